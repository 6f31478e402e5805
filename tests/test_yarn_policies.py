"""Every installed policy drives YARN through the same daemon round (issue 19's contract
test): on the emulator, each policy's plan must turn into actions YARN carries out (or that
the adapter refuses as inexpressible in YARN, clearly), into queue capacities that are the
plan's per-tenant GPU totals, and into an allocation the RM converges to.

The oracle is the plan itself, summed per tenant in this file; the emulator's allocation is
what its own placement loop did with the queue capacities the adapter wrote."""

from __future__ import annotations

import pytest

from gpufair.adapters.yarn import YarnAdapter
from gpufair.model import JobState, Resize
from gpufair.plugin.service import build_daemon
from gpufair.plugin.store import DONE, FAILED, Store
from gpufair.policy.registry import available_policies
from tests.yarn_emulator import RMServer
from tests.yarn_setup import gpu_cluster, yarn_config


@pytest.mark.parametrize("policy", available_policies())
def test_policy_round_on_yarn(policy: str, tmp_path) -> None:
    cluster = gpu_cluster()
    server = RMServer(cluster)
    try:
        cluster.submit("alice", "a", 2, name="a-running")
        cluster.submit("bob", "b", 3, name="b-running")
        cluster.tick()
        cluster.submit("alice", "a", 1, name="a-waiting")
        cluster.submit("bob", "b", 2, name="b-waiting")
        cluster.submit("alice", "a", 3, name="a-big")
        config = yarn_config(tmp_path, server, policy=policy)
        store = Store(config.store.path)
        daemon = build_daemon(config, YarnAdapter.from_settings(config.yarn), store)
        for _ in range(2):
            assert daemon.run_round() is not None, "round skipped"
            result = daemon.last
            state = result.state
            tenant = {j.id: j.tenant for j in state.jobs}
            entries = store.journal(store.journal()[-1].round_id) if result.actions else []
            refused = set()
            for entry in entries:
                if entry.status == FAILED:
                    assert "YARN cannot" in entry.detail, entry.detail
                    refused.add(entry.action.job_id)
                else:
                    assert entry.status == DONE, (entry.status, entry.detail)
            # the plan per tenant, with a refused resize/migration keeping what the job holds
            want = {"a": 0, "b": 0}
            for assignment in result.plan.assignments:
                job = state.job(assignment.job_id)
                size = len(job.gpus_held) if job.id in refused else assignment.size
                want[tenant[job.id]] += size
            for job in state.active_jobs():
                planned = any(a.job_id == job.id for a in result.plan.assignments)
                if job.state is JobState.RUNNING and not planned and any(
                        e.action.job_id == job.id and e.status == FAILED for e in entries):
                    want[job.tenant] += len(job.gpus_held)   # a refused preemption
            cluster.tick()
            held = cluster.gpus_by_queue()
            if result.actions:
                assert {t: cluster.gpu_limit(t) for t in want} == want, result.plan.reason
                assert {t: held[t] for t in want} == want
            else:   # nothing to change: the RM already runs the plan
                assert {t: held[t] for t in want} == want
            assert not any(isinstance(e.action, Resize) and e.status == DONE for e in entries)
        store.close()
    finally:
        server.close()

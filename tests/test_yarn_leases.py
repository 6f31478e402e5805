"""Leases on YARN: an app gpufair starts with ``lease_s`` gets an RM-enforced lifetime, renewed
while the plan keeps the app, never once the plan has preempted it. Against the emulator over
real HTTP, on a clock the test moves (rounds 250 s apart, a 600 s lease)."""

from __future__ import annotations

import math

import pytest

from gpufair.adapters.yarn import YarnAdapter
from gpufair.model import Preempt, Start
from gpufair.plugin.service import build_daemon
from gpufair.plugin.store import Store
from tests.test_yarn_adapter import adapter_for
from tests.yarn_emulator import RMServer
from tests.yarn_setup import gpu_cluster, yarn_config

LEASE_S = 600.0
STEP_S = 250.0


def test_an_app_the_plan_keeps_keeps_a_lifetime_ahead_of_now(tmp_path) -> None:
    """FIFO starts a1 (2 GPUs) in round 1 at t=1000 (lifetime to 1600) and keeps it. By
    hand, with renewal once less than 300 s is left: round 3 (t=1500, 100 s left) renews to
    2100, round 5 (t=2000) to 2600; at every round the lifetime ends after now and a1 runs.
    Set once at start, it would end at 1600 and the RM would kill a1 before round 4."""
    now = [1000.0]
    cluster = gpu_cluster(clock=lambda: now[0])
    server = RMServer(cluster)
    try:
        cluster.queues["root.a"].max_capacity = 0.0      # waits for gpufair to start it
        a1 = cluster.submit("alice", "a", 2)
        config = yarn_config(tmp_path, server, lease_s=LEASE_S)
        adapter = YarnAdapter.from_settings(config.yarn)
        adapter.clock = lambda: now[0]
        store = Store(config.store.path)
        daemon = build_daemon(config, adapter, store)
        ends = []
        for _ in range(6):
            daemon.run_round()
            cluster.tick()
            app = cluster.apps[a1]
            assert app.state == "RUNNING", (now[0], app.diagnostics)
            assert app.expiry_ms is not None and app.expiry_ms / 1000 > now[0]
            ends.append(app.expiry_ms / 1000)
            now[0] += STEP_S
        assert ends == [1600.0, 1600.0, 2100.0, 2100.0, 2600.0, 2600.0]
        status = adapter.status()
        assert (status["yarn_leases"], status["yarn_lease_renewals"],
                status["yarn_lease_expires_at"]) == (1.0, 2.0, 2600.0)
        store.close()
    finally:
        server.close()


def test_an_app_the_plan_preempts_is_not_renewed() -> None:
    """a1 and b1 both started with a lease at t=1000. The plan then preempts b1, but kills
    are not allowed (allow_kill off): b1 keeps running, its lease is not renewed, and the RM
    ends it when the lifetime runs out (t=1600), while a1, renewed, runs on."""
    now = [1000.0]
    cluster = gpu_cluster(clock=lambda: now[0])
    server = RMServer(cluster)
    try:
        cluster.queues["root.a"].max_capacity = 0.0
        cluster.queues["root.b"].max_capacity = 0.0
        a1 = cluster.submit("alice", "a", 2)
        b1 = cluster.submit("bob", "b", 2)
        adapter = adapter_for(server, lease_s=LEASE_S, allow_kill=False)
        adapter.clock = lambda: now[0]
        adapter.snapshot()
        assert adapter.apply_one(Start(a1, ("gpu01:0", "gpu01:1"))).ok
        assert adapter.apply_one(Start(b1, ("gpu02:0", "gpu02:1"))).ok
        cluster.tick()
        refused = adapter.apply_one(Preempt(b1))
        assert not refused.ok and "allow_kill is off" in refused.detail
        renewed = []
        for _ in range(4):
            now[0] += STEP_S
            before = len(cluster.requests)
            adapter.reconcile()
            adapter.snapshot()
            renewed += [p for _, m, p in cluster.requests[before:] if p.endswith("/timeout")]
        assert renewed == [f"/ws/v1/cluster/apps/{a1}/timeout"] * 2   # t=1500, t=2000
        assert cluster.apps[b1].state == "KILLED" and "timed out" in cluster.apps[b1].diagnostics
        assert cluster.apps[a1].state == "RUNNING"
        assert cluster.apps[a1].expiry_ms / 1000 > now[0]
    finally:
        server.close()


def test_a_renewal_the_rm_refuses_is_tried_again_next_round() -> None:
    """At t=1500 (100 s left) the RM answers the renewal with 503 every time: counted as a
    failure, the lease stays at 1600; at t=1550 the renewal goes through (to 2150), before
    the RM would have ended the app."""
    now = [1000.0]
    cluster = gpu_cluster(clock=lambda: now[0])
    server = RMServer(cluster)
    try:
        cluster.queues["root.a"].max_capacity = 0.0
        a1 = cluster.submit("alice", "a", 2)
        adapter = adapter_for(server, lease_s=LEASE_S, retries=2)
        adapter.clock = lambda: now[0]
        adapter.snapshot()
        assert adapter.apply_one(Start(a1, ("gpu01:0", "gpu01:1"))).ok
        now[0] = 1500.0
        cluster.inject(f"/apps/{a1}/timeout", "status", status=503, times=2, method="PUT")
        adapter.reconcile()
        status = adapter.status()
        assert (status["yarn_lease_failures"], status["yarn_lease_expires_at"]) == (1.0, 1600.0)
        assert cluster.apps[a1].expiry_ms == 1_600_000
        now[0] = 1550.0
        adapter.reconcile()
        assert cluster.apps[a1].expiry_ms == 2_150_000 and cluster.apps[a1].state == "RUNNING"
        assert adapter.status()["yarn_lease_renewals"] == 1.0
    finally:
        server.close()


def test_leases_outlive_a_restart_of_the_daemon(tmp_path) -> None:
    """Round 1 (t=1000) starts a1 and b1 with leases to 1600; the plan's preemption of b1 is
    journalled but the kill refused (allow_kill off). The daemon restarts at t=1400 on the
    same store: from its journal it renews a1's lease in its first round (to 2000) and not
    b1's, so at t=1700 a1 runs and the RM has ended b1. A new daemon that forgot the leases
    would let a1 end at 1600 too."""
    from gpufair.model import Preempt
    from gpufair.plugin.store import FAILED

    now = [1000.0]
    cluster = gpu_cluster(clock=lambda: now[0])
    server = RMServer(cluster)
    try:
        cluster.queues["root.a"].max_capacity = 0.0
        cluster.queues["root.b"].max_capacity = 0.0
        a1 = cluster.submit("alice", "a", 2)
        b1 = cluster.submit("bob", "b", 2)
        config = yarn_config(tmp_path, server, lease_s=LEASE_S, allow_kill=False)

        def daemon():
            adapter = YarnAdapter.from_settings(config.yarn)
            adapter.clock = lambda: now[0]
            return build_daemon(config, adapter, Store(config.store.path))

        first = daemon()
        first.run_round()
        assert {a.job_id for a in first.last.actions} == {a1, b1}
        round_id = first.store.begin_round("fifo", {}, [Preempt(b1)], keys=["k"])
        first.store.mark(round_id, 0, FAILED, "allow_kill is off")
        first.store.finish_round(round_id, 0.0)
        first.store.close()
        cluster.tick()
        assert cluster.apps[a1].expiry_ms == cluster.apps[b1].expiry_ms == 1_600_000
        now[0] = 1400.0
        second = daemon()
        second.recover()
        status = second.adapter.status()      # a1 adopted, its end not known until renewed
        assert status["yarn_leases"] == 1.0 and math.isnan(status["yarn_lease_expires_at"])
        second.run_round()
        assert second.adapter.status()["yarn_lease_expires_at"] == 2000.0
        assert cluster.apps[a1].expiry_ms == 2_000_000
        assert cluster.apps[b1].expiry_ms == 1_600_000
        now[0] = 1700.0
        cluster.tick()
        assert cluster.apps[a1].state == "RUNNING" and cluster.apps[b1].state == "KILLED"
        second.store.close()
    finally:
        server.close()


def test_a_lease_that_could_end_between_two_rounds_is_refused() -> None:
    """Renewed once less than half is left, at a round: a lease of at most two round
    periods could end between two rounds. 240 s with rounds every 120 s: refused, naming
    the field; 241 s: accepted."""
    from gpufair.core.config import config_from_dict
    from gpufair.errors import InputError

    def config(lease_s: float):
        return config_from_dict({"daemon": {"round_s": 120}, "yarn": {"lease_s": lease_s}},
                                "t.toml")

    with pytest.raises(InputError, match=r"t.toml: field 'yarn.lease_s' = 240\.0: must be"
                                         r" over twice \[daemon\] round_s \(120 s\)"):
        config(240.0)
    assert config(241.0).yarn.lease_s == 241.0 and config(0.0).yarn.lease_s == 0.0

"""An app gpufair started that YARN has not placed yet stays in the state, running.

gpufair starts an app by growing its tenant's queue capacity (and raising the app's
priority); the CapacityScheduler places the app's containers at the next NodeManager
heartbeat, not when the REST call returns (specs/yarn_rm_rest.md §9). Until then the RM shows
the app ACCEPTED with no containers. A round taken in that window must see what the plan made
it — an app holding its GPUs — or AFS never charges its run time, Shockwave's tables record
it as waiting, and the round plans it again (or gives its GPUs to someone else while its
queue keeps the capacity). The oracle: the same rounds on an RM that places at once (the
emulator's default: on every request), where the question never arises.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufair.adapters.yarn import YarnAdapter, YarnSettings
from gpufair.core.enrich import with_default_profiles
from gpufair.core.round import Round, RoundRules
from gpufair.model import JobState, Preempt, Start
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy
from gpufair.settings import parse_settings
from tests.yarn_emulator import Cluster, EmuNode, RMServer
from tests.yarn_setup import yarn_settings

#: (queue, containers, gpus per container): the 8 GPUs, then 3 more asked for 2 left free
APPS = (("a", 2, 1), ("b", 1, 2), ("a", 1, 1), ("b", 3, 1))
LATER = (("b", 2, 1), ("a", 1, 1))


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def _cluster(clock: Clock, *, late: bool) -> Cluster:
    """Two 4-GPU nodes; the tenants' queues start empty (``rest`` has everything), so that
    nothing runs before gpufair starts it, in either run."""
    return Cluster([EmuNode("gpu01", 4), EmuNode("gpu02", 4)],
                   {"root.a": (0, 0), "root.b": (0, 0), "root.rest": (100, 100)},
                   clock=clock, heartbeats=late)


def _adapter(server: RMServer, clock: Clock) -> YarnAdapter:
    settings = parse_settings(YarnSettings, yarn_settings(server), source="t", section="yarn")
    adapter = YarnAdapter.from_settings(settings)
    adapter.clock = clock
    return adapter


def _actions(actions) -> list[tuple]:
    """What the policy decided, per app: YARN places by count, not on the plan's GPUs."""
    return sorted((type(a).__name__, a.job_id, len(getattr(a, "gpu_ids", ()) or ()))
                  for a in actions)


def _tables(policy) -> dict[str, Any]:
    """The policy's memory (fifo, the control, has none)."""
    return policy.state_dict() if hasattr(policy, "state_dict") else {}


def _run(policy: str, *, late: bool, rounds: int = 7, step_s: float = 60.0,
         finish_at: int = 2) -> tuple[list[dict[str, Any]], Cluster]:
    """``rounds`` daemon rounds (reconcile, snapshot, plan, apply), ``step_s`` apart; the
    first app (tenant a's, 2 GPUs, nothing of a's waiting) finishes before round
    ``finish_at``, and ``LATER`` arrive the round after. ``late``: the RM places only at
    its heartbeat after the next round's snapshot, so each started app spends one round
    ACCEPTED with no containers."""
    clock = Clock()
    cluster = _cluster(clock, late=late)
    server = RMServer(cluster)
    try:
        ids = [cluster.submit(f"u{q}", q, n, gpus_per_container=g) for q, n, g in APPS]
        adapter = _adapter(server, clock)
        rnd = Round(create_policy(policy, PolicyConfig()), RoundRules(mode="hard"),
                    enrichers=[with_default_profiles])
        history: dict = {}
        seen = []
        for i in range(rounds):
            if i == finish_at:
                cluster.finish(ids[0])
            if i == finish_at + 1:
                ids += [cluster.submit(f"u{q}", q, n, gpus_per_container=g)
                        for q, n, g in LATER]
            adapter.reconcile()
            state = adapter.snapshot()
            if late:
                cluster.heartbeat()     # places what the last round started, after the read
            # no app vanishes from the policy's view while YARN has yet to place it
            active = {a.id for a in cluster.apps.values() if a.state in ("ACCEPTED",
                                                                          "RUNNING")}
            assert {j.id for j in state.jobs} == active, i
            result = rnd.run(state, history=history)
            history.update({r["job_id"]: r for r in result.history})
            outcomes = adapter.apply(result.actions)
            assert all(o.ok for o in outcomes), [o.detail for o in outcomes]
            seen.append({"policy": _tables(rnd.policy),
                         "actions": _actions(result.actions),
                         "running": sorted(j.id for j in state.jobs
                                           if j.state is JobState.RUNNING),
                         "held": {j.id: len(j.gpus_held) for j in state.jobs}})
            clock.now += step_s
        if late:
            cluster.heartbeat()
        cluster.tick()
        return seen, cluster
    finally:
        server.close()


@pytest.mark.parametrize("policy", ["fifo", "afs", "shockwave"])
def test_policy_remembers_an_app_yarn_places_late(policy: str) -> None:
    """Round by round, the policy's own state (AFS ``run_s``, Shockwave's ``contention`` and
    ``regimes``...), its actions and the jobs it saw running are those of the same rounds on
    an RM that places at once; and so is the allocation the RM ends with."""
    fast, fast_rm = _run(policy, late=False)
    slow, slow_rm = _run(policy, late=True)
    for i, (f, s) in enumerate(zip(fast, slow, strict=True)):
        assert f == s, i
    assert fast_rm.gpus_by_queue() == slow_rm.gpus_by_queue()
    assert {k: a.held_gpus for k, a in fast_rm.apps.items()} == \
        {k: a.held_gpus for k, a in slow_rm.apps.items()}
    # not a vacuous comparison: apps were started after the first round (the finished app's
    # GPUs went to others), and the policy's state moved
    assert any(f["actions"] for f in fast[1:]), [f["actions"] for f in fast]
    if policy != "fifo":
        assert fast[0]["policy"] != fast[-1]["policy"]


def test_a_started_app_is_shown_running_until_yarn_places_it() -> None:
    clock = Clock()
    cluster = _cluster(clock, late=True)
    server = RMServer(cluster)
    try:
        a1 = cluster.submit("ua", "a", 2)
        b1 = cluster.submit("ub", "b", 1, gpus_per_container=2)
        adapter = _adapter(server, clock)
        adapter.snapshot()
        for outcome in adapter.apply([Start(a1, ("gpu01:0", "gpu01:1")),
                                      Start(b1, ("gpu02:0", "gpu02:1"))]):
            assert outcome.ok, outcome.detail
        assert cluster.apps[a1].state == "ACCEPTED" and not cluster.apps[a1].placed
        clock.now += 5.0
        jobs = {j.id: j for j in adapter.snapshot().jobs}
        assert (jobs[a1].state, jobs[a1].gpus_held) == (JobState.RUNNING,
                                                         ("gpu01:0", "gpu01:1"))
        assert (jobs[b1].state, jobs[b1].gpus_held) == (JobState.RUNNING,
                                                         ("gpu02:0", "gpu02:1"))
        # the plan's place is still free: no service counted while it waits to be placed
        assert jobs[a1].start_s == clock.now
        # killed before YARN placed it: gone, and its grant with it
        assert adapter.apply_one(Preempt(b1)).ok
        cluster.heartbeat()
        jobs = {j.id: j for j in adapter.snapshot().jobs}
        assert set(jobs) == {a1} and jobs[a1].state is JobState.RUNNING
        assert cluster.apps[a1].held_gpus == 2
    finally:
        server.close()


def test_a_started_app_whose_gpus_others_took_is_shown_elsewhere_or_waiting() -> None:
    """The plan was made on a snapshot; before its starts are applied the RM placed apps
    gpufair does not manage (queue ``rest``) on the planned GPUs. Each started app is shown
    on the lowest GPUs still free, in app order, none shared; one that no longer fits waits
    (planned anew), holding nothing."""
    clock = Clock()
    cluster = _cluster(clock, late=True)
    server = RMServer(cluster)
    try:
        b1 = cluster.submit("ub", "b", 1)
        a1 = cluster.submit("ua", "a", 2)
        adapter = _adapter(server, clock)
        adapter.snapshot()                  # the plan's view: all 8 GPUs free
        cluster.submit("ur", "rest", 3)
        cluster.submit("ur", "rest", 3)
        cluster.heartbeat()                 # rest: gpu01:0-3, gpu02:0-1
        assert cluster.gpus_by_queue() == {"a": 0, "b": 0, "rest": 6}
        for outcome in adapter.apply([Start(b1, ("gpu01:0",)),
                                      Start(a1, ("gpu01:1", "gpu01:2"))]):
            assert outcome.ok, outcome.detail
        jobs = {j.id: j for j in adapter.snapshot().jobs}
        assert (jobs[b1].state, jobs[b1].gpus_held) == (JobState.RUNNING, ("gpu02:2",))
        assert (jobs[a1].state, jobs[a1].gpus_held) == (JobState.PENDING, ())
    finally:
        server.close()


def test_without_capacity_enforcement_a_start_promises_no_gpus() -> None:
    """``enforce = none``: a start only raises the app's priority; nothing says YARN will
    place it, so it is shown as the RM shows it."""
    clock = Clock()
    cluster = _cluster(clock, late=True)
    server = RMServer(cluster)
    try:
        a1 = cluster.submit("ua", "a", 2)
        settings = parse_settings(YarnSettings, yarn_settings(server, enforce="none"),
                                  source="t", section="yarn")
        adapter = YarnAdapter.from_settings(settings)
        adapter.snapshot()
        assert adapter.apply_one(Start(a1, ("gpu01:0", "gpu01:1"))).ok
        [job] = adapter.snapshot().jobs
        assert (job.state, job.gpus_held) == (JobState.PENDING, ())
    finally:
        server.close()


def test_an_app_yarn_places_part_by_part_keeps_its_queue_share() -> None:
    """The CapacityScheduler places at each node's heartbeat: an app gpufair spread over two
    nodes first runs on one of them. Its queue must keep the app's whole share (else the
    rest of it is never placed), and the round sees it running on all of its GPUs."""
    clock = Clock()
    cluster = _cluster(clock, late=True)
    server = RMServer(cluster)
    try:
        b0 = cluster.submit("ub", "b", 3)
        adapter = _adapter(server, clock)
        adapter.snapshot()
        assert adapter.apply_one(Start(b0, ("gpu01:0", "gpu01:1", "gpu01:2"))).ok
        cluster.heartbeat("gpu01:45454")                  # b0: gpu01:0-2
        a1 = cluster.submit("ua", "a", 2)
        adapter.snapshot()
        assert adapter.apply_one(Start(a1, ("gpu01:3", "gpu02:0"))).ok
        cluster.heartbeat("gpu01:45454")                  # a1: one container, gpu01:3
        assert (cluster.apps[a1].state, cluster.apps[a1].held_gpus) == ("RUNNING", 1)
        clock.now += 60.0
        adapter.reconcile()
        jobs = {j.id: j for j in adapter.snapshot().jobs}
        assert cluster.gpu_limit("a") == 2 and cluster.gpu_limit("b") == 3
        assert (jobs[a1].state, jobs[a1].gpus_held) == (JobState.RUNNING,
                                                         ("gpu01:3", "gpu02:0"))
        assert jobs[a1].start_s == clock.now - 60.0       # it runs since it was placed
        cluster.heartbeat("gpu02:45454")                  # the rest of it
        assert cluster.apps[a1].held_gpus == 2
        adapter.reconcile()                               # placed: its GPUs are held now
        jobs = {j.id: j for j in adapter.snapshot().jobs}
        assert jobs[a1].gpus_held == ("gpu01:3", "gpu02:0")
        assert (cluster.gpu_limit("a"), cluster.gpu_limit("b")) == (2, 3)
    finally:
        server.close()

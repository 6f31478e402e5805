"""Baseline policies and the shared mechanisms on small hand-checkable clusters."""

from __future__ import annotations

import pytest

from gpufair.core.actions import plan_actions
from gpufair.errors import InputError
from gpufair.model import (
    Assignment,
    ClusterState,
    Job,
    JobState,
    Migrate,
    Node,
    Plan,
    Preempt,
    Progress,
    Start,
    ThroughputProfile,
)
from gpufair.model.records import JOB_FIELDS
from gpufair.policy.base import Policy, PolicyConfig
from gpufair.policy.max_min import MaxMinPolicy
from gpufair.policy.max_sum_throughput import MaxSumThroughputPolicy
from gpufair.policy.min_total_duration import MinTotalDurationPolicy
from gpufair.policy.placement import place
from gpufair.policy.registry import available_policies, create_policy


def job(jid, gpus=1, rates=None, left=1000.0, arrival=0.0, attained=0.0, held=(), weight=1.0):
    rates = rates or {"v100": 10.0}
    return Job(id=jid, gpus=gpus, arrival_s=arrival, weight=weight, attained_s=attained,
               progress=Progress(0.0, left),
               throughput=ThroughputProfile({(t, gpus): r for t, r in rates.items()}),
               state=JobState.RUNNING if held else JobState.PENDING, gpus_held=tuple(held))


def cluster(jobs, spec=(("v100", 4, 1),)):
    nodes = tuple(Node(f"{t}-{i}", t, per) for t, count, per in spec for i in range(count))
    return ClusterState(time_s=0.0, nodes=nodes, jobs=tuple(jobs))


def test_max_min_equal_gpu_share():
    jobs = [job(str(i)) for i in range(6)] + [job("w", gpus=4)]
    alloc = MaxMinPolicy().allocate(jobs, {"v100": 4}, 0.0)
    shares = [sum(alloc[j.id].values()) * j.gpus for j in jobs]
    assert shares == pytest.approx([4 / 7] * 7, abs=1e-6)


def test_max_min_weights_and_heterogeneity():
    jobs = [job("a", rates={"v100": 10, "k80": 5}, weight=2.0),
            job("b", rates={"v100": 10, "k80": 10})]
    alloc = MaxMinPolicy().allocate(jobs, {"v100": 1, "k80": 1}, 0.0)
    eff_a = alloc["a"].get("v100", 0) + 0.5 * alloc["a"].get("k80", 0)
    eff_b = alloc["b"].get("v100", 0) + alloc["b"].get("k80", 0)
    # a job's fractions sum to ≤ 1, so a's weighted share is at most 1/2: it reaches it only
    # on the V100, where it runs twice as fast, and b (as fast on both) takes the K80
    assert min(eff_a / 2, eff_b) == pytest.approx(0.5, abs=1e-6)
    assert alloc["a"]["v100"] == pytest.approx(1.0, abs=1e-6)


def test_max_sum_throughput_prefers_rate_per_gpu():
    jobs = [job("slow", rates={"v100": 1.0}), job("fast", rates={"v100": 50.0}),
            job("wide", gpus=2, rates={"v100": 60.0})]
    alloc = MaxSumThroughputPolicy().allocate(jobs, {"v100": 2}, 0.0)
    assert alloc["fast"]["v100"] == pytest.approx(1.0)
    assert alloc["wide"]["v100"] == pytest.approx(0.5)
    assert alloc["slow"]["v100"] == pytest.approx(0.0, abs=1e-9)


def test_min_total_duration_finishes_everyone_together():
    jobs = [job("a", left=1000.0), job("b", left=3000.0), job("c", left=2000.0)]
    alloc = MinTotalDurationPolicy().allocate(jobs, {"v100": 2}, 0.0)
    # optimum: total work 6000 it at 10 it/s per GPU on 2 GPUs → T* = 300 s; bisection ≤ 5 %
    horizon = max(j.progress.iterations_left / (10.0 * alloc[j.id]["v100"]) for j in jobs)
    assert 300.0 <= horizon <= 300.0 * 1.06
    assert sum(alloc[j.id]["v100"] for j in jobs) <= 2 + 1e-6


def run_rounds(policy: Policy, jobs, rounds, round_s=120.0, spec=(("v100", 4, 1),)):
    """Drive a policy without a simulator: whoever it picks gets a round of service."""
    counts = {j.id: 0 for j in jobs}
    state = cluster(jobs, spec)
    for r in range(rounds):
        plan = policy.schedule(state, r * round_s)
        chosen = plan.by_job()
        new_jobs = []
        for j in state.jobs:
            a = chosen.get(j.id)
            if a:
                counts[j.id] += 1
            new_jobs.append(Job(**{**{f: getattr(j, f) for f in JOB_FIELDS},
                                   "attained_s": j.attained_s + (round_s if a else 0.0),
                                   "gpus_held": a.gpu_ids if a else (),
                                   "state": JobState.RUNNING if a else JobState.PENDING}))
        state = cluster(new_jobs, spec)
    return counts


def test_round_mechanism_realises_equal_time_fractions():
    jobs = [job(str(i)) for i in range(6)]  # 6 one-GPU jobs, 4 GPUs: 2/3 of the rounds each
    counts = run_rounds(MaxMinPolicy(PolicyConfig(round_s=120.0)), jobs, 30)
    assert sorted(counts.values()) == [20] * 6


def test_round_mechanism_gives_wide_jobs_equal_gpu_share():
    jobs = [job(str(i)) for i in range(4)] + [job("w", gpus=4)]
    counts = run_rounds(MaxMinPolicy(PolicyConfig(round_s=120.0)), jobs, 40)
    # equal GPU share 4/8: one-GPU jobs run 1/2 of the rounds... the 4-GPU job 1/8... but the
    # walk is work-conserving, so only bounds hold: the wide job runs, and not more than them
    assert 0 < counts["w"] < counts["0"]


def test_recompute_throttle_defers_new_jobs():
    policy = MaxMinPolicy(PolicyConfig(round_s=120.0, recompute_interval_s=1000.0))
    first = [job("a")]
    policy.schedule(cluster(first), 0.0)  # reset at 0 leaves t_reset = 0
    policy.schedule(cluster([*first, job("b")]), 120.0)  # t_reset == 0: recompute
    plan = policy.schedule(cluster([*first, job("b"), job("c")]), 240.0)
    assert set(plan.by_job()) == {"a", "b"}  # c is outside the allocation until ≥ 1120 s
    plan = policy.schedule(cluster([*first, job("b"), job("c")]), 1200.0)
    assert set(plan.by_job()) == {"a", "b", "c"}
    assert policy.stats.recomputes == 3


@pytest.mark.parametrize(("name", "expected"), [
    ("fifo", ["old", "mid"]),
    ("srtf", ["short", "mid"]),
    ("las", ["mid", "short"]),  # old passed the 3600 GPU-s threshold; FIFO within a queue
])
def test_ordering_policies(name, expected):
    jobs = [job("old", left=9000, arrival=0, attained=4000),
            job("mid", left=500, arrival=5, attained=0),
            job("short", left=100, arrival=10, attained=0)]
    plan = create_policy(name).schedule(cluster(jobs, (("v100", 2, 1),)), 0.0)
    assert [a.job_id for a in plan.assignments] == expected


def test_placement_keeps_held_gpus_and_consolidates():
    state = cluster([], (("v100", 2, 4),))
    a = job("a", gpus=2, held=("v100-1:0", "v100-1:1"))
    b = job("b", gpus=4)
    c = job("c", gpus=2)
    out = {x.job_id: x.gpu_ids for x in place(state, [(a, "v100"), (b, "v100"), (c, "v100")])}
    assert out["a"] == ("v100-1:0", "v100-1:1")
    assert out["b"] == ("v100-0:0", "v100-0:1", "v100-0:2", "v100-0:3")
    assert out["c"] == ("v100-1:2", "v100-1:3")


def test_placement_never_gives_one_gpu_twice():
    """Two records claiming one GPU (a stale snapshot: a job still completing beside its
    successor) must not both keep it: the first in the walk does, the other moves."""
    state = cluster([], (("v100", 2, 2),))
    first = job("first", held=("v100-0:0",))
    second = job("second", held=("v100-0:0",))
    gang = job("gang", gpus=2, held=("v100-0:0", "v100-1:0"))
    out = {x.job_id: x.gpu_ids for x in place(state, [(first, "v100"), (second, "v100"),
                                                      (gang, "v100")])}
    # largest gangs first: the pair keeps its GPUs, "first" finds its GPU taken too
    assert out["gang"] == ("v100-0:0", "v100-1:0")
    assert out["first"] == ("v100-0:1",) and out["second"] == ("v100-1:1",)
    gpus = [g for ids in out.values() for g in ids]
    assert len(gpus) == len(set(gpus))


def test_plan_actions_diff():
    running = job("r", held=("v100-0:0",))
    moved = job("m", held=("v100-1:0",))
    waiting = job("w")
    state = cluster([running, moved, waiting])
    plan = Plan((Assignment("m", ("v100-2:0",)), Assignment("w", ("v100-0:0",))))
    actions = plan_actions(state, plan)
    assert actions == [Preempt("r"), Migrate("m", ("v100-2:0",)), Start("w", ("v100-0:0",))]
    # between rounds nothing is evicted, and only idle GPUs are filled
    assert plan_actions(state, plan, preemptive=False) == []
    plan = Plan((Assignment("w", ("v100-3:0",)),))
    assert plan_actions(state, plan, preemptive=False) == [Start("w", ("v100-3:0",))]


def test_registry():
    assert {"fifo", "srtf", "las", "max_min", "max_sum_throughput",
            "min_total_duration"} <= set(available_policies())
    assert isinstance(create_policy("gavel"), MaxMinPolicy)
    with pytest.raises(InputError, match="unknown policy"):
        create_policy("nope")


def test_time_fraction_state_survives_a_json_round_trip():
    import json
    config = PolicyConfig(round_s=120.0, recompute_interval_s=1000.0)
    jobs = [job(str(i)) for i in range(6)]
    policy = MaxMinPolicy(config)
    run_rounds(policy, jobs, 5)
    restored = MaxMinPolicy(config)
    restored.load_state_dict(json.loads(json.dumps(policy.state_dict())))
    state = cluster(jobs)
    assert restored.schedule(state, 600.0) == policy.schedule(state, 600.0)


def test_walk_keeps_a_running_job_on_its_type_when_speeds_tie():
    from gpufair.policy.placement import greedy_walk
    tied = job("t", rates={"k80": 5.0, "v100": 5.0}, held=("k80-0:0",))
    assert greedy_walk([tied], {"v100": 1, "k80": 1}, {"t": "k80"}) == [(tied, "k80")]
    assert greedy_walk([tied], {"v100": 1, "k80": 1}) == [(tied, "v100")]
    faster = job("f", rates={"k80": 5.0, "v100": 9.0}, held=("k80-0:0",))
    assert greedy_walk([faster], {"v100": 1, "k80": 1}, {"f": "k80"}) == [(faster, "v100")]

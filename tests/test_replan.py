"""The shared replan throttle (policy/replan.py), the time-fraction baselines' use of it, and
min_total_duration's bisection answered from the shortest horizon.

Oracles are hand-worked timelines and a bisection written here, not the policies' code.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from gpufair.core.round import Round
from gpufair.errors import InputError
from gpufair.model import ClusterState, Job, JobState, Node, Plan, Progress, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.max_min import MaxMinPolicy
from gpufair.policy.max_sum_throughput import MaxSumThroughputPolicy
from gpufair.policy.min_total_duration import (
    MinTotalDurationPolicy,
    bisect,
    least_fractions,
    one_type_shortest_horizon,
)
from gpufair.policy.registry import create_policy
from gpufair.policy.replan import BoundaryAware, replan_due, replan_interval
from gpufair.policy.solver import LinearProgram, SolveOptions, solve

R = 120.0


def job(jid: str, left: float = 1e6, rate: float = 10.0, held: tuple[str, ...] = ()) -> Job:
    return Job(id=jid, progress=Progress(0.0, left),
               throughput=ThroughputProfile({("v100", 1): rate}),
               state=JobState.RUNNING if held else JobState.PENDING, gpus_held=held)


def state(jobs: list[Job], gpus: int = 2, now: float = 0.0) -> ClusterState:
    nodes = tuple(Node(f"n{i}", "v100", 1) for i in range(gpus))
    return ClusterState(time_s=now, nodes=nodes, jobs=tuple(jobs))


# -- the rule itself ---------------------------------------------------------------------------
def test_replan_due_and_interval_by_hand() -> None:
    assert replan_due(None, 5.0, 1e9)                    # no plan yet: always
    assert not replan_due(100.0, 219.9, 120.0)
    assert replan_due(100.0, 220.0, 120.0)               # exactly the interval: due
    assert replan_due(100.0, 100.0, 0.0)                 # 0: at once
    assert replan_interval(None, 120.0, 0.75) == 90.0    # the default: a fraction of a round
    assert replan_interval(30.0, 120.0, 0.75) == 30.0    # the option wins
    assert replan_interval(0.0, 120.0, 1.0) == 0.0


@pytest.mark.parametrize("policy", ["max_min", "max_sum_throughput", "min_total_duration",
                                    "shockwave"])
@pytest.mark.parametrize("value", [-1.0, "soon", True, float("nan"), 1e13])
def test_a_bad_replan_interval_is_an_input_error(policy: str, value: object) -> None:
    with pytest.raises(InputError, match="replan_interval_s"):
        create_policy(policy, PolicyConfig(options={"replan_interval_s": value}))


def test_time_fraction_policies_accept_and_use_the_option() -> None:
    policy = create_policy("max_sum_throughput", PolicyConfig(
        round_s=R, options={"replan_interval_s": 30}))
    assert policy.options.replan_interval_s == 30.0 and policy._replan_s == 30.0
    assert create_policy("max_min", PolicyConfig(round_s=R))._replan_s == R  # default: a round
    assert isinstance(policy, BoundaryAware)


# -- the round tells a boundary-aware policy what kind of decision comes ----------------------
class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.told: list[bool] = []

    def next_decision(self, preemptive: bool) -> None:
        self.told.append(preemptive)

    def schedule(self, state: ClusterState, now: float) -> Plan:
        return Plan(assignments=())


def test_round_tells_the_policy_whether_the_decision_may_preempt() -> None:
    recorder = Recorder()
    rounds = Round(recorder)
    for flag in (True, False, False, True):
        rounds.run(state([job("a")]), preemptive=flag)
    assert recorder.told == [True, False, False, True]


# -- the time-fraction policies' timeline, worked by hand --------------------------------------
def drive(policy, timeline):
    """timeline: (time, preemptive, job ids present) → which jobs each decision runs."""
    rounds = Round(policy)
    ran = []
    for now, preemptive, ids in timeline:
        result = rounds.run(state([job(i) for i in ids], gpus=3, now=now),
                            preemptive=preemptive)
        ran.append(set(result.plan.by_job()))
    return ran


# The timelines start at 1 s: a plan made at 0 s counts as none yet (the artifacts' test of
# t_reset == 0, kept), so the next event would re-plan whatever the interval.
TIMELINE = [  # 3 GPUs, one-GPU jobs; R = 120 s
    (1.0, True, "a"),          # first plan (re-plan 1)
    (11.0, False, "ab"),       # arrival 10 s after the plan: the plan stands
    (51.0, False, "abc"),      # still inside the round
    (121.0, True, "abc"),      # a boundary, with the arrivals since 1 s pending: re-plan 2
    (131.0, False, "abcd"),    # 10 s after it: stands
    (251.0, False, "abcde"),   # 130 s after it (no boundary): re-plan 3
    (261.0, False, "abcde"),   # nothing new: no re-plan however long it has been
]


def test_one_replan_per_round_between_boundaries_by_hand() -> None:
    policy = MaxSumThroughputPolicy(PolicyConfig(round_s=R))
    ran = drive(policy, TIMELINE)
    assert policy.stats.recomputes == 3
    # newcomers run on GPUs the stale allocation leaves: b and c at once, d too (3 GPUs:
    # a, b, c hold them at 130 s, so d waits), e after the re-plan at 250 s if it wins a GPU
    assert ran[1] == {"a", "b"} and ran[2] == {"a", "b", "c"}
    assert "d" not in ran[4] and len(ran[4]) == 3


def test_replan_interval_zero_replans_at_every_change() -> None:
    policy = MaxSumThroughputPolicy(PolicyConfig(round_s=R, options={"replan_interval_s": 0}))
    drive(policy, TIMELINE)
    assert policy.stats.recomputes == 5   # at each arrival: 1, 11, 51, 131 and 251 s


def test_a_boundary_replans_even_right_after_a_plan() -> None:
    policy = MaxMinPolicy(PolicyConfig(round_s=R))
    # (the boundary here comes 59 s after the plan, less than the interval of a round)
    drive(policy, [(1.0, True, "a"), (50.0, False, "ab"), (55.0, False, "abc"),
                   (60.0, True, "abc")])
    assert policy.stats.recomputes == 2   # t = 1 and the boundary at 60 s


def test_the_artifacts_throttle_still_holds_at_boundaries_and_newcomers_wait() -> None:
    policy = MaxMinPolicy(PolicyConfig(round_s=R, recompute_interval_s=1000.0))
    ran = drive(policy, [(0.0, True, "a"), (120.0, True, "ab"), (240.0, True, "abc"),
                         (1200.0, True, "abc")])
    # t_reset stays 0 after the first plan, so 120 s re-plans (the artifact's test); 240 s
    # is < 1000 s after it: c holds a GPU in the walk but does not run until 1200 s
    assert policy.stats.recomputes == 3
    assert ran[2] == {"a", "b"} and ran[3] == {"a", "b", "c"}


# -- min_total_duration: the bisection answered from T* ----------------------------------------
def reference_bisection(feasible_at) -> float | None:
    """The artifact's search written out: [100, 1e6], stop at 1.05·lo ≥ hi, decades up."""
    lo, hi = 100.0, 1e6
    for _ in range(8):
        found = None
        while 1.05 * lo < hi:
            mid = (lo + hi) / 2
            if feasible_at(mid):
                hi, found = mid, mid
            else:
                lo = mid
        if found is not None:
            return found
        lo, hi = hi, hi * 10
    return None


@pytest.mark.parametrize("threshold", [150.0, 1000.0, 123456.0, 3e7, 5e14])
def test_bisect_from_the_shortest_horizon_ends_where_the_search_does(threshold: float) -> None:
    calls: list[float] = []

    def feasible(horizon: float) -> np.ndarray | None:
        calls.append(horizon)
        return np.array([horizon]) if horizon >= threshold else None

    expected = reference_bisection(lambda h: h >= threshold)
    got = bisect(feasible, threshold)
    if expected is None:
        assert got is None
        return
    assert got is not None and got[0] == expected
    assert calls == [expected]          # one solve: the horizon the search ends on
    calls.clear()
    assert bisect(feasible, None)[0] == expected and len(calls) > 5   # the full search


def test_bisect_solves_midpoints_too_close_to_call() -> None:
    calls: list[float] = []

    def feasible(horizon: float) -> np.ndarray | None:
        calls.append(horizon)
        return np.array([horizon]) if horizon >= 500_050.0 else None

    # the first midpoint, (100 + 1e6) / 2 = 500,050 s, is within 1e-6 of T*: it is solved
    got = bisect(feasible, 500_050.0 * (1 + 1e-7))
    assert calls[0] == 500_050.0
    expected = reference_bisection(lambda h: h >= 500_050.0)
    assert got is not None and got[0] == expected   # the fractions of where the search ends
    assert calls == ([500_050.0] if expected == 500_050.0 else [500_050.0, expected])


def test_min_total_duration_by_hand_and_as_without_the_shortcut(monkeypatch) -> None:
    # two 1-GPU jobs on 2 GPUs: 1000 it at 1 it/s and 1000 it at 2 it/s. Each needs
    # x_j = r_j / (θ_j T) ≤ 1, so T* = 1000 s (the slow job alone on a GPU)
    jobs = [job("slow", left=1000.0, rate=1.0), job("fast", left=1000.0, rate=2.0)]
    policy = MinTotalDurationPolicy()
    alloc = policy.allocate(jobs, {"v100": 2}, 0.0)
    horizon = reference_bisection(lambda h: h >= 1000.0)
    assert alloc["slow"]["v100"] * 1.0 * horizon >= 1000.0 * (1 - 1e-6)
    assert alloc["fast"]["v100"] * 2.0 * horizon >= 1000.0 * (1 - 1e-6)
    assert policy.stats.solves == 0   # T* and the fractions where the search ends: closed forms
    monkeypatch.setattr(MinTotalDurationPolicy, "_shortest_horizon", lambda *a: None)
    full = MinTotalDurationPolicy()   # without T*: an LP at every midpoint, as the artifact
    assert full.allocate(jobs, {"v100": 2}, 0.0) == alloc
    assert full.stats.solves > 5


def test_min_total_duration_on_two_types_solves_for_t_star() -> None:
    # the closed form is for one type: on two, T* comes from its LP (and the same search)
    jobs = [job("slow", left=1000.0, rate=1.0), job("fast", left=1000.0, rate=2.0)]
    jobs = [replace(j, throughput=ThroughputProfile({("v100", 1): r, ("k80", 1): r / 2}))
            for j, r in zip(jobs, (1.0, 2.0), strict=True)]
    policy = MinTotalDurationPolicy()
    alloc = policy.allocate(jobs, {"v100": 1, "k80": 1}, 0.0)
    assert policy.stats.solves == 2
    # by hand: slow on the V100 alone needs 1000 s; fast on the K80 (1 it/s) too: T* = 1000 s
    horizon = reference_bisection(lambda h: h >= 1000.0 * (1 - 1e-9))
    for j, r in (("slow", 1.0), ("fast", 2.0)):
        done = alloc[j].get("v100", 0.0) * r + alloc[j].get("k80", 0.0) * r / 2
        assert done * horizon >= 1000.0 * (1 - 1e-6)


@pytest.mark.parametrize("seed", range(40))
def test_one_type_shortest_horizon_is_the_feasibility_threshold(seed: int) -> None:
    """Oracle written here: T is feasible on one type when every x_j = r_j / (θ_j T) is at
    most 1 and Σ s_j x_j ≤ G; T* must be feasible, and 1e-9 less must not be (or be 100 s)."""
    rng = np.random.default_rng(seed)
    n, gpus = int(rng.integers(1, 30)), int(rng.integers(1, 64))
    rates = rng.uniform(0.01, 50.0, n)
    need = rng.uniform(0.0, 1e6, n) * (rng.random(n) < 0.9)
    gang = rng.integers(1, gpus + 1, n).astype(float)
    t_star = one_type_shortest_horizon(rates, need, gang, float(gpus))

    def feasible(horizon: float) -> bool:
        x = [r / (theta * horizon) for r, theta in zip(need, rates, strict=True)]
        return all(v <= 1 + 1e-12 for v in x) and \
            sum(s * v for s, v in zip(gang, x, strict=True)) <= gpus * (1 + 1e-12)

    assert feasible(t_star)
    assert t_star == 100.0 or not feasible(t_star * (1 - 1e-9))


@pytest.mark.parametrize("backend", ["gurobi", "highs"])
@pytest.mark.parametrize("seed", range(10))
def test_least_fractions_are_what_the_feasibility_lp_returns(seed: int, backend: str) -> None:
    """Above T* the feasibility LP (no objective) may return any feasible point; both exact
    backends return each job's least fraction (r_j / T) / θ_j, so the policy skips the solve.
    Checked here against the LP itself, built in the test, with the backend forced."""
    rng = np.random.default_rng(seed)
    n, gpus = int(rng.integers(1, 25)), int(rng.integers(1, 64))
    rates = rng.uniform(0.01, 50.0, n)
    need = rng.uniform(0.0, 1e6, n) * (rng.random(n) < 0.9)
    gang = rng.integers(1, gpus + 1, n).astype(float)
    horizon = one_type_shortest_horizon(rates, need, gang, float(gpus)) * rng.uniform(1.01, 3)
    a_ub = sp.vstack([sp.diags(-rates), sp.csr_matrix(gang), sp.identity(n)], format="csr")
    b_ub = np.concatenate([-need / horizon, [gpus], np.ones(n)])
    found = solve(LinearProgram(c=np.zeros(n), A_ub=a_ub, b_ub=b_ub, lb=0.0, ub=1.0),
                  SolveOptions(backend=backend))
    assert found.ok and found.backend == backend
    least = least_fractions(need, horizon, rates)
    np.testing.assert_allclose(found.x, least, rtol=1e-9, atol=1e-12)
    assert np.all(least <= 1) and gang @ least <= gpus


def test_min_total_duration_solves_where_the_backend_is_interior_point() -> None:
    """ECOS (the artifact semantics' backend) returns an interior point, not the least
    fractions: there the horizon the search ends on is still solved."""
    jobs = [job("slow", left=1000.0, rate=1.0), job("fast", left=1000.0, rate=2.0)]
    policy = MinTotalDurationPolicy(PolicyConfig(solver_backend="ecos"))
    policy.allocate(jobs, {"v100": 2}, 0.0)
    assert policy.stats.solves == 1


@pytest.mark.parametrize("interval", [None, 40.0])
def test_in_a_simulation_replans_between_boundaries_keep_the_interval(interval) -> None:
    from gpufair.core.simulation import SimulationSpec, build_simulator, run_to_end

    sim = build_simulator(SimulationSpec())          # the bundled 60-job demo, clean
    options = {} if interval is None else {"replan_interval_s": interval}
    policy = MaxMinPolicy(PolicyConfig(round_s=sim.round_s, options=options))
    plans: list[tuple[float, bool]] = []
    allocate = policy.allocate

    def recording(jobs, capacity, now):
        plans.append((now, policy._preemptive))
        return allocate(jobs, capacity, now)

    policy.allocate = recording
    assert run_to_end(sim, Round(policy))
    wanted = sim.round_s if interval is None else interval
    # (a plan at 0 s counts as none: the artifacts' t_reset == 0 test, kept)
    between = [(now, prev) for (now, boundary), (prev, _) in zip(plans[1:], plans, strict=False)
               if not boundary and prev > 0]
    assert between, "the demo has events between boundaries that re-plan"
    assert all(now - prev >= wanted for now, prev in between)
    assert any(boundary for _, boundary in plans[1:])


# -- the simulator skips decisions that can start nothing, for policies that need not see them
def test_may_start_any_by_hand() -> None:
    from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
    from gpufair.adapters.simulator.engine import TraceSimulator
    from gpufair.adapters.simulator.semantics import CLEAN
    from gpufair.adapters.simulator.throughputs import throughputs_from_dict
    from gpufair.adapters.simulator.trace import parse_trace

    rates = throughputs_from_dict({"v100": {f"('A3C', {n})": {"null": 1.0} for n in (1, 2, 4)}})
    lines = [f"A3C\tcmd\t.\t--steps\t0\t100\t{sf}\t1\t-1\t0" for sf in (2, 4, 2)]
    sim = TraceSimulator(parse_trace("\n".join(lines)), rates, parse_cluster_spec("v100:6"),
                         CLEAN, R)
    first, wide, second = sim._active
    assert sim.may_start_any()                       # 6 idle GPUs, gangs of 2 and 4 wait
    # (GPUs are taken through _hold, which keeps the running counts may_start_any reads)
    sim._hold(first, ("v100-0:0", "v100-0:1"))
    sim._hold(wide, ("v100-0:2",) * 4)               # 0 idle
    assert not sim.may_start_any()
    sim._hold(wide, ("v100-0:2",) * 3)               # 1 idle, smallest waiting gang is 2
    assert not sim.may_start_any()
    sim._hold(wide, ("v100-0:2",) * 2)               # 2 idle: the second 2-GPU gang fits
    assert sim.may_start_any()
    sim._hold(second, ("v100-0:4", "v100-0:5"))      # nobody waits: nothing to start
    assert not sim.may_start_any()
    sim._hold(first, ())                             # preempted: it waits again, and fits
    assert sim.may_start_any() and sim.gpus_in_use() == 4


@pytest.mark.parametrize("name", ["fifo", "srtf", "las", "max_min"])
def test_skipped_decisions_change_nothing_for_the_ordering_policies(name, monkeypatch) -> None:
    """The same run with every decision made (the policy made to say it must see them all)
    gives the same outcomes to the bit, with fewer policy calls; max_min skips only with a
    replan interval, where its plan lags events anyway: it skips, and finishes every job."""
    from counted_run import run_counted

    from gpufair.core.simulation import SimulationSpec

    def run(observe_all: bool):
        done = run_counted(name, SimulationSpec(), monkeypatch,   # the bundled 60-job demo
                           patch=("observes_every_event", True) if observe_all else None)
        return done.sim.outcomes(), done.rounds.decisions, done.asked

    skipped, decisions, asked = run(False)
    full, all_decisions, all_asked = run(True)
    assert all_decisions == all_asked and asked < decisions
    if name == "max_min":
        assert len(skipped) == len(full) == 60
    else:
        assert skipped == full and decisions == all_decisions

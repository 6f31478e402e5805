"""AFS (NSDI'21) against the spec's test vectors and independent oracles.

Oracles share no code with gpufair: the worked vectors V1-V4 and the AFS-P example are the
spec's hand-computed numbers (shared/specs/afs.md §3.2, §3.5); the random cases compare with a
literal transcription of the paper's Algorithm 1 written below (on plain lists, one GPU at a
time), and rule (3) is checked against the paper's two-job JCT differences (1) and (2).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest

from gpufair.errors import InputError
from gpufair.model import ClusterState, Job, JobState, Node, Progress, ThroughputProfile
from gpufair.policy.afs.allocation import Rung, _Share, allocate, cond3
from gpufair.policy.afs.ladder import packing_sizes
from gpufair.policy.afs.policy import AfsPolicy
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy


# -- an independent Algorithm 1 (the oracle) ---------------------------------------------------
def reference_afs_l(rem: list[float], thr: list[list[float]], m: int) -> list[int]:
    """Algorithm 1 as printed in the paper, ``thr[k][c]`` for c = 0..max (thr[k][0] = 0).
    A job is eligible while thr rises at its next count (spec §3.3)."""
    cnt = [0] * len(rem)

    def length(k: int, c: int) -> float:
        return math.inf if c == 0 else rem[k] / thr[k][c]

    def three(a: int, b: int) -> bool:      # a shorter, b longer
        pa, pa1 = thr[a][cnt[a]], thr[a][cnt[a] + 1]
        pb, pb1 = thr[b][cnt[b]], thr[b][cnt[b] + 1]
        rhs = math.inf if pa == 0 else (pa1 - pa) / pa
        return (pb1 - pb) / pb1 > rhs

    for _ in range(m):
        jobs = [k for k in range(len(rem)) if cnt[k] + 1 < len(thr[k])
                and thr[k][cnt[k] + 1] > thr[k][cnt[k]]]
        if not jobs:
            break
        star = jobs[0]
        for j in jobs:
            ja, jb = star, j
            if cnt[ja] == 0 and cnt[jb] == 0:
                star = ja if length(ja, 1) < length(jb, 1) else jb
            else:
                if length(ja, cnt[ja]) >= length(jb, cnt[jb]):
                    ja, jb = jb, ja
                star = jb if three(ja, jb) else ja
        cnt[star] += 1
    return cnt


def rungs_of(rem: list[float], thr: list[list[float]]) -> list[Rung]:
    return [Rung(str(k), tuple(range(1, len(t))), tuple(t[1:]), r)
            for k, (r, t) in enumerate(zip(rem, thr, strict=True))]


def afs_l(rem: list[float], thr: list[list[float]], m: int) -> list[int]:
    got = allocate(rungs_of(rem, thr), m, mode="afs_l").counts
    return [got[str(k)] for k in range(len(rem))]


# -- the spec's worked vectors (§3.2) ---------------------------------------------------------
V1_A = [0, 1, 1.2, 1.3, 1.35]
V1_B = [0, 1, 1.9, 2.7, 3.4]


def test_v1_efficient_long_job_takes_the_stage_two_gpus() -> None:
    assert afs_l([100, 1000], [V1_A, V1_B], 4) == [1, 3]


def test_v2_a_more_scalable_short_job_wins_one_back() -> None:
    assert afs_l([100, 1000], [[0, 1, 1.7, 2.2, 2.5], V1_B], 4) == [2, 2]


def test_v3_stage_one_is_shortest_first() -> None:
    thr = [0, 1, 1.8]
    assert afs_l([100, 300, 50], [thr, thr, thr], 2) == [1, 0, 1]


def test_v4_linear_jobs_do_not_reduce_to_srtf() -> None:
    line = [0, 1, 2, 3, 4, 5, 6]
    assert afs_l([100, 1000], [line, line], 6) == [4, 2]


def test_v4_order_of_grants_is_a_a_b_a_b_a() -> None:
    """The spec lists the sequence; replaying M = 1..6 shows each grant."""
    line = [0, 1, 2, 3, 4, 5, 6]
    seen = [tuple(afs_l([100, 1000], [line, line], m)) for m in range(1, 7)]
    assert seen == [(1, 0), (2, 0), (2, 1), (3, 1), (3, 2), (4, 2)]


# -- the same vectors through the whole policy (ladders, pools, placement) --------------------
def elastic(jid: str, thr: list[float], rem: float | None, *, arrival: float = 0.0,
            held: tuple[str, ...] = (), gpu: str = "v100", min_gpus: int = 1,
            done: float = 0.0) -> Job:
    rates = {(gpu, c): r for c, r in enumerate(thr) if c > 0}
    return Job(id=jid, gpus=len(thr) - 1, min_gpus=min_gpus, max_gpus=len(thr) - 1,
               state=JobState.RUNNING if held else JobState.PENDING, arrival_s=arrival,
               progress=Progress(done, None if rem is None else done + rem),
               throughput=ThroughputProfile(rates), gpus_held=held)


def afs(mode: str = "afs_l", seed: int = 0, **options: object) -> AfsPolicy:
    policy = create_policy("afs", PolicyConfig(seed=seed, options={"mode": mode, **options}))
    assert isinstance(policy, AfsPolicy)
    return policy


def sizes(policy: AfsPolicy, state: ClusterState, now: float | None = None) -> dict[str, int]:
    plan = policy.schedule(state, state.time_s if now is None else now)
    return {a.job_id: len(a.gpu_ids) for a in plan.assignments}


def one_server(gpus: int, *jobs: Job, time_s: float = 0.0) -> ClusterState:
    return ClusterState(time_s, nodes=(Node("n0", "v100", gpus),), jobs=jobs)


@pytest.mark.parametrize(("a_thr", "expect"), [(V1_A, {"A": 1, "B": 3}),
                                               ([0, 1, 1.7, 2.2, 2.5], {"A": 2, "B": 2})])
def test_v1_v2_through_the_policy(a_thr: list[float], expect: dict[str, int]) -> None:
    state = one_server(4, elastic("A", a_thr, 100), elastic("B", V1_B, 1000, arrival=1))
    assert sizes(afs(network_packing=False), state) == expect


def test_v3_v4_through_the_policy() -> None:
    thr = [0, 1, 1.8]
    state = one_server(2, elastic("A", thr, 100), elastic("B", thr, 300, arrival=1),
                       elastic("C", thr, 50, arrival=2))
    assert sizes(afs(network_packing=False), state) == {"A": 1, "C": 1}
    line = [0, 1, 2, 3, 4, 5, 6]
    state = one_server(6, elastic("A", line, 100), elastic("B", line, 1000, arrival=1))
    assert sizes(afs(network_packing=False), state) == {"A": 4, "B": 2}


# -- rule (3) against the paper's two-job analysis (§2.3-2.4) -----------------------------------
def share(thr: list[float], cnt: int, rem: float | None = 1.0) -> _Share:
    return _Share(Rung("x", tuple(range(1, len(thr))), tuple(thr[1:]), rem), cnt - 1)


def test_rule_3_is_the_sign_of_the_papers_jct_differences() -> None:
    """(1) and (2) with the AFS substitution p'_{a,2} = p_{a,1}, p'_{b,2} = p'_{b,1}: both
    are positive exactly when (3) holds, and (3) is f_a + 1/f_b < 2."""
    rng = random.Random(5)
    for _ in range(3000):
        pa, pb = rng.uniform(0.5, 5), rng.uniform(0.5, 5)
        pa1, pb1 = pa * rng.uniform(1.001, 1.999), pb * rng.uniform(1.001, 1.999)
        wa = rng.uniform(1, 100)
        wb = wa * rng.uniform(1.0, 50)
        eq1 = wa / pa1 - wa / pa + wa / (2 * pb1) * (pb1 / pa - pb / pa1)
        pa2 = pa   # p'_{a,2} under AFS
        eq2 = (wa / pa1 - wb / pb1 + pb / (2 * pb1) * (wb / pb - wa / pa1)
               - pa / (2 * pa2) * (wa / pa - wb / pb1))
        got = cond3(share([0, pa, pa1], 1), share([0, pb, pb1], 1))
        if abs(eq1) > 1e-9 * wa:
            assert got == (eq1 > 0)
            assert got == (eq2 > 0)
            assert got == (pa1 / pa + pb / pb1 < 2)


def test_rule_3_never_holds_both_ways() -> None:
    rng = random.Random(6)
    for _ in range(3000):
        x = [0.0, 0.0]
        x[1:] = sorted(rng.uniform(0.1, 9) for _ in range(2))
        y = [0.0, 0.0]
        y[1:] = sorted(rng.uniform(0.1, 9) for _ in range(2))
        x[0] = y[0] = 0.0
        cx, cy = rng.randint(0, 1), rng.randint(0, 1)
        a, b = share([0, *x[1:]], cx), share([0, *y[1:]], cy)
        assert not (cond3(a, b) and cond3(b, a))


def test_a_job_without_gpus_never_loses_as_the_longer_job_to_a_sublinear_one() -> None:
    assert cond3(share([0, 1, 1.99], 1), share([0, 1, 1.5], 0))
    assert not cond3(share([0, 1, 1.5], 0), share([0, 1, 1.99], 1))


def test_longer_wins_direction_is_transitive() -> None:
    """App. C: b beats a and c beats b (lengths a < b < c) imply c beats a."""
    rng = random.Random(8)
    checked = 0
    for _ in range(20000):
        jobs = []
        for _ in range(3):
            p = rng.uniform(0.5, 3)
            jobs.append(share([0, p, p * rng.uniform(1.01, 1.99)], 1))
        a, b, c = jobs
        if cond3(a, b) and cond3(b, c):
            checked += 1
            assert cond3(a, c)
    assert checked > 100


# -- random instances against the literal Algorithm 1 ------------------------------------------
def random_curve(rng: random.Random, top: int) -> list[float]:
    """A concave, strictly rising curve (every increment smaller than the one before)."""
    thr, step = [0.0, rng.uniform(0.5, 3)], None
    step = thr[1] * rng.uniform(0.3, 0.99)
    for _ in range(top - 1):
        thr.append(thr[-1] + step)
        step *= rng.uniform(0.3, 0.95)
    return thr


@pytest.mark.parametrize("seed", range(40))
def test_matches_the_literal_algorithm_1(seed: int) -> None:
    rng = random.Random(seed)
    n, m = rng.randint(1, 7), rng.randint(1, 16)
    rem = [rng.choice([rng.uniform(10, 1000), float(rng.randint(1, 5) * 100)]) for _ in range(n)]
    thr = [random_curve(rng, rng.randint(1, 8)) for _ in range(n)]
    assert afs_l(rem, thr, m) == reference_afs_l(rem, thr, m)


@pytest.mark.parametrize("seed", range(15))
def test_stage_one_with_more_jobs_than_gpus_is_shortest_first(seed: int) -> None:
    """§8.5.3: with n >= M and f < 2 the M jobs with the smallest rem/thr(1) get one GPU."""
    rng = random.Random(100 + seed)
    m = rng.randint(1, 6)
    n = rng.randint(m, m + 5)
    rem = [rng.uniform(1, 1000) for _ in range(n)]
    thr = [random_curve(rng, rng.randint(1, 4)) for _ in range(n)]
    got = afs_l(rem, thr, m)
    shortest = sorted(range(n), key=lambda k: rem[k] / thr[k][1])[:m]
    assert got == [1 if k in shortest else 0 for k in range(n)]


@pytest.mark.parametrize("seed", range(15))
def test_fewer_jobs_than_gpus_all_run(seed: int) -> None:
    rng = random.Random(200 + seed)
    n = rng.randint(1, 5)
    m = rng.randint(n, 12)
    thr = [random_curve(rng, 8) for _ in range(n)]
    got = afs_l([rng.uniform(1, 1000) for _ in range(n)], thr, m)
    assert all(c >= 1 for c in got) and sum(got) == min(m, 8 * n)


def test_one_gpu_is_preemptive_srtf() -> None:
    """§8.5.7: M = 1 gives the GPU to the job with the least remaining time on it."""
    rng = random.Random(9)
    for _ in range(200):
        n = rng.randint(1, 6)
        rem = [rng.uniform(1, 100) for _ in range(n)]
        thr = [random_curve(rng, 3) for _ in range(n)]
        got = afs_l(rem, thr, 1)
        assert got.index(1) == min(range(n), key=lambda k: rem[k] / thr[k][1])


def test_useless_gpus_stay_idle() -> None:
    got = allocate([Rung("a", (1, 2), (1.0, 1.5), 10.0)], 5)
    assert got.counts == {"a": 2} and got.idle == 3


# -- AFS-P (§3.4-3.5) -----------------------------------------------------------------------
P_THR = {"A": [0, 1, 1.2, 1.3, 1.35], "B": [0, 1, 1.9, 2.7, 3.4], "C": [0, 1, 1.5, 1.8, 2.0]}


def p_state(gpus: int = 6) -> ClusterState:
    return one_server(gpus, *(elastic(k, t, None, arrival=i)
                              for i, (k, t) in enumerate(P_THR.items())))


def test_afs_p_worked_example() -> None:
    """Spec §3.5: each job gets one GPU first; B always beats A (u_B = 0.474 > v_A = 0.2);
    B vs C is a coin at GPU 4. Traced by hand, every path of coins ends at A=1, B=3, C=2
    (C first: B wins GPUs 5 and 6 as u_B > v_C(2) = 0.2; B first: GPU 5 is a coin again and
    either way the other of B, C takes GPU 6)."""
    for seed in range(30):
        got = sizes(afs("afs_p", seed=seed, network_packing=False), p_state())
        assert got == {"A": 1, "B": 3, "C": 2}, seed


def test_afs_p_coin_flips_follow_the_seed() -> None:
    """Two identical jobs on three GPUs: after one GPU each, (3) holds neither way (u = 0.44
    <= v = 0.8), so the seed decides who gets the third; the same seed, the same answer."""
    thr = [0, 1, 1.8, 2.5]
    outcomes = set()
    for seed in range(20):
        state = one_server(3, elastic("A", thr, None), elastic("B", thr, None, arrival=1))
        got = sizes(afs("afs_p", seed=seed, network_packing=False), state)
        assert got == sizes(afs("afs_p", seed=seed, network_packing=False), state)
        assert sorted(got.values()) == [1, 2]
        outcomes.add(got["A"])
    assert outcomes == {1, 2}


def test_afs_p_more_jobs_than_gpus_shares_by_run_counters() -> None:
    """§8.5.6: n > M: at most one GPU each, fewest units run first (arrival breaks ties),
    non-preemptive within a unit, evicted when the unit is used up."""
    unit = 100.0
    policy = afs("afs_p", unit_s=unit, network_packing=False)
    jobs = [elastic(k, [0, 1, 1.8], None, arrival=i) for i, k in enumerate("ABC")]
    state = one_server(2, *jobs)
    got = sizes(policy, state, 0.0)
    assert got == {"A": 1, "B": 1}

    def run(state: ClusterState, now: float, plan_sizes: dict[str, int]) -> ClusterState:
        held = {k: tuple(f"n0:{i}" for i in range(c)) for k, c in plan_sizes.items()}
        jobs = [replace(j, state=JobState.RUNNING if j.id in held else JobState.PENDING,
                        gpus_held=held.get(j.id, ())) for j in state.jobs]
        return replace(state, time_s=now, jobs=tuple(jobs))

    state = run(state, 60.0, got)
    assert sizes(policy, state) == {"A": 1, "B": 1}   # within the unit: C waits
    state = run(state, 100.0, {"A": 1, "B": 1})
    # A and B ran one unit each: C (0 units) first, then A (1 unit, earlier arrival)
    assert sizes(policy, state) == {"C": 1, "A": 1}


def test_afs_p_fewer_jobs_than_gpus_ignores_counters() -> None:
    policy = afs("afs_p", unit_s=10.0, network_packing=False)
    policy.load_state_dict({"run_s": {"A": 1e6, "B": 0.0}, "quantum_end_s": {},
                            "last_s": 0.0})
    line = [0, 1, 2, 3]
    got = sizes(policy, one_server(4, elastic("A", line, None), elastic("B", line, None,
                                                                         arrival=1)), 0.0)
    assert got["A"] >= 1 and got["B"] >= 1 and sum(got.values()) == 4


# -- ladders: min/max, measured counts, useless GPUs, network packing -------------------------
def test_packing_sizes_are_one_two_and_multiples_of_four() -> None:
    assert packing_sizes(4, 16) == {1, 2, 4, 8, 12, 16}
    assert packing_sizes(8, 20) == {1, 2, 4, 8, 16}
    assert packing_sizes(6, 12) == {1, 2, 6, 12}


def test_min_max_and_unmeasured_counts_are_respected() -> None:
    job = elastic("A", [0, 1, 1.9, 2.8, 3.6, 4.4, 5.1], 100, min_gpus=2)
    job = replace(job, max_gpus=5, throughput=ThroughputProfile(
        {k: v for k, v in job.throughput.rates.items() if k[1] != 4}))
    got = sizes(afs(network_packing=False), one_server(8, job))
    assert got == {"A": 5}
    got = sizes(afs(network_packing=True), one_server(8, job))
    assert got == {"A": 2}   # 3 and 5 are not packing sizes, 4 is unmeasured


def test_a_job_that_cannot_use_another_gpu_is_not_given_one() -> None:
    flat = elastic("flat", [0, 2.0, 2.0, 2.0, 2.0], 100)
    eager = elastic("eager", [0, 1, 1.3, 1.5, 1.6], 1e6, arrival=1)
    got = sizes(afs(network_packing=False), one_server(8, flat, eager))
    assert got == {"flat": 1, "eager": 4}


def test_rigid_jobs_get_their_gang_or_nothing() -> None:
    rigid = Job(id="R", gpus=3, arrival_s=0.0, progress=Progress(0, 100),
                throughput=ThroughputProfile({("v100", 3): 2.5}))
    small = elastic("S", [0, 1, 1.5], 1000, arrival=1)
    got = sizes(afs(), one_server(4, rigid, small))
    assert got == {"R": 3, "S": 1}
    assert sizes(afs(), one_server(2, rigid, small)) == {"S": 2}


def test_network_packing_placement_has_no_network_sharing() -> None:
    """§8.5.5 on 4-GPU servers from empty: every share regulated, each job on ceil(r/4)
    servers, no server hosts two jobs that span servers."""
    rng = random.Random(3)
    for trial in range(20):
        nodes = tuple(Node(f"n{i}", "v100", 4) for i in range(6))
        jobs = [elastic(f"j{k}", random_curve(rng, 12), rng.uniform(10, 1000), arrival=k)
                for k in range(rng.randint(1, 9))]
        plan = afs().schedule(ClusterState(0.0, nodes=nodes, jobs=tuple(jobs)), 0.0)
        spanning: dict[str, str] = {}
        for a in plan.assignments:
            hosts = {g.split(":")[0] for g in a.gpu_ids}
            assert len(a.gpu_ids) in {1, 2} | set(range(4, 25, 4)), trial
            assert len(hosts) == math.ceil(len(a.gpu_ids) / 4), (trial, a)
            if len(hosts) > 1:
                for h in hosts:
                    assert h not in spanning, (trial, a, spanning)
                    spanning[h] = a.job_id


# -- placement keeps what runs ------------------------------------------------------------------
def test_unchanged_shares_keep_their_gpus_and_a_growing_job_keeps_its_own() -> None:
    nodes = (Node("n0", "v100", 4), Node("n1", "v100", 4))
    a = elastic("A", [0, 1, 1.9, 2.8, 3.6], 100, held=("n1:2", "n1:3"))
    b = elastic("B", [0, 1, 1.2], 10, held=("n0:1",), arrival=1)
    plan = afs().schedule(ClusterState(0.0, nodes=nodes, jobs=(a, b)), 0.0)
    got = plan.by_job()
    assert got["B"].gpu_ids == ("n0:1",) or len(got["B"].gpu_ids) == 2
    assert {"n1:2", "n1:3"} <= set(got["A"].gpu_ids)


# -- reconfiguration cap --------------------------------------------------------------------------
def resize_state() -> ClusterState:
    """Four running 2-GPU jobs fill 8 GPUs; four short jobs arrive: AFS gives each of the
    eight one GPU, so all four running jobs would shrink."""
    nodes = (Node("n0", "v100", 4), Node("n1", "v100", 4))
    curve = [0, 1, 1.9, 2.7, 3.4]
    jobs = [elastic(f"r{k}", curve, 1000 * (k + 1), arrival=k,
                    held=(f"n{k // 2}:{2 * (k % 2)}", f"n{k // 2}:{2 * (k % 2) + 1}"))
            for k in range(4)]
    jobs += [elastic(f"new{k}", curve, 10, arrival=9 + k) for k in range(4)]
    return ClusterState(10.0, nodes=nodes, jobs=tuple(jobs))


def changed(state: ClusterState, plan_sizes: dict[str, int]) -> int:
    return sum(1 for j in state.jobs if j.gpus_held and plan_sizes.get(j.id, 0) not in
               (0, len(j.gpus_held)))


@pytest.mark.parametrize("cap", [0, 1, 2])
def test_reconfiguration_cap_bounds_resizes(cap: int) -> None:
    state = resize_state()
    free = sizes(afs(network_packing=False), state)
    assert changed(state, free) > cap   # uncapped, AFS reshapes more than the cap
    got = sizes(afs(network_packing=False, max_resizes_per_round=cap), state)
    assert changed(state, got) <= cap
    assert sum(got.values()) <= 8


# -- state, options, errors ---------------------------------------------------------------------
def test_run_counters_survive_a_restart() -> None:
    def rounds(policy: AfsPolicy, start: int, stop: int, held: dict[str, int]) -> list:
        out = []
        state = one_server(2, *[elastic(k, [0, 1, 1.8], None, arrival=i)
                                for i, k in enumerate("ABCD")])
        for t in range(start, stop):
            jobs = [replace(j, state=JobState.RUNNING if j.id in held else JobState.PENDING,
                            gpus_held=tuple(f"n0:{i}" for i in range(held.get(j.id, 0))))
                    for j in state.jobs]
            got = sizes(policy, replace(state, time_s=t * 50.0, jobs=tuple(jobs)))
            # the simulated cluster runs the plan: distinct GPUs per job
            held = got
            out.append(tuple(sorted(got.items())))
        return out, held

    first = afs("afs_p", unit_s=100.0, network_packing=False)
    whole, _ = rounds(first, 0, 12, {})
    second = afs("afs_p", unit_s=100.0, network_packing=False)
    head, held = rounds(second, 0, 6, {})
    saved = second.state_dict()
    import json
    restarted = afs("afs_p", unit_s=100.0, network_packing=False)
    restarted.load_state_dict(json.loads(json.dumps(saved)))
    tail, _ = rounds(restarted, 6, 12, held)
    assert whole == head + tail
    assert len(set(whole)) > 1   # the counters did rotate the jobs
    fresh = afs("afs_p", unit_s=100.0, network_packing=False)
    lost, _ = rounds(fresh, 6, 12, held)
    assert lost != tail          # without the saved counters the rotation differs


@pytest.mark.parametrize("bad", [[], {"run_s": {"a": -1}}, {"run_s": {"a": "x"}},
                                 {"run_s": []}, {"last_s": float("nan")},
                                 {"quantum_end_s": {"a": True}}])
def test_bad_saved_state_is_an_input_error(bad: object) -> None:
    with pytest.raises(InputError):
        afs().load_state_dict(bad)   # type: ignore[arg-type]


@pytest.mark.parametrize(("options", "needle"), [
    ({"mode": "afs_x"}, "policies.afs.mode"),
    ({"unit_s": 0}, "policies.afs.unit_s"),
    ({"unit_s": -5.0}, "policies.afs.unit_s"),
    ({"max_resizes_per_round": -1}, "policies.afs.max_resizes_per_round"),
    ({"max_resizes_per_round": 1.5}, "policies.afs.max_resizes_per_round"),
    ({"network_packing": "yes"}, "policies.afs.network_packing"),
])
def test_bad_options_are_input_errors(options: dict, needle: str) -> None:
    with pytest.raises(InputError) as caught:
        create_policy("afs", PolicyConfig(options=options))
    assert needle in str(caught.value)


def test_unknown_lengths_rank_as_longest_under_afs_l() -> None:
    thr = [0, 1, 1.5]
    state = one_server(1, elastic("unknown", thr, None), elastic("known", thr, 1e9, arrival=1))
    assert sizes(afs(network_packing=False), state) == {"known": 1}


def test_heterogeneous_pools_spill_to_an_idle_type() -> None:
    """Two jobs prefer the V100 (faster); the K80 would sit idle: the second one runs there."""
    nodes = (Node("v0", "v100", 1), Node("k0", "k80", 1))
    jobs = [replace(elastic(k, [0, 4.0], 100.0 * (i + 1), arrival=i),
                    throughput=ThroughputProfile({("v100", 1): 4.0, ("k80", 1): 1.0}))
            for i, k in enumerate("AB")]
    plan = afs().schedule(ClusterState(0.0, nodes=nodes, jobs=tuple(jobs)), 0.0)
    assert {a.job_id: a.gpu_ids for a in plan.assignments} == {"A": ("v0:0",), "B": ("k0:0",)}


def test_jobs_sharing_a_node_restriction_each_stay_on_the_type_it_reaches() -> None:
    """Jobs restricted to the K80 node (one restriction, shared as a site's partitions are)
    never take the faster V100, whichever of them is asked first; an unrestricted job does."""
    nodes = (Node("v0", "v100", 1), Node("k0", "k80", 2))
    only_k80 = ("k0",)
    profile = ThroughputProfile({("v100", 1): 4.0, ("k80", 1): 1.0})
    jobs = [replace(elastic(k, [0, 4.0], 100.0 * (i + 1), arrival=i), throughput=profile,
                    allowed_nodes=None if k == "free" else only_k80)
            for i, k in enumerate(("A", "B", "free"))]
    plan = afs().schedule(ClusterState(0.0, nodes=nodes, jobs=tuple(jobs)), 0.0)
    assert {a.job_id: a.gpu_ids for a in plan.assignments} == \
        {"A": ("k0:0",), "B": ("k0:1",), "free": ("v0:0",)}


def test_scan_order_is_arrival_then_id() -> None:
    """The scan runs by arrival, then id, whatever the snapshot order; Algorithm 1's line 6
    gives a tie of equal lengths to the job scanned later (j_b), so among identical jobs the
    last in that order wins: z (first) loses to b (arrived with a, but 'b' > 'a')."""
    thr = [0, 1, 1.5]
    jobs = [elastic(k, thr, 100, arrival=a) for k, a in (("z", 0.0), ("b", 1.0), ("a", 1.0))]
    for order in itertools.permutations(jobs):
        assert sizes(afs(), one_server(1, *order)) == {"b": 1}
        assert set(sizes(afs(), one_server(2, *order))) == {"a", "b"}


# -- the simulator runs elastic jobs at their held count, and charges resizes ----------------
def elastic_sim(jobs: list[tuple[int, int, float]], *, gpus: int = 2,
                resize_s: float | None = 10.0, elastic_flag: bool = True,
                elastic_max: int | None = None):
    """Jobs (scale factor, steps, arrival) of one model with 1.0 it/s on 1 GPU and 1.6 on 2."""
    from gpufair.adapters.simulator.engine import TraceSimulator
    from gpufair.adapters.simulator.semantics import CLEAN
    from gpufair.adapters.simulator.throughputs import Throughputs
    from gpufair.adapters.simulator.trace import TraceJob
    trace = [TraceJob(index=i, job_type="M", total_steps=steps, scale_factor=sf, arrival_s=at)
             for i, (sf, steps, at) in enumerate(jobs)]
    rates = Throughputs({"v100": {("M", 1): 1.0, ("M", 2): 1.6}}, {})
    return TraceSimulator(trace, rates, (Node("n0", "v100", gpus),), CLEAN, 120.0,
                          elastic=elastic_flag, resize_overhead_s=resize_s,
                          elastic_max=elastic_max)


def finish_times(sim, mode: str = "afs_l") -> dict[str, float]:
    from gpufair.core.round import Round
    from gpufair.core.simulation import run_to_end
    assert run_to_end(sim, Round(afs(mode, network_packing=False)))
    return {o.job_id: o.finish_s for o in sim.outcomes()}


def test_an_elastic_job_alone_runs_at_its_max() -> None:
    sim = elastic_sim([(2, 1600, 0.0)])
    assert finish_times(sim) == {"0": pytest.approx(20.0 + 1600 / 1.6)}   # restart + work
    assert sim.resizes() == 0


def test_elastic_max_lets_a_job_grow_past_its_request() -> None:
    sim = elastic_sim([(1, 1600, 0.0)], elastic_max=2)
    assert finish_times(sim) == {"0": pytest.approx(20.0 + 1600 / 1.6)}
    rigid = elastic_sim([(1, 1600, 0.0)])      # without it a 1-GPU job stays rigid
    assert finish_times(rigid) == {"0": pytest.approx(20.0 + 1600 / 1.0)}
    for bad, flag in ((0, True), (2, False), (5000, True)):
        with pytest.raises(InputError, match="elastic-max"):
            elastic_sim([(1, 1600, 0.0)], elastic_max=bad, elastic_flag=flag, resize_s=None)


def test_a_resize_costs_its_overhead_and_runs_at_the_new_rate() -> None:
    """Hand-computed: A (2 GPUs max, 1600 steps) starts at 0 on 2 GPUs (20 s restart);
    B (1 GPU, 100 steps) arrives at 200 and waits for the round at 240, where AFS gives
    each one GPU: A has done (240-20)*1.6 = 352 steps, shrinks (10 s resize), runs at 1.0;
    B starts (20 s) and ends at 360, a round boundary: A grows back (10 s) with
    352 + 110 = 462 done, 1138 left at 1.6 it/s: it ends at 370 + 711.25."""
    sim = elastic_sim([(2, 1600, 0.0), (1, 100, 200.0)])
    got = finish_times(sim)
    assert got == {"0": pytest.approx(370 + 1138 / 1.6), "1": pytest.approx(360.0)}
    assert sim.resizes() == 2


def test_rigid_simulation_refuses_resizes_and_bad_flags() -> None:
    from gpufair.adapters.simulator.semantics import ARTIFACT
    from gpufair.model import Resize
    sim = elastic_sim([(2, 1600, 0.0)], resize_s=None, elastic_flag=False)
    (result,) = sim.apply([Resize("0", ("n0:0",))])
    assert not result.ok and "rigid" in result.detail
    with pytest.raises(InputError, match="resize-overhead"):
        elastic_sim([(2, 1600, 0.0)], resize_s=5.0, elastic_flag=False)
    for bad in (-1.0, float("nan"), 1e9):
        with pytest.raises(InputError, match="resize-overhead"):
            elastic_sim([(2, 1600, 0.0)], resize_s=bad)
    from gpufair.adapters.simulator.engine import TraceSimulator
    with pytest.raises(InputError, match="clean"):
        TraceSimulator(sim.jobs[0:1] and [sim.jobs[0].trace], sim._throughputs, sim.nodes,
                       ARTIFACT, 120.0, elastic=True)


def test_an_elastic_resize_outside_its_range_is_refused() -> None:
    from gpufair.model import Resize, Start
    sim = elastic_sim([(2, 1600, 0.0)], gpus=4)
    assert sim.apply([Start("0", ("n0:0",))])[0].ok
    bad = sim.apply([Resize("0", ("n0:0", "n0:1", "n0:2"))])[0]
    assert not bad.ok and "1 to 2" in bad.detail
    assert sim.apply([Resize("0", ("n0:0", "n0:1"))])[0].ok


# -- how min/max GPUs reach the model from Slurm, and the rates AFS then sees ----------------
SLURM = __import__("pathlib").Path(__file__).parent / "data" / "slurm"


def slurm_job4(comment: str) -> tuple[Job, tuple[str, ...]]:
    import json

    from gpufair.adapters.slurm.translate import translate
    jobs = json.loads((SLURM / "squeue.json").read_text())
    nodes = json.loads((SLURM / "sinfo.json").read_text())
    jobs["jobs"][3]["comment"] = comment     # job 4: pending, asks gres:gpu:k80:4
    view = translate(jobs, nodes, now=1795305510.0)
    return view.state.job("4"), view.problems


@pytest.mark.parametrize(("comment", "bounds"), [
    ("gpufair:gpus=1-8", (1, 8)), ("train gpufair:checkpoint gpufair:gpus=2-4 x", (2, 4)),
    ("", (None, None)), ("gpufair:gpus=4-4", (4, 4))])
def test_slurm_comment_declares_min_and_max_gpus(comment: str, bounds: tuple) -> None:
    job, problems = slurm_job4(comment)
    assert (job.min_gpus, job.max_gpus) == bounds and problems == ()


@pytest.mark.parametrize("comment", ["gpufair:gpus=8-2", "gpufair:gpus=0-4",
                                     "gpufair:gpus=one-4", "gpufair:gpus=1-2",
                                     "gpufair:gpus=1-4 gpufair:gpus=1-8", "gpufair:gpus=",
                                     "gpufair:gpus=١-٤", "gpufair:gpus=1-99999999"])
def test_a_bad_elastic_comment_is_reported_and_the_job_stays_rigid(comment: str) -> None:
    job, problems = slurm_job4(comment)
    assert (job.min_gpus, job.max_gpus) == (None, None) and job.gpus == 4
    assert len(problems) == 1
    assert "gpufair:gpus=" in problems[0] and "rigid job of 4 GPUs" in problems[0]


def test_unmeasured_elastic_counts_scale_linearly_from_the_jobs_own() -> None:
    from gpufair.core.enrich import with_default_profiles
    job = Job(id="e", gpus=2, min_gpus=1, max_gpus=4,
              throughput=ThroughputProfile({("v100", 2): 3.0, ("v100", 1): 2.0}))
    rigid = Job(id="r", gpus=2, throughput=ThroughputProfile({("v100", 2): 3.0}))
    state = with_default_profiles(ClusterState(0.0, nodes=(Node("n", "v100", 8),),
                                               jobs=(job, rigid)))
    assert dict(state.job("e").throughput.rates) == {("v100", 1): 2.0, ("v100", 2): 3.0,
                                                     ("v100", 3): 4.5, ("v100", 4): 6.0}
    assert dict(state.job("r").throughput.rates) == {("v100", 2): 3.0}


def test_equal_lengths_make_the_scanned_job_the_shorter_one() -> None:
    """Line 9 swaps on >=: with equal lengths the job scanned now plays j_a (the shorter),
    and (3) is false for identical curves, so it keeps the priority. Two identical jobs on
    three GPUs: one each, then the third goes to B (scanned after A); the same with lengths
    unknown (both infinite)."""
    thr = [0, 1, 1.6, 2.0]
    assert afs_l([100, 100], [thr, thr], 3) == [1, 2]
    assert reference_afs_l([100, 100], [thr, thr], 3) == [1, 2]
    state = one_server(3, elastic("A", thr, None), elastic("B", thr, None, arrival=1))
    assert sizes(afs(network_packing=False), state) == {"A": 1, "B": 2}


def test_simulate_elastic_from_the_command_line(capsys) -> None:
    import json

    from gpufair.cli.main import main
    from gpufair.errors import EXIT_INPUT
    args = ["simulate", "--trace", "demo_60jobs_16gpus", "--throughputs",
            "tacc_throughputs_v100", "--cluster", "v100:16", "--gpus-per-server", "4",
            "--policy", "afs", "--json", "-q"]
    assert main([*args, "--elastic", "--resize-overhead", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["elastic"] is True and out["resizes"] > 0 and out["num_jobs"] == 60
    assert main([*args, "--resize-overhead", "5"]) == EXIT_INPUT
    assert "give --elastic too" in capsys.readouterr().err
    assert main([*args, "--elastic", "--semantics", "artifact"]) == EXIT_INPUT
    assert "clean" in capsys.readouterr().err
    assert main([*args[:-2], "--json", "-q"]) == 0          # rigid: no elastic keys
    assert "resizes" not in json.loads(capsys.readouterr().out)


def test_spill_offers_a_pools_own_waiting_job_once() -> None:
    """A K80 pool with idle GPUs and its own waiting rigid 4-GPU job (it does not fit the
    3 left) takes a job that got nothing on the V100s: every job is allocated at most once
    and the plan fits the cluster."""
    nodes = (Node("v0", "v100", 1), Node("k0", "k80", 4))
    fast = {("v100", 1): 4.0, ("k80", 1): 1.0}
    jobs = (replace(elastic("A", [0, 4.0], 100.0), throughput=ThroughputProfile(fast)),
            replace(elastic("B", [0, 4.0], 200.0, arrival=1), throughput=ThroughputProfile(fast)),
            Job(id="R", gpus=4, arrival_s=2, progress=Progress(0, 1e6),
                throughput=ThroughputProfile({("k80", 4): 3.0}),
                state=JobState.PENDING),
            replace(elastic("S", [0, 1.0], 10.0, arrival=3),
                    throughput=ThroughputProfile({("k80", 1): 1.0})))
    plan = afs().schedule(ClusterState(0.0, nodes=nodes, jobs=jobs), 0.0)
    got = {a.job_id: a.gpu_ids for a in plan.assignments}
    used = [g for gpus in got.values() for g in gpus]
    assert len(used) == len(set(used)) <= 5
    assert got["A"] == ("v0:0",) and "B" in got and "S" in got


@pytest.mark.parametrize(("low", "high", "gpus"), [(3, 2, 2), (0, 4, 2), (-1, 2, 1)])
def test_an_impossible_gpu_range_is_an_input_error(low: int, high: int, gpus: int) -> None:
    job = replace(elastic("bad", [0, 1, 1.5], 10), min_gpus=low, max_gpus=high, gpus=gpus)
    with pytest.raises(InputError, match="job bad"):
        afs().schedule(one_server(4, job), 0.0)
    rigid = Job(id="zero", gpus=0)
    with pytest.raises(InputError, match="job zero"):
        afs().schedule(one_server(4, rigid), 0.0)

"""OEF (spec specs/oef.md): the worked examples, the §9 checklist, the placer, the policy.

Oracles share no code with gpufair.policy.oef: golden numbers are the paper's/spec's exact
fractions, property checks are written out here, and the reference LPs are built row by row
below and solved with scipy's linprog (not gpufair's solver layer).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from dataclasses import replace
from fractions import Fraction as F

import numpy as np
import pytest
from scipy.optimize import linprog

from gpufair.errors import InputError
from gpufair.model import ClusterState, Job, JobState, Node, Tenant, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.oef.fastpath import ratio_order, solve_non_cooperative_fast
from gpufair.policy.oef.lp import OefProblem, solve_capped, solve_oef
from gpufair.policy.oef.policy import OefPolicy
from gpufair.policy.oef.rounding import Rounder
from gpufair.policy.registry import create_policy
from gpufair.policy.solver import SolveOptions

HAVE_GUROBI = importlib.util.find_spec("gurobipy") is not None
BACKENDS = [pytest.param("gurobi", marks=pytest.mark.skipif(not HAVE_GUROBI,
                                                            reason="no gurobipy")), "highs"]
COOP, NONCOOP = "cooperative", "non_cooperative"
TOL = 1e-6


def problem(w, m=(1, 1), pi=None) -> OefProblem:
    w = np.array(w, dtype=float)
    return OefProblem(w, np.array(m, dtype=float),
                      np.ones(len(w)) if pi is None else np.array(pi, dtype=float))


def frac(rows) -> np.ndarray:
    return np.array([[float(F(v)) for v in row] for row in rows])


# -- §9 golden vectors (m = <1,1>) ------------------------------------------------------------
GOLDEN = [
    # case, W, mode, weights, expected X (None: not unique), expected E
    ("1", [[1, 2], [1, 3], [1, 4]], COOP, None, [[1, 0], [0, "1/2"], [0, "1/2"]],
     [1, "3/2", 2]),
    ("2", [[1, 2], [1, 3], [1, 4]], NONCOOP, None,
     [[1, "5/26"], [0, "6/13"], [0, "9/26"]], ["18/13"] * 3),
    ("3", [[1, 2], [1, 5]], COOP, None, [[1, "1/4"], [0, "3/4"]], ["3/2", "15/4"]),
    ("3 liar", [[1, 4], [1, 5]], COOP, None, [[1, "3/8"], [0, "5/8"]], None),
    ("4", [[1, 2], [1, 5]], NONCOOP, None, [[1, "4/7"], [0, "3/7"]], ["15/7", "15/7"]),
    ("5", [[1, 2], [1, 5]], NONCOOP, [1, 2], [[1, "1/3"], [0, "2/3"]], ["5/3", "10/3"]),
    ("6", [[1, 2], [1, 3], [1, 5]], NONCOOP, [0.5, 0.5, 1],
     [[1, "4/37"], [0, "15/37"], [0, "18/37"]], ["45/37", "45/37", "90/37"]),
    ("7 fig2", [[1, 2], [1, 4]], COOP, None, [[1, "1/4"], [0, "3/4"]], None),
    ("7 liar", [[1, 3], [1, 4]], COOP, None, [[1, "1/3"], [0, "2/3"]], None),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("case", "w", "mode", "pi", "x", "e"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_vectors(backend, case, w, mode, pi, x, e) -> None:
    sol = solve_oef(problem(w, pi=pi), mode, SolveOptions(backend=backend))
    assert sol.backend == backend
    np.testing.assert_allclose(sol.x, frac(x), atol=TOL)
    if e is not None:
        np.testing.assert_allclose(sol.efficiency(np.array(w, float)),
                                   [float(F(v)) for v in e], atol=TOL)


def test_example_b_liar_gains_and_total_drops() -> None:
    """Eq. (6): under cooperative OEF u1 reporting <1,4> instead of <1,2> raises its true
    throughput 1.5 -> 1.75 (+16.7 %) while the true total falls 5.25 -> 4.875."""
    truth = np.array([[1, 2], [1, 5]], float)
    honest = solve_oef(problem(truth), COOP).x
    lied = solve_oef(problem([[1, 4], [1, 5]]), COOP).x
    assert truth[0] @ honest[0] == pytest.approx(1.5)
    assert truth[0] @ lied[0] == pytest.approx(1.75)
    assert np.sum(truth * honest) == pytest.approx(5.25)
    assert np.sum(truth * lied) == pytest.approx(4.875)


def test_example_a_cooperative_beats_gandiva_fair_total() -> None:
    """Eq. (1)/(2): the EF+SI optimum's total 4.5 beats Gandiva_fair's 4.35 (paper §2.4)."""
    w = np.array([[1, 2], [1, 3], [1, 4]], float)
    x = solve_oef(problem(w), COOP).x
    assert np.sum(w * x) == pytest.approx(4.5)
    gandiva = frac([[1, "4/45"], [0, "7/15"], [0, "4/9"]])
    assert np.sum(w * gandiva) < 4.5 - 0.1


def test_multi_type_virtual_users_equal_replication() -> None:
    """§3.4: u1 with types <1,2>, <1,3> and u2 <1,5> is W = {<1,2>;<1,3>;<1,5>;<1,5>}
    unweighted; u2's two replicas sum to the weighted row (18/37 of GPU 2)."""
    rep = solve_oef(problem([[1, 2], [1, 3], [1, 5], [1, 5]], pi=[1, 1, 1, 1]), NONCOOP)
    assert rep.level == pytest.approx(45 / 37)
    np.testing.assert_allclose(rep.x[2] + rep.x[3], [0, 18 / 37], atol=TOL)


# -- independent reference LPs (scipy linprog, rows written out here) ----------------------------
def ref_coop(w: np.ndarray, m: np.ndarray, pi: np.ndarray) -> float:
    n, k = w.shape
    a, b = [], []
    for j in range(k):
        row = np.zeros(n * k)
        row[j::k] = 1
        a.append(row)
        b.append(m[j])
    for own, other in itertools.permutations(range(n), 2):
        row = np.zeros(n * k)
        for j in range(k):
            row[other * k + j] += w[own, j] / pi[other]
            row[own * k + j] -= w[own, j] / pi[own]
        a.append(row)
        b.append(0.0)
    res = linprog(-w.ravel(), A_ub=np.array(a), b_ub=b, bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


def ref_noncoop_level(w: np.ndarray, m: np.ndarray, pi: np.ndarray) -> float:
    """max t s.t. W_l·x_l >= π_l t (max-min form; same optimum t, spec §3.1)."""
    n, k = w.shape
    a, b = [], []
    for j in range(k):
        row = np.zeros(n * k + 1)
        row[j:n * k:k] = 1
        a.append(row)
        b.append(m[j])
    for own in range(n):
        row = np.zeros(n * k + 1)
        row[own * k:(own + 1) * k] = -w[own]
        row[-1] = pi[own]
        a.append(row)
        b.append(0.0)
    c = np.zeros(n * k + 1)
    c[-1] = -1
    res = linprog(c, A_ub=np.array(a), b_ub=b, bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


def random_instance(rng: np.random.Generator, n: int, k: int, ordered: bool = False
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    steps = rng.uniform(1, 2, size=(n, k - 1))
    if ordered:   # ratio-ordered: sort each adjacent ratio column the same way
        steps = np.sort(steps, axis=0)
    w = np.hstack([np.ones((n, 1)), np.cumprod(steps, axis=1)])
    m = rng.integers(1, 9, size=k).astype(float)
    pi = rng.choice([1.0, 2.0, 3.0], size=n)
    return w, m, pi


@pytest.mark.parametrize("seed", range(12))
def test_cooperative_properties(seed: int) -> None:
    """EF (weighted), weighted SI, capacity tight, optimal against the full-row reference."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(2, 8)), int(rng.integers(2, 5))
    w, m, pi = random_instance(rng, n, k)
    x = solve_oef(OefProblem(w, m, pi), COOP).x
    np.testing.assert_allclose(x.sum(axis=0), m, atol=TOL)
    own = np.einsum("lj,lj->l", w, x)
    for a, b in itertools.permutations(range(n), 2):
        assert own[a] / pi[a] >= w[a] @ x[b] / pi[b] - TOL
    assert np.all(own >= pi / pi.sum() * (w @ m) - TOL)
    assert own.sum() == pytest.approx(ref_coop(w, m, pi), rel=1e-7)


def test_cooperative_lazy_rows_reach_the_full_optimum() -> None:
    """Above the eager threshold envy rows are generated lazily: the result must still be
    envy-free and as good as the LP with all n(n-1) rows."""
    rng = np.random.default_rng(99)
    w, m, pi = random_instance(rng, 48, 3)
    m = m * 6
    sol = solve_oef(OefProblem(w, m, pi), COOP)
    assert sol.solves > 1   # it did generate rows
    own = np.einsum("lj,lj->l", w, sol.x)
    envy = (w @ (sol.x / pi[:, None]).T) - (own / pi)[:, None]
    assert envy.max() <= 1e-6 * max(1.0, own.max())
    assert own.sum() == pytest.approx(ref_coop(w, m, pi), rel=1e-7)


@pytest.mark.parametrize("seed", range(12))
def test_non_cooperative_properties(seed: int) -> None:
    """Equal E/π, capacity tight, optimal level, PE (DRF sense), and no gain from inflating."""
    rng = np.random.default_rng(100 + seed)
    n, k = int(rng.integers(2, 7)), int(rng.integers(2, 5))
    w, m, pi = random_instance(rng, n, k)
    sol = solve_oef(OefProblem(w, m, pi), NONCOOP, SolveOptions(backend="highs"))
    x = sol.x
    own = np.einsum("lj,lj->l", w, x)
    np.testing.assert_allclose(own / pi, sol.level, rtol=1e-7)
    np.testing.assert_allclose(x.sum(axis=0), m, atol=TOL)
    assert sol.level == pytest.approx(ref_noncoop_level(w, m, pi), rel=1e-7)
    # PE: no allocation gives everyone at least as much and someone more
    a_ub, b_ub = [], []
    for j in range(k):
        row = np.zeros(n * k)
        row[j::k] = 1
        a_ub.append(row)
        b_ub.append(m[j])
    for own_l in range(n):
        row = np.zeros(n * k)
        row[own_l * k:(own_l + 1) * k] = -w[own_l]
        a_ub.append(row)
        b_ub.append(-own[own_l] + 1e-9)
    res = linprog(-w.ravel(), A_ub=np.array(a_ub), b_ub=b_ub, bounds=(0, None), method="highs")
    assert -res.fun <= own.sum() + 1e-6
    # SP vs inflation: tenant 0 inflates its speedups (w^1 stays 1)
    liar = w.copy()
    liar[0, 1:] *= rng.uniform(1.0, 1.8, size=k - 1)
    lied = solve_oef(OefProblem(liar, m, pi), NONCOOP, SolveOptions(backend="highs")).x
    assert w[0] @ lied[0] <= own[0] + 1e-7


@pytest.mark.parametrize("seed", range(8))
def test_replication_equals_direct_weights(seed: int) -> None:
    """Weighted OEF as the paper states it (integer weights = replicated rows, unweighted
    LP) has the same optimum as the direct weighted form, in both modes."""
    rng = np.random.default_rng(200 + seed)
    n, k = int(rng.integers(2, 5)), int(rng.integers(2, 4))
    w, m, pi = random_instance(rng, n, k)
    rep = np.repeat(w, pi.astype(int), axis=0)
    ones = np.ones(len(rep))
    assert np.sum(w * solve_oef(OefProblem(w, m, pi), COOP).x) == \
        pytest.approx(ref_coop(rep, m, ones), rel=1e-7)
    assert solve_oef(OefProblem(w, m, pi), NONCOOP).level == \
        pytest.approx(ref_noncoop_level(rep, m, ones), rel=1e-7)


@pytest.mark.parametrize("seed", range(10))
def test_non_cooperative_staircase_and_sparsity(seed: int) -> None:
    """Ratio-ordered W: at most n+k-1 non-zeros, and rows form a staircase (no non-zero lies
    lower-left of another) in ascending relative-speedup order."""
    rng = np.random.default_rng(300 + seed)
    n, k = int(rng.integers(2, 7)), int(rng.integers(2, 5))
    w, m, _ = random_instance(rng, n, k, ordered=True)
    x = solve_oef(OefProblem(w, m, np.ones(n)), NONCOOP, SolveOptions(backend="highs")).x
    assert np.count_nonzero(x > 1e-9) <= n + k - 1
    order = np.lexsort(tuple((w[:, 1:] / w[:, :-1])[:, j] for j in reversed(range(k - 1))))
    nz = [np.flatnonzero(x[r] > 1e-9) for r in order]
    for upper, lower in itertools.pairwise(nz):
        assert lower.min() >= upper.max()


@pytest.mark.parametrize("seed", range(25))
def test_fast_path_equals_the_lp(seed: int) -> None:
    rng = np.random.default_rng(400 + seed)
    n, k = int(rng.integers(1, 30)), int(rng.integers(1, 6))
    if k == 1:
        w, m, pi = np.ones((n, 1)), rng.integers(1, 9, size=1).astype(float), \
            rng.choice([1.0, 2.0], size=n)
    else:
        w, m, pi = random_instance(rng, n, k, ordered=True)
    p = OefProblem(w, m, pi)
    fast = solve_non_cooperative_fast(p)
    assert fast is not None
    lp = solve_oef(p, NONCOOP, SolveOptions(backend="highs"))
    assert fast.level == pytest.approx(lp.level, rel=1e-9)
    own = np.einsum("lj,lj->l", w, fast.x)
    np.testing.assert_allclose(own / pi, fast.level, rtol=1e-9)
    assert np.all(fast.x.sum(axis=0) <= m + 1e-9)


def test_fast_path_declines_what_is_not_ratio_ordered() -> None:
    w = np.array([[1, 2, 3], [1, 3, 3.5]])   # ratios 2,1.5 vs 3,1.17: orders disagree
    assert ratio_order(w) is None
    assert solve_non_cooperative_fast(OefProblem(w, np.ones(3), np.ones(2))) is None
    zero = np.array([[1, 0], [1, 2]])
    assert solve_non_cooperative_fast(OefProblem(zero, np.ones(2), np.ones(2))) is None


def test_type_a_tenant_cannot_use_gets_nothing_there() -> None:
    for mode in (COOP, NONCOOP):
        x = solve_oef(problem([[1, 0], [1, 3]]), mode).x
        assert x[0, 1] == 0


def test_demand_cap_water_fills() -> None:
    """u1 can use 1 GPU; the rest of 4 k80 + 4 v100 is shared by u2, u3 (hand-solved:
    capped u1 gets 1 k80 share mix scaled to 1 GPU, the others split what is left)."""
    w = np.array([[1, 2], [1, 3], [1, 4]], float)
    m = np.array([4.0, 4.0])
    sol = solve_capped(OefProblem(w, m, np.ones(3)), np.array([1.0, 8.0, 8.0]), NONCOOP)
    assert sol.x[0].sum() == pytest.approx(1.0)
    np.testing.assert_allclose(sol.x.sum(axis=0), m, atol=TOL)
    own = np.einsum("lj,lj->l", w, sol.x)
    assert own[1] == pytest.approx(own[2])


def test_bad_inputs_are_input_errors() -> None:
    with pytest.raises(InputError, match="mode"):
        solve_oef(problem([[1, 2]]), "friendly")
    with pytest.raises(InputError, match="weights"):
        problem([[1, 2]], pi=[0])
    with pytest.raises(InputError, match="speedups"):
        problem([[1, np.nan]])
    with pytest.raises(InputError, match="capacity"):
        problem([[1, 2]], m=(1, -1))


# -- rounding ---------------------------------------------------------------------------------
def test_rounding_keeps_capacity_and_converges() -> None:
    """Three tenants of 1/3 of one GPU (independent rounding would hand out 3 GPUs), and a
    random mix: every round uses exactly the GPUs there are, |dev| < 1, and after T rounds
    the average is within 1/T of the share."""
    rng = np.random.default_rng(5)
    x = rng.dirichlet(np.ones(5), size=3).T * np.array([1, 4, 7])
    x = np.hstack([np.full((5, 1), 0.2), x])    # 5 tenants, 4 types, sums 1,1,4,7
    m = [1, 1, 4, 7]
    r = Rounder()
    keys = [f"t{i}" for i in range(5)]
    total = np.zeros_like(x)
    rounds = 60
    for _ in range(rounds):
        real = r.round(keys, ["a", "b", "c", "d"], x, m, np.ones((5, 4), bool), [1] * 5)
        assert real.min() >= 0
        np.testing.assert_array_equal(real.sum(axis=0), m)
        total += real
        assert max(abs(d) for v in r.dev.values() for d in v.values()) < 1
    assert np.abs(total / rounds - x).max() <= 1 / rounds + 1e-9
    third = Rounder()
    for _ in range(6):
        real = third.round(["a", "b", "c"], ["g"], np.full((3, 1), 1 / 3), [1],
                           np.ones((3, 1), bool), [1, 1, 1])
        assert real.sum() == 1


def test_small_share_waits_then_runs() -> None:
    """A tenant whose share (0.3 of a type) is below its 2-GPU gang gets nothing until its
    deviation builds up, then at least its gang; the GPUs it gives back go to the other."""
    r = Rounder()
    x = np.array([[0.3, 0.3], [3.7, 3.7]])
    got = []
    for _ in range(12):
        real = r.round(["small", "big"], ["a", "b"], x, [4, 4], np.ones((2, 2), bool), [2, 1])
        np.testing.assert_array_equal(real.sum(axis=0), [4, 4])
        got.append(int(real[0].sum()))
    assert all(g == 0 or g >= 2 for g in got)
    assert sum(got) >= 2 * 2   # it ran, more than once, within 12 rounds
    for v in r.dev.values():
        assert max(abs(d) for d in v.values()) <= 2 + 1


def test_rounder_state_round_trips_through_json() -> None:
    r = Rounder()
    x = np.array([[0.5], [0.5]])
    r.round(["a", "b"], ["g"], x, [1], np.ones((2, 1), bool), [1, 1])
    clone = Rounder()
    clone.load_state_dict(json.loads(json.dumps(r.state_dict())))
    for _ in range(3):
        np.testing.assert_array_equal(
            r.round(["a", "b"], ["g"], x, [1], np.ones((2, 1), bool), [1, 1]),
            clone.round(["a", "b"], ["g"], x, [1], np.ones((2, 1), bool), [1, 1]))


# -- the policy on clusters ---------------------------------------------------------------------
def job(jid: str, tenant: str, rates: dict[str, float], gpus: int = 1, arrival: float = 0.0,
        held: tuple[str, ...] = ()) -> Job:
    return Job(id=jid, tenant=tenant, gpus=gpus, arrival_s=arrival,
               state=JobState.RUNNING if held else JobState.PENDING, gpus_held=held,
               throughput=ThroughputProfile({(t, gpus): r for t, r in rates.items()}))


def two_gpu_cluster(*jobs: Job, tenants=()) -> ClusterState:
    return ClusterState(time_s=0.0, nodes=(Node("s", "k80", 1), Node("f", "v100", 1)),
                        jobs=tuple(jobs), tenants=tuple(tenants))


def run(policy: OefPolicy, state: ClusterState, rounds: int, dt: float = 300.0
        ) -> list[dict[str, str]]:
    """Rounds of the policy, each snapshot holding what the last plan placed."""
    out = []
    for _ in range(rounds):
        plan = policy.schedule(state, state.time_s)
        placed = {a.job_id: a.gpu_ids for a in plan.assignments}
        type_of = state.gpu_type_of()
        out.append({j: type_of[g[0]] for j, g in placed.items()})
        state = replace(state, time_s=state.time_s + dt, jobs=tuple(
            replace(j, gpus_held=placed.get(j.id, ()),
                    state=JobState.RUNNING if j.id in placed else JobState.PENDING)
            for j in state.jobs))
    return out


def oef(**options) -> OefPolicy:
    return OefPolicy(PolicyConfig(options=options))


def test_policy_example_a_shares_and_realised_time() -> None:
    """Example A on a k80 + v100 cluster, throughputs measured (absolute rates differ per
    job, only the ratios matter): shares X*, and over 20 rounds u1 always has the k80 while
    u2 and u3 have the v100 ten rounds each."""
    state = two_gpu_cluster(job("a", "u1", {"k80": 10, "v100": 20}),
                            job("b", "u2", {"k80": 7, "v100": 21}),
                            job("c", "u3", {"k80": 0.5, "v100": 2}))
    policy = oef(mode=COOP)
    rounds = run(policy, state, 20)
    shares = policy.view.tenant_shares()
    assert shares["u1"] == pytest.approx({"k80": 1.0, "v100": 0.0})
    assert shares["u2"] == pytest.approx({"k80": 0.0, "v100": 0.5})
    assert shares["u3"] == pytest.approx({"k80": 0.0, "v100": 0.5})
    assert all(r.get("a") == "k80" for r in rounds)
    assert sum(r.get("b") == "v100" for r in rounds) == 10
    assert sum(r.get("c") == "v100" for r in rounds) == 10


def test_policy_weights_from_tenants_and_options() -> None:
    """Case 5 (non-cooperative, π = (1, 2)) with the weight from the snapshot's tenants, and
    the same from the options table overriding a snapshot weight of 1."""
    jobs = (job("a", "u1", {"k80": 1, "v100": 2}), job("b", "u2", {"k80": 3, "v100": 15}))
    for policy, tenants in ((oef(mode=NONCOOP), (Tenant("u1", 1.0), Tenant("u2", 2.0))),
                            (oef(mode=NONCOOP, weights={"u2": 2.0}), (Tenant("u2", 1.0),))):
        policy.schedule(two_gpu_cluster(*jobs, tenants=tenants), 0.0)
        shares = policy.view.tenant_shares()
        assert shares["u1"] == pytest.approx({"k80": 1.0, "v100": 1 / 3})
        assert shares["u2"] == pytest.approx({"k80": 0.0, "v100": 2 / 3})


def test_policy_multi_type_tenant_splits_its_weight() -> None:
    """Case 6: u1 runs two job types (<1,2> and <1,3>), u2 one (<1,5>): u1's types are
    virtual tenants of weight 1/2 each."""
    jobs = (job("a", "u1", {"k80": 1, "v100": 2}), job("a2", "u1", {"k80": 2, "v100": 6}),
            job("b", "u2", {"k80": 1, "v100": 5}))
    policy = oef(mode=NONCOOP)
    policy.schedule(two_gpu_cluster(*jobs), 0.0)
    rows = {v.speedups: x for v, x in zip(policy.view.tenants, policy.view.shares, strict=True)}
    np.testing.assert_allclose(rows[(1.0, 2.0)], [1, 4 / 37], atol=TOL)
    np.testing.assert_allclose(rows[(1.0, 3.0)], [0, 15 / 37], atol=TOL)
    np.testing.assert_allclose(rows[(1.0, 5.0)], [0, 18 / 37], atol=TOL)


def test_speedups_come_from_the_jobs_gang_size() -> None:
    """Rates at other gang sizes never enter: a 2-GPU job's speedup is its 2-GPU rates'."""
    j = Job(id="g", tenant="u", gpus=2, throughput=ThroughputProfile(
        {("k80", 2): 4.0, ("v100", 2): 12.0, ("k80", 1): 1.0, ("v100", 1): 10.0}))
    state = ClusterState(0.0, nodes=(Node("s", "k80", 2), Node("f", "v100", 2)), jobs=(j,))
    policy = oef()
    policy.schedule(state, 0.0)
    assert policy.view.tenants[0].speedups == (1.0, 3.0)


def test_between_oef_rounds_the_plan_holds() -> None:
    """Calls inside one OEF round keep running jobs where they are (round robin happens at
    round boundaries only); at the next boundary the longest-starved job takes over."""
    jobs = (job("a1", "u1", {"k80": 1, "v100": 2}), job("a2", "u1", {"k80": 1, "v100": 2},
                                                         arrival=1.0))
    state = ClusterState(0.0, nodes=(Node("s", "k80", 1),), jobs=jobs)
    policy = oef(round_s=300.0)
    first = policy.schedule(state, 0.0)
    assert [a.job_id for a in first.assignments] == ["a1"]
    state = replace(state, jobs=(replace(jobs[0], gpus_held=first.assignments[0].gpu_ids,
                                         state=JobState.RUNNING), jobs[1]))
    assert [a.job_id for a in policy.schedule(state, 120.0).assignments] == ["a1"]
    assert [a.job_id for a in policy.schedule(state, 300.0).assignments] == ["a2"]
    fifo = oef(round_s=300.0, job_order="arrival")
    fifo.schedule(replace(state, jobs=jobs), 0.0)
    assert [a.job_id for a in fifo.schedule(state, 300.0).assignments] == ["a1"]


def test_backfill_uses_what_a_share_leaves_idle() -> None:
    """u1 (one job) is entitled to more than it can use; u2's second job runs on the rest."""
    nodes = (Node("s", "k80", 2), Node("f", "v100", 2))
    jobs = (job("a", "u1", {"k80": 1, "v100": 1.2}),
            job("b1", "u2", {"k80": 1, "v100": 4}), job("b2", "u2", {"k80": 1, "v100": 4}),
            job("b3", "u2", {"k80": 1, "v100": 4}))
    state = ClusterState(0.0, nodes=nodes, jobs=jobs)
    on = oef(mode=COOP).schedule(state, 0.0)
    off = oef(mode=COOP, backfill=False).schedule(state, 0.0)
    assert len(on.assignments) == 4
    assert len(off.assignments) < 4


def test_state_survives_a_restart() -> None:
    """A policy restored from its JSON state plans exactly what the original plans next."""
    jobs = tuple(job(f"{t}{i}", t, {"k80": 1, "v100": s}, arrival=i)
                 for t, s in (("u1", 2.0), ("u2", 3.0), ("u3", 4.0)) for i in range(2))
    state = ClusterState(0.0, nodes=(Node("s", "k80", 2), Node("f", "v100", 1)), jobs=jobs)
    policy = oef()
    run(policy, state, 3)
    clone = oef()
    clone.load_state_dict(json.loads(json.dumps(policy.state_dict())))
    later = replace(state, time_s=900.0)
    assert run(policy, later, 4) == run(clone, later, 4)


def test_registered_and_options_checked() -> None:
    assert isinstance(create_policy("oef"), OefPolicy)
    for bad, word in (({"mode": "friendly"}, "mode"), ({"round_s": 0}, "round_s"),
                      ({"weights": {"u": 0.0}}, "weights"), ({"weights": {"u": -1}}, "weights"),
                      ({"demand_cap": "yes"}, "demand_cap"),
                      ({"job_order": "random"}, "job_order")):
        with pytest.raises(InputError, match=word):
            oef(**bad)


def test_bad_tenant_weight_in_a_snapshot_is_an_input_error() -> None:
    state = two_gpu_cluster(job("a", "u1", {"k80": 1, "v100": 2}),
                            tenants=(Tenant("u1", 0.0),))
    with pytest.raises(InputError, match=r"tenants\.u1\.weight"):
        oef().schedule(state, 0.0)


def test_capacity_never_exceeded_over_many_rounds() -> None:
    """Random tenants, gangs and rates on 3 types: every round's plan fits every type."""
    rng = np.random.default_rng(11)
    nodes = tuple(Node(f"{t}{i}", t, 4) for t in ("k80", "p100", "v100") for i in range(2))
    jobs = []
    for i in range(30):
        gang = int(rng.choice([1, 1, 2, 4, 8]))
        base = float(rng.uniform(1, 10))
        jobs.append(job(f"j{i}", f"u{i % 7}", {"k80": base, "p100": base * rng.uniform(1, 2),
                                               "v100": base * rng.uniform(2, 4)}, gpus=gang,
                        arrival=float(i)))
    state = ClusterState(0.0, nodes=nodes, jobs=tuple(jobs),
                         tenants=tuple(Tenant(f"u{i}", float(1 + i % 3)) for i in range(7)))
    for mode in (COOP, NONCOOP):
        policy = oef(mode=mode)
        for r in run(policy, state, 15):
            gang = {j.id: j.gpus for j in jobs}
            used: dict[str, int] = {}
            for jid, t in r.items():
                used[t] = used.get(t, 0) + gang[jid]
            assert all(v <= 8 for v in used.values())
            assert sum(used.values()) >= 20   # backfill keeps most GPUs busy


@pytest.mark.skipif(not HAVE_GUROBI, reason="no gurobipy")
@pytest.mark.parametrize("seed", range(6))
def test_gurobi_and_highs_agree(seed: int) -> None:
    """Small random models (inside the size-limited licence): the same optimum from both;
    the same X where the optimum is unique is not guaranteed, the same E/π level is."""
    rng = np.random.default_rng(500 + seed)
    w, m, pi = random_instance(rng, int(rng.integers(2, 9)), int(rng.integers(2, 5)))
    p = OefProblem(w, m, pi)
    for mode in (COOP, NONCOOP):
        g = solve_oef(p, mode, SolveOptions(backend="gurobi"))
        h = solve_oef(p, mode, SolveOptions(backend="highs"))
        assert (g.backend, h.backend) == ("gurobi", "highs")
        assert np.sum(w * g.x) == pytest.approx(np.sum(w * h.x), rel=1e-7)
        if mode == NONCOOP:
            assert g.level == pytest.approx(h.level, rel=1e-7)


def test_known_limit_deflation_pays_in_non_cooperative_mode() -> None:
    """Documents a limit, not a promise (spec §3.6): strategy-proofness covers inflated
    reports only. u2 under-reporting <1,4> for its true <1,5> raises its true throughput
    15/7 -> 2.5. This is why speedups must come from the profiler, never from users."""
    truth = np.array([[1, 2], [1, 5]], float)
    honest = solve_oef(problem(truth), NONCOOP).x
    lied = solve_oef(problem([[1, 2], [1, 4]]), NONCOOP).x
    assert truth[1] @ honest[1] == pytest.approx(15 / 7)
    assert truth[1] @ lied[1] == pytest.approx(2.5)


def test_a_tenant_charged_less_than_dealt_is_owed_and_sums_stay_zero() -> None:
    """settle(charged): a tenant whose gang did not fit what it was dealt is charged only
    what ran; it is owed the rest (its deviation rises against the others') and each type's
    deviations still sum to 0, so nothing drifts however long it lasts."""
    r = Rounder()
    x = np.array([[1.0, 1.0], [1.0, 1.0]])   # a is dealt 1 + 1: its gang fits neither
    ran, owed = 0, []
    for _ in range(20):
        real = r.round(["a", "b"], ["k80", "v100"], x, [2, 2], np.ones((2, 2), bool), [2, 1],
                       settle=False)
        fits = real[0].max() >= 2             # a's gang of 2 on one type only
        charged = real.copy()
        charged[0] = real[0] if fits else 0
        ran += fits
        r.settle(charged)
        dev = np.array([[r.dev[k][t] for t in ("k80", "v100")] for k in ("a", "b")])
        np.testing.assert_allclose(dev.sum(axis=0), 0.0, atol=1e-9)
        assert np.abs(dev).max() < 4
        if not fits and real[0].sum():
            owed.append(dev[0].sum())
    assert ran >= 4 and owed and min(owed) > 0

"""``max_min`` ``objective = "finish_time"``: Gavel's finish-time fairness (the Shockwave paper's
"Themis", SIMULATION.md §4).

The oracle is written here from the formula — min over x of max_j (t_j + r_j/T_j(x)) / D_j,
D_j = c_j + r_j/T_iso,j, T_iso,j the job's throughput with 1/m of every type — as a bisection
over dense SciPy ``linprog`` feasibility problems, not through gpufair's solver layer or its
row builders.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from scipy.optimize import linprog

from gpufair.errors import InputError
from gpufair.model import Job, JobState, Progress, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.max_min import MaxMinPolicy
from gpufair.policy.registry import create_policy

HAVE_GUROBI = importlib.util.find_spec("gurobipy") is not None
BACKENDS = [pytest.param("gurobi", marks=pytest.mark.skipif(not HAVE_GUROBI,
                                                            reason="no gurobipy")), "highs"]
TYPES = ("k80", "v100")


def policy(backend: str = "highs", **options: object) -> MaxMinPolicy:
    return create_policy("max_min", PolicyConfig(
        solver_backend=backend, options={"objective": "finish_time", **options}))


def job(name: str, rates: tuple[float, ...], left: float | None, arrival: float = 0.0,
        gang: int = 1, done: float = 0.0) -> Job:
    profile = {(t, gang): r for t, r in zip(TYPES, rates, strict=False) if r > 0}
    total = None if left is None else done + left
    return Job(id=name, gpus=gang, state=JobState.PENDING, arrival_s=arrival,
               progress=Progress(done, total), throughput=ThroughputProfile(profile))


def rho_of(jobs: list[Job], alloc: dict, capacity: dict[str, int], now: float) -> np.ndarray:
    """ρ̂_j of an allocation, for jobs new to the policy (c_j = 0, nothing done yet)."""
    m = len(jobs)
    out = []
    for j in jobs:
        usable = [t for t in capacity if j.rate(t) > 0 and j.gpus <= capacity[t]]
        share = {t: capacity[t] / (m * j.gpus) for t in usable}
        scale = max(1.0, sum(share.values()))
        iso = sum(j.rate(t) * share[t] / scale for t in usable)
        left = j.progress.iterations_left
        throughput = sum(j.rate(t) * x for t, x in alloc[j.id].items())
        out.append((now - j.arrival_s + left / throughput) / (left / iso))
    return np.array(out)


def oracle_level(jobs: list[Job], capacity: dict[str, int], now: float) -> float:
    """The least z for which dense linprog finds x with every ρ̂_j ≤ z (bisection, 1e-7)."""
    types = list(capacity)
    n, k = len(jobs), len(types)
    theta = np.array([[j.rate(t) if j.gpus <= capacity[t] else 0.0 for t in types]
                      for j in jobs])
    gang = np.array([j.gpus for j in jobs], dtype=float)
    share = np.array([[capacity[t] / (n * j.gpus) if theta[i, c] > 0 else 0.0
                       for c, t in enumerate(types)] for i, j in enumerate(jobs)])
    share /= np.maximum(1.0, share.sum(axis=1))[:, None]
    iso = (theta * share).sum(axis=1)
    left = np.array([j.progress.iterations_left for j in jobs])
    elapsed = np.array([now - j.arrival_s for j in jobs])
    denom = left / iso
    a_need = np.zeros((n, n * k))
    for i in range(n):
        a_need[i, i * k:(i + 1) * k] = -theta[i]
    a_cap = np.vstack([np.hstack([np.diag(np.full(k, g)) for g in gang]),   # Σ sf_j x_jt ≤ G_t
                       np.kron(np.eye(n), np.ones(k))])                     # Σ_t x_jt ≤ 1
    b_cap = np.concatenate([[capacity[t] for t in types], np.ones(n)])
    bounds = [(0, 1 if theta.ravel()[c] > 0 else 0) for c in range(n * k)]

    def feasible(z: float) -> bool:
        slack = z * denom - elapsed
        if np.any(slack <= 0):
            return False
        r = linprog(np.zeros(n * k), A_ub=np.vstack([a_need, a_cap]),
                    b_ub=np.concatenate([-left / slack, b_cap]), bounds=bounds, method="highs")
        return r.status == 0

    lo, hi = 0.0, 1.0
    while not feasible(hi):
        hi *= 2
    while hi - lo > 1e-7 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(5))
def test_two_types_reach_the_oracles_level(backend: str, seed: int) -> None:
    """Random 1- and 2-GPU jobs on k80+v100 (some cannot use the v100s, some arrived long
    ago): the allocation's worst ρ̂ is the oracle's optimum, to the bisection's tolerance."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    jobs = [job(f"j{i}", (float(rng.uniform(0.5, 1.0)),
                          0.0 if rng.random() < 0.25 else float(rng.uniform(1.0, 4.0))),
                float(rng.uniform(1e3, 2e4)), arrival=float(rng.uniform(0, 3000)),
                gang=int(rng.choice([1, 2])))
            for i in range(n)]
    capacity = {"k80": int(rng.integers(1, 4)), "v100": int(rng.integers(1, 4))}
    now = 3600.0
    alloc = policy(backend).allocate(jobs, capacity, now)
    level = oracle_level(jobs, capacity, now)
    worst = float(rho_of(jobs, alloc, capacity, now).max())
    assert level * (1 - 1e-6) <= worst <= level * (1 + 2e-4)
    used = {t: sum(j.gpus * alloc[j.id].get(t, 0.0) for j in jobs) for t in capacity}
    assert all(used[t] <= capacity[t] + 1e-6 for t in capacity)


def test_one_type_heavy_load_equalises_every_rho_and_fills_the_type() -> None:
    """More demand than GPUs on one type: the closed form (no LP) gives every job the same ρ̂
    — the LP's only optimum — and uses every GPU; it is the oracle's level."""
    jobs = [job("a", (0.0, 2.0), 4e4), job("b", (0.0, 1.0), 1e4, arrival=600.0),
            job("c", (0.0, 3.0), 9e4, gang=2), job("d", (0.0, 1.5), 2e3, arrival=1200.0)]
    capacity = {"v100": 3}
    alloc = policy().allocate(jobs, capacity, 1800.0)
    rho = rho_of(jobs, alloc, capacity, 1800.0)
    np.testing.assert_allclose(rho, rho.max(), rtol=1e-9)
    assert sum(j.gpus * alloc[j.id]["v100"] for j in jobs) == pytest.approx(3.0, rel=1e-9)
    assert rho.max() == pytest.approx(oracle_level(jobs, capacity, 1800.0), rel=1e-6)


def test_light_load_level_is_a_job_running_all_the_time() -> None:
    """Two 1-GPU jobs on four GPUs (an exact fit would be two): each could run all the time,
    so the level is the worse of the two running alone, and no fraction passes 1."""
    jobs = [job("a", (0.0, 2.0), 4e4, arrival=0.0), job("b", (0.0, 1.0), 1e4, arrival=900.0)]
    alloc = policy().allocate(jobs, {"v100": 4}, 1000.0)
    # x_iso = min(1, 4/2) = 1: ρ̂ = (t + r/θ) / (r/θ), at most when x = 1
    expected = max((1000.0 + 2e4) / 2e4, (100.0 + 1e4) / 1e4)
    assert max(rho_of(jobs, alloc, {"v100": 4}, 1000.0)) == pytest.approx(expected, rel=1e-9)
    assert all(x <= 1.0 for a in alloc.values() for x in a.values())


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_stage_spends_the_spare_capacity_where_it_is_fastest(backend: str) -> None:
    """At light load the first stage gives each job only what its ρ̂ needs; the second keeps
    the level and gives the rest to where it adds most normalized throughput."""
    jobs = [job("a", (1.0, 3.0), 1e4), job("b", (1.0, 1.2), 1e4)]
    capacity = {"k80": 2, "v100": 2}
    first = policy(backend).allocate(jobs, capacity, 0.0)
    second = policy(backend, stages=2).allocate(jobs, capacity, 0.0)

    def speed(alloc: dict) -> float:
        return sum(j.rate(t) / j.rate("k80") * x for j in jobs for t, x in alloc[j.id].items())

    level = oracle_level(jobs, capacity, 0.0)
    assert max(rho_of(jobs, second, capacity, 0.0)) <= level * (1 + 2e-4)
    assert speed(second) >= speed(first) - 1e-6
    assert speed(second) == pytest.approx(3.0 + 1.2, rel=1e-6)   # each on a v100 all the time


def test_isolated_time_is_charged_between_plans_and_survives_a_restart() -> None:
    """c_j grows by the iterations done since the last plan at that plan's isolated rate;
    a restored policy charges the same (state that changes between rounds)."""
    capacity = {"v100": 1}
    first = [job("a", (0.0, 2.0), 1e4), job("b", (0.0, 2.0), 1e4)]
    p = policy()
    p.allocate(first, capacity, 0.0)
    assert p._isolated_s == {"a": 0.0, "b": 0.0}
    later = [job("a", (0.0, 2.0), 9e3, done=1e3), job("b", (0.0, 2.0), 1e4),
             job("c", (0.0, 2.0), 5e3, done=500.0, arrival=400.0)]
    restored = policy()
    restored.load_state_dict(p.state_dict())
    for each in (p, restored):
        each.allocate(later, capacity, 500.0)
        # a: 1e3 iterations at its isolated rate then (1/2 of 2 it/s); c (first seen): 500
        # at today's (1/3 of 2 it/s); b did nothing
        assert each._isolated_s == pytest.approx({"a": 1e3, "b": 0.0, "c": 750.0})
    p.allocate(later[1:], capacity, 600.0)
    assert set(p._isolated_s) == {"b", "c"}   # a finished: forgotten


def test_unknown_lengths_hold_their_isolated_share() -> None:
    """No ρ̂ without a remaining length: such a job keeps 1/m; the others share the rest
    with equal ρ̂ (b, waiting longer, gets more); with no length known, everyone keeps 1/m."""
    jobs = [job("a", (0.0, 1.0), None), job("b", (0.0, 1.0), 1e4),
            job("c", (0.0, 1.0), 1e4, arrival=600.0), job("d", (0.0, 1.0), None)]
    alloc = policy().allocate(jobs, {"v100": 2}, 600.0)
    assert alloc["a"]["v100"] == pytest.approx(0.5) and alloc["d"]["v100"] == pytest.approx(0.5)
    x_b, x_c = alloc["b"]["v100"], alloc["c"]["v100"]
    assert x_b + x_c == pytest.approx(1.0)
    # ρ̂ = (t + r/x) / (r/0.5) with θ = 1: equal for b (t = 600) and c (t = 0)
    assert (600.0 + 1e4 / x_b) == pytest.approx(1e4 / x_c) and x_b > x_c
    unknown = policy().allocate([jobs[0], jobs[3]], {"v100": 1}, 0.0)
    assert unknown == {"a": {"v100": 0.5}, "d": {"v100": 0.5}}


def test_tenant_level_is_refused() -> None:
    """ρ̂ is a job's: a tenant-level finish-time objective is a config error naming the key."""
    with pytest.raises(InputError, match=r"finish_time.* is per job") as caught:
        policy(level="tenant")
    assert "level" in str(caught.value)


def test_ecos_answers_inside_the_optimal_face() -> None:
    """Under the artifact's interior-point solver the one-type answer is a point inside the
    optimal face, as the artifact's: the same worst ρ̂, and at light load (the face is not
    one point) every job above the least fraction its ρ̂ needs, where the closed form (the
    other backends) gives exactly that least fraction to all but the bottleneck."""
    jobs = [job("a", (0.0, 1.0), 4e4, arrival=0.0), job("b", (0.0, 1.0), 1e4, arrival=3600.0),
            job("c", (0.0, 1.0), 1e4, arrival=3600.0)]
    capacity = {"v100": 4}   # room for all three: a, waiting since 0, sets the level alone
    vertex = policy("highs").allocate(jobs, capacity, 3600.0)
    inside = policy("ecos").allocate(jobs, capacity, 3600.0)
    worst = {name: float(rho_of(jobs, a, capacity, 3600.0).max())
             for name, a in (("vertex", vertex), ("inside", inside))}
    assert worst["inside"] == pytest.approx(worst["vertex"], rel=1e-5)
    assert vertex["a"]["v100"] == pytest.approx(1.0)          # a sets the level alone
    rho_vertex = rho_of(jobs, vertex, capacity, 3600.0)
    np.testing.assert_allclose(rho_vertex, rho_vertex.max(), rtol=1e-9)   # b, c dragged up
    rho_inside = rho_of(jobs, inside, capacity, 3600.0)
    for k, name in ((1, "b"), (2, "c")):
        assert inside[name]["v100"] > vertex[name]["v100"] + 0.01
        assert rho_inside[k] < worst["inside"] - 0.01
    assert sum(x["v100"] for x in inside.values()) <= 4.0 + 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_type_with_no_gpus_leaves_the_lp_path_equal_to_the_closed_form(backend: str) -> None:
    """With an empty k80 pool beside the v100s the bisection over LPs runs (two types) and
    reaches the one-type closed form's level; at an exact fit (as many GPUs as gangs) the
    level is the best case on either path, and the second stage runs everyone all the time."""
    jobs = [job("a", (1.0, 2.0), 4e4), job("b", (1.0, 1.0), 1e4, arrival=600.0),
            job("c", (1.0, 3.0), 9e4, gang=2), job("d", (1.0, 1.5), 2e3, arrival=1200.0)]
    closed = policy(backend).allocate(jobs, {"v100": 3}, 1800.0)
    bisected = policy(backend).allocate(jobs, {"k80": 0, "v100": 3}, 1800.0)
    levels = [float(rho_of(jobs, a, {"v100": 3}, 1800.0).max()) for a in (closed, bisected)]
    assert levels[1] == pytest.approx(levels[0], rel=2e-4) and levels[1] >= levels[0] * (1 - 1e-9)
    assert all(set(a) <= {"v100"} for a in bisected.values())
    everyone = {j.id: {"v100": 1.0} for j in jobs}
    best = float(rho_of(jobs, everyone, {"v100": 5}, 1800.0).max())
    for capacity in ({"v100": 5}, {"k80": 0, "v100": 5}):
        fit = policy(backend).allocate(jobs, capacity, 1800.0)
        assert float(rho_of(jobs, fit, {"v100": 5}, 1800.0).max()) == \
            pytest.approx(best, rel=2e-4)
        full = policy(backend, stages=2).allocate(jobs, capacity, 1800.0)
        assert all(a["v100"] == pytest.approx(1.0, abs=1e-6) for a in full.values())

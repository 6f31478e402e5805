"""``max_min`` at the tenant level (the OEF paper's Gavel, spec oef.md §5.4), one and two stages.

The oracle is a dense SciPy ``linprog`` of the spec's formula written here from the text
(max t s.t. W_l·x_l ≥ t·W_l·(m·π_l/Σπ), Σ_l x_l ≤ m, each job at most one GPU's time), not
gpufair's solver layer or its row builder.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from scipy.optimize import linprog

from gpufair.errors import InputError
from gpufair.model import ClusterState, Job, JobState, Node, Progress, Tenant, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.max_min import MaxMinPolicy
from gpufair.policy.registry import create_policy

HAVE_GUROBI = importlib.util.find_spec("gurobipy") is not None
BACKENDS = [pytest.param("gurobi", marks=pytest.mark.skipif(not HAVE_GUROBI,
                                                            reason="no gurobipy")), "highs"]
TYPES = ("k80", "v100")


def policy(backend: str = "highs", **options: object) -> MaxMinPolicy:
    return create_policy("max_min", PolicyConfig(solver_backend=backend,
                                                 options={"level": "tenant", **options}))


def job(name: str, tenant: str, speeds: tuple[float, ...], gang: int = 1) -> Job:
    rates = {(t, gang): gang * s for t, s in zip(TYPES, speeds, strict=True) if s > 0}
    return Job(id=name, tenant=tenant, gpus=gang, state=JobState.PENDING,
               progress=Progress(0.0, 1e6), throughput=ThroughputProfile(rates))


def tenant_efficiency(jobs: list[Job], alloc: dict, tenants: list[str]) -> np.ndarray:
    """Σ gang · rate/slowest rate · x per tenant (slowest-GPU equivalents)."""
    out = dict.fromkeys(tenants, 0.0)
    for j in jobs:
        slowest = min(j.rate(t) for t in TYPES if j.rate(t) > 0)
        out[j.tenant] += sum(j.gpus * j.rate(t) / slowest * x for t, x in alloc[j.id].items())
    return np.array([out[t] for t in tenants])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("stages", [1, 2])
def test_the_papers_example_a(backend: str, stages: int) -> None:
    """Eq. (3): W = {<1,2>; <1,3>; <1,4>}, m = <1,1>: x = {<10/11,1/11>; <1/11,5/11>;
    <0,5/11>}, E = 1.0909, 1.4545, 1.8182 (unique, so both stages agree)."""
    jobs = [job(f"u{i}", f"u{i}", (1.0, float(i + 2))) for i in range(3)]
    alloc = policy(backend, stages=stages).allocate(jobs, {"k80": 1, "v100": 1}, 0.0)
    expected = [(10 / 11, 1 / 11), (1 / 11, 5 / 11), (0.0, 5 / 11)]
    for j, (slow, fast) in zip(jobs, expected, strict=True):
        assert alloc[j.id].get("k80", 0.0) == pytest.approx(slow, abs=1e-6)
        assert alloc[j.id]["v100"] == pytest.approx(fast, abs=1e-6)
    np.testing.assert_allclose(tenant_efficiency(jobs, alloc, ["u0", "u1", "u2"]),
                               [12 / 11, 16 / 11, 20 / 11], atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_papers_liar_gets_less_fast_share(backend: str) -> None:
    """u1 reports <1, 2.5> instead of <1, 2>: Gavel gives it <0.852, 0.148> (spec §6)."""
    jobs = [job("u0", "u0", (1.0, 2.5)), job("u1", "u1", (1.0, 3.0)),
            job("u2", "u2", (1.0, 4.0))]
    alloc = policy(backend).allocate(jobs, {"k80": 1, "v100": 1}, 0.0)
    assert alloc["u0"]["k80"] == pytest.approx(0.852, abs=1e-3)
    assert alloc["u0"]["v100"] == pytest.approx(0.148, abs=1e-3)


def oracle(w: np.ndarray, owner: np.ndarray, pi: np.ndarray, m: np.ndarray
           ) -> tuple[float, float]:
    """(t*, the most total efficiency at t*) for 1-GPU jobs with speedups w (jobs x types,
    column 0 the slowest), job j owned by tenant owner[j]."""
    n_jobs, k = w.shape
    n = len(pi)
    fair = np.array([(w[owner == t].mean(axis=0) * m * pi[t] / pi.sum()).sum()
                     for t in range(n)])
    usable = (w > 0).ravel()
    a_ten = np.zeros((n, n_jobs * k))
    for j in range(n_jobs):
        a_ten[owner[j], j * k:(j + 1) * k] = w[j]
    a_cap = np.vstack([np.kron(np.ones(n_jobs), np.eye(k)), np.kron(np.eye(n_jobs),
                                                                    np.ones(k))])
    b_cap = np.concatenate([m, np.ones(n_jobs)])
    bounds = [(0, 1 if u else 0) for u in usable]
    first = linprog(np.append(np.zeros(n_jobs * k), -1.0),
                    A_ub=np.vstack([np.hstack([-a_ten, fair[:, None]]),
                                    np.hstack([a_cap, np.zeros((len(b_cap), 1))])]),
                    b_ub=np.concatenate([np.zeros(n), b_cap]), bounds=[*bounds, (0, None)],
                    method="highs")
    t = float(first.x[-1])
    second = linprog(-w.ravel(), A_ub=np.vstack([-a_ten, a_cap]),
                     b_ub=np.concatenate([-t * (1 - 1e-7) * fair, b_cap]), bounds=bounds,
                     method="highs")
    return t, float(-second.fun)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(6))
def test_level_and_two_stage_total_match_the_oracle(backend: str, seed: int) -> None:
    """Random tenants of several 1-GPU jobs of mixed profiles, weights 1/2/3, a GPU type some
    jobs cannot use: the level matches at both stages; the second stage reaches the oracle's
    total and never has less than the first."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    n_jobs = int(rng.integers(n, 12))
    owner = np.concatenate([np.arange(n), rng.integers(0, n, n_jobs - n)])
    w = np.column_stack([np.ones(n_jobs), rng.uniform(1.0, 4.0, n_jobs)])
    w[rng.random(n_jobs) < 0.2, 1] = 0.0                   # some jobs cannot use the v100s
    pi = rng.choice([1.0, 2.0, 3.0], n)
    m = rng.integers(1, 6, 2).astype(float)
    jobs = [job(f"j{i}", f"t{owner[i]}", tuple(w[i])) for i in range(n_jobs)]
    tenants = [f"t{i}" for i in range(n)]
    state_weights = {f"t{i}": float(pi[i]) for i in range(n)}
    capacity = {"k80": int(m[0]), "v100": int(m[1])}
    t_star, best = oracle(w, owner, pi, m)
    fair = np.array([(w[owner == t].mean(axis=0) * m * pi[t] / pi.sum()).sum()
                     for t in range(n)])
    totals = []
    for stages in (1, 2):
        p = policy(backend, stages=stages)
        p._tenant_weights = state_weights
        alloc = p.allocate(jobs, capacity, 0.0)
        e = tenant_efficiency(jobs, alloc, tenants)
        assert float(np.min(e / fair)) == pytest.approx(t_star, rel=1e-5, abs=1e-7)
        totals.append(float(e.sum()))
    assert totals[1] == pytest.approx(best, rel=1e-5)
    assert totals[1] >= totals[0] - 1e-6


def state_of(jobs: list[Job], gpus: dict[str, int], weights: dict[str, float]) -> ClusterState:
    nodes = tuple(Node(f"{t}-0", t, g) for t, g in gpus.items())
    return ClusterState(0.0, nodes=nodes, jobs=tuple(jobs),
                        tenants=tuple(Tenant(t, w) for t, w in weights.items()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_stage_gives_a_capped_tenants_leftover_away(backend: str) -> None:
    """Tenant a has one 1-GPU job, b three: t* = 1/2 is set by a (1 of its 2 GPUs); at that
    level b needs only 1 GPU, two stages give it all 3 left, and exactly 4 of 4 GPUs are
    planned."""
    jobs = [job("a0", "a", (1.0, 0.0)), *(job(f"b{i}", "b", (1.0, 0.0)) for i in range(3))]
    alloc = policy(backend, stages=2).allocate(jobs, {"k80": 4, "v100": 0}, 0.0)
    assert {j: round(a["k80"], 6) for j, a in alloc.items()} == {
        "a0": 1.0, "b0": 1.0, "b1": 1.0, "b2": 1.0}


def test_a_tenant_weight_change_between_rounds_replans() -> None:
    """Weights come from the snapshot's tenants: a change re-plans even with the same jobs."""
    jobs = [job(f"{t}{i}", t, (1.0, 0.0)) for t in "ab" for i in range(2)]
    p = policy()
    p.schedule(state_of(jobs, {"k80": 2}, {"a": 1.0, "b": 1.0}), 0.0)
    even = dict(p._alloc)
    p.schedule(state_of(jobs, {"k80": 2}, {"a": 3.0, "b": 1.0}), 360.0)
    share = {t: sum(sum(p._alloc[j].values()) for j in (f"{t}0", f"{t}1")) for t in "ab"}
    assert sum(sum(even[j].values()) for j in ("a0", "a1")) == pytest.approx(1.0, abs=1e-6)
    assert share["a"] == pytest.approx(1.5, abs=1e-6)
    assert share["b"] == pytest.approx(0.5, abs=1e-6)


def test_defaults_are_the_job_level_one_stage_lp() -> None:
    options = create_policy("max_min", PolicyConfig()).options
    assert (options.level, options.stages) == ("job", 1)
    with pytest.raises(InputError, match="level"):
        create_policy("max_min", PolicyConfig(options={"level": "user"}))
    with pytest.raises(InputError, match="stages"):
        create_policy("max_min", PolicyConfig(options={"stages": 3}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gangs_count_their_gpus_in_an_exact_fit(backend: str) -> None:
    """A tenant's one 2-GPU job against another's two 1-GPU jobs on 4 GPUs: each tenant's
    equal share is 2 GPUs, and the only allocation giving both t = 1 runs everything."""
    jobs = [job("a0", "a", (1.0, 0.0), gang=2), job("b0", "b", (1.0, 0.0)),
            job("b1", "b", (1.0, 0.0))]
    for stages in (1, 2):
        alloc = policy(backend, stages=stages).allocate(jobs, {"k80": 4, "v100": 0}, 0.0)
        assert {j: round(a["k80"], 6) for j, a in alloc.items()} == {
            "a0": 1.0, "b0": 1.0, "b1": 1.0}
    three = policy(backend).allocate(jobs, {"k80": 3, "v100": 0}, 0.0)   # one GPU short
    e = tenant_efficiency(jobs, three, ["a", "b"])
    np.testing.assert_allclose(e, [1.5, 1.5], atol=1e-6)   # equal shares of 3 GPUs

"""Tests for gpufair.policy.solver: both backends must agree, fall back quietly, and never raise.

Reference answers come from brute-force enumeration or closed forms where possible, so the
tests do not only check that Gurobi and HiGHS agree with each other.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging

import highspy
import numpy as np
import pytest
import scipy.sparse as sp

from gpufair.policy import solver
from gpufair.policy.solver import (
    LinearProgram,
    Solution,
    SolveOptions,
    Status,
    available_backends,
    gurobi_fits,
    reset_fallback_log,
    solve,
)

HAVE_GUROBIPY = importlib.util.find_spec("gurobipy") is not None
needs_gurobi = pytest.mark.skipif(not HAVE_GUROBIPY, reason="gurobipy is not importable")
BOTH = [pytest.param("gurobi", marks=needs_gurobi), "highs"]
TOL = 1e-6


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def _dense(a: object) -> np.ndarray:
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def assert_feasible(p: LinearProgram, x: np.ndarray, tol: float = 1e-6) -> None:
    """x satisfies every row, bound and integrality requirement of p."""
    assert x.shape == (p.num_vars,)
    assert np.all(x >= p.lb - tol) and np.all(x <= p.ub + tol)
    if p.num_ub:
        assert np.all(_dense(p.A_ub) @ x <= p.b_ub + tol)
    if p.num_eq:
        np.testing.assert_allclose(_dense(p.A_eq) @ x, p.b_eq, atol=tol)
    if p.is_mip:
        xi = x[p.integrality]
        np.testing.assert_array_equal(xi, np.round(xi))


def solve_checked(p: LinearProgram, backend: str, **kw: object) -> Solution:
    """Solve, check the backend really ran, and check objective == c·x + constant."""
    sol = solve(p, SolveOptions(backend=backend, **kw))
    assert sol.backend == backend, sol.message
    assert sol.solve_time_s >= 0
    if sol.ok:
        assert_feasible(p, sol.x)
        assert sol.objective == pytest.approx(float(p.c @ sol.x) + p.constant, rel=TOL, abs=TOL)
    else:
        assert sol.x is None and sol.objective is None
    return sol


def fractional_knapsack(n: int, seed: int = 0) -> tuple[LinearProgram, float]:
    """max v·x  s.t.  w·x <= B, 0 <= x <= 1; optimum by the greedy density rule."""
    rng = np.random.default_rng(seed)
    v = rng.uniform(1, 10, n)
    w = rng.uniform(1, 10, n)
    budget = w.sum() / 3
    order = np.argsort(-v / w)
    cum = np.cumsum(w[order])
    k = int(np.searchsorted(cum, budget))  # first item that no longer fits entirely
    best = v[order[:k]].sum() + v[order[k]] * (budget - (cum[k - 1] if k else 0.0)) / w[order[k]]
    p = LinearProgram(c=v, A_ub=sp.csr_array(w[None, :]), b_ub=[budget], ub=1.0, maximize=True,
                      name=f"fracknap{n}")
    return p, float(best)


def md_knapsack(n: int, m: int, seed: int = 1) -> LinearProgram:
    """Multi-dimensional 0-1 knapsack: hard enough that a short time limit actually bites."""
    rng = np.random.default_rng(seed)
    w = rng.integers(10, 100, size=(m, n)).astype(float)
    v = w.sum(0) / m + rng.integers(0, 10, n)
    return LinearProgram(c=v, A_ub=w, b_ub=w.sum(1) / 2, ub=1.0,
                         integrality=np.ones(n, dtype=bool), maximize=True, name="mdknap")


def greedy_md_knapsack(p: LinearProgram) -> np.ndarray:
    w = _dense(p.A_ub)
    x = np.zeros(p.num_vars)
    load = np.zeros(w.shape[0])
    for j in np.argsort(-p.c / w.sum(0)):
        if np.all(load + w[:, j] <= p.b_ub):
            x[j] = 1.0
            load += w[:, j]
    return x


# ------------------------------------------------------------------------------------------
# small models, both backends
# ------------------------------------------------------------------------------------------

INF = np.inf

# min x0 + 2 x1 - x2 + 2.5  s.t.  x0+x1+x2 <= 10, x1-x2 <= 2, x0+x2 == 4,
# 0<=x0<=5, 1<=x1, 0<=x2<=3   ->  x = (1, 1, 3), objective 1 + 2 - 3 + 2.5 = 2.5
LP_MIXED = LinearProgram(c=[1, 2, -1], A_ub=[[1, 1, 1], [0, 1, -1]], b_ub=[10, 2],
                         A_eq=[[1, 0, 1]], b_eq=[4], lb=[0, 1, 0], ub=[5, INF, 3],
                         constant=2.5, name="lp_mixed")
# max 3x + 2y  s.t.  x + y <= 4, x + 3y <= 6  ->  (4, 0), 12
LP_MAX = LinearProgram(c=[3, 2], A_ub=sp.csr_matrix([[1, 1], [1, 3]]), b_ub=[4, 6],
                       maximize=True, name="lp_max")
# free variables: min x + y  s.t.  x >= -3, y >= 2 (as <= rows)  ->  -1
LP_FREE = LinearProgram(c=[1, 1], A_ub=[[-1, 0], [0, -1]], b_ub=[3, -2], lb=-INF,
                        name="lp_free")

KNAP_V = np.array([10, 13, 7, 8, 9, 4, 11, 6, 5, 12], dtype=float)
KNAP_W = np.array([3, 4, 2, 3, 3, 1, 4, 2, 2, 5], dtype=float)
KNAPSACK = LinearProgram(c=KNAP_V, A_ub=KNAP_W[None, :], b_ub=[13], ub=1.0,
                         integrality=np.ones(10, dtype=bool), maximize=True, constant=-1.0,
                         name="knapsack")

# general integers plus one continuous variable:
# min 3a + 5b + 4c + 0.5s  s.t.  2a + 3b + c + s >= 13.5,  a + b + 2c >= 7.2,  a - b <= 2,
# a, b, c integer in [0, 10], s continuous in [0, 1]
GEN_INT = LinearProgram(c=[3, 5, 4, 0.5], A_ub=[[-2, -3, -1, -1], [-1, -1, -2, 0], [1, -1, 0, 0]],
                        b_ub=[-13.5, -7.2, 2], ub=[10, 10, 10, 1],
                        integrality=np.array([1, 1, 1, 0]), name="gen_int")


def brute_knapsack() -> float:
    combos = np.array(list(itertools.product((0.0, 1.0), repeat=10)))
    fits = combos @ KNAP_W <= 13
    return float((combos[fits] @ KNAP_V).max()) - 1.0


def brute_gen_int() -> float:
    grid = np.array(list(itertools.product(range(11), repeat=3)), dtype=float)
    a, b, c = grid.T
    s = np.clip(13.5 - (2 * a + 3 * b + c), 0.0, None)  # cheapest slack for row 1
    ok = (s <= 1.0) & (a + b + 2 * c >= 7.2) & (a - b <= 2)
    return float((3 * a + 5 * b + 4 * c + 0.5 * s)[ok].min())


REFERENCE = {
    "lp_mixed": 2.5,
    "lp_max": 12.0,
    "lp_free": -1.0,
    "knapsack": brute_knapsack(),
    "gen_int": brute_gen_int(),
}
MODELS = [LP_MIXED, LP_MAX, LP_FREE, KNAPSACK, GEN_INT]


@pytest.mark.parametrize("p", MODELS, ids=[m.name for m in MODELS])
def test_backends_agree_with_reference(p: LinearProgram) -> None:
    results = {b: solve_checked(p, b, mip_gap=0.0) for b in ("gurobi", "highs")
               if b != "gurobi" or HAVE_GUROBIPY}
    for sol in results.values():
        assert sol.status is Status.OPTIMAL, sol.message
        assert sol.objective == pytest.approx(REFERENCE[p.name], rel=TOL)
    objs = [s.objective for s in results.values()]
    assert objs[0] == pytest.approx(objs[-1], rel=TOL)


def test_mip_solution_is_exactly_integral_and_reports_gap() -> None:
    for backend in set(available_backends()) - {"ecos"}:
        sol = solve_checked(KNAPSACK, backend, mip_gap=0.0)
        assert set(np.unique(sol.x)) <= {0.0, 1.0}
        assert sol.mip_gap is not None and sol.mip_gap <= 1e-9
        lp = solve_checked(LP_MAX, backend)
        assert lp.mip_gap is None


INFEASIBLE_LP = LinearProgram(c=[1, 1], A_ub=[[1, 1]], b_ub=[-1], name="infeasible_lp")
INFEASIBLE_MIP = LinearProgram(c=[1, 1], A_eq=[[2, 2]], b_eq=[3], integrality=[True, True],
                               name="infeasible_mip")  # 2(a+b) = 3 has no integer solution
UNBOUNDED_LP = LinearProgram(c=[-1, 0], A_ub=[[0, 1]], b_ub=[1], name="unbounded_lp")
UNBOUNDED_MIP = LinearProgram(c=[-1, 0], A_ub=[[0, 1]], b_ub=[1], integrality=[True, True],
                              name="unbounded_mip")
UNBOUNDED_FREE = LinearProgram(c=[1, 0], A_ub=[[1, 1]], b_ub=[1], lb=-INF, maximize=False,
                               name="unbounded_free")


@pytest.mark.parametrize("backend", BOTH)
@pytest.mark.parametrize(
    ("p", "expected"),
    [(INFEASIBLE_LP, Status.INFEASIBLE), (INFEASIBLE_MIP, Status.INFEASIBLE),
     (UNBOUNDED_LP, Status.UNBOUNDED), (UNBOUNDED_MIP, Status.UNBOUNDED),
     (UNBOUNDED_FREE, Status.UNBOUNDED)],
    ids=lambda v: v.name if isinstance(v, LinearProgram) else str(v.value),
)
def test_infeasible_and_unbounded(p: LinearProgram, expected: Status, backend: str) -> None:
    sol = solve_checked(p, backend)
    assert sol.status is expected, sol.message
    assert not sol.ok


@pytest.mark.parametrize("backend", BOTH)
def test_dense_sparse_and_duplicate_entries_give_same_answer(backend: str) -> None:
    a = np.array([[1.0, 1.0], [1.0, 3.0]])
    # Non-canonical CSR with the (0, 0) entry split in two: must be summed (HiGHS rejects
    # duplicate entries outright), and the caller's matrix must be left as it was.
    dup = sp.csr_array((np.array([0.25, 0.75, 1.0, 1.0, 3.0]), np.array([0, 0, 1, 0, 1]),
                        np.array([0, 3, 5])), shape=(2, 2))
    assert not dup.has_canonical_format
    objs = []
    for mat in (a, sp.csr_array(a), sp.csc_matrix(a), dup):
        p = LinearProgram(c=[3, 2], A_ub=mat, b_ub=[4, 6], maximize=True)
        objs.append(solve_checked(p, backend).objective)
    assert objs == pytest.approx([12.0] * 4, rel=TOL)
    assert dup.nnz == 5  # the caller's matrix was not canonicalised in place


@pytest.mark.parametrize("backend", BOTH)
def test_same_seed_gives_identical_solution(backend: str) -> None:
    p = md_knapsack(20, 3, seed=3)
    first = solve_checked(p, backend, seed=7)
    second = solve_checked(p, backend, seed=7)
    np.testing.assert_array_equal(first.x, second.x)
    lp, _ = fractional_knapsack(300)
    np.testing.assert_array_equal(solve_checked(lp, backend).x, solve_checked(lp, backend).x)


@pytest.mark.parametrize("backend", BOTH)
@pytest.mark.parametrize("lp_method", ["simplex", "ipm"])
def test_lp_method(backend: str, lp_method: str) -> None:
    p, best = fractional_knapsack(500, seed=4)
    sol = solve_checked(p, backend, lp_method=lp_method)
    assert sol.status is Status.OPTIMAL
    assert sol.objective == pytest.approx(best, rel=TOL)


@pytest.mark.parametrize("backend", BOTH)
def test_trivial_models_skip_the_solver(backend: str) -> None:
    # HiGHS calls a model without columns "empty" (an error); settle these identically.
    opts = SolveOptions(backend=backend)
    empty = solve(LinearProgram(c=np.zeros(0), constant=3.0), opts)
    assert empty.status is Status.OPTIMAL and empty.objective == 3.0 and empty.x.size == 0
    bad_rows = LinearProgram(c=np.zeros(0), A_ub=np.zeros((1, 0)), b_ub=[-1])
    assert solve(bad_rows, opts).status is Status.INFEASIBLE
    crossed = solve(LinearProgram(c=[1.0, 1.0], lb=[0, 2], ub=[1, 1]), opts)
    assert crossed.status is Status.INFEASIBLE and "variable 1" in crossed.message
    assert empty.backend == crossed.backend == "none"


# ------------------------------------------------------------------------------------------
# backend selection and the size-limited Gurobi license
# ------------------------------------------------------------------------------------------


def test_available_backends() -> None:
    backends = available_backends()
    assert "highs" in backends
    assert ("gurobi" in backends) == HAVE_GUROBIPY  # importable here implies licensed


@needs_gurobi
def test_gurobi_fits_matches_pip_license_limits() -> None:
    assert solver._gurobi_state().size_limited  # the pip wheel license
    ok = LinearProgram(c=np.ones(2000), A_ub=sp.csr_array((2000, 2000)), b_ub=np.ones(2000))
    assert gurobi_fits(ok)
    assert not gurobi_fits(LinearProgram(c=np.ones(2001)))
    too_many_rows = LinearProgram(c=np.ones(10), A_ub=np.ones((1500, 10)), b_ub=np.ones(1500),
                                  A_eq=np.ones((501, 10)), b_eq=np.ones(501))
    assert not gurobi_fits(too_many_rows)


@needs_gurobi
def test_auto_uses_gurobi_when_model_fits() -> None:
    sol = solve(LP_MAX)
    assert sol.backend == "gurobi" and sol.status is Status.OPTIMAL and sol.message == ""


def _fallback_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    records = [r for r in caplog.records if r.name == "gpufair.solver" and
               "using HiGHS" in r.message]
    # an expected fallback (the pip licence is size-limited) must not alarm: INFO
    assert all(r.levelno == logging.INFO for r in records), records
    return records


@needs_gurobi
@pytest.mark.parametrize("backend", ["auto", "gurobi"])
def test_too_large_model_falls_back_to_highs_and_logs_once(
        backend: str, caplog: pytest.LogCaptureFixture) -> None:
    reset_fallback_log()
    caplog.set_level(logging.INFO, logger="gpufair.solver")
    p, best = fractional_knapsack(2500)
    assert not gurobi_fits(p)
    for _ in range(2):
        sol = solve(p, SolveOptions(backend=backend))
        assert sol.backend == "highs"
        assert sol.status is Status.OPTIMAL
        assert sol.objective == pytest.approx(best, rel=TOL)
        assert "size-limited" in sol.message and "HiGHS" in sol.message
    assert len(_fallback_records(caplog)) == 1
    # and the once-flag is resettable, so the next test sees the log line again
    reset_fallback_log()
    solve(p, SolveOptions(backend=backend))
    assert len(_fallback_records(caplog)) == 2


@needs_gurobi
@pytest.mark.parametrize("backend", ["auto", "gurobi"])
def test_real_gurobi_size_error_is_caught(backend: str, monkeypatch: pytest.MonkeyPatch,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """If the pre-check lets a model through, Gurobi's own error 10010 still falls back,
    also when Gurobi was requested explicitly (a size refusal is not a Gurobi failure)."""
    reset_fallback_log()
    caplog.set_level(logging.INFO, logger="gpufair.solver")
    monkeypatch.setattr(solver, "gurobi_fits", lambda problem: True)
    p, best = fractional_knapsack(2500, seed=5)
    for _ in range(2):
        sol = solve(p, SolveOptions(backend=backend))
        assert sol.backend == "highs" and sol.status is Status.OPTIMAL, sol.message
        assert sol.objective == pytest.approx(best, rel=TOL)
        assert "Model too large" in sol.message
    records = _fallback_records(caplog)
    assert len(records) == 1 and "refused" in records[0].message


def test_unavailable_gurobi_falls_back(monkeypatch: pytest.MonkeyPatch,
                                       caplog: pytest.LogCaptureFixture) -> None:
    reset_fallback_log()
    caplog.set_level(logging.INFO, logger="gpufair.solver")
    monkeypatch.setattr(solver, "_GUROBI_STATE",
                        solver._GurobiState(None, True, "gurobipy is not importable (test)"))
    sol = solve(LP_MAX, SolveOptions(backend="gurobi"))
    assert sol.backend == "highs" and sol.objective == pytest.approx(12.0)
    assert "not importable" in sol.message
    assert "gurobi" not in available_backends()
    assert len(_fallback_records(caplog)) == 1


# ------------------------------------------------------------------------------------------
# warm start, limits, threads
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BOTH)
def test_warm_start_keeps_optimality(backend: str) -> None:
    reference = solve_checked(KNAPSACK, backend, mip_gap=0.0)
    suboptimal = np.zeros(10)
    suboptimal[[0, 1]] = 1.0  # feasible, value 23 - 1
    for start in (reference.x, suboptimal):
        sol = solve_checked(KNAPSACK, backend, mip_gap=0.0, warm_start=start)
        assert sol.status is Status.OPTIMAL
        assert sol.objective == pytest.approx(REFERENCE["knapsack"], rel=TOL)
    # ignored, not an error, for an LP
    assert solve_checked(LP_MAX, backend, warm_start=np.array([0.0, 0.0])).objective == 12.0


@pytest.mark.parametrize("backend", BOTH)
def test_warm_start_is_used_under_a_tight_time_limit(backend: str) -> None:
    """HiGHS finds no incumbent for this model in 50 ms on its own; with a start it must
    return at least the start's value."""
    p = md_knapsack(500, 30)
    start = greedy_md_knapsack(p)
    sol = solve_checked(p, backend, time_limit_s=0.05, warm_start=start)
    assert sol.status in (Status.FEASIBLE, Status.OPTIMAL), sol.message
    assert sol.objective >= float(p.c @ start) - 1e-6


@pytest.mark.parametrize("backend", BOTH)
def test_time_limit_returns_incumbent_not_exception(backend: str) -> None:
    p = md_knapsack(200, 20)
    sol = solve_checked(p, backend, time_limit_s=0.3)
    assert sol.status in (Status.FEASIBLE, Status.OPTIMAL), sol.message
    assert sol.solve_time_s < 10.0
    if sol.status is Status.FEASIBLE:
        assert sol.mip_gap is not None and sol.mip_gap > 0


def test_time_limit_without_incumbent_is_no_solution(monkeypatch: pytest.MonkeyPatch) -> None:
    # Deterministic stand-in for "limit hit before any feasible point": drive the mapping.
    assert solver._map_highs_status(highspy.HighsModelStatus.kTimeLimit, False) \
        is Status.NO_SOLUTION
    assert solver._map_gurobi_status(9, 0) is Status.NO_SOLUTION


@pytest.mark.parametrize("backend", BOTH)
def test_changing_thread_count_between_solves(backend: str) -> None:
    # HiGHS keeps one global thread pool; a different count must not turn into kError.
    for threads in (1, 2, None, 1):
        sol = solve_checked(KNAPSACK, backend, threads=threads, mip_gap=0.0)
        assert sol.status is Status.OPTIMAL, sol.message


# ------------------------------------------------------------------------------------------
# status mapping (statuses that small models cannot produce on demand)
# ------------------------------------------------------------------------------------------

HMS = highspy.HighsModelStatus


@pytest.mark.parametrize(
    ("status", "feasible", "expected"),
    [
        (HMS.kOptimal, True, Status.OPTIMAL),
        (HMS.kInfeasible, False, Status.INFEASIBLE),
        (HMS.kUnbounded, False, Status.UNBOUNDED),
        (HMS.kUnboundedOrInfeasible, False, None),
        (HMS.kTimeLimit, True, Status.FEASIBLE),
        (HMS.kTimeLimit, False, Status.NO_SOLUTION),
        (HMS.kIterationLimit, True, Status.FEASIBLE),
        (HMS.kIterationLimit, False, Status.NO_SOLUTION),
        (HMS.kSolutionLimit, True, Status.FEASIBLE),
        (HMS.kInterrupt, False, Status.NO_SOLUTION),
        (HMS.kUnknown, True, Status.FEASIBLE),
        (HMS.kUnknown, False, Status.ERROR),
        (HMS.kModelError, False, Status.ERROR),
        (HMS.kSolveError, False, Status.ERROR),
        (HMS.kNotset, False, Status.ERROR),
    ],
)
def test_highs_status_mapping(status: highspy.HighsModelStatus, feasible: bool,
                              expected: Status | None) -> None:
    assert solver._map_highs_status(status, feasible) is expected


@pytest.mark.parametrize(
    ("code", "sol_count", "expected"),
    [(2, 1, Status.OPTIMAL), (3, 0, Status.INFEASIBLE), (4, 0, None), (5, 0, Status.UNBOUNDED),
     (9, 1, Status.FEASIBLE), (9, 0, Status.NO_SOLUTION), (7, 0, Status.NO_SOLUTION),
     (8, 2, Status.FEASIBLE), (16, 1, Status.FEASIBLE), (13, 1, Status.FEASIBLE),
     (12, 0, Status.ERROR), (1, 0, Status.ERROR)],
)
def test_gurobi_status_mapping(code: int, sol_count: int, expected: Status | None) -> None:
    assert solver._map_gurobi_status(code, sol_count) is expected


def test_solution_ok() -> None:
    x = np.zeros(1)
    assert Solution(Status.FEASIBLE, x, 0.0, "highs", 0.0).ok
    assert not Solution(Status.FEASIBLE, None, None, "highs", 0.0).ok
    assert not Solution(Status.NO_SOLUTION, None, None, "highs", 0.0).ok


# ------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"c": np.ones((2, 2))}, "c must be 1-D"),
        ({"c": [1.0, np.nan]}, "c contains"),
        ({"A_ub": np.ones((2, 3)), "b_ub": np.ones(2)}, "A_ub has 3 columns"),
        ({"A_ub": np.ones((2, 2)), "b_ub": np.ones(3)}, "b_ub has shape"),
        ({"A_ub": np.ones((2, 2))}, "b_ub is None"),
        ({"b_eq": np.ones(1)}, "A_eq is None"),
        ({"A_eq": sp.csr_array(np.ones((1, 4))), "b_eq": [1.0]}, "A_eq has 4 columns"),
        ({"A_eq": np.ones((1, 2)), "b_eq": [np.inf]}, "b_eq contains infinite"),
        ({"A_ub": np.ones(2), "b_ub": [1.0]}, "A_ub must be 2-D"),
        ({"A_ub": [[1.0, np.inf]], "b_ub": [1.0]}, "A_ub contains"),
        ({"lb": np.zeros(3)}, "lb has shape"),
        ({"ub": [1.0, np.nan]}, "ub contains NaN"),
        ({"lb": np.nan}, "lb contains NaN"),
        ({"constant": np.inf}, "constant must be finite"),
        ({"lb": np.inf}, r"lb contains \+inf"),
        ({"integrality": [True]}, "integrality has shape"),
        ({"integrality": [0, 2]}, "integrality must be boolean"),
    ],
)
def test_shape_validation(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"c": [1.0, 1.0]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        LinearProgram(**args)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"backend": "cplex"}, "backend"), ({"time_limit_s": 0}, "time_limit_s"),
     ({"mip_gap": -1}, "mip_gap"), ({"threads": 0}, "threads"), ({"seed": -1}, "seed"),
     ({"lp_method": "barrier"}, "lp_method"), ({"warm_start": np.ones((2, 2))}, "warm_start"),
     ({"highs_objective_scale": -1}, "highs_objective_scale"),
     ({"highs_objective_scale": 21}, "highs_objective_scale")],
)
def test_option_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SolveOptions(**kwargs)


def test_warm_start_length_is_checked() -> None:
    with pytest.raises(ValueError, match="warm_start has 3 entries"):
        solve(LP_MAX, SolveOptions(warm_start=np.zeros(3)))


def test_problem_is_normalised_and_independent_of_caller_arrays() -> None:
    c = np.array([1, 2])  # integers on purpose
    a = sp.csr_array(np.array([[1.0, 1.0]]))
    p = LinearProgram(c=c, A_ub=a, b_ub=[3], integrality=[0, 1])
    assert p.c.dtype == np.float64 and p.lb.shape == (2,) and p.ub.shape == (2,)
    assert p.integrality.dtype == np.bool_ and p.is_mip and p.num_constraints == 1
    a.data[:] = 5.0  # editing the caller's matrix afterwards must not change the model
    assert p.A_ub.toarray().tolist() == [[1.0, 1.0]]
    assert not LinearProgram(c=[1.0], integrality=[False]).is_mip


# ------------------------------------------------------------------------------------------
# ECOS: the artifacts' interior-point LP solver
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [m for m in MODELS if not m.is_mip],
                         ids=[m.name for m in MODELS if not m.is_mip])
def test_ecos_agrees_on_lps(p: LinearProgram) -> None:
    sol = solve(p, SolveOptions(backend="ecos"))
    assert sol.backend == "ecos" and sol.status is Status.OPTIMAL, sol.message
    assert sol.objective == pytest.approx(REFERENCE[p.name], rel=1e-6, abs=1e-6)


def test_ecos_returns_interior_point_on_ties() -> None:
    """max x1 + x2, x1 + x2 <= 1: a vertex picks one, the interior point splits evenly."""
    tie = LinearProgram(c=[1, 1], A_ub=[[1, 1]], b_ub=[1], ub=1.0, maximize=True, name="tie")
    ecos_x = solve(tie, SolveOptions(backend="ecos")).x
    assert ecos_x == pytest.approx([0.5, 0.5], abs=1e-6)
    highs_x = solve(tie, SolveOptions(backend="highs")).x
    assert sorted(highs_x) == pytest.approx([0.0, 1.0])


@pytest.mark.parametrize(("p", "expected"), [(INFEASIBLE_LP, Status.INFEASIBLE),
                                             (UNBOUNDED_LP, Status.UNBOUNDED)])
def test_ecos_infeasible_and_unbounded(p: LinearProgram, expected: Status) -> None:
    assert solve(p, SolveOptions(backend="ecos")).status is expected


def test_ecos_sends_milps_to_highs() -> None:
    sol = solve(KNAPSACK, SolveOptions(backend="ecos", mip_gap=0.0))
    assert sol.backend == "highs" and sol.objective == pytest.approx(REFERENCE[KNAPSACK.name])
    assert "ECOS solves LPs only" in sol.message


@pytest.mark.parametrize("backend", ["highs", "gurobi", "auto"])
def test_simulate_json_is_pure_json_whatever_the_solver_prints(tmp_path, backend):
    """Issue 13: recent highspy prints its banner on fd 1 when a process creates its first
    ``Highs``, before options can be set, so ``--json`` was not JSON. A fresh process (the
    banner comes once per process), the real CLI, stdout read at the descriptor level."""
    import json
    import subprocess
    import sys

    config = tmp_path / "gpufair.toml"
    config.write_text(f'[solver]\nbackend = "{backend}"\n')
    done = subprocess.run([sys.executable, "-m", "gpufair.cli.main", "simulate", "--json",
                           "--policy", "max_min", "--config", str(config)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["policy"] == "max_min", done.stdout[:300]
    assert "HiGHS" not in done.stderr and "Gurobi" not in done.stderr   # only with -v

"""OEF's fair-share LPs (spec §3.1-3.3), in the direct weighted form.

Rows are (virtual) tenants, columns GPU types; ``speedups[l, j]`` is tenant l's throughput on
one type-j GPU over its throughput on the slowest type (0: it cannot use type j, and no
variable is made for that pair, so the LP cannot park capacity there).

* non-cooperative (eq. 9): max t  s.t.  W_l·x_l = π_l t,  Σ_l x_l^j ≤ m_j. Equal weighted
  normalized throughput is what makes lying about speedups unprofitable (Theorem 5.4).
* cooperative (eq. 10): max Σ_l W_l·x_l  s.t.  W_l·x_l/π_l ≥ W_l·x_i/π_i  (envy-freeness),
  Σ_l x_l^j ≤ m_j. The n(n-1) envy rows are generated lazily once n is large: solve,
  add each tenant's most violated rows, solve again, until none is violated.

Why the direct form rather than the paper's row replication: it takes real-valued weights and
does not multiply the model size by the weights; the spec verified both give the same optimum
(our tests check it again against replication).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gpufair.errors import InputError
from gpufair.policy.solver import LinearProgram, SolveOptions, solve

COOPERATIVE = "cooperative"
NON_COOPERATIVE = "non_cooperative"
MODES = (COOPERATIVE, NON_COOPERATIVE)

#: Entries below this are solver noise, not shares (spec §7.15).
ZERO = 1e-9
#: Relative tolerance of an envy row before it counts as violated.
EF_TOL = 1e-7
#: Tenants at or below which every envy row is in the first model (n(n-1) rows).
EAGER_EF_TENANTS = 40
#: Violated envy rows added per tenant per lazy iteration.
EF_ROWS_PER_TENANT = 4
#: Neighbours on each side, in relative-speedup order, whose envy rows start the model.
NEIGHBOURS = 8
MAX_EF_ITERATIONS = 200


@dataclass(frozen=True)
class OefProblem:
    """``speedups`` n x k (≥ 0), ``capacity`` k (≥ 0), ``weights`` n (> 0)."""

    speedups: np.ndarray
    capacity: np.ndarray
    weights: np.ndarray

    def __post_init__(self) -> None:
        w = np.asarray(self.speedups, dtype=float)
        m = np.asarray(self.capacity, dtype=float)
        pi = np.asarray(self.weights, dtype=float)
        if w.ndim != 2 or m.shape != (w.shape[1],) or pi.shape != (w.shape[0],):
            raise InputError("oef", f"shapes do not match: speedups {w.shape}, capacity "
                             f"{m.shape}, weights {pi.shape}", field="speedups")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InputError("oef", "speedups must be finite and >= 0", field="speedups")
        if not np.all(np.isfinite(m)) or np.any(m < 0):
            raise InputError("oef", "GPU counts must be finite and >= 0", field="capacity",
                             value=m.tolist())
        if not np.all(np.isfinite(pi)) or np.any(pi <= 0):
            raise InputError("oef", "weights must be finite and > 0", field="weights",
                             value=pi.tolist())
        object.__setattr__(self, "speedups", w)
        object.__setattr__(self, "capacity", m)
        object.__setattr__(self, "weights", pi)

    @property
    def shape(self) -> tuple[int, int]:
        return self.speedups.shape  # type: ignore[return-value]


@dataclass(frozen=True)
class OefSolution:
    """``x`` n x k shares; ``level`` the common E_l/π_l (non-cooperative) or None."""

    x: np.ndarray
    level: float | None
    backend: str
    solve_s: float
    solves: int = 1

    def efficiency(self, speedups: np.ndarray) -> np.ndarray:
        """E_l = W_l·x_l per tenant."""
        return np.einsum("lj,lj->l", speedups, self.x)


class SolveFailed(RuntimeError):
    """The solver gave no optimum for a model that always has one (x = 0 is feasible)."""


class _Columns:
    """The variables: one per (tenant, type) with a positive speedup, row-major."""

    def __init__(self, speedups: np.ndarray) -> None:
        self.mask = speedups > 0
        self.rows, self.types = np.nonzero(self.mask)
        self.size = len(self.rows)
        self.index = np.full(speedups.shape, -1, dtype=np.int64)
        self.index[self.rows, self.types] = np.arange(self.size)
        self.values = speedups[self.rows, self.types]

    def capacity_rows(self, k: int) -> sp.csr_matrix:
        return sp.csr_matrix((np.ones(self.size), (self.types, np.arange(self.size))),
                             shape=(k, self.size))

    def own_value_rows(self, n: int, scale: np.ndarray) -> sp.csr_matrix:
        """Row l: Σ_j w_lj x_lj · scale_l."""
        return sp.csr_matrix((self.values * scale[self.rows], (self.rows, np.arange(self.size))),
                             shape=(n, self.size))

    def to_matrix(self, shape: tuple[int, int], x: np.ndarray) -> np.ndarray:
        out = np.zeros(shape)
        out[self.rows, self.types] = x[: self.size]
        out[out < ZERO] = 0.0
        return out


def solve_oef(problem: OefProblem, mode: str, options: SolveOptions | None = None
              ) -> OefSolution:
    if mode not in MODES:
        raise InputError("oef", f"expected one of {', '.join(MODES)}", field="mode", value=mode)
    n, k = problem.shape
    if n == 0:
        return OefSolution(np.zeros((0, k)), None, "none", 0.0, 0)
    options = options or SolveOptions()
    if mode == NON_COOPERATIVE:
        return _non_cooperative(problem, options)
    return _cooperative(problem, options)


def _run(lp: LinearProgram, options: SolveOptions) -> tuple[np.ndarray, str]:
    solution = solve(lp, options)
    if not solution.ok:
        raise SolveFailed(f"OEF {lp.name}: {solution.status.value} {solution.message}".strip())
    return solution.x, solution.backend


def _non_cooperative(problem: OefProblem, options: SolveOptions) -> OefSolution:
    """max t s.t. W_l·x_l - π_l t = 0, capacity. Tenants with no usable type get nothing,
    and would force t = 0 for everyone: they are left out (a tenant that can run nowhere
    here, no type it can use having a GPU, cannot be given an equal share of anything)."""
    started = time.perf_counter()
    n, k = problem.shape
    usable = ((problem.speedups > 0) & (problem.capacity > 0)).any(axis=1)
    w = problem.speedups[usable]
    pi = problem.weights[usable]
    cols = _Columns(w)
    if cols.size == 0:
        return OefSolution(np.zeros((n, k)), 0.0, "none", time.perf_counter() - started, 0)
    rows = w.shape[0]
    t_col = sp.csr_matrix(-pi.reshape(-1, 1))
    a_eq = sp.hstack([cols.own_value_rows(rows, np.ones(rows)), t_col], format="csr")
    a_ub = sp.hstack([cols.capacity_rows(k), sp.csr_matrix((k, 1))], format="csr")
    c = np.zeros(cols.size + 1)
    c[-1] = 1.0
    lp = LinearProgram(c=c, A_ub=a_ub, b_ub=problem.capacity, A_eq=a_eq, b_eq=np.zeros(rows),
                       lb=0.0, maximize=True, name="oef_non_cooperative")
    x, backend = _run(lp, options)
    out = np.zeros((n, k))
    out[usable] = cols.to_matrix(w.shape, x)
    return OefSolution(out, float(x[-1]), backend, time.perf_counter() - started)


def _ef_rows(w: np.ndarray, pi: np.ndarray, cols: _Columns, owners: np.ndarray,
             others: np.ndarray) -> sp.csr_matrix:
    """Rows (l, i): Σ_j w_lj x_ij / π_i − Σ_j w_lj x_lj / π_l ≤ 0, for l = owners, i = others."""
    r_idx, c_idx, vals = [], [], []
    rows = np.arange(len(owners))
    for j in range(w.shape[1]):
        wl = w[owners, j]
        for who, sign, scale in ((others, 1.0, pi[others]), (owners, -1.0, pi[owners])):
            col = cols.index[who, j]
            keep = (col >= 0) & (wl > 0)
            r_idx.append(rows[keep])
            c_idx.append(col[keep])
            vals.append(sign * wl[keep] / scale[keep])
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(r_idx),
                                                  np.concatenate(c_idx))),
                         shape=(len(owners), cols.size))


def envy(w: np.ndarray, pi: np.ndarray, x: np.ndarray, chunk: int = 512) -> list[np.ndarray]:
    """Per chunk of owners l: (W_l·x_i/π_i − W_l·x_l/π_l) / max(1, W_l·x_l/π_l), all i."""
    own = np.einsum("lj,lj->l", w, x) / pi
    out = []
    for start in range(0, len(w), chunk):
        block = w[start:start + chunk] @ (x / pi[:, None]).T
        mine = own[start:start + chunk, None]
        out.append((block - mine) / np.maximum(1.0, mine))
    return out


def _neighbour_pairs(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The envy rows to start lazy generation with: each tenant against its nearest
    neighbours in relative-speedup order. Envy binds between tenants that value the same
    types about alike, so these are most of the rows the optimum needs, and the row
    generation then only adds the few it missed."""
    n, k = w.shape
    safe = np.where(w > 0, w, np.nan)
    ratios = np.nan_to_num(safe[:, 1:] / safe[:, :-1], nan=0.0) if k > 1 else np.zeros((n, 1))
    order = np.lexsort(tuple(ratios[:, j] for j in reversed(range(ratios.shape[1]))))
    owners, others = [], []
    for step in range(1, NEIGHBOURS + 1):
        owners += [order[:-step], order[step:]]
        others += [order[step:], order[:-step]]
    return np.concatenate(owners), np.concatenate(others)


def _cooperative(problem: OefProblem, options: SolveOptions) -> OefSolution:
    started = time.perf_counter()
    n, k = problem.shape
    w, pi = problem.speedups, problem.weights
    cols = _Columns(w)
    if cols.size == 0:
        return OefSolution(np.zeros((n, k)), None, "none", time.perf_counter() - started, 0)
    cap = cols.capacity_rows(k)
    if n <= EAGER_EF_TENANTS:
        owners, others = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n),
                                                          indexing="ij"))
        keep = owners != others
        owners, others = owners[keep], others[keep]
    else:
        owners, others = _neighbour_pairs(w)
    have: set[tuple[int, int]] = set(zip(owners.tolist(), others.tolist(), strict=True))
    ef = _ef_rows(w, pi, cols, owners, others)
    solves = 0
    backend = "none"
    for _ in range(MAX_EF_ITERATIONS):
        a_ub = sp.vstack([cap, ef], format="csr")
        b_ub = np.concatenate([problem.capacity, np.zeros(ef.shape[0])])
        lp = LinearProgram(c=cols.values, A_ub=a_ub, b_ub=b_ub, lb=0.0, maximize=True,
                           name="oef_cooperative")
        x, backend = _run(lp, options)
        solves += 1
        matrix = cols.to_matrix((n, k), x)
        new_l: list[int] = []
        new_i: list[int] = []
        start = 0
        for block in envy(w, pi, matrix):
            for r in range(block.shape[0]):
                row = block[r]
                bad = np.flatnonzero(row > EF_TOL)
                if bad.size == 0:
                    continue
                worst = bad[np.argsort(-row[bad], kind="stable")]
                added = 0
                for i in worst.tolist():
                    if (start + r, i) not in have:
                        have.add((start + r, i))
                        new_l.append(start + r)
                        new_i.append(i)
                        added += 1
                        if added == EF_ROWS_PER_TENANT:
                            break
            start += block.shape[0]
        if not new_l:
            return OefSolution(matrix, None, backend, time.perf_counter() - started, solves)
        ef = sp.vstack([ef, _ef_rows(w, pi, cols, np.array(new_l), np.array(new_i))],
                       format="csr")
    raise SolveFailed(f"OEF cooperative: envy rows still violated after {MAX_EF_ITERATIONS} "
                      "rounds of row generation")


def solve_capped(problem: OefProblem, demand: np.ndarray, mode: str,
                 options: SolveOptions | None = None) -> OefSolution:
    """OEF with each tenant's share capped at the GPUs its jobs can use (spec §7.1 option).

    Water-filling: solve; every tenant given more GPUs than ``demand`` keeps its type mix
    scaled down to its demand and leaves the model with that much capacity; solve again for
    the rest, until nobody is over. The paper's LPs have no demand limit, so this is a
    departure: neither strategy-proofness nor envy-freeness is proven under it.
    """
    n, k = problem.shape
    demand = np.asarray(demand, dtype=float)
    if demand.shape != (n,) or np.any(demand < 0) or not np.all(np.isfinite(demand)):
        raise InputError("oef", "demands must be finite, >= 0, one per tenant", field="demand")
    x = np.zeros((n, k))
    active = np.ones(n, dtype=bool)
    capacity = problem.capacity.copy()
    started = time.perf_counter()
    solves, backend, level = 0, "none", None
    while active.any():
        idx = np.flatnonzero(active)
        sub = OefProblem(problem.speedups[idx], np.maximum(capacity, 0.0),
                         problem.weights[idx])
        solution = solve_oef(sub, mode, options)
        solves += solution.solves
        backend = solution.backend if solution.solves else backend
        level = solution.level
        totals = solution.x.sum(axis=1)
        over = totals > demand[idx] * (1 + 1e-9) + ZERO
        if not over.any():
            x[idx] = solution.x
            break
        for r in np.flatnonzero(over):
            row = solution.x[r] * (demand[idx[r]] / totals[r])
            x[idx[r]] = row
            capacity -= row
            active[idx[r]] = False
    return OefSolution(x, level, backend, time.perf_counter() - started, solves)

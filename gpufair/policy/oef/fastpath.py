"""Non-cooperative OEF without an LP, for ratio-ordered speedups (spec §3.8; not in the paper).

When tenants can be ordered so that each one's relative speedup between every pair of
adjacent types is at least the previous tenant's, the optimum is a staircase: the tenants
that gain least from fast GPUs take the slow ones. For a level t, fill the tenants in that
order from the slowest type upward until each has W_l·x_l = π_l t; t is feasible iff the
fill fits. Bisection on t then finds the optimum in O(n k log 1/ε) without a solver, which
matters when thousands of tenants share a cluster. Anything not ratio-ordered (or with a
type a tenant cannot use) goes to the LP: the shortcut is only exact on the staircase.
"""

from __future__ import annotations

import time

import numpy as np

from gpufair.policy.oef.lp import ZERO, OefProblem, OefSolution

#: Relative width of the bracket on t at which the bisection stops.
BISECT_TOL = 1e-13
#: Relative shortfall of a tenant's π_l t that the fill treats as met (float rounding only).
FILL_TOL = 1e-13


def ratio_order(speedups: np.ndarray) -> np.ndarray | None:
    """Tenant order of ascending relative speedup if ``speedups`` is ratio-ordered (every
    adjacent-type ratio non-decreasing along one order), else None."""
    n, k = speedups.shape
    if n == 0 or np.any(speedups <= 0):
        return None
    if k == 1:
        return np.arange(n)
    ratios = speedups[:, 1:] / speedups[:, :-1]
    order = np.lexsort(tuple(ratios[:, j] for j in reversed(range(k - 1))))
    steps = np.diff(ratios[order], axis=0)
    scale = np.maximum(1.0, np.abs(ratios[order][1:]))
    if np.all(steps >= -1e-12 * scale):
        return order
    return None


def _fill(w: np.ndarray, pi: np.ndarray, cap: np.ndarray, order: np.ndarray, t: float
          ) -> np.ndarray | None:
    """The staircase allocation giving every tenant π_l t, or None if it does not fit."""
    n, k = w.shape
    x = np.zeros((n, k))
    left = cap.astype(float).copy()
    j = 0
    for row in order.tolist():
        need = pi[row] * t
        while need > FILL_TOL * max(1.0, pi[row] * t):
            while j < k and left[j] <= 0:
                j += 1
            if j == k:
                return None
            take = need / w[row, j]
            if take >= left[j]:
                take = left[j]
                left[j] = 0.0
            else:
                left[j] -= take
            x[row, j] += take
            need -= take * w[row, j]
    return x


def solve_non_cooperative_fast(problem: OefProblem) -> OefSolution | None:
    """The non-cooperative optimum by staircase bisection, or None when W is not
    ratio-ordered (or a tenant cannot use some type): then the LP must be solved."""
    started = time.perf_counter()
    w, pi, cap = problem.speedups, problem.weights, problem.capacity
    order = ratio_order(w)
    if order is None:
        return None
    hi = float(np.min((w @ cap) / pi))
    lo = 0.0
    best = np.zeros_like(w)
    while hi - lo > BISECT_TOL * max(hi, 1e-300):
        mid = (lo + hi) / 2
        x = _fill(w, pi, cap, order, mid)
        if x is None:
            hi = mid
        else:
            lo, best = mid, x
        if mid in (lo, hi) and hi - lo <= np.spacing(hi):
            break
    best[best < ZERO] = 0.0
    return OefSolution(best, lo, "fastpath", time.perf_counter() - started, 0)

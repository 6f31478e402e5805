"""Minimise the time until every active job finishes (OSSP; legend "OSSP" in Shockwave).

Bisection over the horizon T as in the artifact: T is feasible when time fractions exist with
θ_j·x_j ≥ r_j / T for every job. The search starts on [100 s, 10^6 s], stops when
1.05·lo ≥ hi, and moves up a decade while nothing is feasible. All jobs advance so that they
finish together: short makespan, long JCTs.

Feasibility is monotone in T, so one LP (maximise u = 1/T subject to θ_j·x_j ≥ r_j·u) gives
the smallest feasible horizon T*, and the bisection's answers follow from comparing each
midpoint with T*: the search visits the same midpoints and ends on the same horizon, and
only the horizon it ends on is solved for its fractions — the very LP the search solved
there before. Midpoints within a hair of T* (where a solver's tolerance could answer either
way) are still solved. Two solves per recompute instead of about a dozen; same result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import numpy as np
import scipy.sparse as sp

from gpufair.model import Job
from gpufair.policy.allocation_lp import FractionIndex, fraction_index, solve_timed
from gpufair.policy.solver import LinearProgram
from gpufair.policy.time_fractions import Allocation, TimeFractionPolicy

_MAX_DECADES = 8
_LOWEST_S, _HIGHEST_S = 100.0, 1e6
#: relative distance from T* inside which a midpoint is solved rather than decided by T*
_SOLVE_BAND = 1e-6


class MinTotalDurationPolicy(TimeFractionPolicy):
    name = "min_total_duration"

    def allocate(self, jobs: Sequence[Job], capacity: dict[str, int], now: float) -> Allocation:
        index = fraction_index(jobs, capacity)
        if index.size == 0:
            return {}
        remaining = np.array([j.progress.iterations_left or 0.0 for j in jobs])
        need = remaining[index.runnable]
        cap_rows, cap_rhs = index.capacity_rows(capacity)

        @cache
        def a_ub() -> sp.csr_matrix:
            """The rows θ_j·x_j ≥ r_j/T and capacity: built only when an LP is solved (on
            one GPU type, only for a horizon within a hair of T*)."""
            return sp.vstack([-index.per_job(index.rates, runnable_only=True), cap_rows],
                             format="csr")

        shortest = self._shortest_horizon(index, a_ub, need, cap_rhs)
        # (an interior-point backend — ECOS, the artifact's — returns another feasible point)
        one_type = len(index.types) == 1 and shortest is not None \
            and self.config.solver_backend != "ecos"

        def feasible(horizon: float) -> np.ndarray | None:
            if one_type and horizon > shortest * (1 + _SOLVE_BAND):
                return least_fractions(need, horizon, index.rates)
            b_ub = np.concatenate([-need / horizon, cap_rhs])
            problem = LinearProgram(c=np.zeros(index.size), A_ub=a_ub(), b_ub=b_ub, lb=0.0,
                                    ub=1.0, name="min_total_duration")
            solution = solve_timed(problem, self.config, self.stats)
            return solution.x if solution.ok else None

        x = bisect(feasible, shortest)
        if x is None and shortest is not None:   # a solver that disagrees with its own T*
            x = bisect(feasible, None)
        return {} if x is None else index.to_allocation(jobs, x)

    def _shortest_horizon(self, index: FractionIndex, a_ub: Callable[[], sp.csr_matrix],
                          need: np.ndarray,
                          cap_rhs: np.ndarray) -> float | None:
        """T* = 1 / max u with θ_j·x_j ≥ r_j·u (u ≤ 1/100 s: the search looks no lower);
        None when the solver gives no answer (the search then solves every midpoint).

        On one GPU type the LP has a closed form (:func:`one_type_shortest_horizon`), and
        solving it was half of the policy's solver time; midpoints within a hair of T* are
        solved either way, so the search ends on the same horizon."""
        if len(index.types) == 1:
            return one_type_shortest_horizon(index.rates, need, index.gang, float(cap_rhs[0]))
        u_col = sp.csr_matrix(np.concatenate([need, np.zeros(len(cap_rhs))])[:, None])
        c = np.zeros(index.size + 1)
        c[-1] = 1.0
        problem = LinearProgram(c=c, A_ub=sp.hstack([a_ub(), u_col], format="csr"),
                                b_ub=np.concatenate([np.zeros(len(need)), cap_rhs]), lb=0.0,
                                ub=np.append(np.ones(index.size), 1.0 / _LOWEST_S),
                                maximize=True, name="min_total_duration_horizon")
        solution = solve_timed(problem, self.config, self.stats)
        if not solution.ok or solution.x is None or not solution.x[-1] > 0:
            return None
        return 1.0 / float(solution.x[-1])


def one_type_shortest_horizon(rates: np.ndarray, need: np.ndarray, gang: np.ndarray,
                              gpus: float) -> float:
    """T* on one GPU type, where job j needs x_j = r_j / (θ_j T) of the time: T* is the
    largest of 100 s (where the search starts), each job alone (x_j ≤ 1: r_j / θ_j) and
    the type's capacity (Σ_j s_j x_j ≤ G: Σ_j s_j r_j / θ_j / G). ``rates``, ``need`` and
    ``gang`` are per runnable job (θ_j > 0, s_j ≤ G)."""
    alone = need / rates
    return max(_LOWEST_S, float(alone.max(initial=0.0)), float(gang @ alone) / gpus)


def least_fractions(need: np.ndarray, horizon: float, rates: np.ndarray) -> np.ndarray:
    """On one GPU type, at a horizon clearly above T*: each job's least fraction
    x_j = (r_j / T) / θ_j, which is feasible there (x_j ≤ 1 and Σ s_j·x_j ≤ G hold with room
    to spare). The feasibility LP has no objective, so any feasible point answers it, and this
    is the one both solvers return to the bit (presolve leaves each zero-cost variable at its
    tightened lower bound): the answer without building the model, which was most of the
    policy's solver time. The walk gives the spare capacity out, as it did."""
    return need / horizon / rates


def bisect(feasible: Callable[[float], np.ndarray | None], shortest: float | None
           ) -> np.ndarray | None:
    """The artifact's bisection; ``shortest`` (T*, when known) answers the midpoints away from
    it without a solve, and the horizon the search ends on is solved for its fractions."""
    def verdict(horizon: float) -> tuple[bool, np.ndarray | None]:
        if shortest is not None and abs(horizon - shortest) > _SOLVE_BAND * shortest:
            return horizon > shortest, None
        x = feasible(horizon)
        return x is not None, x

    lo, hi = _LOWEST_S, _HIGHEST_S
    for _ in range(_MAX_DECADES):
        best: np.ndarray | None = None
        found = False
        while 1.05 * lo < hi:
            horizon = (lo + hi) / 2
            ok, x = verdict(horizon)
            if ok:
                hi, best, found = horizon, x, True
            else:
                lo = horizon
        if found:
            return best if best is not None else feasible(hi)
        lo, hi = hi, hi * 10
    return None

"""Minimise the time until every active job finishes (OSSP; legend "OSSP" in Shockwave).

Bisection over the horizon T as in the artifact: T is feasible when time fractions exist with
θ_j·x_j ≥ r_j / T for every job. The search starts on [100 s, 10^6 s], stops when
1.05·lo ≥ hi, and moves up a decade while nothing is feasible. All jobs advance so that they
finish together: short makespan, long JCTs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from gpufair.model import Job
from gpufair.policy.allocation_lp import fraction_index, solve_timed
from gpufair.policy.solver import LinearProgram
from gpufair.policy.time_fractions import Allocation, TimeFractionPolicy

_MAX_DECADES = 8


class MinTotalDurationPolicy(TimeFractionPolicy):
    name = "min_total_duration"

    def allocate(self, jobs: Sequence[Job], capacity: dict[str, int], now: float) -> Allocation:
        index = fraction_index(jobs, capacity)
        if index.size == 0:
            return {}
        remaining = np.array([j.progress.iterations_left or 0.0 for j in jobs])
        runnable = np.unique(index.jobs)
        speed_rows = -index.per_job(index.rates)[runnable]
        cap_rows, cap_rhs = index.capacity_rows(capacity)
        a_ub = sp.vstack([speed_rows, cap_rows], format="csr")

        def feasible(horizon: float) -> np.ndarray | None:
            b_ub = np.concatenate([-remaining[runnable] / horizon, cap_rhs])
            problem = LinearProgram(c=np.zeros(index.size), A_ub=a_ub, b_ub=b_ub, lb=0.0,
                                    ub=1.0, name="min_total_duration")
            solution = solve_timed(problem, self.config, self.stats)
            return solution.x if solution.ok else None

        lo, hi = 100.0, 1e6
        for _ in range(_MAX_DECADES):
            best: np.ndarray | None = None
            while 1.05 * lo < hi:
                horizon = (lo + hi) / 2
                x = feasible(horizon)
                if x is not None:
                    hi, best = horizon, x
                else:
                    lo = horizon
            if best is not None:
                return index.to_allocation(jobs, best)
            lo, hi = hi, hi * 10
        return {}

"""Maximise total throughput (legend "MST"): Σ θ_{j,t}·x_{j,t} over time fractions.

θ is the job's raw iterations/s, not normalised across models, exactly as the artifact's
``max_sum_throughput_perf``: it favours job types with many iterations per second.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpufair.model import Job
from gpufair.policy.allocation_lp import fraction_index, solve_timed
from gpufair.policy.solver import LinearProgram
from gpufair.policy.time_fractions import Allocation, TimeFractionPolicy


class MaxSumThroughputPolicy(TimeFractionPolicy):
    name = "max_sum_throughput"

    def allocate(self, jobs: Sequence[Job], capacity: dict[str, int], now: float) -> Allocation:
        index = fraction_index(jobs, capacity)
        if index.size == 0:
            return {}
        a_ub, b_ub = index.capacity_rows(capacity)
        problem = LinearProgram(c=index.rates, A_ub=a_ub, b_ub=b_ub, lb=0.0, ub=1.0,
                                maximize=True, name="max_sum_throughput")
        solution = solve_timed(problem, self.config, self.stats)
        if not solution.ok:
            return {}
        return index.to_allocation(jobs, solution.x)

"""Gavel's max-min fairness over time fractions (legend "Gavel" in the Shockwave paper).

Maximise min_j (effective GPU share of j) / w_j. A job's effective share counts each GPU type
by its speed relative to the job's fastest type, so on one GPU type it is exactly the
artifact's sf_j·x_j (every job gets an equal GPU share) and on mixed types it is Gavel's
heterogeneity-aware variant. Set ``heterogeneity_aware = false`` for the agnostic LP, in which
every type counts the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gpufair.model import Job
from gpufair.policy.allocation_lp import fraction_index, solve_timed
from gpufair.policy.solver import LinearProgram
from gpufair.policy.time_fractions import Allocation, TimeFractionOptions, TimeFractionPolicy
from gpufair.settings import setting


@dataclass(frozen=True)
class MaxMinOptions(TimeFractionOptions):
    heterogeneity_aware: bool = setting(
        True, "count each GPU type by the job's speed on it (Gavel's *_perf variant)")


class MaxMinPolicy(TimeFractionPolicy):
    name = "max_min"
    Options = MaxMinOptions

    def allocate(self, jobs: Sequence[Job], capacity: dict[str, int], now: float) -> Allocation:
        index = fraction_index(jobs, capacity)
        if index.size == 0:
            return {}
        if self.options.heterogeneity_aware:
            best = np.zeros(len(jobs))
            np.maximum.at(best, index.jobs, index.rates)
            speed = index.rates / best[index.jobs]
        else:
            speed = np.ones(index.size)
        weights = np.array([j.weight for j in jobs])[index.jobs]
        if len(index.types) == 1:   # one column per runnable job
            x = one_type_max_min(speed * index.gang / weights, weights,
                                 float(capacity[index.types[0]]))
            if x is not None:
                return index.to_allocation(jobs, x)
        share = index.per_job(speed * index.gang / weights, runnable_only=True)
        runnable = index.runnable
        cap_rows, cap_rhs = index.capacity_rows(capacity)
        z_col = sp.csr_matrix(np.ones((len(runnable), 1)))
        a_ub = sp.vstack([sp.hstack([-share, z_col]),
                          sp.hstack([cap_rows, sp.csr_matrix((cap_rows.shape[0], 1))])],
                         format="csr")
        b_ub = np.concatenate([np.zeros(len(runnable)), cap_rhs])
        c = np.zeros(index.size + 1)
        c[-1] = 1.0
        ub = np.append(np.ones(index.size), np.inf)
        problem = LinearProgram(c=c, A_ub=a_ub, b_ub=b_ub, lb=0.0, ub=ub, maximize=True,
                                name="max_min")
        solution = solve_timed(problem, self.config, self.stats)
        if not solution.ok:
            return {}
        return index.to_allocation(jobs, solution.x[:-1])


def one_type_max_min(share: np.ndarray, weights: np.ndarray, gpus: float) -> np.ndarray | None:
    """The LP's optimum on one GPU type when it is the only one; None when it is not.

    With z ≤ share_j·x_j (share_j = s_j/w_j), Σ_j s_j·x_j ≤ G and x_j ≤ 1: summing
    w_j·z ≤ s_j·x_j over the jobs gives z ≤ G/Σw, which x_j = (G/Σw)/share_j reaches when
    every x_j ≤ 1. Any optimum must then make each of those inequalities tight, so this x is
    the LP's only optimum and every exact solver returns it (to its tolerance). Otherwise —
    a light load, where some job's whole GPU gang caps z and spare capacity may go anywhere —
    the optimum is not unique and the LP decides. Half of a 900-job simulation's recomputes
    were this LP's model building.
    """
    if not (np.all(weights > 0) and np.all(np.isfinite(weights)) and np.all(share > 0)):
        return None
    level = gpus / float(weights.sum())
    x = level / share
    return x if np.all(x <= 1.0) else None

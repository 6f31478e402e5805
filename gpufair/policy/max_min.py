"""Gavel's max-min fairness over time fractions (legend "Gavel" in the Shockwave paper).

Maximise min_j (effective GPU share of j) / w_j. A job's effective share counts each GPU type
by its speed relative to the job's fastest type, so on one GPU type it is exactly the
artifact's sf_j·x_j (every job gets an equal GPU share) and on mixed types it is Gavel's
heterogeneity-aware variant. Set ``heterogeneity_aware = false`` for the agnostic LP, in which
every type counts the same.

``level = "tenant"`` is the Gavel the OEF paper compares against (spec oef.md §5.4): max t such
that each tenant's normalized efficiency is at least t times what its weighted equal share of
every GPU type would give it (:mod:`gpufair.policy.tenant_max_min`). ``stages = 2`` then
maximises the total normalized efficiency among the allocations that keep that t; with
``stages = 1`` (the default, today's behaviour) the allocation is whichever optimal vertex the
solver returns first, which may leave efficiency — even whole GPUs — on the table when the
max-min level is set by a tenant that cannot use more. That difference is what OEF's "+20 %
over Gavel" measures (docs/policies/oef.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gpufair.model import ClusterState, Job, Plan
from gpufair.policy.allocation_lp import FractionIndex, fraction_index, solve_timed
from gpufair.policy.base import PolicyConfig
from gpufair.policy.solver import LinearProgram
from gpufair.policy.tenant_max_min import normalized_efficiency, tenant_fair_rows
from gpufair.policy.time_fractions import Allocation, TimeFractionOptions, TimeFractionPolicy
from gpufair.settings import setting

#: relative slack on the first stage's level when the second stage keeps it: solvers return
#: the optimum to ~1e-9, and holding it exactly could make the second LP infeasible
STAGE_SLACK = 1e-7


@dataclass(frozen=True)
class MaxMinOptions(TimeFractionOptions):
    heterogeneity_aware: bool = setting(
        True, "count each GPU type by the job's speed on it (Gavel's *_perf variant)")
    level: str = setting(
        "job", "whose share is max-min fair: each job's (Gavel) or each tenant's normalized"
        " efficiency against its weighted equal share (the OEF paper's Gavel)",
        choices=("job", "tenant"))
    stages: int = setting(
        1, "1: the max-min LP's first optimal vertex; 2: then the most total normalized"
        " efficiency that keeps the max-min level", choices=(1, 2))


class MaxMinPolicy(TimeFractionPolicy):
    name = "max_min"
    Options = MaxMinOptions

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        self._tenant_weights: dict[str, float] = {}

    def schedule(self, state: ClusterState, now: float) -> Plan:
        if self.options.level == "tenant":
            weights = {t.name: t.weight for t in state.tenants}
            if weights != self._tenant_weights:   # a weight changed: the shares did
                self._tenant_weights = weights
                self._dirty = True
        return super().schedule(state, now)

    def allocate(self, jobs: Sequence[Job], capacity: dict[str, int], now: float) -> Allocation:
        index = fraction_index(jobs, capacity)
        if index.size == 0:
            return {}
        if self.options.level == "tenant":
            fair, level_of = tenant_fair_rows(index, jobs, capacity, self._tenant_weights,
                                              self.options.heterogeneity_aware)
            return self._solve(index, jobs, capacity, fair, level_of)
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
            if x is not None:   # the LP's only optimum: a second stage cannot move it
                return index.to_allocation(jobs, x)
        share = index.per_job(speed * index.gang / weights, runnable_only=True)
        return self._solve(index, jobs, capacity, share, np.ones(share.shape[0]))

    def _solve(self, index: FractionIndex, jobs: Sequence[Job], capacity: dict[str, int],
               fair: sp.csr_matrix, level_of: np.ndarray) -> Allocation:
        """max z s.t. fair·x ≥ z·level_of (row by row) and capacity; then, with ``stages = 2``,
        max Σ normalized efficiency s.t. fair·x ≥ z*·level_of."""
        cap_rows, cap_rhs = index.capacity_rows(capacity)
        rows = fair.shape[0]
        z_col = sp.csr_matrix(level_of.reshape(-1, 1))
        a_ub = sp.vstack([sp.hstack([-fair, z_col]),
                          sp.hstack([cap_rows, sp.csr_matrix((cap_rows.shape[0], 1))])],
                         format="csr")
        b_ub = np.concatenate([np.zeros(rows), cap_rhs])
        c = np.zeros(index.size + 1)
        c[-1] = 1.0
        ub = np.append(np.ones(index.size), np.inf)
        problem = LinearProgram(c=c, A_ub=a_ub, b_ub=b_ub, lb=0.0, ub=ub, maximize=True,
                                name="max_min")
        solution = solve_timed(problem, self.config, self.stats)
        if not solution.ok:
            return {}
        if self.options.stages == 1:
            return index.to_allocation(jobs, solution.x[:-1])
        level = float(solution.x[-1]) * (1.0 - STAGE_SLACK)
        second = LinearProgram(
            c=normalized_efficiency(index, self.options.heterogeneity_aware),
            A_ub=sp.vstack([-fair, cap_rows], format="csr"),
            b_ub=np.concatenate([-level * level_of, cap_rhs]), lb=0.0, ub=1.0, maximize=True,
            name="max_min_stage2")
        total = solve_timed(second, self.config, self.stats)
        x = total.x if total.ok else solution.x[:-1]   # the first stage's vertex still holds
        return index.to_allocation(jobs, x)


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

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

``objective = "finish_time"`` is Gavel's finish-time-fairness policy, the baseline the Shockwave
paper calls "Themis" (its artifact's ``finish_time_fairness``; SIMULATION.md §4): minimise the
largest estimated ρ̂_j, i.e. maximise the smallest 1/ρ̂_j
(:mod:`gpufair.policy.finish_time_fairness`). It is per job, weighs every job alike and always
counts each type by the job's speed on it, as the artifact's ``_Perf`` variant does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gpufair.errors import InputError
from gpufair.model import ClusterState, Job, Plan
from gpufair.policy.allocation_lp import FractionIndex, fraction_index, solve_timed
from gpufair.policy.base import PolicyConfig
from gpufair.policy.finish_time_fairness import (
    bisect_level,
    isolated_fractions,
    isolated_level,
    lowest_level,
    need_rows,
    one_type_level,
    per_job_sum,
    terms,
)
from gpufair.policy.solver import LinearProgram
from gpufair.policy.tenant_max_min import normalized_efficiency, tenant_fair_rows
from gpufair.policy.time_fractions import Allocation, TimeFractionOptions, TimeFractionPolicy
from gpufair.settings import setting

#: relative slack on the first stage's level when the second stage keeps it: solvers return
#: the optimum to ~1e-9, and holding it exactly could make the second LP infeasible
STAGE_SLACK = 1e-7
#: relative room above the finish-time level z* for the interior-point solve: at heavy load
#: the optimal face is a single point, which an interior-point method cannot sit inside
ECOS_SLACK = 1e-6


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
    objective: str = setting(
        "share", "what is max-min fair: each job's (or tenant's) GPU share, or each job's"
        " finish-time fairness 1/ρ (Gavel's finish_time_fairness, the Shockwave paper's"
        " 'Themis'; job level only)", choices=("share", "finish_time"))


class MaxMinPolicy(TimeFractionPolicy):
    name = "max_min"
    Options = MaxMinOptions

    _STATE = (*TimeFractionPolicy._STATE, "_isolated_s", "_isolated_mark")

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        self._tenant_weights: dict[str, float] = {}
        # finish_time: each job's time with its isolated share so far (c_j), and the
        # iterations done and isolated rate it was last charged at
        self._isolated_s: dict[str, float] = {}
        self._isolated_mark: dict[str, list[float]] = {}
        if self.options.objective == "finish_time" and self.options.level != "job":
            raise InputError(self.config.options_source or f"policies.{self.name}",
                             "objective = \"finish_time\" is per job: level must be \"job\"",
                             field="level", value=self.options.level)

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
        if self.options.objective == "finish_time":
            return index.to_allocation(jobs, self._finish_time(index, jobs, capacity, now))
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


    # -- finish-time fairness ----------------------------------------------------------------
    def _finish_time(self, index: FractionIndex, jobs: Sequence[Job], capacity: dict[str, int],
                     now: float) -> np.ndarray:
        """min max_j ρ̂_j over time fractions: z* by bisection (a root on one type), then
        the point at z* — with ``stages = 2`` the one of most total normalized efficiency."""
        iso_x = isolated_fractions(index, len(jobs), capacity)
        iso_rate = per_job_sum(index, index.rates * iso_x)
        t = terms(index, jobs, iso_rate, self._charge_isolated(index, jobs, iso_rate), now)
        if not t.known.any():
            return iso_x   # no ρ̂ to equalise: everyone holds its isolated share
        cap_rows, cap_rhs = index.capacity_rows(capacity)
        a_ub = sp.vstack([need_rows(index), cap_rows], format="csr")

        def solve_at(level: float, objective: np.ndarray) -> np.ndarray | None:
            need = t.need(level)
            if not np.all(np.isfinite(need)):
                return None
            problem = LinearProgram(c=objective, A_ub=a_ub, b_ub=np.concatenate([-need, cap_rhs]),
                                    lb=0.0, ub=1.0, maximize=True, name="max_min_finish_time")
            solution = solve_timed(problem, self.config, self.stats)
            return solution.x if solution.ok else None

        no_objective = np.zeros(index.size)
        if len(index.types) == 1:   # one column per runnable job, in order
            level = one_type_level(t, index.rates, index.gang, float(cap_rhs[0]))
            x = np.minimum(1.0, t.need(level) / index.rates)
            if self.config.solver_backend == "ecos":
                # the artifact's interior-point answer: a point inside the optimal face,
                # where the closed form is its vertex of least fractions (min_total_duration
                # makes the same choice); at heavy load the face is that one point
                inside = solve_at(level * (1.0 + ECOS_SLACK), no_objective)
                x = x if inside is None else inside
        else:
            best = np.zeros(index.num_jobs)
            np.maximum.at(best, index.jobs, index.rates)
            low = lowest_level(t, best[index.runnable])
            high = max(low, isolated_level(t))   # the isolated shares reach it
            level, x = bisect_level(lambda z: solve_at(z, no_objective), low, high, iso_x)
        if self.options.stages == 2:
            efficient = solve_at(level * (1.0 + STAGE_SLACK),
                                 normalized_efficiency(index, heterogeneity_aware=True))
            x = x if efficient is None else efficient
        return x

    def _charge_isolated(self, index: FractionIndex, jobs: Sequence[Job],
                         iso_rate: np.ndarray) -> np.ndarray:
        """c_j per runnable job: the iterations done since the last plan at that plan's
        isolated rate, added up (the artifact's bookkeeping); a job seen first is charged
        its iterations done at today's rate (0 for a new one, as in the artifact)."""
        spent, marks = self._isolated_s, self._isolated_mark
        out = np.zeros(len(iso_rate))
        for row, (k, rate) in enumerate(zip(index.runnable.tolist(), iso_rate.tolist(),
                                            strict=True)):
            job = jobs[k]
            done = job.progress.iterations_done
            mark = marks.get(job.id)
            if mark is None:
                value = done / rate if rate > 0 else 0.0
            else:
                gained = max(0.0, done - mark[0])
                value = spent[job.id] + (gained / mark[1] if mark[1] > 0 else 0.0)
            spent[job.id], marks[job.id] = value, [done, rate]
            out[row] = value
        active = {job.id for job in jobs}
        for gone in [jid for jid in spent if jid not in active]:
            spent.pop(gone)
            marks.pop(gone, None)
        return out


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

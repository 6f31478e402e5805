"""Gavel's finish-time-fairness allocation: the "Themis" of the Shockwave paper.

The Shockwave paper's baseline labelled "Themis" is not THEMIS's auction (``themis``) but
Gavel's ``finish_time_fairness`` policy, which its artifact runs (SIMULATION.md §4): over time
fractions x it minimises max_j ρ̂_j(x), with

    ρ̂_j(x) = (t_j + r_j / T_j(x)) / (c_j + r_j / T_iso,j)

t_j the time since job j arrived, r_j its remaining iterations, T_j(x) = Σ_t θ_jt·x_jt its
throughput under the allocation, T_iso,j its throughput with the isolated 1/m share of every
GPU type (m active jobs), and c_j the time it would have spent so far with that share
(cumulative, charged at the previous plan's isolated rate, as the artifact does).

ρ̂_j ≤ z is T_j(x) ≥ r_j / (z·D_j − t_j) with D_j = c_j + r_j / T_iso,j: for a fixed level z
the constraints are linear, and feasibility only grows with z. So the optimum z* is found by
bisection over feasibility LPs (both solver backends, no conic solver needed), and on one GPU
type, where feasibility is just Σ_j sf_j·x_j(z) ≤ G with each x_j ≤ 1, as the root of a
monotone sum (no LP). A job whose remaining work is unknown cannot have a ρ̂: it is held to
its isolated share, the allocation the artifact falls back on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq

from gpufair.model import Job
from gpufair.policy.allocation_lp import FractionIndex

#: the bisection stops when its bracket is this narrow, relative to its top (the level a
#: finished search answers with is always the feasible end of the bracket)
LEVEL_TOLERANCE = 1e-4
#: bisection steps at most (a bracket halves each step: 40 is far below any tolerance)
MAX_STEPS = 60


@dataclass(frozen=True)
class FinishTimeTerms:
    """Per runnable job (rows of ``index.runnable``): the parts of ρ̂_j.

    ``known`` marks the jobs with a remaining length (the others are held to ``isolated``,
    their isolated throughput); ``elapsed`` is t_j, ``remaining`` r_j, ``denominator`` D_j.
    """

    known: np.ndarray
    elapsed: np.ndarray
    remaining: np.ndarray
    denominator: np.ndarray
    isolated: np.ndarray

    def need(self, level: float) -> np.ndarray:
        """The throughput each job needs for ρ̂_j ≤ level (inf where no throughput would do)."""
        slack = level * self.denominator - self.elapsed
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(slack > 0, self.remaining / slack, np.inf)
        return np.where(self.known, need, self.isolated)


def isolated_fractions(index: FractionIndex, jobs_active: int,
                       capacity: dict[str, int]) -> np.ndarray:
    """x_iso per column: 1/m of each GPU type the job can run on, in its gang's units
    (G_t / (m·sf_j)), scaled down so that a job's fractions sum to at most 1 — on one type,
    the artifact's min(1, G/(m·sf_j))."""
    gpus = np.array([capacity[t] for t in index.types], dtype=float)[index.type_index]
    share = gpus / (max(jobs_active, 1) * index.gang)
    total = np.bincount(index.jobs, weights=share, minlength=index.num_jobs)
    return share / np.maximum(1.0, total[index.jobs])


def per_job_sum(index: FractionIndex, values: np.ndarray) -> np.ndarray:
    """Σ over each runnable job's columns, in the order of ``index.runnable``."""
    return np.bincount(index.jobs, weights=values, minlength=index.num_jobs)[index.runnable]


def terms(index: FractionIndex, jobs: Sequence[Job], isolated_rate: np.ndarray,
          isolated_time: np.ndarray, now: float) -> FinishTimeTerms:
    """ρ̂'s parts for the runnable jobs; ``isolated_rate`` and ``isolated_time`` (T_iso,j and
    c_j) are per runnable job."""
    runnable = index.runnable
    left = [jobs[k].progress.iterations_left for k in runnable.tolist()]
    remaining = np.array([0.0 if r is None else r for r in left], dtype=float)
    known = np.array([r is not None for r in left], dtype=bool) & (isolated_rate > 0)
    elapsed = np.array([max(0.0, now - jobs[k].arrival_s) for k in runnable.tolist()])
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = isolated_time + np.where(known, remaining / isolated_rate, 0.0)
    known &= denominator > 0
    return FinishTimeTerms(known, elapsed, remaining, denominator, isolated_rate)


def lowest_level(t: FinishTimeTerms, best_rate: np.ndarray) -> float:
    """No allocation does better than every job running all the time on its fastest type."""
    if not t.known.any():
        return 0.0
    k = t.known
    return float(np.max((t.elapsed[k] + t.remaining[k] / best_rate[k]) / t.denominator[k]))


def isolated_level(t: FinishTimeTerms) -> float:
    """max_j ρ̂_j with every job at its isolated share: a level that is always feasible."""
    k = t.known
    return float(np.max((t.elapsed[k] + t.remaining[k] / t.isolated[k]) / t.denominator[k]))


def one_type_level(t: FinishTimeTerms, rate: np.ndarray, gang: np.ndarray,
                   gpus: float) -> float:
    """z* on one GPU type: the least z with every x_j = need_j(z)/θ_j ≤ 1 and
    Σ_j sf_j·x_j ≤ G. The sum falls as z grows, so z* is the lowest level when the sum fits
    there, and otherwise the root of Σ_j sf_j·x_j(z) = G above it."""
    low = lowest_level(t, rate)

    def excess(level: float) -> float:
        return float(gang @ (t.need(level) / rate)) - gpus

    if excess(low) <= 0:
        return low
    high = max(low, 1e-9) * 2
    for _ in range(MAX_STEPS):   # the sum tends to the unknown jobs' part (< G) as z grows
        if excess(high) <= 0:
            break
        high *= 2
    return float(brentq(excess, low, high, xtol=1e-12, rtol=1e-12))


def bisect_level(feasible: Callable[[float], np.ndarray | None], low: float, high: float,
                 at_high: np.ndarray) -> tuple[float, np.ndarray]:
    """The least feasible level, to :data:`LEVEL_TOLERANCE`, by bisection between a level
    known infeasible or optimal (``low``) and one known feasible (``high``, with its point)."""
    best = at_high
    for _ in range(MAX_STEPS):
        if high - low <= LEVEL_TOLERANCE * high:
            break
        middle = (low + high) / 2
        x = feasible(middle)
        if x is None:
            low = middle
        else:
            high, best = middle, x
    return high, best


def need_rows(index: FractionIndex) -> sp.csr_matrix:
    """−T_j(x) per runnable job: the rows of T_j(x) ≥ need_j written as A_ub·x ≤ b_ub."""
    return -index.per_job(index.rates, runnable_only=True)

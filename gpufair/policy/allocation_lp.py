"""The time-fraction LP skeleton the Gavel-family allocators share.

Variables x[j,t] ∈ [0, 1] (only for job/type pairs the job can run on), each job's fractions
sum to at most 1, and each GPU type's capacity holds: Σ_j sf_j · x[j,t] ≤ G_t. Each policy
adds its own objective and extra rows on top.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gpufair.model import Job
from gpufair.policy.base import PolicyConfig, PolicyStats
from gpufair.policy.solver import LinearProgram, Solution, SolveOptions, solve


@dataclass(frozen=True)
class FractionIndex:
    """Column layout of x: pair k is (job index jobs[k], gpu type types[k]), rate rates[k]."""

    jobs: np.ndarray
    types: tuple[str, ...]
    type_index: np.ndarray
    rates: np.ndarray
    gang: np.ndarray
    num_jobs: int

    @property
    def size(self) -> int:
        return len(self.jobs)

    def per_job(self, values: np.ndarray, runnable_only: bool = False) -> sp.csr_matrix:
        """Rows j: Σ_{k of job j} values[k] x_k; only the rows of jobs with a column when
        ``runnable_only`` (the rows of :attr:`runnable`, in order).

        Built as CSR directly: the columns are in job order, so each row's entries are one
        contiguous run of them (what a COO conversion and row slicing would sort out again at
        every recompute)."""
        counts = np.bincount(self.jobs, minlength=self.num_jobs)
        if runnable_only:
            counts = counts[counts > 0]
        indptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return sp.csr_matrix((np.asarray(values, dtype=float), np.arange(self.size), indptr),
                             shape=(len(counts), self.size))

    @property
    def runnable(self) -> np.ndarray:
        """Indices of the jobs with at least one column, ascending."""
        return np.unique(self.jobs)

    def capacity_rows(self, capacity: dict[str, int]) -> tuple[sp.csr_matrix, np.ndarray]:
        """Σ_j sf_j x[j,t] ≤ G_t and Σ_t x[j,t] ≤ 1."""
        by_type = np.argsort(self.type_index, kind="stable")
        indptr = np.zeros(len(self.types) + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.type_index, minlength=len(self.types)), out=indptr[1:])
        cap = sp.csr_matrix((self.gang[by_type], by_type, indptr),
                            shape=(len(self.types), self.size))
        once = self.per_job(np.ones(self.size))
        rows = sp.vstack([cap, once], format="csr")
        rhs = np.concatenate([[capacity[t] for t in self.types], np.ones(self.num_jobs)])
        return rows, rhs

    def to_allocation(self, job_list: Sequence[Job], x: np.ndarray) -> dict[str, dict[str, float]]:
        ids = [j.id for j in job_list]
        out: dict[str, dict[str, float]] = {i: {} for i in ids}
        types = self.types   # plain lists: indexing numpy arrays one element at a time is slow
        for j, t, value in zip(self.jobs.tolist(), self.type_index.tolist(),
                               np.asarray(x, dtype=float)[: self.size].tolist(), strict=True):
            out[ids[j]][types[t]] = value
        return out


def fraction_index(jobs: Sequence[Job], capacity: dict[str, int]) -> FractionIndex:
    """The pairs (job, type) with a rate and room for the job's gang, job by job and type by
    type within a job (a rate table per type, read in whole columns)."""
    types = tuple(capacity)
    gangs = np.array([job.gpus for job in jobs], dtype=float).reshape(len(jobs))
    rate_table = np.array([[job.rate(t) for job in jobs] for t in types],
                          dtype=float).reshape(len(types), len(jobs)).T
    room = np.array([capacity[t] for t in types], dtype=float)
    job_idx, type_idx = np.nonzero((rate_table > 0) & (gangs[:, None] <= room[None, :]))
    return FractionIndex(job_idx, types, type_idx, rate_table[job_idx, type_idx],
                         gangs[job_idx], len(jobs))


def solve_timed(problem: LinearProgram, config: PolicyConfig, stats: PolicyStats) -> Solution:
    """Solve with the policy's solver settings, charging the time to the policy's stats."""
    options = SolveOptions(backend=config.solver_backend, time_limit_s=config.solver_time_limit_s,
                           threads=config.solver_threads, seed=config.seed)
    started = time.perf_counter()
    solution = solve(problem, options)
    stats.solves += 1
    stats.solver_s += time.perf_counter() - started
    return solution

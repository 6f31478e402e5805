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

    def per_job(self, values: np.ndarray) -> sp.csr_matrix:
        """Rows j: Σ_{k of job j} values[k] x_k."""
        return sp.csr_matrix((values, (self.jobs, np.arange(self.size))),
                             shape=(self.num_jobs, self.size))

    def capacity_rows(self, capacity: dict[str, int]) -> tuple[sp.csr_matrix, np.ndarray]:
        """Σ_j sf_j x[j,t] ≤ G_t and Σ_t x[j,t] ≤ 1."""
        cap = sp.csr_matrix((self.gang, (self.type_index, np.arange(self.size))),
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
    types = tuple(capacity)
    job_idx, type_idx, rates, gang = [], [], [], []
    for j, job in enumerate(jobs):
        for t, gpu_type in enumerate(types):
            rate = job.rate(gpu_type)
            if rate > 0 and job.gpus <= capacity[gpu_type]:
                job_idx.append(j)
                type_idx.append(t)
                rates.append(rate)
                gang.append(job.gpus)
    return FractionIndex(np.array(job_idx, dtype=int), types, np.array(type_idx, dtype=int),
                         np.array(rates, dtype=float), np.array(gang, dtype=float), len(jobs))


def solve_timed(problem: LinearProgram, config: PolicyConfig, stats: PolicyStats) -> Solution:
    """Solve with the policy's solver settings, charging the time to the policy's stats."""
    options = SolveOptions(backend=config.solver_backend, time_limit_s=config.solver_time_limit_s,
                           threads=config.solver_threads, seed=config.seed)
    started = time.perf_counter()
    solution = solve(problem, options)
    stats.solves += 1
    stats.solver_s += time.perf_counter() - started
    return solution

"""Shortest remaining time first (preemptive), on the job's fastest GPU type.

Remaining time = iterations left / isolated iterations per second; jobs whose remaining work
is unknown go last, in arrival order.
"""

from __future__ import annotations

import math

from gpufair.model import Job, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.ordering import OrderingPolicy, best_rate

#: Profiles remembered at most; past that the memo starts over (a daemon's enrichers make
#: new profile objects each round, a simulator shares a few across all its jobs and rounds).
_MEMO_SIZE = 4096


class SrtfPolicy(OrderingPolicy):
    name = "srtf"

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        self._best: dict[tuple[int, int], tuple[ThroughputProfile, float]] = {}

    def sort_key(self, job: Job, now: float) -> tuple[float, ...]:
        left = job.progress.iterations_left
        rate = self._best_rate(job)
        remaining = left / rate if left is not None and rate > 0 else math.inf
        return (remaining, job.arrival_s)

    def key_figures(self, job: Job, now: float) -> dict[str, float | int | str]:
        remaining = self.sort_key(job, now)[0]
        return {"remaining_s": round(remaining, 1) if math.isfinite(remaining) else "unknown"}

    def _best_rate(self, job: Job) -> float:
        """:func:`best_rate`, remembered per (profile object, gang size): it scans the
        profile, and every job is sorted at every decision. Profiles are immutable; the
        entry keeps its profile alive, so an id is never reused while remembered."""
        key = (id(job.throughput), job.gpus)
        hit = self._best.get(key)
        if hit is None or hit[0] is not job.throughput:
            if len(self._best) >= _MEMO_SIZE:
                self._best.clear()
            hit = self._best[key] = (job.throughput, best_rate(job))
        return hit[1]

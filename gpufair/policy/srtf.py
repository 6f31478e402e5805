"""Shortest remaining time first (preemptive), on the job's fastest GPU type.

Remaining time = iterations left / isolated iterations per second; jobs whose remaining work
is unknown go last, in arrival order.
"""

from __future__ import annotations

import math

from gpufair.model import Job
from gpufair.policy.ordering import OrderingPolicy, best_rate


class SrtfPolicy(OrderingPolicy):
    name = "srtf"

    def sort_key(self, job: Job, now: float) -> tuple[float, ...]:
        left = job.progress.iterations_left
        rate = best_rate(job)
        remaining = left / rate if left is not None and rate > 0 else math.inf
        return (remaining, job.arrival_s)

"""Tiresias-style least attained service (discretised two-dimensional LAS).

Attained service is GPU-seconds (time held × gang size), Tiresias's 2D metric, so wide jobs
age faster. Jobs fall into priority queues by thresholds (option ``queue_thresholds_gpu_s``,
default one hour of one GPU) and run FIFO within a queue: the discretisation is what keeps
Tiresias from preempting on every small difference in attained service.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpufair.model import ClusterState, Job
from gpufair.policy.base import PolicyConfig
from gpufair.policy.ordering import OrderingPolicy
from gpufair.settings import setting


@dataclass(frozen=True)
class LasOptions:
    queue_thresholds_gpu_s: tuple[float, ...] = setting(
        (3600.0,), "attained GPU-seconds at which a job drops to the next queue")


class LasPolicy(OrderingPolicy):
    name = "las"
    Options = LasOptions

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        self.thresholds = sorted(self.options.queue_thresholds_gpu_s)

    def sort_key(self, job: Job, now: float) -> tuple[float, ...]:
        return (bisect.bisect_right(self.thresholds, job.attained_s * job.gpus), job.arrival_s)

    def order_key(self, now: float) -> Callable[[Job], Any]:
        """:meth:`sort_key` in one call per job rather than two."""
        thresholds, level = self.thresholds, bisect.bisect_right
        return lambda job: (level(thresholds, job.attained_s * job.gpus), job.arrival_s)

    def plan_holds_for_s(self, state: ClusterState) -> float:
        """Seconds the plan made on ``state`` stays the plan while no job arrives, ends or
        changes GPUs: until a running job's attained service could reach the next threshold
        (a job's queue is all its key reads of the clock; a waiting job gains none). Attained
        time grows at most one second a second; a millisecond is kept in hand against the
        rounding of its sums. A simulator skips the rounds before then that change nothing
        else (core.simulation.run_to_end)."""
        soonest = math.inf
        for job in state.jobs:
            if job.gpus_held:
                attained = job.attained_s * job.gpus
                level = bisect.bisect_right(self.thresholds, attained)
                if level < len(self.thresholds):
                    soonest = min(soonest, (self.thresholds[level] - attained) / job.gpus)
        return soonest - 1e-3

    def key_figures(self, job: Job, now: float) -> dict[str, float | int | str]:
        """Tiresias's terms: the job's queue (0 first) and the attained service that put it
        there, against the threshold of the next queue down."""
        attained = job.attained_s * job.gpus
        level = bisect.bisect_right(self.thresholds, attained)
        figures: dict[str, float | int | str] = {"queue": level,
                                                 "attained_gpu_s": round(attained, 1)}
        if level < len(self.thresholds):
            figures["next_queue_at_gpu_s"] = self.thresholds[level]
        return figures

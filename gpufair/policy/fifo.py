"""First in, first out, with skip-ahead: a job that does not fit lets smaller later ones run,
but an earlier job always reclaims GPUs from later ones (arrival order is the priority)."""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from gpufair.model import ClusterState, Job
from gpufair.policy.ordering import OrderingPolicy

_ARRIVAL = attrgetter("arrival_s")


class FifoPolicy(OrderingPolicy):
    name = "fifo"
    def plan_holds_for_s(self, state: ClusterState) -> float:
        """For ever: the plan depends on which jobs are active, what they are and which GPUs
        they hold, never on the clock or on progress (the key is the arrival), and nothing is
        kept between decisions. A simulator skips the rounds in which none of that changed
        since a round that asked for no action (core.simulation.run_to_end)."""
        return math.inf

    def sort_key(self, job: Job, now: float) -> tuple[float, ...]:
        return (job.arrival_s,)

    def order_key(self, now: float) -> Callable[[Job], Any]:
        """The arrival itself: it orders as the 1-tuple does, read in C."""
        return _ARRIVAL

    def key_figures(self, job: Job, now: float) -> dict[str, float | int | str]:
        return {"waited_s": round(now - job.arrival_s, 1)}

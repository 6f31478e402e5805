"""First in, first out, with skip-ahead: a job that does not fit lets smaller later ones run,
but an earlier job always reclaims GPUs from later ones (arrival order is the priority)."""

from __future__ import annotations

from gpufair.model import Job
from gpufair.policy.ordering import OrderingPolicy


class FifoPolicy(OrderingPolicy):
    name = "fifo"

    def sort_key(self, job: Job, now: float) -> tuple[float, ...]:
        return (job.arrival_s,)

    def key_figures(self, job: Job, now: float) -> dict[str, float | int | str]:
        return {"waited_s": round(now - job.arrival_s, 1)}

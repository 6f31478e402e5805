"""Policies that are a sort order: each round, walk the jobs in order and give gangs GPUs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from gpufair.model import ClusterState, Job, Plan, Reason
from gpufair.policy.base import PolicyBase
from gpufair.policy.placement import capacity_by_type, greedy_walk, held_types, place


class OrderingPolicy(PolicyBase, ABC):
    name = "ordering"
    #: the plan is a function of the snapshot alone, so a decision that can start nothing
    #: (between boundaries, no waiting job fits the idle GPUs) may go unseen
    #: (core.simulation.run_to_end)
    observes_every_event: ClassVar[bool] = False

    @abstractmethod
    def sort_key(self, job: Job, now: float) -> tuple[float, ...]:
        """Smaller runs first; ties keep submission order."""

    def order_key(self, now: float) -> Callable[[Job], Any]:
        """A one-argument key that orders jobs exactly as :meth:`sort_key` at ``now`` does
        (ties too: the sort is stable). A policy may give one that is cheaper to call: the
        sort runs over every active job at every decision, thousands on a full cluster."""
        return lambda job: self.sort_key(job, now)

    def key_figures(self, job: Job, now: float) -> dict[str, float | int | str]:
        """The sort key in words, for the job's reason (each policy names its own)."""
        return {"sort_key": str(self.sort_key(job, now))}

    def schedule(self, state: ClusterState, now: float) -> Plan:
        jobs = sorted(state.active_jobs(), key=self.order_key(now))
        picks = greedy_walk(jobs, capacity_by_type(state), held_types(state))
        assignments = place(state, picks)

        def explain() -> dict[str, Reason]:
            # the walk gives GPUs in this order: a job waits because those before it took them
            return {j.id: Reason(f"{self.name}.position",
                                 {"position": rank + 1, "of": len(jobs),
                                  **self.key_figures(j, now)})
                    for rank, j in enumerate(jobs)}

        return Plan(assignments=assignments,
                    priorities={j.id: -float(rank) for rank, j in enumerate(jobs)},
                    reason=f"{self.name}: {len(assignments)} jobs in order", explain=explain)


def best_rate(job: Job) -> float:
    """The job's fastest known rate on its gang size: the optimistic remaining-time basis."""
    return max((r for (_, n), r in job.throughput.rates.items() if n == job.gpus), default=0.0)

"""Job history that outlives the resource manager's memory of a job.

Slurm restarts a requeued job's clock and resets its submit time to the requeue; the daemon's
store keeps the first submit time and accumulates the time each job held GPUs (or waited)
between the snapshots it saw, so that policies see the job's whole history (a preempted job
would otherwise lose its place in FIFO/LAS order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufair.model import ClusterState, JobState
from gpufair.model.records import job_replaced


def merge_history(state: ClusterState, history: Mapping[str, Mapping[str, Any]]
                  ) -> tuple[ClusterState, list[dict[str, Any]]]:
    """The state with arrival and attained service from ``history``, and the rows to store."""
    now = state.time_s
    jobs = []
    rows = []
    for job in state.jobs:
        old = history.get(job.id)
        attained = old["attained_s"] if old else 0.0
        waiting = old["waiting_s"] if old else 0.0
        since = old["last_seen"] if old else now
        if job.state is JobState.RUNNING:
            began = job.start_s if job.start_s is not None else now
            attained += max(0.0, now - max(since, began)) if old else job.attained_s
        elif job.state is JobState.PENDING:
            waiting += max(0.0, now - since) if old else max(0.0, now - job.arrival_s)
        arrival = job.arrival_s
        if old and old.get("arrival_s") is not None:
            arrival = min(arrival, old["arrival_s"])
        jobs.append(job_replaced(job, attained_s=attained, arrival_s=arrival))
        rows.append({"job_id": job.id, "tenant": job.tenant, "arrival_s": arrival,
                     "first_seen": old["first_seen"] if old else now,
                     "state": job.state.value, "attained_s": attained, "waiting_s": waiting,
                     "restarts": job.restarts, "last_seen": now,
                     "finished_at": now if not job.state.active and not (
                         old and old["finished_at"]) else (old or {}).get("finished_at"),
                     "exit_code": None})
    return state.with_jobs(jobs), rows


def rho_estimates(state: ClusterState) -> dict[str, float]:
    """Time in the system over GPU time received, for active jobs that have run."""
    out = {}
    for job in state.active_jobs():
        if job.attained_s > 0:
            out[job.id] = max(1.0, (state.time_s - job.arrival_s) / job.attained_s)
    return out

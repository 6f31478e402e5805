"""Model actions → Slurm verbs. Pure: a list of (verb, job id, fields) steps per action.

Hard mode starts a held job by pinning it to the planned nodes (``NodeList``, ``NumNodes`` and
the GPU count per node in the field the job was submitted with, because 22.05 refuses to mix
``TresPerNode`` and ``TresPerJob``), making it eligible at once (``StartTime=now``: a requeued
job otherwise waits ~120 s in ``BeginTime``) and releasing it. Preemption requeues *held*
(``requeuehold``) so Slurm cannot restart the job on its own; the grace signal is sent before,
by the adapter, for all victims of a round at once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufair.adapters.slurm.translate import SlurmJobInfo
from gpufair.model import (
    Action,
    Job,
    JobState,
    Migrate,
    Preempt,
    PreemptMode,
    Resize,
    Resume,
    SetPriority,
    Start,
    node_of,
)

#: Slurm's priority is a 32-bit unsigned; gpufair's ranks map into [1, PRIORITY_TOP]
PRIORITY_TOP = 1_000_000


@dataclass(frozen=True, slots=True)
class Step:
    verb: str
    job_id: str
    fields: tuple[tuple[str, str], ...] = ()

    def as_fields(self) -> dict[str, str]:
        return dict(self.fields)


class NotExpressible(ValueError):
    """The action cannot be said to Slurm (e.g. an uneven split of a gang over nodes)."""


def placement_fields(job: SlurmJobInfo, gpu_ids: tuple[str, ...]) -> dict[str, str]:
    per_node: OrderedDict[str, int] = OrderedDict()
    for gpu in gpu_ids:
        per_node[node_of(gpu)] = per_node.get(node_of(gpu), 0) + 1
    if not per_node:
        raise NotExpressible("no GPUs given")
    counts = set(per_node.values())
    if job.gres_field == "TresPerNode" and len(counts) != 1:
        raise NotExpressible(f"uneven GPUs per node {dict(per_node)}: TresPerNode cannot "
                             "express it")
    typed = f"{job.gpu_type}:" if job.gpu_type else ""
    if job.gres_field == "TresPerJob":
        gres = f"gres:gpu:{typed}{len(gpu_ids)}"
    else:
        gres = f"gres:gpu:{typed}{counts.pop()}"
    return {"NodeList": ",".join(per_node), "NumNodes": str(len(per_node)),
            job.gres_field: gres}


def steps_for(action: Action, job: SlurmJobInfo, *, hard: bool) -> list[Step]:
    """The Slurm steps of one action, in order. Raises NotExpressible when impossible."""
    # an array task is named A_T. A pending array record is the job A_T of one task of it:
    # a start acts on that task alone (the update splits it out of the record; the other
    # tasks stay held), a hold or a priority on the whole record
    jid, record = job.control_id, job.record_id
    if isinstance(action, Start):
        fields = placement_fields(job, action.gpu_ids) if hard else {}
        fields["StartTime"] = "now"
        steps = [Step("update", jid, tuple(fields.items()))]
        if hard:
            steps.append(Step("verify-pinned", jid, (("NodeList", fields["NodeList"]),)))
        if job.held:
            steps += [Step("release", jid), Step("verify-released", jid)]
        return steps
    if isinstance(action, Resume):
        return [Step("resume", jid)]
    if isinstance(action, Preempt):
        if hard and starting(job):
            # released, not started yet (the model shows it running): taken back by a hold
            return [Step("uhold", record), Step("verify-held", record)]
        if action.mode is PreemptMode.SUSPEND:
            return [Step("suspend", jid)]
        return [Step("requeuehold" if hard else "requeue", jid), Step("verify-requeued", jid)]
    if isinstance(action, (Resize, Migrate)):
        # a running job cannot grow or move in 22.05: restart it (from its checkpoint) there
        fields = placement_fields(job, action.gpu_ids)
        fields["StartTime"] = "now"
        # one not started yet is held, pinned anew and released again: nothing to requeue
        if hard and starting(job):
            stop = [Step("uhold", record), Step("verify-held", record)]
        else:
            stop = [Step("requeuehold", jid), Step("await-pending", jid)]
        return [*stop, Step("update", jid, tuple(fields.items())),
                Step("verify-pinned", jid, (("NodeList", fields["NodeList"]),)),
                Step("release", jid), Step("verify-released", jid)]
    if isinstance(action, SetPriority):
        value = max(1, min(PRIORITY_TOP, round(action.priority)))
        return [Step("update", record, (("Priority", str(value)),))]
    raise NotExpressible(f"unknown action {type(action).__name__}")


def starting(job: SlurmJobInfo) -> bool:
    """A managed job gpufair released that Slurm has not started yet (pending, not held)."""
    return job.managed and job.raw_state == "PENDING" and not job.held


def precondition(action: Action, job: Job, fresh: Mapping[str, Any] | None) -> str | None:
    """Why ``action`` must not be carried out on the job as Slurm shows it right now, or None.

    The plan was made on a snapshot; between it and the action the job may have finished,
    been requeued, or restarted. Acting on it then would re-run a finished job (a requeue of a
    COMPLETED job runs it again) or preempt the wrong incarnation. So each action is checked
    against a fresh read: the same state, the same restart count, the same start time.
    """
    if fresh is None:
        return "the job is no longer in Slurm"
    state = str(fresh.get("job_state") or "?").upper()
    restarts = fresh.get("restart_cnt")
    if isinstance(restarts, int) and restarts != job.restarts:
        return f"the job restarted since the snapshot (restart {restarts}, not {job.restarts})"
    if isinstance(action, (Preempt, Migrate, Resize)) and job.state is JobState.PENDING:
        if state != "PENDING" or fresh.get("priority") == 0:
            return f"the job is {state}, no longer starting"
    elif isinstance(action, (Preempt, Migrate, Resize)):
        if state != "RUNNING":
            return f"the job is {state}, not RUNNING"
        started = fresh.get("start_time")
        if (job.start_s is not None and isinstance(started, (int, float))
                and abs(float(started) - job.start_s) > 1.0):
            return "the job started again since the snapshot"
    elif isinstance(action, (Start, SetPriority)):
        if state != "PENDING":
            return f"the job is {state}, not PENDING" + (
                " (a requeue still settling; planned again next round)"
                if state == "COMPLETING" else "")
    elif isinstance(action, Resume) and state != "SUSPENDED":
        return f"the job is {state}, not SUSPENDED"
    return None

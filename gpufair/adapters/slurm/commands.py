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
from dataclasses import dataclass

from gpufair.adapters.slurm.translate import SlurmJobInfo
from gpufair.model import (
    Action,
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
    jid = job.job_id
    if isinstance(action, Start):
        fields = placement_fields(job, action.gpu_ids) if hard else {}
        fields["StartTime"] = "now"
        steps = [Step("update", jid, tuple(fields.items()))]
        if job.held:
            steps.append(Step("release", jid))
        return steps
    if isinstance(action, Resume):
        return [Step("resume", jid)]
    if isinstance(action, Preempt):
        if action.mode is PreemptMode.SUSPEND:
            return [Step("suspend", jid)]
        return [Step("requeuehold" if hard else "requeue", jid)]
    if isinstance(action, (Resize, Migrate)):
        # a running job cannot grow or move in 22.05: restart it (from its checkpoint) there
        fields = placement_fields(job, action.gpu_ids)
        fields["StartTime"] = "now"
        return [Step("requeuehold", jid), Step("await-pending", jid),
                Step("update", jid, tuple(fields.items())), Step("release", jid)]
    if isinstance(action, SetPriority):
        value = max(1, min(PRIORITY_TOP, round(action.priority)))
        return [Step("update", jid, (("Priority", str(value)),))]
    raise NotExpressible(f"unknown action {type(action).__name__}")


def slurm_priorities(priorities: dict[str, float]) -> dict[str, int]:
    """Plan priorities (any scale, higher first) → distinct Slurm priorities by rank."""
    ordered = sorted(priorities.items(), key=lambda kv: (-kv[1], int(kv[0])
                                                         if kv[0].isdigit() else 0, kv[0]))
    return {job_id: PRIORITY_TOP - rank for rank, (job_id, _) in enumerate(ordered)}

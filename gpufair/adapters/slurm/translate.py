"""Slurm's JSON (``squeue --json`` / ``sinfo --json`` or slurmrestd v0.0.37-38) → cluster model.

The translation is pure (documents in, state out) so it is tested on the real samples and on
broken variants without a cluster. Bad records are *reported* naming the job or node and
skipped; a record that cannot be read but holds GPUs would leave those GPUs looking free, so
its nodes are marked drained in the state rather than offered to the policy (an action must
never come from a half-read cluster).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpufair.adapters.slurm.gres import parse_gpu_entries
from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.model import ClusterState, GpuType, Job, JobState, Node, NodeState, Tenant, gpu_id

#: Slurm job states → model states; None: holds resources but is in transition (see below).
JOB_STATES: dict[str, JobState | None] = {
    "PENDING": JobState.PENDING, "REQUEUED": JobState.PENDING, "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING, "RESV_DEL_HOLD": JobState.PENDING,
    "RUNNING": JobState.RUNNING, "CONFIGURING": JobState.RUNNING, "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING, "STAGE_OUT": JobState.RUNNING,
    "SUSPENDED": JobState.SUSPENDED, "STOPPED": JobState.SUSPENDED,
    "COMPLETED": JobState.COMPLETED,
    "CANCELLED": JobState.CANCELLED, "DEADLINE": JobState.CANCELLED,
    "FAILED": JobState.FAILED, "TIMEOUT": JobState.FAILED, "NODE_FAIL": JobState.FAILED,
    "PREEMPTED": JobState.FAILED, "BOOT_FAIL": JobState.FAILED, "OUT_OF_MEMORY": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    # COMPLETING: processes are being killed (also right after a requeue); the GPUs are not
    # free yet and the job cannot be started again until it is plain PENDING.
    "COMPLETING": None,
}
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin", "job requeued in held state"})
MANAGED_MARK = "gpufair:managed"
_U32 = 1 << 32


@dataclass(frozen=True, slots=True)
class SlurmJobInfo:
    """What the actions need beyond the model: how the job asks for GPUs, hold, partition."""

    job_id: str
    raw_state: str
    partition: str
    reason: str
    held: bool
    managed: bool
    priority: float | None
    nice: int
    gres_field: str            # "TresPerNode" or "TresPerJob": the one the job was given
    gpu_type: str | None       # the type the job asked for, None if untyped
    nodes: tuple[str, ...]
    node_count: int
    pinned: tuple[str, ...] = ()   # ReqNodeList: where a released hard-mode job will start


@dataclass(frozen=True)
class SlurmView:
    state: ClusterState
    jobs: Mapping[str, SlurmJobInfo] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    #: jobs in COMPLETING (GPUs still busy); their nodes are reported as not usable this round
    settling: tuple[str, ...] = ()


def fix_nice(value: Any) -> int:
    """22.05 prints nice 0 as null and negative nice as unsigned 32-bit (-20 → 4294967276)."""
    if value is None:
        return 0
    nice = int(value)
    return nice - _U32 if nice >= 1 << 31 else nice


def _number(value: Any) -> float | None:
    # v0.0.38 prints plain numbers; later versions wrap them as {"set":..,"number":..}
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _state_name(value: Any) -> str:
    if isinstance(value, list):  # newer openapi versions: a list of flags
        value = value[0] if value else ""
    return str(value or "").upper()


def translate(jobs_doc: Mapping[str, Any], nodes_doc: Mapping[str, Any], *, now: float,
              managed_partitions: Sequence[str] = (), source: str = "slurm") -> SlurmView:
    """Build the model from one jobs document and one nodes document read back to back."""
    problems: list[str] = []
    managed = set(managed_partitions)
    nodes, node_types = _nodes(nodes_doc, managed, problems, source)
    known = {n.name for n in nodes}
    jobs: list[Job] = []
    infos: dict[str, SlurmJobInfo] = {}
    blocked: set[str] = set()
    settling: list[str] = []
    for i, raw in enumerate(sorted(jobs_doc.get("jobs") or (), key=_submission_order)):
        where = f"{source}: job {raw.get('job_id', f'#{i}')}" if isinstance(raw, Mapping) \
            else f"{source}: job #{i}"
        try:
            parsed = _job(raw, node_types, now, managed)
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"{where}: skipped: {_describe(exc)}")
            blocked.update(_nodes_of_raw(raw))
            continue
        if parsed is None:
            continue
        job, info = parsed
        if info.raw_state == "COMPLETING":
            settling.append(job.id)
            blocked.update(info.nodes)
            continue
        if any(n not in known for n in info.nodes) and job.gpus_held:
            problems.append(f"{where}: runs on nodes outside the managed set "
                            f"({', '.join(info.nodes)}); its GPUs there stay blocked")
        jobs.append(job)
        infos[job.id] = info
    nodes = block_nodes(nodes, blocked)
    tenants = sorted({j.tenant for j in jobs})
    types = sorted({n.gpu_type for n in nodes})
    state = ClusterState(time_s=now, nodes=tuple(nodes), jobs=tuple(jobs),
                         tenants=tuple(Tenant(t) for t in tenants),
                         gpu_types=tuple(GpuType(t) for t in types))
    return SlurmView(state, infos, tuple(problems), tuple(settling))


def block_nodes(nodes: Sequence[Node], blocked: set[str]) -> list[Node]:
    """Mark nodes whose GPUs are in transition (or unreadable) as drained for one round."""
    return [replace(n, state=NodeState.DRAIN)
            if n.name in blocked and n.state is NodeState.UP else n for n in nodes]


def _submission_order(raw: Any) -> tuple[int, str]:
    """squeue lists jobs in no documented order; the model wants submission (job id) order."""
    job_id = raw.get("job_id") if isinstance(raw, Mapping) else None
    return (job_id, "") if isinstance(job_id, int) else (1 << 62, str(job_id))


def _describe(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc)


def _nodes_of_raw(raw: Any) -> list[str]:
    try:
        return expand_hostlist(str(raw.get("nodes") or ""))
    except (AttributeError, ValueError):
        return []


def _nodes(doc: Mapping[str, Any], managed: set[str], problems: list[str], source: str
           ) -> tuple[list[Node], dict[str, str]]:
    nodes: list[Node] = []
    types: dict[str, str] = {}
    for i, raw in enumerate(doc.get("nodes") or ()):
        name = raw.get("name") if isinstance(raw, Mapping) else None
        where = f"{source}: node {name or f'#{i}'}"
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: skipped: missing field 'name'")
            continue
        if managed and not managed.intersection(raw.get("partitions") or ()):
            continue
        try:
            entries = parse_gpu_entries(raw.get("gres"))
        except ValueError as exc:
            problems.append(f"{where}: skipped: {exc}")
            continue
        if not entries:
            continue  # no GPUs: nothing for gpufair to schedule there
        gpu_type = entries[0].gpu_type or "gpu"
        if len({e.gpu_type for e in entries}) > 1:
            problems.append(f"{where}: several GPU types ({raw.get('gres')}); "
                            f"scheduling it as {gpu_type} only")
            entries = [e for e in entries if (e.gpu_type or "gpu") == gpu_type]
        types[name] = gpu_type
        nodes.append(Node(name, gpu_type, sum(e.count for e in entries),
                          state=_node_state(raw, where, problems)))
    return nodes, types


def _node_state(raw: Mapping[str, Any], where: str, problems: list[str]) -> NodeState:
    flags = {str(f).upper() for f in raw.get("state_flags") or ()}
    base = _state_name(raw.get("state")).lower()
    if base in ("down", "unknown", "future") or "NOT_RESPONDING" in flags:
        return NodeState.DOWN
    if flags & {"DRAIN", "DRAINING", "DRAINED", "FAIL", "MAINTENANCE", "REBOOT_REQUESTED"} or \
            base in ("drain", "drained", "draining", "fail", "error"):
        return NodeState.DRAIN
    if base not in ("idle", "mixed", "allocated", "completing", "planned", "reserved"):
        problems.append(f"{where}: unknown node state {raw.get('state')!r}; not scheduled")
        return NodeState.DOWN
    return NodeState.UP


def _job(raw: Mapping[str, Any], node_types: Mapping[str, str], now: float, managed: set[str]
         ) -> tuple[Job, SlurmJobInfo] | None:
    job_id = str(int(raw["job_id"]))
    raw_state = _state_name(raw["job_state"])
    if raw_state not in JOB_STATES:
        raise ValueError(f"unknown job state {raw['job_state']!r}")
    partition = str(raw.get("partition") or "")
    if managed and not managed.intersection(partition.split(",")):
        return None
    nodes = tuple(expand_hostlist(str(raw.get("nodes") or "")))
    request_field, asked, asked_type = _gpu_request(raw)
    held_gpus = _held(job_id, raw, nodes, node_types) if nodes else ()
    gpus = len(held_gpus) if held_gpus else asked
    if gpus <= 0:
        return None  # not a GPU job
    state = JOB_STATES[raw_state]
    submit = _number(raw.get("submit_time")) or 0.0
    start = _number(raw.get("start_time"))
    running = state in (JobState.RUNNING, JobState.SUSPENDED)
    attained = 0.0
    if state is JobState.RUNNING and start:
        suspended = _number(raw.get("suspend_time")) or 0.0
        attained = max(0.0, now - max(start, suspended if suspended > start else start))
    array_id = int(_number(raw.get("array_job_id")) or 0)
    account = str(raw.get("account") or "")
    tenant = account or str(raw.get("user_name") or raw.get("user_id") or "default")
    reason = str(raw.get("state_reason") or "")
    job = Job(
        id=job_id, tenant=tenant, app=str(array_id) if array_id else None, gpus=gpus,
        state=state if state is not None else JobState.RUNNING, arrival_s=submit,
        start_s=start if running else None, attained_s=attained,
        restarts=int(_number(raw.get("restart_cnt")) or 0),
        gpus_held=held_gpus if running else (),
        log_path=str(raw.get("standard_output") or "") or None,
    )
    info = SlurmJobInfo(
        job_id=job_id, raw_state=raw_state, partition=partition, reason=reason,
        held=reason in HELD_REASONS or (raw_state == "PENDING" and _number(raw.get("priority"))
                                          == 0),
        managed=MANAGED_MARK in str(raw.get("admin_comment") or ""),
        priority=_number(raw.get("priority")), nice=fix_nice(raw.get("nice")),
        gres_field=request_field, gpu_type=asked_type, nodes=nodes,
        node_count=int(_number(raw.get("node_count")) or max(1, len(nodes))),
        pinned=tuple(expand_hostlist(str(raw.get("required_nodes") or ""))),
    )
    return job, info


def _gpu_request(raw: Mapping[str, Any]) -> tuple[str, int, str | None]:
    """Which field asked for GPUs, the total asked and its type (None if untyped)."""
    per_node = parse_gpu_entries(raw.get("tres_per_node") or "")
    if per_node:
        count = int(_number(raw.get("node_count")) or 1)
        return "TresPerNode", sum(e.count for e in per_node) * count, per_node[0].gpu_type
    per_job = parse_gpu_entries(raw.get("tres_per_job") or "")
    if per_job:
        return "TresPerJob", sum(e.count for e in per_job), per_job[0].gpu_type
    return "TresPerNode", 0, None


def _held(job_id: str, raw: Mapping[str, Any], nodes: Sequence[str],
          node_types: Mapping[str, str]) -> tuple[str, ...]:
    """GPU ids from ``gres_detail`` (one entry per allocated node, in host-list order)."""
    detail = raw.get("gres_detail") or []
    if not detail:
        return ()
    if len(detail) != len(nodes):
        raise ValueError(f"gres_detail has {len(detail)} entries for {len(nodes)} nodes")
    gpus: list[str] = []
    for node, text in zip(nodes, detail, strict=True):
        for entry in parse_gpu_entries(text):
            if entry.indices is None:
                raise ValueError(f"no GPU indices in gres_detail {text!r}")
            gpus.extend(gpu_id(node, i) for i in entry.indices)
    return tuple(gpus)

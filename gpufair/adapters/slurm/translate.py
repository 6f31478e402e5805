"""Slurm's JSON (``squeue --json`` / ``sinfo --json`` or slurmrestd v0.0.37-38) → cluster model.

The translation is pure (documents in, state out) so it is tested on the real samples and on
broken variants without a cluster. Every record is read on its own: a job or node record that
is malformed in any way (a missing or odd-typed field, a number out of range, a nested value
where text belongs, an unreadable GRES string) is *reported* naming the job or node and what
was wrong, and skipped; the other records go on. A record that cannot be read but holds GPUs
would leave those GPUs looking free, so its nodes are marked drained in the state rather than
offered to the policy (an action must never come from a half-read cluster). The same holds
for records that contradict each other (one job id twice, one GPU held by two jobs, a GPU
index the node does not have): all records involved are skipped and their nodes held back.

Absent or null optional fields take Slurm's defaults (versions differ in which keys they
print); a field that is present with the wrong type or an impossible value makes the record
malformed. Text read from Slurm may hold anything a user typed (control characters, the
U+FFFD the transport put for bytes that were not UTF-8); it is kept as text, and lone
surrogates (only a hand-made document can carry them) become U+FFFD so everything downstream
encodes as UTF-8.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from itertools import filterfalse
from typing import Any

from gpufair.adapters.slurm.arrays import parse_task_list
from gpufair.adapters.slurm.gres import parse_gpu_entries
from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.record_cache import RecordCache
from gpufair.errors import json_kind
from gpufair.model import (
    ClusterState,
    GpuType,
    HostRequest,
    Job,
    JobState,
    Node,
    NodeState,
    Progress,
    Tenant,
    ThroughputProfile,
    gpu_id,
    node_of,
)
from gpufair.model.records import job_replaced

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
#: Where gpufair's one-line reason starts in a managed job's admin comment (docs/explain.md):
#: ``gpufair:managed [nodelist=...] [gpufair:ownerhold=N] | gpufair 12:02: waiting — ...``.
#: Only the words before it are marks; the reason after it is never read as one.
REASON_SEP = " | "


def admin_marks(admin_comment: str) -> str:
    """The marks part of an admin comment: what job_submit.lua and gpufair's notes wrote,
    without the reason shown after :data:`REASON_SEP` (whose words come from job and tenant
    names, and so must never pass for a mark)."""
    return admin_comment.split(REASON_SEP, 1)[0]
#: The owner's own hold of a managed job (``sbatch --hold``, ``scontrol hold``), a word of the
#: job's comment that job_submit.lua keeps (the admin comment cannot hold it: Slurm refuses a
#: user's update that changes it, even when the lua does). The owner's ``scontrol release``
#: only takes the word out; the job stays held, and only then is it gpufair's to start.
USER_HOLD_MARK = "gpufair:userhold"
#: Slurm's longest comment (bytes). When the owner's comment leaves no room for the mark,
#: job_submit.lua keeps it in the admin comment, where it counts only while there is no room
#: (see :func:`user_held`)
COMMENT_MAX = 1024
_MARK_WORD = re.compile(r"(?<=\s)" + re.escape(USER_HOLD_MARK) + r"(?=\s)")
#: An elastic job says so in its --comment: ``gpufair:gpus=MIN-MAX`` (one word); it is then
#: scheduled with any GPU count from MIN to MAX (AFS), and resized by requeue + update.
ELASTIC_MARK = "gpufair:gpus="
_ELASTIC = re.compile(r"^([0-9]{1,7})-([0-9]{1,7})$")
_U32 = 1 << 32
_MAX_U32 = _U32 - 1
#: Bounds of a sane record (Slurm's ids and counters are 32-bit; times are epoch seconds).
_MAX_TIME = float(1 << 40)          # year 36812: beyond any "start in a year" estimate
_MAX_JOB_GPUS = 1 << 20
_MAX_NODE_GPUS = 1 << 12
_MAX_MEMORY_MB = 1 << 40           # a petabyte of memory in one node or one job
_MAX_NAMES = 1 << 16                # names one host list or GPU index list may expand to
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_RANGES = re.compile(r"(\d+)-(\d+)")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")


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
    description: str = ""          # state_description: e.g. "job requeued in held state"
    admin_comment: str = ""        # job_submit.lua's mark, and what gpufair noted there
    #: how scontrol names the job when not by ``job_id``: an array task is ``A_T`` (the
    #: array's own record by its number ``A`` is every task of the array to scontrol, and
    #: scancel does not find a task by its own job id)
    control: str = ""
    #: the record a pending array record's job ``A_T`` stands in (see :func:`_job`): ``A``
    record: str = ""
    #: when it became eligible (for a job gpufair released: the release, ``StartTime=now``)
    #: and when Slurm's scheduler last looked at it (epoch seconds; 0 when not shown)
    eligible_s: float = 0.0
    evaluated_s: float = 0.0
    #: who Slurm's association and QOS limits count it for: (account, user name, uid,
    #: partition, QOS), see :mod:`gpufair.adapters.slurm.limits`
    counted_as: tuple[str, str, int | None, str, str] = ("", "", None, "", "")
    #: its TRES request as Slurm counts it against those limits (``tres_req_str``)
    tres_req: str = ""

    @property
    def control_id(self) -> str:
        """The id the job's own actions (start, requeue, signal) are carried out on."""
        return self.control or self.job_id

    @property
    def record_id(self) -> str:
        """The id that acts on the whole record (a hold, a priority)."""
        return self.record or self.control_id


@dataclass(frozen=True)
class SlurmView:
    state: ClusterState
    jobs: Mapping[str, SlurmJobInfo] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    #: jobs in COMPLETING (GPUs still busy); their nodes are reported as not usable this round
    settling: tuple[str, ...] = ()
    #: pending jobs that may not start yet (their owner's hold, a dependency), with why: not
    #: in the state (no demand to serve), shown by the dry run so nobody has to guess
    waiting: tuple[tuple[Job, str], ...] = ()
    #: nodes Slurm shows up that ``state`` shows drained for this round: their GPUs are in
    #: transition or cannot be told. Any other node not up there is Slurm's own word (down,
    #: drained by an admin): Slurm starts nothing on it until it is back
    held_back: frozenset[str] = frozenset()
    #: those of ``held_back`` whose only reason is a job settling there: up again in seconds,
    #: and their GPUs are known (the settling job's are free once it is gone)
    settling_nodes: frozenset[str] = frozenset()
    #: waiting jobs whose dependency can never be met any more (a parent of ``afterok`` that
    #: failed, ...), by the id that cancels them alone: their own word on it
    #: (``--kill-on-invalid-dep=yes`` True, ``=no`` False, neither None: the cluster's
    #: ``kill_invalid_depend``) and the dependency as read. Slurm re-checks no held job's
    #: dependencies, and gpufair holds them all: it carries out that rule itself
    #: (``SlurmAdapter.reconcile``)
    never_met: Mapping[str, tuple[bool | None, str]] = field(default_factory=dict)


class Malformed(ValueError):
    """A record (or one field of it) is not what Slurm prints."""


def fix_nice(value: Any) -> int:
    """22.05 prints nice 0 as null and negative nice as unsigned 32-bit (-20 → 4294967276)."""
    number = _as_number(value, "nice", -(1 << 31), _MAX_U32, integral=True)
    if number is None:
        return 0
    nice = int(number)
    return nice - _U32 if nice >= 1 << 31 else nice


# ---- reading one field --------------------------------------------------------------------

def _as_number(value: Any, key: str, lo: float, hi: float, *, integral: bool = False
               ) -> float | None:
    """A number field: None when absent or unset; raises :class:`Malformed` otherwise."""
    if type(value) is int and lo <= value <= hi:   # most fields: checked without the ABCs
        return float(value)                        # (floats hold these ints exactly)
    if isinstance(value, Mapping):  # later openapi versions: {"set":..,"infinite":..,"number":..}
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed(f"field {key!r} is {json_kind(value)}, not a number: {_show(value)}")
    if isinstance(value, int) and not lo <= value <= hi:   # before float(): no OverflowError
        raise Malformed(f"field {key!r} out of range: {_show(value)}")
    number = float(value)
    if not math.isfinite(number) or not lo <= number <= hi:
        raise Malformed(f"field {key!r} out of range: {_show(value)}")
    if integral and not number.is_integer():
        raise Malformed(f"field {key!r} is not a whole number: {_show(value)}")
    return number


def _num(raw: Mapping[str, Any], key: str, lo: float = 0.0, hi: float = _MAX_TIME
         ) -> float | None:
    return _as_number(raw.get(key), key, lo, hi)


def _int(raw: Mapping[str, Any], key: str, hi: int = _MAX_U32) -> int | None:
    number = _as_number(raw.get(key), key, 0, hi, integral=True)
    return None if number is None else int(number)


def _text(raw: Mapping[str, Any], key: str) -> str:
    """A text field ("" when absent or null)."""
    value = raw.get(key)
    if type(value) is str and value.isascii():   # most fields: no more checks needed
        return value
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Malformed(f"field {key!r} is {json_kind(value)}, not text: {_show(value)}")
    return clean_text(value)


def clean_text(text: str) -> str:
    """``text`` with lone surrogates as U+FFFD: it then always encodes as UTF-8."""
    if text.isascii():   # most fields, and no surrogate is ASCII: no regex pass needed
        return text
    return _SURROGATES.sub("\ufffd", text)


def _state_name(value: Any, key: str = "state") -> str:
    if isinstance(value, list):  # newer openapi versions: a list of flags
        value = value[0] if value else ""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Malformed(f"field {key!r} is {json_kind(value)}, not a state name: {_show(value)}")
    return value.upper()


def _bounded(text: str, what: str) -> str:
    """Refuse strings whose ranges would expand to absurdly many names or indices."""
    total = 0
    for match in _RANGES.finditer(text):
        lo, hi = match.group(1), match.group(2)
        if len(hi) > 9:
            raise Malformed(f"{what} {_show(text)}: range {_show(match.group(0))} too large")
        total += max(0, int(hi) - int(lo)) + 1
        if total > _MAX_NAMES:
            raise Malformed(f"{what} {_show(text)}: more than {_MAX_NAMES} names")
    return text


def _hostlist(raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    text = _text(raw, key)
    return tuple(expand_hostlist(_bounded(text, f"host list {key!r}"))) if text else ()


def _show(value: Any, limit: int = 60) -> str:
    """A short printable form of any value for a problem message (never raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        return f"<{value.bit_length()}-bit integer>"
    if isinstance(value, str):
        text = repr(clean_text(value[:limit]))
        return text + ("…" if len(value) > limit else "")
    if isinstance(value, (Mapping, list, tuple)):
        return f"<{json_kind(value)} of {len(value)}>"
    try:
        text = repr(value)
    except Exception:  # any value at all must be describable
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "…"


def _job_id(value: Any) -> str:
    """Slurm job ids are positive 32-bit numbers (some tools print them as digit strings)."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,10}", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_U32:
        raise Malformed(f"field 'job_id' is not a job id: {_show(value)}")
    return str(value)


# ---- the translation ----------------------------------------------------------------------

@dataclass
class _Parsed:
    index: int
    raw: Any
    where: str
    job: Job
    info: SlurmJobInfo
    order: tuple[int, int, str] = (0, 0, "")


def translate(jobs_doc: Mapping[str, Any], nodes_doc: Mapping[str, Any], *, now: float,
              managed_partitions: Sequence[str] = (), source: str = "slurm",
              cache: RecordCache | None = None) -> SlurmView:
    """Build the model from one jobs document and one nodes document read back to back.

    Never raises on the content of the documents: whatever cannot be read is in
    ``problems``, naming the job or node and what was wrong. ``cache`` (the adapter's, kept
    across reads) spares translating again the job records that did not change.
    """
    problems: list[str] = []
    managed = set(managed_partitions)
    nodes, hosts, unreadable = _nodes(nodes_doc, managed, problems, source)
    site = _site(nodes_doc, {n.name for n in nodes})
    known = {n.name: n for n in nodes}
    blocked: set[str] = set()
    records = _records(jobs_doc, "jobs")
    if records is None:
        problems.append(f"{source}: the jobs document has no 'jobs' list; every node is held "
                        f"back this round")
        blocked.update(known)
        records = []

    site = replace(site, job_states=_job_states(records), arrays=_array_load(records))
    capacity = sum(n.gpus for n in nodes)
    parsed: list[_Parsed] = []
    waiting: list[tuple[Job, str]] = []
    never_met: dict[str, tuple[bool | None, str]] = {}
    orders = [_submission_order(raw) for raw in records]
    if cache is not None:
        cache.begin((frozenset(managed), hosts))
    for i in sorted(range(len(records)), key=orders.__getitem__):
        raw = records[i]
        where = _where(source, raw, i)
        try:
            result = _job_of(raw, now, managed, hosts, cache)
            if result is None:
                continue
            _check_held(*result, known)
            result = (_elastic(result[0], raw, problems, where), result[1])
            try:
                result = (_constrain(result[0], raw, site, now), result[1])
            except NotRunnable as why:  # nothing wrong: it waits for its owner or a parent
                waiting.append((result[0], str(why)))
                if isinstance(why, NeverMet) and not result[1].record:
                    # (an array record is not cancelled by gpufair: its id is every task)
                    never_met[result[1].control_id] = (_kill_on_invalid_dep(raw),
                                                       _text(raw, "dependency"))
                continue
            except Unmodelled as why:   # not broken: just not for the policy to place
                problems.append(f"{where}: not scheduled by gpufair: {why}")
                continue
        except Exception as exc:  # one record must never stop a round
            held = _nodes_of_raw(raw)
            if held is None:   # it may hold GPUs anywhere: nothing may look free
                held = list(known)
                problems.append(f"{where}: skipped: {_describe(exc)}; its nodes cannot be "
                                f"told, so every node is held back this round")
            else:
                problems.append(f"{where}: skipped: {_describe(exc)}")
            blocked.update(held)
            continue
        for job, info in _array_tasks(*result, raw, site, capacity):
            order = orders[i]
            if info.record:   # a task of the record: at its place among its split-out peers
                order = (order[0], int(job.id.partition("_")[2]), "")
            parsed.append(_Parsed(i, raw, where, job, info, order))
    if cache is not None:
        cache.end()
    parsed.sort(key=lambda p: p.order)

    parsed = _drop_conflicts(parsed, problems, blocked)
    jobs: list[Job] = []
    infos: dict[str, SlurmJobInfo] = {}
    settling: list[str] = []
    settling_nodes: set[str] = set()
    for p in parsed:
        job, info = p.job, p.info
        if info.raw_state == "COMPLETING":
            settling.append(job.id)
            settling_nodes.update(info.nodes)
            continue
        if lost := sorted(unreadable.intersection(info.nodes)):
            # what it holds there cannot be told: no action on it, none on its GPUs
            problems.append(f"{p.where}: skipped: runs on node {', '.join(lost)} whose record "
                            "could not be read; left as it is, its nodes held back")
            blocked.update(info.nodes)
            continue
        if any(n not in known for n in info.nodes) and job.gpus_held:
            problems.append(f"{p.where}: runs on nodes outside the managed set "
                            f"({', '.join(info.nodes)}); its GPUs there stay blocked")
        jobs.append(job)
        infos[job.id] = info
    up = {n.name for n in nodes if n.state is NodeState.UP}
    nodes = _foreign_gpus(block_nodes(nodes, blocked | settling_nodes), jobs, site, problems,
                          source)
    tenants = sorted({j.tenant for j in jobs})
    types = sorted({n.gpu_type for n in nodes})
    state = ClusterState(time_s=now, nodes=tuple(nodes), jobs=tuple(jobs),
                         tenants=tuple(Tenant(t) for t in tenants),
                         gpu_types=tuple(GpuType(t) for t in types))
    return SlurmView(state, infos, tuple(problems), tuple(settling), tuple(waiting),
                     never_met=never_met,
                     held_back=frozenset(up & (blocked | settling_nodes)),
                     settling_nodes=frozenset((up & settling_nodes) - blocked))


@dataclass(frozen=True)
class _Site:
    """What sinfo says beyond the model: node features, partitions, GPUs in use."""

    features: Mapping[str, frozenset[str]]
    partitions: Mapping[str, frozenset[str]]    # partition → its GPU nodes
    used: Mapping[str, tuple[int, ...]]         # node → GPU indices in use by anybody
    #: node → (CPUs, memory MB) Slurm has allocated there to anybody
    allocated: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    job_states: Mapping[str, str] = field(default_factory=dict)   # for dependencies
    #: array job id → (its tasks running or released, its ``%N`` limit): see ``_array_load``
    arrays: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    #: (partitions, features, excluded nodes, own node list) → allowed nodes, filled as jobs
    #: are read (see ``_allowed_nodes``)
    allowed: dict[tuple[Any, ...], tuple[str, ...] | None] = field(default_factory=dict)
    #: (partitions, features) → their nodes (sorted, and as a set), None → every node
    bases: dict[tuple[Any, ...] | None, tuple[tuple[str, ...], frozenset[str]] | None] = \
        field(default_factory=dict)


def _site(doc: Mapping[str, Any], names: set[str]) -> _Site:
    features: dict[str, frozenset[str]] = {}
    partitions: dict[str, set[str]] = {}
    used: dict[str, tuple[int, ...]] = {}
    allocated: dict[str, tuple[int, int]] = {}
    for raw in _records(doc, "nodes") or ():
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            continue
        name = clean_text(raw["name"])
        if name not in names:
            continue
        text = raw.get("active_features") or raw.get("features") or ""
        # a list of names (newer versions' documents), or anything else (a damaged file):
        # no features, so no --constraint job is placed there (str() of a huge int raised)
        words = text.split(",") if isinstance(text, str) else \
            [w for w in text if isinstance(w, str)] if isinstance(text, list) else []
        features[name] = frozenset(f for f in words if f)
        for part in raw.get("partitions") or ():
            if isinstance(part, str):
                partitions.setdefault(part, set()).add(name)
        try:
            used[name] = tuple(i for e in parse_gpu_entries(_text(raw, "gres_used"))
                               for i in (e.indices or ()))
        except (ValueError, TypeError):
            used[name] = ()
        try:
            allocated[name] = (_int(raw, "alloc_cpus") or 0,
                               _int(raw, "alloc_memory", _MAX_MEMORY_MB) or 0)
        except Malformed:   # unknown: all of it, so that nothing is placed there on a guess
            allocated[name] = (_MAX_U32, _MAX_MEMORY_MB)
    return _Site(features, {p: frozenset(n) for p, n in partitions.items()}, used, allocated)


def gpu_use_disagrees(jobs_doc: Mapping[str, Any], nodes_doc: Mapping[str, Any]
                      ) -> list[str]:
    """Nodes where sinfo's GPUs in use are not the GPUs the jobs document's running jobs hold
    there (any partition; a node where a job is COMPLETING is left out: it is held back
    anyway, and sinfo frees its GPUs step by step).

    squeue and sinfo are two reads at two moments: a job that starts between them is
    pending in one and holds GPUs in the other, so its GPUs looked "used by jobs gpufair
    does not schedule", the jobs released there looked stranded and were held again, then
    released again (issue 29). The adapter reads both again while this says they differ.
    Whatever cannot be read here agrees: the translation reports it."""
    used: dict[str, set[int]] = {}
    completing: set[str] = set()
    for raw in _records(jobs_doc, "jobs") or ():
        try:
            state = _state_name(raw.get("job_state"), "job_state")
            if state not in _RUNS:
                continue
            nodes = _hostlist(raw, "nodes")
            if state == "COMPLETING":
                completing.update(nodes)
                continue
            for gpu in _held(raw, nodes):
                name, _, index = gpu.rpartition(":")
                used.setdefault(name, set()).add(int(index))
        except Exception:  # unreadable: the translation reports it
            continue
    differ = []
    for raw in _records(nodes_doc, "nodes") or ():
        try:
            name = raw["name"]
            said = {i for e in parse_gpu_entries(_text(raw, "gres_used"))
                    for i in (e.indices or ())}
        except Exception:  # unreadable: the translation reports it
            continue
        if name not in completing and said != used.get(name, set()):
            differ.append(name)
    return differ


def _job_states(records: Sequence[Any]) -> dict[str, str]:
    """Job id → Slurm state, of every record that has both (for dependencies)."""
    states = {}
    for raw in records:
        if isinstance(raw, Mapping) and isinstance(raw.get("job_state"), str):
            try:
                states[_job_id(raw.get("job_id"))] = raw["job_state"].upper()
            except Malformed:  # named by the translation of that record
                continue
    return states


def _array_load(records: Sequence[Any]) -> dict[int, tuple[int, int]]:
    """Array job id → (tasks running or released, the ``%N`` limit) of the arrays that have a
    limit. Slurm starts no task beyond it: a task released then would wait (reason
    JobArrayTaskLimit) where the model sees it start, its GPUs held for nothing. The limit is
    read from any record of the array (22.05 prints it on the pending array record)."""
    limits: dict[int, int] = {}
    load: Counter[int] = Counter()
    for raw in records:
        if not isinstance(raw, Mapping):
            continue
        array, limit = raw.get("array_job_id"), raw.get("array_max_tasks")
        if not isinstance(array, int) or isinstance(array, bool) or array <= 0:
            continue
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            limits[array] = max(limit, limits.get(array, 0))
        state = raw.get("job_state")
        state = state.upper() if isinstance(state, str) else ""
        released = state == "PENDING" and raw.get("array_task_id") is not None \
            and raw.get("priority") not in (0, None)
        if state in _RUNS or released:
            load[array] += 1
    return {a: (load[a], limit) for a, limit in limits.items()}


def _foreign_gpus(nodes: Sequence[Node], jobs: Sequence[Job], site: _Site,
                  problems: list[str], source: str) -> list[Node]:
    """GPUs Slurm shows in use that no job of the state holds belong to what gpufair does
    not schedule (jobs of other partitions, jobs it cannot see): never offered."""
    held: dict[str, set[int]] = {}
    for job in jobs:
        for gpu in job.gpus_held:
            name, _, index = gpu.rpartition(":")
            held.setdefault(name, set()).add(int(index))
    ours = _host_use(nodes, jobs)
    out = []
    for node in nodes:
        if node.state is not NodeState.UP:   # not offered anyway
            out.append(node)
            continue
        cpus, memory = site.allocated.get(node.name, (0, 0))
        mine = ours.get(node.name, (0, 0))
        node = replace(node, cpus_unavailable=max(0, cpus - mine[0]) if node.cpus else 0,
                       memory_unavailable_mb=max(0, memory - mine[1]) if node.memory_mb else 0)
        foreign = tuple(sorted(set(site.used.get(node.name, ())) - held.get(node.name, set())))
        foreign = tuple(i for i in foreign if i < node.gpus)
        if foreign:
            problems.append(f"{source}: node {node.name}: GPUs {list(foreign)} used by jobs "
                            "gpufair does not schedule; not offered")
            node = replace(node, unavailable=foreign)
        out.append(node)
    return out


def _host_use(nodes: Sequence[Node], jobs: Sequence[Job]) -> dict[str, tuple[int, int]]:
    """Node → (CPUs, memory MB) the jobs of the state hold there by their requests: what of
    Slurm's allocation there is theirs (the rest belongs to what gpufair does not schedule)."""
    known = {n.name: n for n in nodes}
    use: dict[str, tuple[int, int]] = {}
    for job in jobs:
        if job.host is None or not job.gpus_held:
            continue
        counts: dict[str, int] = {}
        for gpu in job.gpus_held:
            counts[node_of(gpu)] = counts.get(node_of(gpu), 0) + 1
        for name, count in counts.items():
            if name in known:
                cpus, memory = job.host.on_node(count, known[name])
                before = use.get(name, (0, 0))
                use[name] = (before[0] + cpus, before[1] + memory)
    return use


#: a --constraint gpufair can model: features joined by & or , (all of them)
_SIMPLE_FEATURES = re.compile(r"^[A-Za-z0-9_.\-]+([&,][A-Za-z0-9_.\-]+)*$")


class Unmodelled(ValueError):
    """The job asks something of its placement gpufair cannot express; it is left alone."""


class NotRunnable(Unmodelled):
    """The job may not start yet for a reason of its own (a dependency not met, its owner's
    hold): nothing to report, and no demand the policy should count or serve."""


class NeverMet(NotRunnable):
    """The job's dependency can never be met any more: Slurm alone would say
    DependencyNeverSatisfied, and cancel it if it asked (``--kill-on-invalid-dep=yes``)."""


def _kill_on_invalid_dep(raw: Mapping[str, Any]) -> bool | None:
    """The job's own ``--kill-on-invalid-dep``: yes True, no False, not given None."""
    flags = raw.get("flags")
    flags = set(flags) if isinstance(flags, list) else set()
    return True if "KILL_INV_DEP" in flags else False if "NO_KILL_INV_DEP" in flags else None


def user_held(raw: Mapping[str, Any]) -> bool:
    """Whether a managed job carries its owner's hold (``USER_HOLD_MARK``). Only job_submit.lua
    writes the word into a managed job's comment, and only the owner (or an operator) can
    change that comment; in a job the lua did not mark, the word means nothing. When the
    comment leaves no room for the word (Slurm's 1,024 bytes: an ``sbatch --hold`` with a
    1,008-byte comment was refused), the lua keeps it in the admin comment, which users
    cannot change: it counts there only while the comment still leaves no room (the owner
    shortens it to release the job, and the word then moves into it)."""
    if not _managed(raw):
        return False
    comment = _text(raw, "comment")
    return USER_HOLD_MARK in comment.split() or (
        USER_HOLD_MARK in _text(raw, "admin_comment").split() and not mark_fits(comment))


def mark_fits(comment: str) -> bool:
    """Whether the owner's hold mark fits in ``comment`` (as job_submit.lua counts: bytes of
    the comment without the mark, a space, the mark)."""
    text = _MARK_WORD.sub("", f" {comment} ").strip()
    return not text or len(text.encode("utf-8", "replace")) + 1 + len(USER_HOLD_MARK) \
        <= COMMENT_MAX


def held_by_gpufair(jobs_doc: Any) -> list[str]:
    """Ids of the waiting jobs that wait only for gpufair: marked by job_submit.lua, held,
    not held by their owner nor by an administrator. What an uninstall must release (hard
    mode holds every managed job, dependency waiters included); an owner's hold and an
    administrator's stay. A record that
    cannot be read is left alone (releasing a job on a guess is not undone)."""
    ids = []
    for raw in _records(jobs_doc, "jobs") or []:
        try:
            if not isinstance(raw, Mapping) or not _managed(raw) or user_held(raw) \
                    or _text(raw, "state_reason") == ADMIN_HOLD:
                continue
            job_id = raw.get("job_id")
            if _on_hold(_text(raw, "job_state"), _text(raw, "state_reason"),
                     _num(raw, "priority", 0.0, float(_MAX_U32))) \
                    and _text(raw, "job_state") == "PENDING" and isinstance(job_id, int):
                ids.append(_job_id(job_id))
        except Malformed:
            continue
    return ids


def _on_hold(raw_state: str, reason: str, priority: float | None) -> bool:
    """Held, by gpufair's job_submit.lua or anyone: a hold's reason, or waiting at priority 0."""
    return reason in HELD_REASONS or (raw_state == "PENDING" and priority == 0)


def _managed(raw: Mapping[str, Any]) -> bool:
    """Marked by job_submit.lua as gpufair's to start (users cannot change the mark)."""
    return MANAGED_MARK in admin_marks(_text(raw, "admin_comment"))


def _elastic(job: Job, raw: Mapping[str, Any], problems: list[str], where: str) -> Job:
    """min/max GPUs from ``gpufair:gpus=MIN-MAX`` in the job's comment. The comment is the
    user's: a word that is not a valid range is reported and the job stays rigid (it still
    runs, at the size it asked for), rather than being dropped or guessed at."""
    words = [w for w in _text(raw, "comment").split() if w.startswith(ELASTIC_MARK)]
    if not words:
        return job
    text = words[0][len(ELASTIC_MARK):]
    match = _ELASTIC.match(text)
    problem = None
    if len(words) > 1:
        problem = "gives gpufair:gpus= more than once"
    elif match is None:
        problem = "expects MIN-MAX (e.g. gpufair:gpus=1-8)"
    else:
        low, high = int(match.group(1)), int(match.group(2))
        if not 1 <= low <= high <= _MAX_JOB_GPUS:
            problem = f"needs 1 <= MIN <= MAX <= {_MAX_JOB_GPUS}"
        elif not low <= job.gpus <= high:
            problem = f"asks for {job.gpus} GPUs, outside {low}-{high}"
    if problem is not None:
        problems.append(f"{where}: comment {_show(words[0])} {problem}; scheduled as a rigid "
                        f"job of {job.gpus} GPUs")
        return job
    return job_replaced(job, min_gpus=low, max_gpus=high)


def _constrain(job: Job, raw: Mapping[str, Any], site: _Site, now: float) -> Job:
    """What Slurm will honour of a placement, as the model's constraints on the job.

    A running job keeps them too: a move or resize restarts it on the planned GPUs, and a
    typed job moved onto another GPU type was refused by Slurm (BadConstraints, then held
    by Slurm itself, JobHeldAdmin, so gpufair never started it again: found by issue 29's
    soak, a v100 job stuck for 20 minutes after a migration onto k80 GPUs). Whether it may
    start (holds, begin time, limits, dependencies) is asked of waiting jobs only."""
    if job.state is JobState.PENDING:
        _eligible(raw, site, now)
    elif job.state is not JobState.RUNNING:
        return job
    parts = tuple(p for p in _text(raw, "partition").split(",") if p in site.partitions)
    wanted = _text(raw, "features")
    if wanted and not _SIMPLE_FEATURES.match(wanted):
        if job.state is JobState.RUNNING:   # not to be moved: where it runs is all it may have
            return replace(job, allowed_nodes=tuple(dict.fromkeys(
                node_of(g) for g in job.gpus_held)))
        raise Unmodelled(f"--constraint {_show(wanted)} is more than a list of features")
    excluded = _hostlist(raw, "excluded_nodes")
    asked = _user_nodelist(raw)
    key = (parts, wanted, excluded, asked)
    if key not in site.allowed:
        site.allowed[key] = _allowed_nodes(site, parts, wanted, excluded, asked)
    allowed = site.allowed[key]
    nodes = len(asked) if asked else job.nodes
    per_node = parse_gpu_entries(_text(raw, "tres_per_node"))
    if per_node:
        nodes = _int(raw, "node_count") or 1
    typed = per_node[0].gpu_type if per_node else None
    if typed is None:
        per_job = parse_gpu_entries(_text(raw, "tres_per_job"))
        typed = per_job[0].gpu_type if per_job else None
    if job.state is JobState.RUNNING:
        # a move or resize of a job asking GPUs per node keeps its node count: whether it
        # fixed it (-N n) no longer shows once it runs (22.05 reads max_nodes 0 then,
        # measured), and a refused count leaves it unrunnable (see _fixed_node_count; soak
        # seed 1 again, with the waiting-job check in place). A --gpus job's is open.
        nodes = (_int(raw, "node_count") or 1) if per_node else job.nodes
    fixed = _fixed_node_count(raw)
    if fixed is not None:               # a waiting job that fixed it (-N n) keeps it
        nodes = fixed
    return job_replaced(job, allowed_nodes=allowed, nodes=nodes,
                        gpu_types=(typed,) if typed else None)


def _fixed_node_count(raw: Mapping[str, Any]) -> int | None:
    """The node count a job fixed with ``-N n`` (``max_nodes`` = ``node_count``), else None.

    Why: Slurm refuses to place such a job on another count ("Node count specification
    invalid"), and worse, the refused ``scontrol update`` is half applied: the node list
    stays and NumCPUs doubles, so the job is BadConstraints for good, however it is pinned
    again (issue 29 soak: a ``-N 1`` two-GPU job moved onto one GPU on each of two nodes
    never ran again). A range (``-N 1-2``) is left open: the model has exact counts only."""
    most = _int(raw, "max_nodes")
    count = _int(raw, "node_count")
    if not most or most == _NO_VAL or not count or count != most:
        return None
    return count


def _eligible(raw: Mapping[str, Any], site: _Site, now: float) -> None:
    """Raise NotRunnable (NeverMet) when a waiting job may not start now."""
    if user_held(raw):
        raise NotRunnable("held by its owner until they release it")
    why = not_eligible(raw, now)
    if why is not None:
        raise NotRunnable(why)
    running, limit = site.arrays.get(_int(raw, "array_job_id") or 0, (0, 0))
    if limit and running >= limit and _num(raw, "priority", 0.0, float(_MAX_U32)) == 0:
        # (a task already released counts itself: it is not held back for that)
        raise NotRunnable(f"its array has {running} tasks running, its limit (%{limit})")
    dependency = _text(raw, "dependency")
    if dependency not in ("", "(null)") and not dependency_met(dependency, site.job_states):
        never = dependency_never_met(dependency, site.job_states)
        if never is not None:
            raise NeverMet(f"its dependency can never be met ({_show(never)})")
        raise NotRunnable(f"waits for a dependency ({_show(dependency)})")


def _allowed_nodes(site: _Site, parts: tuple[str, ...], wanted: str, excluded: Sequence[str],
                   asked: tuple[str, ...]) -> tuple[str, ...] | None:
    """The nodes a job may run on (sorted; None: any), from its partitions, features,
    excluded nodes and own node list. Jobs share a few such combinations, so the translation
    keeps one tuple per combination (``_Site.allowed``): computing and sorting a site's
    thousand node names for each of ten thousand jobs was most of a round's translation.
    A site's jobs exclude nodes in many ways (1,600 combinations at 100,000 jobs), so the
    nodes of their partitions and features are sorted once (``_Site.bases``) and each
    combination's excluded nodes are filtered out of that order: the same tuple, without a
    sort of 8,192 names per combination (issue 30)."""
    key = (parts, wanted)
    if key not in site.bases:
        site.bases[key] = _base_nodes(site, parts, wanted)
    base = site.bases[key]
    if base is None and excluded:   # any node but these: all of them, less these
        if None not in site.bases:
            site.bases[None] = (tuple(sorted(site.features)), frozenset(site.features))
        base = site.bases[None]
    drop = set(excluded)
    if asked:
        names = set(asked) if base is None else {n for n in asked if n in base[1]}
        return tuple(sorted(names - drop))
    if base is None:
        return None
    return tuple(filterfalse(drop.__contains__, base[0])) if drop else base[0]


def _base_nodes(site: _Site, parts: tuple[str, ...], wanted: str
                ) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """The nodes of these partitions having these features, sorted and as a set (None: the
    job names neither, so any node)."""
    allowed: set[str] | None = None
    if parts:
        allowed = set().union(*(site.partitions[p] for p in parts))
    if wanted:
        need = set(re.split(r"[&,]", wanted))
        having = {n for n, f in site.features.items() if need <= f}
        allowed = having if allowed is None else allowed & having
    return None if allowed is None else (tuple(sorted(allowed)), frozenset(allowed))


#: the reason of a hold by an administrator (root's ``scontrol hold``). gpufair's own holds are
#: user holds (job_submit.lua's at submission, ``scontrol uhold`` and ``requeuehold`` by the
#: daemon): an admin hold is somebody else's decision, and gpufair starts no job under one
ADMIN_HOLD = "JobHeldAdmin"


#: Slurm's reasons for not starting a job it may start (released, not held) that a wait does
#: not cure by itself: the job's nodes, partition, licences, reservation, or an association or
#: QOS limit (AssocGrpGRES, AssocMaxJobsLimit, QOSMaxJobsPerUserLimit, QOSGrpGRES, ...).
#: ``Resources`` is not one: a job pinned onto GPUs a requeue is still freeing waits on it
#: for seconds; what gpufair can count (GPUs, CPUs, memory, nodes down) it checks itself.
REFUSALS = frozenset({
    "ReqNodeNotAvail", "NodeDown", "PartitionDown", "PartitionInactive", "PartitionNodeLimit",
    "PartitionTimeLimit", "PartitionConfig", "BadConstraints", "Licenses", "Reservation",
    "InvalidQOS", "InvalidAccount", "AccountNotAllowed", "QOSNotAllowed", "FrontEndDown"})
#: gpufair's note (in the admin comment, which users cannot change) on a job it held again
#: because Slurm refused to start it: ``gpufair:refused=REASON@EPOCH``. A limit lasts until
#: other jobs end, which nothing tells: the job is offered again only ``RETRY_REFUSED_S`` later
REFUSED_NOTE = "gpufair:refused="
RETRY_REFUSED_S = 60.0


#: how long after a release Slurm's scheduler must still have found no ``Resources`` for a
#: job, with nothing of gpufair's settling on its nodes, for gpufair to place it anew although
#: its own count says it fits (a GRES or limit it does not model); the seconds a requeue's
#: KillWait keeps a node are covered by the settling check, this only by the look's time
RESOURCES_GRACE_S = 10.0


def refused(reason: str) -> bool:
    """Whether Slurm's ``state_reason`` of a released job says it will not start it as is."""
    return reason in REFUSALS or reason.startswith(("Assoc", "QOS"))


def no_resources(info: SlurmJobInfo) -> bool:
    """Whether Slurm looked at a released job well after its release and found no resources
    for it where it is pinned (the caller checks nothing settles there)."""
    return info.reason == "Resources" and info.eligible_s > 0 and \
        info.evaluated_s >= info.eligible_s + RESOURCES_GRACE_S


def refusal(raw: Mapping[str, Any]) -> tuple[str, float] | None:
    """(reason, when) of gpufair's refusal note on a managed job, or None."""
    if not _managed(raw):
        return None
    for word in _text(raw, "admin_comment").split():
        if word.startswith(REFUSED_NOTE):
            reason, _, when = word[len(REFUSED_NOTE):].rpartition("@")
            try:
                return reason, float(when)
            except ValueError:
                return None
    return None


def not_eligible(raw: Mapping[str, Any], now: float) -> str | None:
    """Why Slurm itself would not start this waiting job now, or None.

    Read from Slurm's own fields rather than re-derived: gpufair holds every job it manages,
    so Slurm's reason for a managed job is the hold, and what else stands in its way must be
    read here, or the release (``StartTime=now``) would override it.

    - ``eligible_time`` in the future on a job never run: its ``--begin`` (or an
      ``scontrol update StartTime=``). A requeue sets a begin time too (Slurm's delay before
      a requeued job may run again): that one is gpufair's to override, as it does when it
      restarts a job it preempted, so a job that ran before (``restart_cnt``) is not held
      back by it.
    - ``deadline`` that the job can no longer meet: Slurm ends such a job (state DEADLINE)
      rather than start it; the shortest run it accepts is ``--time-min``, else its time
      limit when known.
    - an administrator's hold (``JobHeldAdmin``): theirs to lift.
    - a reservation (``resv_name``): its nodes and window are Slurm's to honour, so
      job_submit.lua leaves such a job to Slurm at submission; one moved into a reservation
      later waits here for an operator.
    - Slurm's refusal of the job's last release (a limit, a reservation: gpufair's note, see
      ``REFUSED_NOTE``), for ``RETRY_REFUSED_S``.
    """
    eligible = _num(raw, "eligible_time") or 0.0
    if eligible > now and not _int(raw, "restart_cnt"):
        return f"not eligible before {_clock(eligible)} (its --begin)"
    deadline = _num(raw, "deadline") or 0.0
    if deadline:
        shortest = _int(raw, "time_minimum") or _int(raw, "time_limit") or 0
        if now + 60.0 * shortest >= deadline:
            return f"its --deadline {_clock(deadline)} cannot be met (Slurm ends it)"
    if _text(raw, "state_reason") == ADMIN_HOLD:
        return "held by an administrator (scontrol hold); scontrol uhold hands it back"
    reservation = _text(raw, "resv_name")
    if reservation:   # moved into one after submission: job_submit.lua leaves those to Slurm
        return (f"runs in reservation {_show(reservation)}, Slurm's to schedule (an "
                "operator's scontrol release hands it over)")
    note = refusal(raw)
    if note is not None and now < note[1] + RETRY_REFUSED_S:
        return (f"Slurm refused to start it ({note[0]}) at {_clock(note[1])}; offered again "
                f"from {_clock(note[1] + RETRY_REFUSED_S)}")
    return None


def _clock(epoch: float) -> str:
    """An epoch time as Slurm prints it (UTC), for the reasons a dry run shows."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
          "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}
_STARTED = _ENDED | {"RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STOPPED"}
#: what Slurm counts against an array's %N limit
_RUNS = _STARTED - _ENDED
_MET = {"after": _STARTED, "afterany": _ENDED, "afterok": {"COMPLETED"},
        "afternotok": _ENDED - {"COMPLETED"}}


def dependency_met(text: str, states: Mapping[str, str]) -> bool:
    """Whether Slurm's dependency string (``afterok:12(unfulfilled),afterany:13``; ``?``
    for "any of") is met by the jobs' states. Slurm does not re-evaluate the dependencies of
    a *held* job, and gpufair holds every job it manages, so it reads them itself. A kind it
    does not know (singleton, aftercorr, burst buffers) or a job it cannot see counts as not
    met: the job waits rather than starting too early."""
    any_of = "?" in text
    results = []
    for item in re.split(r"[,?]", text):
        item = re.sub(r"\(.*?\)$", "", item.strip())
        kind, _, ids = item.partition(":")
        allowed = _MET.get(kind)
        if allowed is None or not ids:
            results.append(False)
            continue
        results.append(all(states.get(j.split("+")[0].split("_")[0]) in allowed
                           for j in ids.split(":")))
    return any(results) if any_of else all(results)


#: the states of a parent that decide a dependency kind for good, the wrong way
_FAILS = {"afterok": _ENDED - {"COMPLETED"}, "afternotok": {"COMPLETED"}}


def dependency_never_met(text: str, states: Mapping[str, str]) -> str | None:
    """The part of a dependency that can never be met any more (``afterok:12`` once job 12
    failed, ``afternotok:12`` once it completed), or None while it still may be: Slurm's
    DependencyNeverSatisfied. ``?`` (any of) can never be met only when no part can. A
    parent gpufair cannot see (gone from squeue after MinJobAge) decides nothing."""
    failed = []
    for item in re.split(r"[,?]", text):
        part = re.sub(r"\(.*?\)$", "", item.strip())
        kind, _, ids = part.partition(":")
        fails = _FAILS.get(kind, set())
        failed.append(bool(ids) and any(states.get(j.split("+")[0].split("_")[0]) in fails
                                        for j in ids.split(":")))
        if failed[-1] and "?" not in text:
            return part
    return text if "?" in text and all(failed) else None


def _user_nodelist(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The user's own --nodelist, as job_submit.lua recorded it at submission (gpufair itself
    rewrites the job's required nodes when it pins it, so those are not the user's)."""
    for word in admin_marks(_text(raw, "admin_comment")).split():
        if word.startswith("nodelist="):
            return tuple(expand_hostlist(word.removeprefix("nodelist=")))
    return ()


def block_nodes(nodes: Sequence[Node], blocked: set[str]) -> list[Node]:
    """Mark nodes whose GPUs are in transition (or unreadable) as drained for one round."""
    return [replace(n, state=NodeState.DRAIN)
            if n.name in blocked and n.state is NodeState.UP else n for n in nodes]


def _records(doc: Any, key: str) -> list[Any] | None:
    records = doc.get(key) if isinstance(doc, Mapping) else None
    return records if isinstance(records, list) else None


def _submission_order(raw: Any) -> tuple[int, int, str]:
    """squeue lists jobs in no documented order; the model wants submission order: job ids,
    and the tasks of an array at their array's id in task order (``A_T``). A task split out
    of its array record gets a job id above the record's, while the record keeps the tasks
    not started yet: in job id order those would come first, and a policy that breaks ties
    of arrival by order (every task of an array arrives at once) would take GPUs back from
    the array's running tasks for its waiting ones, round after round."""
    job_id = raw.get("job_id") if isinstance(raw, Mapping) else None
    try:
        number = int(_job_id(job_id))
    except Malformed:
        return 1 << 62, 0, _show(job_id)
    array, task = raw.get("array_job_id"), raw.get("array_task_id")
    if not isinstance(array, int) or isinstance(array, bool) or not 0 < array <= _MAX_U32:
        return number, -1, ""
    if isinstance(task, int) and not isinstance(task, bool) and 0 <= task < _NO_VAL:
        return array, task, ""
    try:
        return array, parse_task_list(_text(raw, "array_task_string")).first, ""
    except (ValueError, Malformed):
        return array, 1 << 62, ""


def _where(source: str, raw: Any, index: int) -> str:
    job_id = raw.get("job_id") if isinstance(raw, Mapping) else None
    try:
        return f"{source}: job {_job_id(job_id)}"
    except Malformed:
        return f"{source}: job #{index}"


def _describe(exc: Exception) -> str:
    """One line of at most about 300 characters, whatever the exception holds."""
    try:
        if isinstance(exc, KeyError):
            text = f"missing field {_show(exc.args[0] if exc.args else None)}"
        elif isinstance(exc, ValueError):
            text = str(exc)
        else:  # not a check of ours: name the kind of failure too
            text = f"unreadable record ({type(exc).__name__}: {exc})"
    except Exception:  # an exception whose message cannot even be made
        text = f"unreadable record ({type(exc).__name__})"
    text = _CONTROLS.sub(lambda m: repr(m.group())[1:-1], clean_text(text))
    return text if len(text) <= 300 else text[:300] + "…"


def _nodes_of_raw(raw: Any) -> list[str] | None:
    """The nodes an unreadable record names; None if even that cannot be read."""
    try:
        return list(_hostlist(raw, "nodes")) if isinstance(raw, Mapping) else None
    except Exception:  # whatever went wrong, the answer is "cannot tell"
        return None


def _drop_conflicts(parsed: list[_Parsed], problems: list[str], blocked: set[str]
                    ) -> list[_Parsed]:
    """Skip every record of a job id listed twice, and every job holding a GPU another holds:
    which of them is right cannot be told, and their GPUs must not look free."""
    ids = Counter(p.job.id for p in parsed)
    holders: dict[str, list[str]] = {}
    for p in parsed:
        if ids[p.job.id] == 1:
            for gpu in p.job.gpus_held:
                holders.setdefault(gpu, []).append(p.job.id)
    kept: list[_Parsed] = []
    for p in parsed:
        if ids[p.job.id] > 1:
            problems.append(f"{p.where}: skipped: job id listed {ids[p.job.id]} times")
        elif shared := sorted({o for g in p.job.gpus_held for o in holders[g]} - {p.job.id}):
            gpus = [g for g in p.job.gpus_held if len(holders[g]) > 1]
            problems.append(f"{p.where}: skipped: GPU {gpus[0]} also held by job "
                            f"{', '.join(shared)}")
        else:
            kept.append(p)
            continue
        blocked.update(p.info.nodes)
    return kept


def _nodes(doc: Mapping[str, Any], managed: set[str], problems: list[str], source: str
           ) -> tuple[list[Node], dict[str, str], set[str]]:
    """The GPU nodes, the host name ``%N`` expands to on each node where it is known, and
    the names of node records that could not be read (the jobs on them are left alone)."""
    records = _records(doc, "nodes")
    if records is None:
        problems.append(f"{source}: the nodes document has no 'nodes' list")
        records = []
    names = Counter(raw.get("name") for raw in records
                    if isinstance(raw, Mapping) and isinstance(raw.get("name"), str))
    nodes: list[Node] = []
    hosts: dict[str, str] = {}
    unreadable: set[str] = set()
    for i, raw in enumerate(records):
        name = raw.get("name") if isinstance(raw, Mapping) else None
        if not isinstance(name, str) or not name:
            what = (f"the record is {json_kind(raw)}, not an object"
                    if not isinstance(raw, Mapping) else "missing field 'name'" if not name
                    else f"field 'name' is {json_kind(name)}, not text: {_show(name)}")
            problems.append(f"{source}: node #{i}: skipped: {what}")
            continue
        name = clean_text(name)
        where = f"{source}: node {name}"
        if names[raw["name"]] > 1:
            problems.append(f"{where}: skipped: listed {names[raw['name']]} times")
            unreadable.add(name)
            continue
        try:
            node = _node(raw, name, managed, where, problems)
            host = raw.get("hostname")
            # slurmd writes %N as its short host name. It found its node name by that host
            # name unless started with -N, so NodeHostname equal to NodeName means %N = name.
            if isinstance(host, str) and host.split(".")[0] == name:
                hosts[name] = name
        except Exception as exc:  # one record must never stop a round
            problems.append(f"{where}: skipped: {_describe(exc)}")
            unreadable.add(name)
            continue
        if node is not None:
            nodes.append(node)
    return nodes, hosts, unreadable


def _node(raw: Mapping[str, Any], name: str, managed: set[str], where: str,
          problems: list[str]) -> Node | None:
    partitions = raw.get("partitions") or []
    if not isinstance(partitions, list) or not all(isinstance(p, str) for p in partitions):
        raise Malformed(f"field 'partitions' is not a list of names: {_show(partitions)}")
    if managed and not managed.intersection(partitions):
        return None
    gres = _text(raw, "gres")
    entries = parse_gpu_entries(_bounded(gres, "GRES"))
    if not entries:
        return None  # no GPUs: nothing for gpufair to schedule there
    gpu_type = entries[0].gpu_type or "gpu"
    if len({e.gpu_type for e in entries}) > 1:
        problems.append(f"{where}: several GPU types ({_show(gres)}); scheduling it as "
                        f"{gpu_type} only")
        entries = [e for e in entries if (e.gpu_type or "gpu") == gpu_type]
    count = sum(e.count for e in entries)
    if count > _MAX_NODE_GPUS:
        raise Malformed(f"{_show(count)} GPUs in GRES {_show(gres)}")
    return Node(name, gpu_type, count, state=_node_state(raw, where, problems),
                cpus=_int(raw, "cpus") or None,
                memory_mb=_int(raw, "real_memory", _MAX_MEMORY_MB) or None)


def _node_state(raw: Mapping[str, Any], where: str, problems: list[str]) -> NodeState:
    flags = raw.get("state_flags") or []
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise Malformed(f"field 'state_flags' is not a list of names: {_show(flags)}")
    upper = {f.upper() for f in flags}
    base = _state_name(raw.get("state")).lower()
    if base in ("down", "unknown", "future") or "NOT_RESPONDING" in upper:
        return NodeState.DOWN
    if upper & {"DRAIN", "DRAINING", "DRAINED", "FAIL", "MAINTENANCE", "REBOOT_REQUESTED",
                 "RESERVED"} or \
            base in ("drain", "drained", "draining", "fail", "error"):
        return NodeState.DRAIN
    if base not in ("idle", "mixed", "allocated", "completing", "planned", "reserved"):
        problems.append(f"{where}: unknown node state {_show(raw.get('state'))}; not scheduled")
        return NodeState.DOWN
    return NodeState.UP


def _job_of(raw: Any, now: float, managed: set[str], hosts: Mapping[str, str],
            cache: RecordCache | None) -> tuple[Job, SlurmJobInfo] | None:
    """:func:`_job`, or the last read's translation of the same record (``cache``) with the
    attained service of a running job brought up to ``now``."""
    if cache is None or type(raw) is not dict or type(raw.get("job_id")) not in (int, str):
        return _job(raw, now, managed, hosts)   # (an odd record: its problem said afresh)
    result = cache.translated(raw, lambda: _job(raw, now, managed, hosts))
    if result is None:
        return None
    job, info = result
    if JOB_STATES[info.raw_state] is JobState.RUNNING and job.start_s:
        attained = _attained(raw, job.start_s, now)
        if attained != job.attained_s:
            job = job_replaced(job, attained_s=attained)
    return job, info


def _attained(raw: Mapping[str, Any], start: float, now: float) -> float:
    """A running job's service so far: since its start or its last resume."""
    suspended = _num(raw, "suspend_time") or 0.0
    return max(0.0, now - max(start, suspended))


def _job(raw: Any, now: float, managed: set[str], hosts: Mapping[str, str]
         ) -> tuple[Job, SlurmJobInfo] | None:
    if not isinstance(raw, Mapping):
        raise Malformed(f"the record is {json_kind(raw)}, not an object")
    if "job_id" not in raw:
        raise KeyError("job_id")
    job_id = _job_id(raw["job_id"])
    if "job_state" not in raw:
        raise KeyError("job_state")
    raw_state = _state_name(raw["job_state"], "job_state")
    if raw_state not in JOB_STATES:
        raise Malformed(f"unknown job state {_show(raw['job_state'])}")
    partition = _text(raw, "partition")
    if managed and not managed.intersection(partition.split(",")):
        return None
    nodes = _hostlist(raw, "nodes")
    request_field, asked, asked_type = _gpu_request(raw)
    held_gpus = _held(raw, nodes) if nodes else ()
    gpus = len(held_gpus) if held_gpus else asked
    if gpus <= 0:
        return None  # not a GPU job
    if gpus > _MAX_JOB_GPUS:
        raise Malformed(f"asks for {_show(gpus)} GPUs")
    state = JOB_STATES[raw_state]
    submit = _num(raw, "submit_time") or 0.0
    start = _num(raw, "start_time")
    running = state in (JobState.RUNNING, JobState.SUSPENDED)
    attained = 0.0
    if state is JobState.RUNNING and start:
        attained = _attained(raw, start, now)
    array_id = _int(raw, "array_job_id") or 0
    record = ""
    if array_id and _array_task(raw) is None and state is JobState.PENDING:
        # a record standing for several tasks: the model sees the task gpufair would start
        # next (the others follow as the record splits), under Slurm's name for it
        try:
            first = parse_task_list(_text(raw, "array_task_string")).first
        except ValueError as exc:
            raise Malformed(str(exc)) from None
        record, job_id = job_id, f"{array_id}_{first}"
    user_id = _int(raw, "user_id")
    account = _text(raw, "account")
    user = _text(raw, "user_name")
    tenant = account or user or (str(user_id) if user_id is not None else "") or "default"
    reason = _text(raw, "state_reason")
    priority = _num(raw, "priority", 0.0, float(_MAX_U32))
    job = Job(
        id=job_id, tenant=tenant, app=str(array_id) if array_id else None, gpus=gpus,
        state=state if state is not None else JobState.RUNNING, arrival_s=submit,
        start_s=start if running else None, attained_s=attained,
        restarts=_int(raw, "restart_cnt") or 0,
        gpus_held=held_gpus if running else (),
        log_path=_log_path(raw, int(record or job_id), array_id, user, hosts),
        owner_uid=user_id, owner_gid=_int(raw, "group_id"), host=host_request(raw),
        progress=_NO_PROGRESS, throughput=_NO_PROFILE,
        time_limit_s=time_limit_s(raw),
    )
    info = SlurmJobInfo(
        job_id=job_id, raw_state=raw_state, partition=partition, reason=reason,
        held=_on_hold(raw_state, reason, priority), managed=_managed(raw),
        priority=priority, nice=fix_nice(raw.get("nice")),
        gres_field=request_field, gpu_type=asked_type, nodes=nodes,
        node_count=_int(raw, "node_count") or max(1, len(nodes)),
        pinned=_hostlist(raw, "required_nodes"), description=_text(raw, "state_description"),
        admin_comment=_text(raw, "admin_comment"), record=record,
        control=task_name(raw) or "",
        eligible_s=_num(raw, "eligible_time") or 0.0,
        evaluated_s=_num(raw, "last_sched_evaluation") or 0.0,
        counted_as=(account, user, user_id, partition, _text(raw, "qos")),
        tres_req=_text(raw, "tres_req_str"),
    )
    return job, info


#: what a job fresh from Slurm has measured: nothing. Both are immutable, so every job shares
#: one of each (their default factories made two objects per job, 100,000 a round)
_NO_PROGRESS = Progress()
_NO_PROFILE = ThroughputProfile()
#: Slurm's 32-bit "no value" and "infinite" (NO_VAL, INFINITE): a time limit of either is none
NO_LIMIT_MINUTES = frozenset({_MAX_U32 - 1, _MAX_U32})


def time_limit_s(raw: Mapping[str, Any]) -> float | None:
    """The job's time limit in seconds, or None when it has none (UNLIMITED) or none is shown.

    ``time_limit`` is in minutes. slurmctld fills in the partition's DefaultTime (else its
    MaxTime) at submission, so the record already carries the partition default; 22.05's
    squeue prints UNLIMITED as null, slurmrestd as 4294967295 (INFINITE), later versions as
    ``{"infinite": true}``; 0 (``--time=0``) is unlimited too. A backfill policy plans with
    this limit (``slurm_backfill``); without it the policy's one-day default would stand in.
    """
    minutes = _int(raw, "time_limit")
    if not minutes or minutes in NO_LIMIT_MINUTES:
        return None
    return 60.0 * minutes


#: ``--exclusive`` (``none``) and ``--exclusive=user`` (``user``): no node shared with another
#: job of gpufair's (the second is looser in Slurm; as strict here: never placed wrong)
_EXCLUSIVE = frozenset({"none", "user"})
_PER_GPU = re.compile(r"^gres:gpu(?::[^:,]+)?:([0-9]{1,12})$")


def host_request(raw: Mapping[str, Any]) -> HostRequest | None:
    """The CPUs and memory the job asks on each node, as Slurm 22.05 shows them.

    CPUs per node: ``minimum_cpus_per_node`` (``-c`` x ``--ntasks-per-node``), or the job's
    ``cpus`` spread over its nodes (``-n``), whichever is more; per GPU: ``cpus_per_tres``
    (``--cpus-per-gpu``). Memory: ``memory_per_node`` (``--mem``), else ``memory_per_tres``
    (``--mem-per-gpu``), else ``memory_per_cpu`` (``--mem-per-cpu``, which Slurm fills with
    DefMemPerCPU when the job gave none: no need to read the site's config), else none at
    all: ``--mem=0``, the whole memory of each node (``whole_memory``). ``shared``
    ``none``: ``--exclusive``. None when the record asks nothing of the sort."""
    nodes = _int(raw, "node_count") or 1
    cpus = _int(raw, "cpus") or 0
    per_node = max(_int(raw, "minimum_cpus_per_node") or 0, -(-cpus // nodes))
    memory = _int(raw, "memory_per_node", _MAX_MEMORY_MB) or 0
    whole = False
    if not (memory or _text(raw, "memory_per_tres") or _int(raw, "memory_per_cpu")):
        # no memory field at all: ``--mem=0``, or no request on a site without DefMemPerCPU
        # (DefMemPerNode unlimited): all of each node's memory. The job's TRES request shows
        # the smallest node's (spread over its nodes): the least it needs where unknown
        memory = -(-_tres_memory(raw) // nodes)
        whole = memory > 0
    request = HostRequest(
        cpus_per_node=per_node, cpus_per_gpu=_per_gpu(raw, "cpus_per_tres"),
        memory_per_node_mb=memory,
        memory_per_gpu_mb=_per_gpu(raw, "memory_per_tres"),
        memory_per_cpu_mb=_int(raw, "memory_per_cpu", _MAX_MEMORY_MB) or 0,
        exclusive=_text(raw, "shared").lower() in _EXCLUSIVE, whole_memory=whole)
    return None if request == HostRequest() else request


_TRES_MEMORY = re.compile(r"(?:^|,)mem=([0-9]{1,15})([KMGTP]?)(?:,|$)")
_MB = {"K": 1 / 1024, "M": 1, "": 1, "G": 1024, "T": 1024 ** 2, "P": 1024 ** 3}


def _tres_memory(raw: Mapping[str, Any]) -> int:
    """The memory (MB) of ``tres_req_str`` (``cpu=1,mem=125G,node=1``); 0 if it names none."""
    match = _TRES_MEMORY.search(_text(raw, "tres_req_str"))
    if match is None:
        return 0
    memory = math.ceil(int(match.group(1)) * _MB[match.group(2)])
    if memory > _MAX_MEMORY_MB:
        raise Malformed(f"field 'tres_req_str' out of range: {_show(match.group(0))}")
    return memory


def _per_gpu(raw: Mapping[str, Any], key: str) -> int:
    """The number of a ``gres:gpu:N`` TRES field (``--cpus-per-gpu``, ``--mem-per-gpu``)."""
    text = _text(raw, key)
    if not text:
        return 0
    match = _PER_GPU.match(text)
    if match is None or int(match.group(1)) > _MAX_MEMORY_MB:
        raise Malformed(f"field {key!r} is not gres:gpu:N: {_show(text)}")
    return int(match.group(1))


def _array_tasks(job: Job, info: SlurmJobInfo, raw: Mapping[str, Any], site: _Site,
                 capacity: int) -> list[tuple[Job, SlurmJobInfo]]:
    """A pending array record as the jobs ``A_T`` of the tasks it stands for, lowest first;
    any other record as itself. Each task is started on its own (the update of ``A_T``
    splits it out of the record), so a round starts as many as the plan places: one job for
    the whole record started one task per round (a 12-task array on 16 idle GPUs took 32 s).

    Not more tasks than the array's ``%N`` limit leaves room for, nor than could all run on
    the cluster's GPUs at once (an array may stand for 4 million tasks: the rest follow as
    these start), nor than the record lists when Slurm cut its list short."""
    if not info.record:
        return [(job, info)]
    tasks = parse_task_list(_text(raw, "array_task_string"))   # read once already by _job
    running, limit = site.arrays.get(int(job.app or 0), (0, 0))
    room = limit - running if limit else capacity
    at_most = max(1, min(room, capacity // max(1, job.gpus)))
    array = job.id.partition("_")[0]
    out = []
    for task in tasks.ids(at_most):
        task_id = f"{array}_{task}"
        out.append((job_replaced(job, id=task_id), replace(info, job_id=task_id)))
    return out


def task_name(raw: Mapping[str, Any]) -> str | None:
    """``A_T`` for the record of one array task, else None."""
    array, task = _int(raw, "array_job_id"), _array_task(raw)
    return f"{array}_{task}" if array and task is not None else None


def _array_task(raw: Mapping[str, Any]) -> int | None:
    """The record's array task id; None for a record standing for several (or not a task)."""
    task = _int(raw, "array_task_id")
    return None if task == _NO_VAL else task


def _gpu_request(raw: Mapping[str, Any]) -> tuple[str, int, str | None]:
    """Which field asked for GPUs, the total asked and its type (None if untyped)."""
    per_node = parse_gpu_entries(_text(raw, "tres_per_node"))
    if per_node:
        count = _int(raw, "node_count") or 1
        return "TresPerNode", sum(e.count for e in per_node) * count, per_node[0].gpu_type
    per_job = parse_gpu_entries(_text(raw, "tres_per_job"))
    if per_job:
        return "TresPerJob", sum(e.count for e in per_job), per_job[0].gpu_type
    return "TresPerNode", 0, None


def _held(raw: Mapping[str, Any], nodes: Sequence[str]) -> tuple[str, ...]:
    """GPU ids from ``gres_detail`` (one entry per allocated node, in host-list order)."""
    detail = raw.get("gres_detail") or []
    if not isinstance(detail, list) or not all(isinstance(t, str) for t in detail):
        raise Malformed(f"field 'gres_detail' is not a list of GRES strings: {_show(detail)}")
    if not detail:
        return ()
    if len(detail) != len(nodes):
        raise Malformed(f"gres_detail has {len(detail)} entries for {len(nodes)} nodes")
    gpus: list[str] = []
    for node, text in zip(nodes, detail, strict=True):
        for entry in parse_gpu_entries(_bounded(text, "gres_detail")):
            if entry.indices is None:
                raise Malformed(f"no GPU indices in gres_detail {_show(text)}")
            gpus.extend(gpu_id(node, i) for i in entry.indices)
    if len(set(gpus)) != len(gpus):
        raise Malformed(f"a GPU listed twice in gres_detail {_show(detail)}")
    return tuple(gpus)


def _check_held(job: Job, info: SlurmJobInfo, known: Mapping[str, Node]) -> None:
    """A GPU index beyond what its node has: the job and the node disagree."""
    for node_name in info.nodes:
        node = known.get(node_name)
        if node is None:
            continue
        prefix = f"{node_name}:"
        for gpu in job.gpus_held:
            if gpu.startswith(prefix) and int(gpu[len(prefix):]) >= node.gpus:
                raise Malformed(f"holds GPU {gpu} but node {node_name} has {node.gpus} GPUs")


# ---- where the job's output goes ----------------------------------------------------------

#: NO_VAL: what Slurm writes for %a when the job is not an array task.
_NO_VAL = 0xFFFFFFFE
_MAX_WIDTH = 10


def _log_path(raw: Mapping[str, Any], job_id: int, array_job_id: int, user: str,
              hosts: Mapping[str, str]) -> str | None:
    pattern = _text(raw, "standard_output")
    task = _array_task(raw)
    if array_job_id and task is None:
        return None   # an array record standing for several tasks: each writes its own file
    if not pattern:   # sbatch's default, in the working directory
        pattern = "slurm-%j.out" if task is None else "slurm-%A_%a.out"
    return slurm_output_path(
        pattern, cwd=_text(raw, "current_working_directory"), job_id=job_id,
        array_job_id=array_job_id, array_task_id=task, user=user or None,
        job_name=_text(raw, "name"), host=hosts.get(_text(raw, "batch_host")))


def slurm_output_path(pattern: str, *, cwd: str, job_id: int, array_job_id: int = 0,
                      array_task_id: int | None = None, user: str | None = None,
                      job_name: str | None = None, host: str | None = None) -> str | None:
    """The file a Slurm 22.05 batch script writes its output to, or None if it cannot be told.

    ``pattern`` is the job's ``standard_output`` (sbatch ``-o``; sbatch's default
    ``slurm-%j.out`` / ``slurm-%A_%a.out`` when it is empty). Expanded as slurmstepd does for
    the batch step (src/slurmd/common/fname.c; every rule checked on a 22.05 cluster):

    - a relative pattern is under ``cwd``; ``%%`` is ``%``; a ``%`` before anything but a
      letter or digit (or at the end) stays as written;
    - ``%j`` job id; ``%J`` the same for the batch step; ``%A`` array master id (the job id
      outside arrays); ``%a`` array task id (4294967294 outside arrays); ``%n`` and ``%t`` 0;
      ``%s`` ``batch``; ``%u`` user name; ``%x`` job name; ``%N`` the batch host's short host
      name (``host``: known only when Slurm's node names are the host names);
    - digits after ``%`` zero-pad numeric fields (at most 10 wide) and are ignored for text;
    - a backslash anywhere turns expansion off: ``\\\\`` is ``\\``, other backslashes are
      dropped, and a relative pattern is appended to ``cwd`` without a ``/`` (22.05 does so);
    - a pattern of digits only names the task that writes; the batch script is task 0, so
      any other number means ``/dev/null``.

    None for ``/dev/null``, for a field that is not known (``%N`` of a pending job, ``%u``
    without a user), for a conversion 22.05 lacks or later versions changed (``%b``, a width
    with no conversion), and for a result that is not a plain absolute path (U+FFFD standing
    for bytes that were not UTF-8, NUL): the profiler must never read somebody else's file.
    """
    if re.fullmatch(r"[0-9]+", pattern) and pattern.strip("0"):
        return None
    relative = not pattern.startswith("/")
    if "\\" in pattern:
        path: str | None = re.sub(r"\\(\\?)", r"\1", pattern)
        if relative:
            path = cwd + path if cwd else None
    else:
        path = _expand(pattern, job_id=job_id, array_job_id=array_job_id,
                       array_task_id=array_task_id, user=user, job_name=job_name, host=host)
        if path is not None and relative:
            path = cwd + ("" if cwd.endswith("/") else "/") + path if cwd else None
    if path is None or not path.startswith("/") or path == "/dev/null" or \
            any(c in path for c in "\x00\ufffd") or _SURROGATES.search(path):
        return None
    return path


def _expand(pattern: str, *, job_id: int, array_job_id: int, array_task_id: int | None,
            user: str | None, job_name: str | None, host: str | None) -> str | None:
    numbers = {"j": job_id, "J": job_id, "n": 0, "t": 0,
               "A": job_id if array_task_id is None else array_job_id,
               "a": _NO_VAL if array_task_id is None else array_task_id}
    texts = {"s": "batch", "u": user, "x": job_name, "N": host}
    out: list[str] = []
    i, end = 0, len(pattern)
    while i < end:
        char = pattern[i]
        if char != "%":   # the run up to the next "%" at once, not char by char
            stop = pattern.find("%", i)
            stop = end if stop < 0 else stop
            out.append(pattern[i:stop])
            i = stop
            continue
        if pattern.startswith("%", i + 1):
            out.append("%")
            i += 2
            continue
        j = i + 1
        while j < end and pattern[j] in "0123456789":
            j += 1
        digits = pattern[i + 1:j]
        conversion = pattern[j] if j < end else ""
        if conversion in numbers:
            significant = digits.lstrip("0")
            width = _MAX_WIDTH if len(significant) > 2 else min(int(significant or 0),
                                                                _MAX_WIDTH)
            out.append(f"{numbers[conversion]:0{width}d}")
        elif conversion in texts:
            value = texts[conversion]
            if value is None:
                return None
            out.append(value)
        elif digits or conversion.isalpha():
            return None
        else:
            out.append("%")   # "50%-done.out", or a "%" at the end
            i += 1
            continue
        i = j + 1
    return "".join(out)

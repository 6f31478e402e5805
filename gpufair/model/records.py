"""The common cluster model: what every adapter produces and every policy reads.

Records are frozen so a policy can never mutate the state it was handed (a dry run must be
side-effect free), and so one snapshot can be shared by the arbiter, the profiler merge and
the store without copies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from functools import lru_cache
from types import MappingProxyType

from gpufair.model.allowed_nodes import all_allowed
from gpufair.model.identity_memo import IdentityMemo


class JobState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def active(self) -> bool:
        """Still wants GPUs: the set every policy schedules over (a module tuple: spelling
        the members out here looked each up through the enum class on every call, and
        policies ask for every job at every decision)."""
        return self in _ACTIVE


class NodeState(str, Enum):
    UP = "up"
    DRAIN = "drain"
    DOWN = "down"


class Adaptation(str, Enum):
    """How a job changes its batch size while it trains (Shockwave's regimes)."""

    STATIC = "static"
    ACCORDION = "accordion"
    GNS = "gns"


@dataclass(frozen=True, slots=True)
class GpuType:
    name: str
    memory_gb: float | None = None


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpu_type: str
    gpus: int
    rack: str | None = None
    switch: str | None = None
    state: NodeState = NodeState.UP
    # GPU indices in use by what gpufair does not schedule (jobs of other partitions,
    # reservations): never offered to a policy
    unavailable: tuple[int, ...] = ()
    # the node's CPUs and memory (MB), and what of them is held by what gpufair does not
    # schedule, when the resource manager tells (Slurm's sinfo): a job placed there needs
    # room for its own CPUs and memory too. None: not known, GPUs are all that counts
    cpus: int | None = None
    memory_mb: int | None = None
    cpus_unavailable: int = 0
    memory_unavailable_mb: int = 0

    def gpu_ids(self) -> tuple[str, ...]:
        return _gpu_ids(self.name, self.gpus, tuple(self.unavailable))


@lru_cache(maxsize=1 << 16)
def _gpu_ids(name: str, gpus: int, unavailable: tuple[int, ...]) -> tuple[str, ...]:
    """Cached: every round asks every node for its GPU ids (placement, guards), and building
    the strings again each time was a large share of a simulated event's cost."""
    return tuple(gpu_id(name, i) for i in range(gpus) if i not in unavailable)


def gpu_id(node: str, index: int) -> str:
    """One spelling of a GPU's identity everywhere (plans, actions, store): ``node:index``."""
    return f"{node}:{index}"


def node_of(gpu: str) -> str:
    return gpu.rpartition(":")[0]


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    weight: float = 1.0


def _frozen_map(data: Mapping | None) -> Mapping:
    return MappingProxyType(dict(data or {}))


@dataclass(frozen=True, slots=True)
class ThroughputProfile:
    """Iterations per second of the *whole job* on ``count`` GPUs of a type.

    Keyed by (gpu_type, count). Measured values only: the papers' incentive results depend on
    speedups never being what a user declares.
    """

    rates: Mapping[tuple[str, int], float] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "rates", _frozen_map(self.rates))

    def rate(self, gpu_type: str, count: int) -> float | None:
        return self.rates.get((gpu_type, count))

    def gang_rate(self, gpu_types: Iterable[str], count: int) -> float:
        """Iterations/s of the whole job on ``count`` GPUs of ``gpu_types`` (one entry per GPU
        or per type). A synchronous gang waits for its slowest worker at every step, so a gang
        that spans types trains at the slowest type's whole-job rate at that gang size (the
        straggler effect of OEF §4.4); 0 if any of the types has no rate there. The one
        definition of what a gang on mixed GPUs is worth: the simulator, the policies that
        may span types and the contract test all ask it."""
        rates = [self.rates.get((t, count)) for t in set(gpu_types)]
        if not rates or any(r is None or not r > 0 for r in rates):
            return 0.0
        return min(rates)   # type: ignore[type-var]


@dataclass(frozen=True, slots=True)
class Progress:
    iterations_done: float = 0.0
    iterations_total: float | None = None
    epochs_done: int = 0
    epochs_total: int | None = None

    @property
    def iterations_left(self) -> float | None:
        if self.iterations_total is None:
            return None
        return max(0.0, self.iterations_total - self.iterations_done)


@dataclass(frozen=True, slots=True)
class HostRequest:
    """The CPUs and memory a job needs on each node it runs on, beside its GPUs.

    Slurm's forms, each resolved on the GPUs the job gets on that node: a CPU count per node
    (tasks x CPUs per task) or per GPU (``--cpus-per-gpu``), whichever is more; memory per
    node (``--mem``), else per GPU (``--mem-per-gpu``), else per CPU (``--mem-per-cpu``, or
    the site's DefMemPerCPU Slurm filled in); ``--mem=0``: all of the node's memory;
    ``--exclusive``: the whole node. Zero: not
    asked. A job from a trace has no request at all (``Job.host is None``).
    """

    cpus_per_node: int = 0
    cpus_per_gpu: int = 0
    memory_per_node_mb: int = 0
    memory_per_gpu_mb: int = 0
    memory_per_cpu_mb: int = 0
    exclusive: bool = False
    #: all of each node's memory (Slurm's ``--mem=0``, and a job without any memory request
    #: on a site without DefMemPerCPU/DefMemPerNode): the node's whole memory, whatever its
    #: size, so no other job may hold memory there; ``memory_per_node_mb`` is the least it
    #: is (what Slurm shows), for a node that does not tell its memory
    whole_memory: bool = False

    def on_node(self, gpus: int, node: Node) -> tuple[int, int]:
        """(CPUs, memory MB) it takes on ``node`` with ``gpus`` of its GPUs there."""
        if self.exclusive:
            return node.cpus or 0, node.memory_mb or 0
        cpus = max(self.cpus_per_node, self.cpus_per_gpu * gpus)
        if self.whole_memory:
            return cpus, node.memory_mb or self.memory_per_node_mb
        if self.memory_per_node_mb:
            return cpus, self.memory_per_node_mb
        if self.memory_per_gpu_mb:
            return cpus, self.memory_per_gpu_mb * gpus
        return cpus, self.memory_per_cpu_mb * cpus


@dataclass(frozen=True)   # not slotted: job_from_fields copies a record's fields in one step
class Job:
    """A training job as the scheduler sees it.

    ``attained_s`` is the job's attained service in wall seconds it held its GPUs (once per
    job, not per GPU); baselines such as LAS and Gavel's round mechanism charge it.
    ``gpus_held`` lists the GPUs the job runs on now (empty unless running or suspended).
    """

    id: str
    tenant: str = "default"
    app: str | None = None
    gpus: int = 1
    min_gpus: int | None = None
    max_gpus: int | None = None
    state: JobState = JobState.PENDING
    arrival_s: float = 0.0
    start_s: float | None = None
    finish_s: float | None = None
    progress: Progress = field(default_factory=Progress)
    throughput: ThroughputProfile = field(default_factory=ThroughputProfile)
    model: str | None = None
    batch_size: int | None = None
    initial_batch_size: int | None = None
    adaptation: Adaptation = Adaptation.STATIC
    # what a policy that plans across batch-size regimes needs (Shockwave): the dataset size,
    # the largest batch size the job's adaptation may reach, and measured whole-job
    # iterations/s on its gang per batch size, as (batch size, rate) pairs
    samples_per_epoch: int | None = None
    max_batch_size: int | None = None
    batch_rates: tuple[tuple[int, float], ...] = ()
    weight: float = 1.0
    attained_s: float = 0.0
    restarts: int = 0
    gpus_held: tuple[str, ...] = ()
    log_path: str | None = None
    # who may read the log: the profiler (running as root) reads only what they could
    owner_uid: int | None = None
    owner_gid: int | None = None
    # what the resource manager will honour of a placement: only these nodes (partition,
    # --nodelist, --exclude, --constraint), exactly this many of them with equal GPUs on each
    # (--nodes with GPUs per node), only these GPU types (--gres=gpu:TYPE:N); None: any
    allowed_nodes: tuple[str, ...] | None = None
    nodes: int | None = None
    gpu_types: tuple[str, ...] | None = None
    # the CPUs and memory it needs on each of its nodes (Slurm); None: GPUs only
    host: HostRequest | None = None
    # the wall time the resource manager gives the job before it kills it (Slurm's
    # Timelimit), where known: what a backfill scheduler plans with; None: not known
    time_limit_s: float | None = None

    def placement_problem(self, gpu_ids: tuple[str, ...], type_of: Mapping[str, str]
                          ) -> str | None:
        """Why running on ``gpu_ids`` breaks what the job asked for, or None."""
        if not self.constrains_placement:
            return None   # asks nothing: the common case, checked for every placed job
        hosts: dict[str, int] = {}
        for gpu in gpu_ids:
            hosts[node_of(gpu)] = hosts.get(node_of(gpu), 0) + 1
        if self.allowed_nodes is not None and not all_allowed(hosts, self.allowed_nodes):
            return f"nodes {sorted(set(hosts) - set(self.allowed_nodes))} are not allowed"
        if self.nodes is not None and (len(hosts) != self.nodes or len(set(hosts.values())) > 1):
            return f"asks {self.nodes} node(s) with equal GPUs, not {dict(hosts)}"
        if self.gpu_types is not None and any(type_of.get(g) not in self.gpu_types
                                              for g in gpu_ids):
            return f"asks GPU type {'/'.join(self.gpu_types)}"
        return None

    @property
    def constrains_placement(self) -> bool:
        """It asks for certain nodes, a node count, GPU types, or CPUs and memory beside its
        GPUs (else any GPUs will do)."""
        return self.allowed_nodes is not None or self.nodes is not None or \
            self.gpu_types is not None or self.host is not None

    @property
    def elastic(self) -> bool:
        return self.min_gpus is not None and self.max_gpus is not None and \
            self.min_gpus != self.max_gpus

    def rate_at_batch(self, batch_size: int) -> float | None:
        return dict(self.batch_rates).get(batch_size)

    def rate(self, gpu_type: str, count: int | None = None) -> float:
        """Iterations/s on ``count`` (default: its gang size) GPUs of ``gpu_type``; 0 if unknown
        or if the job may not run there (it asked for other GPU types)."""
        if self.gpu_types is not None and gpu_type not in self.gpu_types:
            return 0.0
        value = self.throughput.rate(gpu_type, self.gpus if count is None else count)
        return 0.0 if value is None else value

    def gang_rate(self, gpu_types: Iterable[str], count: int | None = None) -> float:
        """:meth:`ThroughputProfile.gang_rate` at ``count`` (default: its gang size), 0 on a
        type the job did not ask for: a gang spanning types runs at the slowest one's rate."""
        kinds = set(gpu_types)
        if self.gpu_types is not None and not kinds <= set(self.gpu_types):
            return 0.0
        return self.throughput.gang_rate(kinds, self.gpus if count is None else count)


#: Job's fields in declaration order.
JOB_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Job))
_NEW = object.__new__


def job_from_fields(values: Mapping[str, object]) -> Job:
    """A Job with exactly these field values (every field, by name), made without
    ``__init__``: a simulator rebuilds each running job's record at every event, and the
    frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field, about thirty) was
    most of a snapshot's cost; copying the values into the new record's ``__dict__`` is one
    step. Job has no ``__post_init__``, so the result is the record ``Job(**values)`` makes.
    """
    if len(values) != len(JOB_FIELDS):
        raise ValueError(f"a Job has {len(JOB_FIELDS)} fields, got {len(values)} values")
    job = _NEW(Job)
    job.__dict__.update(values)
    return job


_JOB_FIELD_SET = frozenset(JOB_FIELDS)


def job_replaced(job: Job, **changes: object) -> Job:
    """``dataclasses.replace(job, **changes)`` without ``__init__`` (see
    :func:`job_from_fields`): a site's translation and enrichment copy each of 100,000 jobs
    four or five times a round (its constraints, array tasks, history, profiles), and
    ``replace`` was a third of that (issue 30). A field name Job does not have fails as
    ``replace`` fails."""
    if not changes.keys() <= _JOB_FIELD_SET:
        unknown = sorted(changes.keys() - _JOB_FIELD_SET)
        raise TypeError(f"Job has no field(s) {', '.join(unknown)}")
    new = _NEW(Job)
    values = new.__dict__
    values.update(job.__dict__)
    values.update(changes)
    return new


#: Progress's field setters, in order (it is slotted; the unpacking fails if a field is added,
#: so :func:`progress_of` cannot silently leave one unset)
_SET_DONE, _SET_TOTAL, _SET_EPOCHS_DONE, _SET_EPOCHS_TOTAL = (
    getattr(Progress, f.name).__set__ for f in fields(Progress))


def progress_of(done: float, total: float | None, epochs_done: int,
                epochs_total: int | None) -> Progress:
    """``Progress(done, total, epochs_done, epochs_total)`` at half the cost of the frozen
    dataclass's ``__init__`` (a simulator makes one per running job per event)."""
    progress = _NEW(Progress)
    _SET_DONE(progress, done)
    _SET_TOTAL(progress, total)
    _SET_EPOCHS_DONE(progress, epochs_done)
    _SET_EPOCHS_TOTAL(progress, epochs_total)
    return progress


#: A tuple, not a set: membership is then an identity check, with no call to Enum.__hash__.
_ACTIVE = (JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED)
#: (jobs tuple, its active jobs) of the last call: the tuple is kept alive with it, so its
#: identity cannot be reused by another while cached; jobs are immutable, so is the answer
_LAST_ACTIVE: tuple[tuple[Job, ...] | None, tuple[Job, ...]] = (None, ())


@dataclass(frozen=True, slots=True)
class NodeLayout:
    """The usable GPUs by node, for placement: a fixed fact of the nodes, so it is built once
    per node tuple rather than once per round (see :meth:`ClusterState.layout`)."""

    gpus_of: Mapping[str, tuple[str, ...]]         # node -> its usable GPU ids
    nodes_of: Mapping[str, tuple[str, ...]]        # GPU type -> its usable nodes, in order
    node_sets: Mapping[str, frozenset[str]]        # the same, as sets
    biggest: Mapping[str, int]                     # GPU type -> most usable GPUs on one node
    node_of_gpu: Mapping[str, str]                 # usable GPU id -> its node
    type_of: Mapping[str, str]                     # usable GPU id -> its type


@dataclass(frozen=True, slots=True)
class _NodeFacts:
    usable: tuple[Node, ...]
    counts: dict[str, int]          # usable GPUs per type, in first-seen order of the nodes
    type_of: dict[str, str]         # GPU id -> type, usable GPUs only
    layout: NodeLayout


#: Facts of the last few node tuples, by identity. A simulator or daemon hands the same tuple
#: to every snapshot, so each round reads them instead of walking every node and GPU several
#: times.
_FACTS: IdentityMemo[tuple[Node, ...], _NodeFacts] = IdentityMemo(8)


def _node_facts(nodes: tuple[Node, ...]) -> _NodeFacts:
    if type(nodes) is not tuple:   # a list could change under the cache
        return _compute_node_facts(nodes)
    return _FACTS.get(nodes, _compute_node_facts)


def _compute_node_facts(nodes: Iterable[Node]) -> _NodeFacts:
    usable = tuple(n for n in nodes if n.state is NodeState.UP)
    counts: dict[str, int] = {}
    for n in usable:
        counts[n.gpu_type] = counts.get(n.gpu_type, 0) + n.gpus - len(n.unavailable)
    gpus_of: dict[str, tuple[str, ...]] = {}
    nodes_of: dict[str, list[str]] = {}
    biggest: dict[str, int] = {}
    for n in usable:
        gpus_of[n.name] = n.gpu_ids()
        nodes_of.setdefault(n.gpu_type, []).append(n.name)
        biggest[n.gpu_type] = max(biggest.get(n.gpu_type, 0), len(gpus_of[n.name]))
    layout = NodeLayout(
        MappingProxyType(gpus_of), MappingProxyType({t: tuple(v) for t, v in nodes_of.items()}),
        MappingProxyType({t: frozenset(v) for t, v in nodes_of.items()}),
        MappingProxyType(biggest),
        MappingProxyType({g: n.name for n in usable for g in n.gpu_ids()}),
        MappingProxyType(type_of := {g: n.gpu_type for n in usable for g in n.gpu_ids()}))
    return _NodeFacts(usable, counts, type_of, layout)


@dataclass(frozen=True, slots=True)
class ClusterState:
    """One consistent view of the cluster at ``time_s``.

    ``jobs`` keeps the resource manager's submission order, which policies use to break ties
    (the artifacts break them by job id). It may also hold jobs that ended since the previous
    snapshot, so that accounting (attained service) sees their last round.
    """

    time_s: float
    nodes: tuple[Node, ...] = ()
    jobs: tuple[Job, ...] = ()
    tenants: tuple[Tenant, ...] = ()
    gpu_types: tuple[GpuType, ...] = ()

    def active_jobs(self) -> tuple[Job, ...]:
        global _LAST_ACTIVE
        last = _LAST_ACTIVE   # policy and diff both ask, at every decision, of the same jobs
        if last[0] is self.jobs:
            return last[1]
        active = tuple(j for j in self.jobs if j.state in _ACTIVE)
        if type(self.jobs) is tuple:   # a list could change under the cache
            _LAST_ACTIVE = (self.jobs, active)
        return active

    def job(self, job_id: str) -> Job:
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise KeyError(job_id)

    def usable_nodes(self) -> tuple[Node, ...]:
        return _node_facts(self.nodes).usable

    def gpu_count(self, gpu_type: str | None = None) -> int:
        counts = _node_facts(self.nodes).counts
        return sum(counts.values()) if gpu_type is None else counts.get(gpu_type, 0)

    def gpu_type_names(self) -> tuple[str, ...]:
        return tuple(_node_facts(self.nodes).counts)

    def gpu_type_of(self) -> dict[str, str]:
        """GPU id → type, for every usable GPU (a fresh dict the caller may change)."""
        return dict(_node_facts(self.nodes).type_of)

    def layout(self) -> NodeLayout:
        """The usable GPUs by node and type (read-only, shared by every state on the same
        node tuple)."""
        return _node_facts(self.nodes).layout

    def with_jobs(self, jobs: Iterable[Job]) -> ClusterState:
        return replace(self, jobs=tuple(jobs))


@dataclass(frozen=True, slots=True)
class Assignment:
    """One job's place in the next round: which GPUs, and so at what size."""

    job_id: str
    gpu_ids: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.gpu_ids)


#: A figure of a reason: a number, or a short name (a tenant, an app, a GPU type).
Figure = float | int | str


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a policy placed, preempted or left waiting one job, in the policy's own terms.

    ``code`` is short and machine-readable (``policy.what``: ``themis.lost_auction``,
    ``las.queue``), stable across releases so tools can count them; ``figures`` are the
    numbers that justify it (ρ and the bid, a queue level, an LP share). What the job's
    outcome was (started, preempted, waiting, held back by a guard) is the round's to say
    (:mod:`gpufair.core.explain`), not the policy's: one reason serves every outcome.
    """

    code: str
    figures: Mapping[str, Figure] = field(default_factory=dict)

    def text(self) -> str:
        """One line: the code, then each figure (``las.queue: queue 1, attained gpu s 7200``)."""
        parts = [f"{k.replace('_', ' ')} {_figure(v)}" for k, v in self.figures.items()]
        return f"{self.code}: {', '.join(parts)}" if parts else self.code


def _figure(value: Figure) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@dataclass(frozen=True, slots=True)
class Plan:
    """What runs where next round. Jobs absent from ``assignments`` do not run.

    ``priorities`` is what soft-mode adapters hand to the resource manager's own scheduler;
    ``reason`` is a one-line human explanation for logs and dry runs.

    ``explain`` gives each active job's :class:`Reason`. It is a function, called only by a
    caller that keeps reasons (the daemon, a dry run), so a simulation pays nothing for
    them; it must be called before the policy's next ``schedule`` (it may read the policy's
    state as this call left it).
    """

    assignments: tuple[Assignment, ...] = ()
    priorities: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    reason: str = ""
    explain: Callable[[], Mapping[str, Reason]] | None = field(default=None, compare=False,
                                                                repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "priorities", _frozen_map(self.priorities))

    def reasons(self) -> Mapping[str, Reason]:
        """Job id → why (empty when the policy gives none)."""
        return {} if self.explain is None else self.explain()

    def by_job(self) -> dict[str, Assignment]:
        return {a.job_id: a for a in self.assignments}


class PreemptMode(str, Enum):
    REQUEUE = "requeue"
    SUSPEND = "suspend"


@dataclass(frozen=True, slots=True)
class Start:
    """Start (or release from hold) a pending job on exactly these GPUs."""

    job_id: str
    gpu_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Resume:
    job_id: str
    gpu_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Preempt:
    job_id: str
    mode: PreemptMode = PreemptMode.REQUEUE
    grace_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Resize:
    job_id: str
    gpu_ids: tuple[str, ...]
    grace_s: float = 0.0   # a resize restarts the job: the same checkpoint warning as a preempt


@dataclass(frozen=True, slots=True)
class Migrate:
    job_id: str
    gpu_ids: tuple[str, ...]
    grace_s: float = 0.0   # a move restarts the job: the same checkpoint warning as a preempt


@dataclass(frozen=True, slots=True)
class SetPriority:
    job_id: str
    priority: float


Action = Start | Resume | Preempt | Resize | Migrate | SetPriority


@dataclass(frozen=True, slots=True)
class ActionResult:
    """``retry``: the resource manager could not be reached (try again later), as opposed to
    an action it refused (``ok`` false, ``retry`` false). ``stale``: not carried out because
    the job is no longer as the plan saw it (it finished, restarted, moved): nothing failed,
    the next round plans again."""

    action: Action
    ok: bool
    detail: str = ""
    retry: bool = False
    stale: bool = False

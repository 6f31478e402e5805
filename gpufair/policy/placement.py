"""Gang selection and GPU placement shared by every policy that picks jobs in an order.

The greedy walk is Gavel's: a job that does not fit is skipped and the walk goes on, so
smaller jobs overtake (work conservation). Placement keeps a job on the GPUs it already holds
when they are all still free (no needless restart), then fills servers in order, preferring
one server that holds the whole gang.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache

from gpufair.model import Assignment, ClusterState, Job
from gpufair.model.host_room import HostRoom
from gpufair.model.identity_memo import IdentityMemo
from gpufair.model.records import NodeLayout
from gpufair.policy.free_gpus import Candidates, FreeGpus


def fastest_type(job: Job, free: dict[str, int], current: str | None = None) -> str | None:
    """The GPU type with the highest rate for this job among those with room for its gang.

    On a tie the type the job runs on now wins: moving it would cost a restart for nothing.
    """
    best: tuple[float, bool, str] | None = None
    for gpu_type, count in free.items():
        rate = job.rate(gpu_type)
        key = (rate, gpu_type == current, gpu_type)
        if rate > 0 and count >= job.gpus and (best is None or key[:2] > best[:2]):
            best = key
    return None if best is None else best[2]


def held_types(state: ClusterState) -> dict[str, str]:
    """Job id → the GPU type it runs on now, for jobs holding GPUs."""
    type_of = state.layout().type_of
    return {j.id: type_of[j.gpus_held[0]] for j in state.jobs
            if j.gpus_held and j.gpus_held[0] in type_of}


def greedy_walk(ordered: Iterable[Job], capacity: dict[str, int],
                current: dict[str, str] | None = None) -> list[tuple[Job, str]]:
    """Walk jobs in priority order; each gets its gang on the fastest type with room."""
    free = dict(capacity)
    current = current or {}
    picks: list[tuple[Job, str]] = []
    # once the cluster is full the rest of the queue is only skipped: no type has room for a
    # gang larger than the largest free count, so those jobs need no look at their rates
    largest = max(free.values(), default=0)
    for job in ordered:
        if job.gpus > largest:
            continue
        gpu_type = fastest_type(job, free, current.get(job.id))
        if gpu_type is None:
            continue
        free[gpu_type] -= job.gpus
        largest = max(free.values())
        picks.append((job, gpu_type))
    return picks


def capacity_by_type(state: ClusterState) -> dict[str, int]:
    return {t: state.gpu_count(t) for t in state.gpu_type_names()}


def place(state: ClusterState, picks: Sequence[tuple[Job, str]],
          reserved: Iterable[str] = ()) -> tuple[Assignment, ...]:
    """GPU ids for each picked (job, type); largest gangs first, as the artifacts do.
    ``reserved``: GPUs no pick may take (a gang spanning types that keeps its place,
    :mod:`gpufair.policy.spanning`).

    Nodes only fill up during one call, so each type keeps a cursor past its full nodes:
    placement stays near-linear on clusters of thousands of nodes. A simulator calls this at
    every event with most picks keeping their GPUs, so what is taken is a set and a count
    per node, and a node's free GPUs are listed only when a new gang lands on it (copying
    every node's GPU list per call was most of a call on a 256-node cluster).

    Where nodes count their CPUs and memory (Slurm), a job that asks for them goes only where
    they fit beside the jobs that keep their place and those placed before it
    (:class:`HostRoom`); on a simulated cluster ``room`` is None and nothing changes.
    """
    layout = state.layout()
    room = HostRoom.of(state)
    gpus_of, nodes_of, named = layout.gpus_of, layout.nodes_of, layout.node_sets
    biggest, node_at, type_of = layout.biggest, layout.node_of_gpu, layout.type_of
    taken: set[str] = set()
    used: dict[str, int] = {}   # node -> GPUs taken on it so far
    free = FreeGpus(gpus_of, taken, used)
    free.take((g for g in reserved if g in node_at), node_at)
    cursor = dict.fromkeys(nodes_of, 0)
    order = sorted(picks, key=lambda p: -p[0].gpus)
    gangs = _gangs_on(layout)
    chosen: dict[str, tuple[str, ...]] = {}
    newcomers = []
    for pick in order:
        job, gpu_type = pick
        held = job.gpus_held
        if len(held) == job.gpus and _keep(held, taken, used, named.get(gpu_type, ()), gangs):
            if job.placement_problem(held, type_of) is None:
                chosen[job.id] = held
                if room is not None:
                    room.take(job, held)
                continue
            _give_back(held, taken, used, node_at)
        newcomers.append(pick)
    singles: dict[str, Iterator[str]] = {}
    for job, gpu_type in newcomers:
        if job.allowed_nodes is not None or job.nodes is not None or \
                (room is not None and job.host is not None):
            # (the type's whole node tuple: its count buckets skip the full nodes)
            gpus = constrained_layout(job, nodes_of.get(gpu_type, ()), free, room)
            if gpus:
                free.take(gpus, node_at)
                chosen[job.id] = gpus
                if room is not None:
                    room.take(job, gpus)
            continue
        if job.gpus == 1:   # after every larger gang (the order): the first free GPU
            stream = singles.get(gpu_type)
            if stream is None:
                stream = singles[gpu_type] = _free_in_order(nodes_of.get(gpu_type, ()),
                                                            gpus_of, taken)
            gpu = next(stream, None)
            if gpu is not None:
                free.take((gpu,), node_at)
                chosen[job.id] = (gpu,)
            continue
        names = nodes_of.get(gpu_type, ())
        at = cursor.get(gpu_type, 0)   # (a type without usable nodes has none)
        while at < len(names) and not free.count(names[at]):
            at += 1
        cursor[gpu_type] = at
        rest = names[at:]
        if job.gpus <= 1:   # the cursor stops at the first node with a free GPU
            whole = rest[0] if rest else None
        elif job.gpus > biggest.get(gpu_type, 0):
            whole = None
        else:
            whole = next((n for n in rest if free.count(n) >= job.gpus), None)
        gpus: list[str] = []
        for name in [whole] if whole is not None else rest:
            gpus.extend(free[name][: job.gpus - len(gpus)])
            if len(gpus) == job.gpus:
                break
        if len(gpus) < job.gpus:
            continue  # the walk over-committed a type: skip rather than under-provision a gang
        free.take(gpus, node_at)
        chosen[job.id] = tuple(gpus)
    return tuple([_assignment(job.id, chosen[job.id]) for job, _ in picks if job.id in chosen])


def _free_in_order(names: Sequence[str], gpus_of: Mapping[str, tuple[str, ...]],
                   taken: Collection[str]) -> Iterator[str]:
    """The type's GPUs not taken, node by node in order, each checked when it is reached:
    where the node cursor would place one 1-GPU gang after another, without rescanning
    the nodes for each."""
    for name in names:
        for gpu in gpus_of[name]:
            if gpu not in taken:
                yield gpu


@lru_cache(maxsize=1 << 14)
def _assignment(job_id: str, gpu_ids: tuple[str, ...]) -> Assignment:
    """Assignments are immutable values, and most recur decision after decision (a running
    job kept on its GPUs): built once each, a large share of a simulated event's cost less."""
    return Assignment(job_id, gpu_ids)


def _keep(held: tuple[str, ...], taken: set[str], used: dict[str, int],
          nodes: Collection[str], gangs: _Gangs) -> bool:
    """Take the GPUs the job holds if every one is usable, not yet taken (nor named twice)
    and on a node of the type it was picked for; else take nothing. Most picks keep their
    GPUs, decision after decision: the held tuple's nodes are looked up once
    (:class:`_Gangs`), and the checks and the taking are set operations, not a Python step
    per GPU (issue 31: this was the largest share of a long history's FIFO decisions)."""
    gang = gangs.of(held)
    if gang is None or not gang[1].issubset(nodes) or not taken.isdisjoint(held):
        return False
    taken.update(held)
    for node, count in gang[0]:
        used[node] = used.get(node, 0) + count
    return True


class _Gangs:
    """A held GPU tuple's nodes on one layout: (node, GPUs on it) in first-seen order and the
    set of them, or None when a GPU is not usable or named twice. Tuples recur from decision
    to decision (a running job's record keeps its ``gpus_held``); the memo starts over past
    :data:`_GANGS_KEPT` entries."""

    def __init__(self, node_at: Mapping[str, str]) -> None:
        self.node_at = node_at
        self.memo: dict[tuple[str, ...], tuple[tuple[tuple[str, int], ...],
                                               frozenset[str]] | None] = {}

    def of(self, held: tuple[str, ...]
           ) -> tuple[tuple[tuple[str, int], ...], frozenset[str]] | None:
        memo = self.memo
        if held in memo:
            return memo[held]
        counts: dict[str, int] = {}
        gang: tuple[tuple[tuple[str, int], ...], frozenset[str]] | None = None
        if len(set(held)) == len(held):
            for g in held:
                node = self.node_at.get(g)
                if node is None:
                    break
                counts[node] = counts.get(node, 0) + 1
            else:
                gang = (tuple(counts.items()), frozenset(counts))
        if len(memo) >= _GANGS_KEPT:
            memo.clear()
        memo[held] = gang
        return gang


_GANGS_KEPT = 1 << 15
#: one :class:`_Gangs` per layout, by identity; layouts are shared by every state on the
#: same node tuple
_GANGS: IdentityMemo[NodeLayout, _Gangs] = IdentityMemo(8)


def _gangs_on(layout: NodeLayout) -> _Gangs:
    return _GANGS.get(layout, lambda kept: _Gangs(kept.node_of_gpu))


def _give_back(gpus: Sequence[str], taken: set[str], used: dict[str, int],
               node_at: Mapping[str, str]) -> None:
    for g in gpus:
        taken.discard(g)
        used[node_at[g]] -= 1


def constrained_layout(job: Job, names: Sequence[str], free: Mapping[str, list[str]],
                       room: HostRoom | None = None) -> tuple[str, ...]:
    """A layout on the job's allowed nodes, on exactly ``job.nodes`` of them with equal GPUs
    when it asks so (fullest-fitting nodes first, to keep large holes); () if none fits.
    Without a node count: the first allowed node with room for the whole gang, else the
    allowed nodes' free GPUs in node order.

    With ``room``, a node takes only as many of the job's GPUs as its free CPUs and memory
    leave room for (the caller charges the room with the layout it keeps).

    ``free`` is a :class:`FreeGpus` (its count buckets answer without scanning every node)
    or any node → free GPUs map (scanned in node order): the answers are the same."""
    allowed = None if job.allowed_nodes is None else _as_set(job.allowed_nodes)
    if room is not None and job.host is None:
        room = None
    fits = None if room is None else lambda name, gpus: room.fits(job, name, gpus)
    nodes = free.candidates(names, allowed, fits) if isinstance(free, FreeGpus) else \
        Candidates(names, allowed, lambda name: len(free[name]), fits)
    if job.nodes is None:
        first = nodes.first_fitting(job.gpus)
        if first is not None:
            return tuple(free[first][: job.gpus])
        # the gang spread over nodes in order, each taking what its free GPUs (and with
        # ``room`` its CPUs and memory) allow
        gpus: list[str] = []
        for name in nodes.in_order(job.gpus):
            take = min(nodes.count(name), job.gpus - len(gpus))
            if room is not None:
                take = room.most(job, name, take)
            gpus.extend(free[name][:take])
            if len(gpus) == job.gpus:
                return tuple(gpus)
        return ()
    if job.gpus % job.nodes:
        return ()
    per = job.gpus // job.nodes
    chosen = nodes.best_fitting(per, job.nodes)
    if chosen is None:
        return ()
    return tuple(g for name in chosen for g in free[name][:per])


@lru_cache(maxsize=256)
def _as_set(names: tuple[str, ...]) -> frozenset[str]:
    """A job's allowed nodes as a set, once per distinct tuple (most jobs of a partition
    share one: building a set of a thousand names per job and node was issue 30's hot spot)."""
    return frozenset(names)

"""Gang selection and GPU placement shared by every policy that picks jobs in an order.

The greedy walk is Gavel's: a job that does not fit is skipped and the walk goes on, so
smaller jobs overtake (work conservation). Placement keeps a job on the GPUs it already holds
when they are all still free (no needless restart), then fills servers in order, preferring
one server that holds the whole gang.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpufair.model import Assignment, ClusterState, Job


def fastest_type(job: Job, free: dict[str, int]) -> str | None:
    """The GPU type with the highest rate for this job among those with room for its gang."""
    best: tuple[float, str] | None = None
    for gpu_type, count in free.items():
        rate = job.rate(gpu_type)
        if rate > 0 and count >= job.gpus and (best is None or rate > best[0]):
            best = (rate, gpu_type)
    return None if best is None else best[1]


def greedy_walk(ordered: Iterable[Job], capacity: dict[str, int]) -> list[tuple[Job, str]]:
    """Walk jobs in priority order; each gets its gang on the fastest type with room."""
    free = dict(capacity)
    picks: list[tuple[Job, str]] = []
    for job in ordered:
        gpu_type = fastest_type(job, free)
        if gpu_type is None:
            continue
        free[gpu_type] -= job.gpus
        picks.append((job, gpu_type))
    return picks


def capacity_by_type(state: ClusterState) -> dict[str, int]:
    return {t: state.gpu_count(t) for t in state.gpu_type_names()}


def place(state: ClusterState, picks: Sequence[tuple[Job, str]]) -> tuple[Assignment, ...]:
    """GPU ids for each picked (job, type); largest gangs first, as the artifacts do."""
    free_by_node: dict[str, list[str]] = {}
    node_type: dict[str, str] = {}
    for node in state.usable_nodes():
        free_by_node[node.name] = list(node.gpu_ids())
        node_type[node.name] = node.gpu_type
    free = {g for ids in free_by_node.values() for g in ids}
    order = sorted(picks, key=lambda p: -p[0].gpus)
    chosen: dict[str, tuple[str, ...]] = {}
    for job, gpu_type in order:
        held = job.gpus_held
        if len(held) == job.gpus and all(g in free for g in held) and \
                all(node_type.get(g.rpartition(":")[0]) == gpu_type for g in held):
            chosen[job.id] = held
            free.difference_update(held)
    for job, gpu_type in order:
        if job.id in chosen:
            continue
        nodes = [n for n, t in node_type.items() if t == gpu_type]
        whole = next((n for n in nodes
                      if sum(g in free for g in free_by_node[n]) >= job.gpus), None)
        candidates = free_by_node[whole] if whole is not None else \
            [g for n in nodes for g in free_by_node[n]]
        gpus = tuple(g for g in candidates if g in free)[: job.gpus]
        if len(gpus) < job.gpus:
            continue  # the walk over-committed a type: skip rather than under-provision a gang
        chosen[job.id] = gpus
        free.difference_update(gpus)
    return tuple(Assignment(job.id, chosen[job.id]) for job, _ in picks if job.id in chosen)

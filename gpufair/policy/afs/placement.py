"""GPU ids for AFS's counts on one GPU type: change as little as possible of what runs.

Order of work (spec §4.4-4.5):

1. a job whose count did not change and whose GPUs are all still free keeps them exactly
   (no action at all);
2. the others, whole-server shares first and then largest first (first-fit decreasing, which
   packs network-packing sizes without network sharing when it starts from empty servers,
   App. E Prop. 1), each on the servers where it already holds the most GPUs, its own GPUs
   first: a job that grows or shrinks keeps as many of its GPUs as it can;
3. when no server layout fits (fragmentation left by step 1), the fewest servers that hold
   enough free GPUs. A job that still does not fit is left out of the plan (its GPUs idle).

Jobs that constrain their placement (allowed nodes, an exact node count) use the shared
:func:`gpufair.policy.placement.constrained_layout`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from gpufair.model import Job
from gpufair.model.records import NodeLayout
from gpufair.policy.placement import constrained_layout


def place_pool(layout: NodeLayout, gpu_type: str, counts: Sequence[tuple[Job, int]]
               ) -> dict[str, tuple[str, ...]]:
    """Job id → GPU ids on ``gpu_type`` for each (job, count) that could be placed."""
    names = layout.nodes_of.get(gpu_type, ())
    free = {n: list(layout.gpus_of[n]) for n in names}
    node_at = layout.node_of_gpu
    per_node = layout.biggest.get(gpu_type, 0)
    chosen: dict[str, tuple[str, ...]] = {}
    for job, count in counts:
        held = job.gpus_held
        if len(held) == count and all(node_at.get(g) in free and g in free[node_at[g]]
                                      for g in held) \
                and job.placement_problem(held, layout.type_of) is None:
            chosen[job.id] = held
            for g in held:
                free[node_at[g]].remove(g)
    rest = [(job, count) for job, count in counts if job.id not in chosen]
    rest.sort(key=lambda jc: (jc[1] < per_node, -jc[1]))
    for job, count in rest:
        if job.allowed_nodes is not None or job.nodes is not None:
            gpus = constrained_layout(replace(job, gpus=count), names, free)
        else:
            gpus = _fit(job, count, names, free, per_node, node_at)
        if not gpus:
            continue
        for g in gpus:
            free[node_at[g]].remove(g)
        chosen[job.id] = gpus
    return chosen


def _fit(job: Job, count: int, names: Sequence[str], free: Mapping[str, list[str]],
         per_node: int, node_at: Mapping[str, str]) -> tuple[str, ...]:
    """GPUs for ``count`` on the fewest servers, preferring the job's own GPUs and servers."""
    mine: dict[str, int] = {}
    for g in job.gpus_held:
        node = node_at.get(g)
        if node in free and g in free[node]:
            mine[node] = mine.get(node, 0) + 1
    # servers it holds GPUs on first (most first), then in cluster order (a stable sort by
    # -mine, without sorting every server of the pool for every job)
    ranked = sorted(mine, key=lambda n: (-mine[n], names.index(n)))
    ranked += [n for n in names if n not in mine]
    held = set(job.gpus_held)

    def take(node: str, k: int) -> list[str]:
        own = [g for g in free[node] if g in held]
        other = [g for g in free[node] if g not in held]
        return (own + other)[:k]

    if per_node and count >= per_node and count % per_node == 0:
        whole = [n for n in ranked if len(free[n]) == per_node]
        if len(whole) >= count // per_node:
            return tuple(g for n in whole[: count // per_node] for g in take(n, per_node))
    elif count < per_node:
        node = next((n for n in ranked if len(free[n]) >= count), None)
        if node is not None:
            return tuple(take(node, count))
    gpus: list[str] = []
    for node in sorted(ranked, key=lambda n: (-mine.get(n, 0), -len(free[n]))):
        gpus += take(node, count - len(gpus))
        if len(gpus) == count:
            return tuple(gpus)
    return ()

"""Gangs that span GPU types, for the policies that allow it (an option, off by default).

Why: when the GPUs a policy may give are split over types so that no single type has room
for a gang (an 8-GPU job on 8+8+8 GPUs waits until one whole type is free; an OEF tenant's
whole GPUs fall on two types), the gang can still run across types, at the slowest type's
rate (:meth:`gpufair.model.ThroughputProfile.gang_rate`: a synchronous gang waits for its
slowest worker). That is the straggler cost the OEF paper's placer keeps small (§4.4: a
tenant only ever gets adjacent types, and most tenants one type). The rules here follow the
OEF spec's choice (§7.9): a gang spans only when no single type holds it, and only the
fastest run of types the job can use that holds it, so its rate is as high as spanning allows.

Two steps: :func:`span_mix` (how many GPUs of which types, from counts: what a policy's
share accounting needs) and :func:`place_spans` (which GPUs, after the single-type gangs
are placed by :func:`gpufair.policy.placement.place`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from gpufair.model import Assignment, ClusterState, Job
from gpufair.model.host_room import HostRoom
from gpufair.policy.free_gpus import FreeGpus
from gpufair.policy.placement import constrained_layout


def span_mix(job: Job, free: Mapping[str, int]) -> dict[str, int] | None:
    """GPUs per type for the job's gang across types of ``free`` (type → GPUs it may take),
    or None: when one type holds it (then it needs no span), when the types it can use
    (a positive rate at its gang size) cannot hold it together, or when it asks for an exact
    node count (spanning types would break it).

    The types are taken in the job's own speed order, fastest first, until they hold the
    gang: the slowest of them sets the gang's rate, so that is the best rate a span can
    have. The GPUs are then taken from that slowest type up, so the fewest fast GPUs wait on
    it (the same rate, the least straggler cost). Ties of rate: type order of ``free``."""
    if job.nodes is not None or job.gpus < 2:
        return None
    usable = [(job.rate(t), k, t) for k, t in enumerate(free) if free[t] > 0 and job.rate(t) > 0]
    if any(free[t] >= job.gpus for _, _, t in usable):
        return None
    usable.sort(key=lambda u: (-u[0], u[1]))
    held, run = 0, []
    for _, _, t in usable:
        run.append(t)
        held += free[t]
        if held >= job.gpus:
            break
    else:
        return None
    mix: dict[str, int] = {}
    left = job.gpus
    for t in reversed(run):   # from the slowest of the run up
        take = min(free[t], left)
        if take:
            mix[t] = take
            left -= take
    return mix


def place_spans(state: ClusterState, placed: Sequence[Assignment],
                spans: Sequence[tuple[Job, Mapping[str, int]]]) -> tuple[Assignment, ...]:
    """GPU ids for each (job, GPUs per type) on the GPUs ``placed`` leaves free; largest
    gangs first. A job keeps the GPUs it holds when they are still free and of the same mix
    (no needless restart: a caller that places other gangs first reserves them, see
    :func:`kept_span`); otherwise each type's part goes where a gang of that size would
    (:func:`constrained_layout`: one node when one has room, the job's allowed nodes and
    CPUs and memory respected). A span that no longer fits is left out."""
    layout = state.layout()
    node_at, type_of = layout.node_of_gpu, layout.type_of
    free = FreeGpus.around(layout.gpus_of, node_at, (g for a in placed for g in a.gpu_ids))
    room = HostRoom.of(state)
    if room is not None:
        for a in placed:
            room.take(state.job(a.job_id), a.gpu_ids)
    out: list[Assignment] = []
    for job, mix in sorted(spans, key=lambda s: -s[0].gpus):
        gpus = kept_span(job, mix, type_of)
        if gpus is not None and any(g not in free[node_at[g]] for g in gpus):
            gpus = None
        if gpus is None:
            gpus = _laid_out(job, mix, layout.nodes_of, free, room)
        if gpus is None or job.placement_problem(gpus, type_of) is not None:
            continue
        free.take(gpus, node_at)
        if room is not None:
            room.take(job, gpus)
        out.append(Assignment(job.id, gpus))
    return tuple(out)


def kept_span(job: Job, mix: Mapping[str, int], type_of: Mapping[str, str]
              ) -> tuple[str, ...] | None:
    """The GPUs the job holds when they are usable and of exactly this mix (it can stay
    where it runs: the caller reserves them from other placements), else None."""
    held = job.gpus_held
    if len(held) != job.gpus or any(g not in type_of for g in held) or \
            Counter(type_of[g] for g in held) != Counter(mix):
        return None
    return held


def _laid_out(job: Job, mix: Mapping[str, int], nodes_of: Mapping[str, tuple[str, ...]],
              free: FreeGpus, room: HostRoom | None) -> tuple[str, ...] | None:
    """Each type's part laid out on that type's nodes (parts never share a node: a node has
    one type, so the parts need not see each other's GPUs)."""
    gpus: list[str] = []
    for gpu_type, count in mix.items():
        part = constrained_layout(replace(job, gpus=count), nodes_of.get(gpu_type, ()), free,
                                  room)
        if len(part) != count:
            return None
        gpus.extend(part)
    return tuple(gpus)

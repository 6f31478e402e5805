"""``slurm_backfill``: what a stock Slurm does, so a replayed history's "as run" and gpufair's
policies can be compared with the resource manager's own behaviour in the same simulator.

Priority is submission order (Slurm's multifactor priority with no weights but the
partition's, the loopback cluster's and many sites' setting: ties go to the older job id).
Jobs start in that order while they fit. The first job that does not fit (the head) gets a
reservation: the earliest time (the *shadow time*) at which enough GPUs will be free for it
if every running job runs to its time limit, on the GPUs it would then take. A later job
starts now (is backfilled) only if it fits now and either ends, by its own time limit,
before the shadow time, or leaves the head job's reserved GPUs alone. So the head job's
reservation is never delayed (EASY backfill: only the head has one). Running jobs are never
preempted, moved or resized.

A job's time limit is ``Job.time_limit_s`` (a history's ``Timelimit``); a job without one
(a trace that has no such column) gets ``default_time_limit_s``, one day, a common
``DefaultTime`` (Slurm itself plans an UNLIMITED job with a year).

Placement follows Slurm's node order: a job on one node takes the first node (in the
cluster's order) with room, a gang without node count fills nodes in order, a job asking for
N nodes takes N nodes with equal GPUs. GPU types are those the job may run on (its
``gpu_types``) with a known rate, as for every policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from gpufair.model import Assignment, ClusterState, Job, Plan
from gpufair.policy.base import PolicyBase
from gpufair.settings import setting

#: GPU ids free, by node, in the node's own order (what a fit reads and takes from)
FreeGpus = dict[str, list[str]]


@dataclass(frozen=True)
class SlurmBackfillOptions:
    """``[policies.slurm_backfill]``."""

    default_time_limit_s: float = setting(
        86400.0, "time limit (s) of a job that has none (a trace without Timelimit)",
        ge=1.0)


@dataclass(frozen=True)
class Reservation:
    """The head job's start: when (``shadow_s``) and on which GPUs."""

    job_id: str
    shadow_s: float
    gpus: frozenset[str]


class SlurmBackfillPolicy(PolicyBase):
    name = "slurm_backfill"
    Options = SlurmBackfillOptions
    #: a function of the snapshot alone; but a running job past its limit moves the shadow
    #: time with the clock, so it wants to see every event
    observes_every_event: ClassVar[bool] = True

    def time_limit(self, job: Job) -> float:
        return job.time_limit_s or self.options.default_time_limit_s

    def schedule(self, state: ClusterState, now: float) -> Plan:
        layout = state.layout()
        free: FreeGpus = {name: list(gpus) for name, gpus in layout.gpus_of.items()}
        active = state.active_jobs()
        kept: list[Assignment] = []
        releases: list[tuple[float, tuple[str, ...]]] = []
        for job in active:
            held = list(job.gpus_held)
            if not held or not self.may_keep(job, state):
                continue   # none, or where the job may not run: placed anew below
            for gpu in held:
                node_free = free[layout.node_of_gpu[gpu]]
                if gpu in node_free:
                    node_free.remove(gpu)
            kept.append(Assignment(job.id, tuple(held)))
            started = job.start_s if job.start_s is not None else now
            releases.append((max(now, started + self.time_limit(job)), tuple(held)))
        releases.sort(key=lambda r: r[0])
        running = {a.job_id for a in kept}
        queue = sorted((j for j in active if j.id not in running),
                       key=lambda j: j.arrival_s)   # stable: ties keep submission order
        started: list[Assignment] = []
        reservation: Reservation | None = None
        for job in queue:
            nodes = self.nodes_for(job, state)
            if not nodes:
                continue   # no GPU of a type it may use: never runs, reserves nothing
            if reservation is None:
                gpus = fit(job, nodes, free)
                if gpus:
                    take(free, gpus, layout.node_of_gpu)
                    started.append(Assignment(job.id, gpus))
                    continue
                reservation = reserve(job, nodes, free, releases, layout.node_of_gpu)
                continue
            gpus = self.backfill(job, nodes, free, reservation, now)
            if gpus:
                take(free, gpus, layout.node_of_gpu)
                started.append(Assignment(job.id, gpus))
        ranks = {j.id: -float(rank) for rank, j in enumerate(sorted(
            active, key=lambda j: j.arrival_s))}
        head = f", head {reservation.job_id} reserved at {reservation.shadow_s:g}" \
            if reservation else ""
        return Plan(assignments=(*kept, *started), priorities=ranks,
                    reason=f"{self.name}: {len(started)} started{head}")

    def backfill(self, job: Job, nodes: Sequence[Sequence[str]], free: FreeGpus,
                 reservation: Reservation, now: float) -> tuple[str, ...]:
        """GPUs for ``job`` that cannot delay the head job, or () (it waits)."""
        # on GPUs the head job will not take: may run as long as it likes
        outside = {n: [g for g in gpus if g not in reservation.gpus] for n, gpus in free.items()}
        gpus = fit(job, nodes, outside)
        if gpus:
            return gpus
        if now + self.time_limit(job) <= reservation.shadow_s:
            return fit(job, nodes, free)   # done by its limit before the head job starts
        return ()

    @staticmethod
    def may_keep(job: Job, state: ClusterState) -> bool:
        """The job runs where it may: its whole gang on usable GPUs of one type it has a
        rate for, as it asked (nodes, types). Else it is placed anew, as if requeued."""
        type_of = state.layout().type_of
        types = {type_of.get(g) for g in job.gpus_held}
        if len(job.gpus_held) != job.gpus or len(types) != 1 or None in types:
            return False
        return job.rate(types.pop()) > 0 and \
            job.placement_problem(job.gpus_held, type_of) is None

    @staticmethod
    def nodes_for(job: Job, state: ClusterState) -> tuple[tuple[str, ...], ...]:
        """The usable nodes the job may run on, one group per GPU type it has a rate for
        (a gang never mixes types), types and nodes in the cluster's order."""
        layout = state.layout()
        allowed = None if job.allowed_nodes is None else set(job.allowed_nodes)
        groups = []
        for gpu_type, names in layout.nodes_of.items():
            if job.rate(gpu_type) <= 0:
                continue
            nodes = tuple(n for n in names if layout.gpus_of[n]
                          and (allowed is None or n in allowed))
            if nodes:
                groups.append(nodes)
        return tuple(groups)


def fit(job: Job, groups: Sequence[Sequence[str]], free: Mapping[str, list[str]]
        ) -> tuple[str, ...]:
    """The GPUs the job takes of ``free`` now: on the first GPU type (group of nodes) where
    it fits, in Slurm's node order; () when it fits on none."""
    for nodes in groups:
        gpus = fit_on(job, nodes, free)
        if gpus:
            return gpus
    return ()


def fit_on(job: Job, nodes: Sequence[str], free: Mapping[str, list[str]]) -> tuple[str, ...]:
    """The GPUs the job takes of ``free`` on ``nodes`` (all of one type), or ()."""
    if job.nodes is not None:
        if job.gpus % job.nodes:
            return ()
        per = job.gpus // job.nodes
        fitting = [n for n in nodes if len(free[n]) >= per][: job.nodes]
        if len(fitting) < job.nodes:
            return ()
        return tuple(g for n in fitting for g in free[n][:per])
    whole = next((n for n in nodes if len(free[n]) >= job.gpus), None)
    if whole is not None:
        return tuple(free[whole][: job.gpus])
    gpus: list[str] = []
    for n in nodes:
        gpus.extend(free[n][: job.gpus - len(gpus)])
        if len(gpus) == job.gpus:
            return tuple(gpus)
    return ()


def take(free: FreeGpus, gpus: Sequence[str], node_of_gpu: Mapping[str, str]) -> None:
    for gpu in gpus:
        free[node_of_gpu[gpu]].remove(gpu)


def reserve(job: Job, nodes: Sequence[Sequence[str]], free: FreeGpus,
            releases: Sequence[tuple[float, tuple[str, ...]]],
            node_of_gpu: Mapping[str, str]) -> Reservation | None:
    """The head job's reservation: running jobs end (by their limits) in order until it fits.

    None when it never fits (more GPUs than it may ever use): then it holds no one back.
    """
    later = {n: list(gpus) for n, gpus in free.items()}
    for end_s, gpus in releases:
        for gpu in gpus:
            later[node_of_gpu[gpu]].append(gpu)
        placed = fit(job, nodes, _in_node_order(later, node_of_gpu))
        if placed:
            return Reservation(job.id, end_s, frozenset(placed))
    return None


def _in_node_order(free: FreeGpus, node_of_gpu: Mapping[str, str]) -> FreeGpus:
    """GPU ids given back keep their node's order (``node:index``)."""
    return {n: sorted(gpus, key=_index) for n, gpus in free.items()}


def _index(gpu: str) -> int:
    return int(gpu.rpartition(":")[2])

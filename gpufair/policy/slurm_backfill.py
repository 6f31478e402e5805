"""``slurm_backfill``: what a stock Slurm does, so a replayed history's "as run" and gpufair's
policies can be compared with the resource manager's own behaviour in the same simulator.

Priority is submission order (Slurm's multifactor priority with no weights but the
partition's, the loopback cluster's and many sites' setting: ties go to the older job id).
Jobs start in that order while they fit. A job that does not fit gets a *reservation*: the
earliest time at which enough GPUs are free for it if every running job runs to its time
limit (and no earlier reservation is disturbed), on the GPUs it would take then. A later job
starts now (is backfilled) only if it fits now on GPUs that no reservation holds before its
own time limit ends: it either ends before the reservations start, or leaves their GPUs alone.
So a reserved start is never delayed. Running jobs are never preempted, moved or resized.

The defaults follow Slurm 22.05's sched/backfill: a reservation for each waiting job it
tests (here the first 20; 1 would be EASY backfill, the head only), holding whole nodes (the
backfill map is per node), starting and ending on whole minutes (``bf_resolution``), at the
start the select plugin reports (the last end of a batch of running jobs' ends,
``end_window_s``). Against the loopback histories they plan 57 % of the starts slurmctld
logged to the second, where EASY plans 4 %, and start more jobs within a round of Slurm than
EASY does. Slurm tests up to 500 jobs (``bf_max_job_test``); 20 plan nearly as many logged
starts (224 of 391, against 227) and start the same jobs, at a fraction of the cost: each
reservation is a search over every later time a GPU frees (docs/policies/slurm_backfill.md
has the figures).

A job's time limit is ``Job.time_limit_s`` (a history's ``Timelimit``); a job without one
(a trace that has no such column) gets ``default_time_limit_s``, one day, a common
``DefaultTime`` (Slurm itself plans an UNLIMITED job with a year).

Placement follows Slurm's node order (22.05 orders nodes by name): a gang that fits on one
node goes to the first node with room, of any GPU type it may use; a larger one spreads over
the nodes of one type in order, or exactly N nodes with equal GPUs when it asked for N.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from gpufair.model import Assignment, ClusterState, Job, Plan, Reason
from gpufair.policy.base import PolicyBase
from gpufair.settings import setting

#: GPU ids free, by node, in the node's own order (what a fit reads and takes from)
FreeGpus = dict[str, list[str]]


@dataclass(frozen=True)
class SlurmBackfillOptions:
    """``[policies.slurm_backfill]``."""

    default_time_limit_s: float = setting(
        86400.0, "time limit (s) of a job that has none (a trace without Timelimit)", ge=1.0)
    reservations: int = setting(
        20, "waiting jobs that get a reservation, in priority order (Slurm's backfill plans "
        "one for every job it tests, up to bf_max_job_test, 500 by default; each costs a "
        "search here); later ones start only if they fit now; 1 is EASY backfill (the head "
        "only); 0 every waiting job", ge=0)
    whole_nodes: bool = setting(
        True, "a reservation holds every GPU of its nodes, not only the job's (Slurm's "
        "backfill map is per node); false: only the GPUs it will take")
    resolution_s: float = setting(
        60.0, "reservations start and end on multiples of this many seconds of the clock "
        "(Slurm's bf_resolution, 60 s by default); 0: exactly", ge=0.0)
    end_window_s: float = setting(
        30.0, "a reserved start is looked for as Slurm's select plugin does: running jobs end "
        "in batches (the first batch up to the next multiple of this many seconds after the "
        "first end, plus as much again; each later one twice as long), and the start is the "
        "last end of the first batch after which the job fits (30 s in Slurm 22.05); 0: the "
        "first end after which it fits", ge=0.0)
    backfill_at_boundaries: bool = setting(
        False, "backfill only at round boundaries, as Slurm's backfill thread runs every "
        "bf_interval (give the round that length); between them Slurm's main scheduler, run "
        "on each job's end and submission, starts jobs in priority order until the first "
        "that cannot start, reserving nothing; false: every decision backfills")


@dataclass(frozen=True)
class Reservation:
    """A waiting job's start: when (``start_s``) and on which GPUs, until ``end_s``."""

    job_id: str
    start_s: float
    end_s: float
    gpus: tuple[str, ...]


class Timeline:
    """When each GPU is free, as a backfill scheduler plans it: a running job holds its GPUs
    until its time limit, a reservation holds its GPUs from its start to its limit."""

    def __init__(self, gpus_of: Mapping[str, tuple[str, ...]], now: float, *,
                 node_of_gpu: Mapping[str, str] | None = None, resolution_s: float = 0.0,
                 end_window_s: float = 0.0) -> None:
        """``node_of_gpu``: reservations hold whole nodes (each GPU names its node);
        ``resolution_s``: their windows start and end on multiples of it; ``end_window_s``:
        running jobs' ends are taken in Slurm's batches (:func:`batch_ends`)."""
        self.gpus_of = gpus_of
        self.now = now
        self.node_of_gpu = node_of_gpu
        self.resolution_s = resolution_s
        self.end_window_s = end_window_s
        self.busy_until: dict[str, float] = {}   # GPU -> when its running job's limit ends
        self.windows: dict[str, list[tuple[float, float]]] = {}
        # what is free now, kept as jobs are held: most jobs of a long queue only ask "now?"
        self.free_now: FreeGpus = {node: list(gpus) for node, gpus in gpus_of.items()}
        self.free_count = sum(len(gpus) for gpus in gpus_of.values())
        # free(length) by how many reservations begin within ``length``: the same view for
        # every job of the queue until something is held or reserved
        self._begins: list[float] = []
        self._views: dict[int, FreeGpus] = {}
        self._node_sets: dict[int, tuple[Sequence[Sequence[str]], set[str]]] = {}

    def hold(self, gpus: Sequence[str], until: float) -> None:
        """Running (or starting now) until ``until``; never free now, whatever ``until``
        says (a job past its limit still holds its GPUs until it ends)."""
        for gpu in gpus:
            self.busy_until[gpu] = max(until, self.now)
            node = gpu.rpartition(":")[0]
            if gpu in self.free_now.get(node, ()):
                self.free_now[node].remove(gpu)
                self.free_count -= 1
        self._views.clear()

    def reserve(self, reservation: Reservation) -> None:
        window = (self._floor(reservation.start_s), self._floor(reservation.end_s))
        gpus: Sequence[str] = reservation.gpus
        if self.node_of_gpu is not None:
            nodes = dict.fromkeys(self.node_of_gpu[g] for g in reservation.gpus)
            gpus = [g for node in nodes for g in self.gpus_of[node]]
        for gpu in gpus:
            self.windows.setdefault(gpu, []).append(window)
        bisect.insort(self._begins, window[0])
        self._views.clear()

    def _floor(self, t: float) -> float:
        step = self.resolution_s
        return t if step <= 0 or math.isinf(t) else math.floor(t / step) * step

    def free(self, length: float) -> FreeGpus:
        """The GPUs free from now for ``length`` seconds (free now, and no reservation takes
        them sooner), by node in the node's order."""
        if not self.windows:
            return self.free_now
        end = self.now + length
        key = bisect.bisect_left(self._begins, end)   # the reservations that begin in time
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = {
                node: [g for g in gpus if g not in self.windows or self._free(g, self.now, end)]
                for node, gpus in self.free_now.items()}
        return view

    def _free(self, gpu: str, at: float, end: float) -> bool:
        until = self.busy_until.get(gpu)
        if until is not None and (at <= self.now or until > at):
            return False
        return all(stop <= at or begin >= end for begin, stop in self.windows.get(gpu, ()))

    def times(self, nodes: set[str] | None = None) -> list[float]:
        """Now and every later time a GPU may become free: where a start can first fit.

        A job past its limit frees its GPUs any moment: the instant after now, when a
        reservation can be had but nothing can start. With ``end_window_s``, the ends of
        running jobs on ``nodes`` (the job's, as Slurm looks only at jobs on the nodes it
        may use) count only as the last end of each of Slurm's batches."""
        ends = {t for t in self.busy_until.values() if t > self.now}
        if self.end_window_s > 0:
            ends = batch_ends(sorted({t for g, t in self.busy_until.items() if t > self.now
                                      and (nodes is None or g.rpartition(":")[0] in nodes)}),
                              self.end_window_s)
        ends.update(stop for windows in self.windows.values() for _, stop in windows
                    if stop > self.now)
        overdue = [math.nextafter(self.now, math.inf)] \
            if any(t <= self.now for t in self.busy_until.values()) else []
        return [self.now, *overdue, *sorted(ends)]

    def _nodes_in(self, groups: Sequence[Sequence[str]]) -> set[str]:
        """The nodes of ``groups`` as a set, kept per groups object: a queue's jobs share a
        few (SlurmBackfillPolicy.nodes_for's cache), and a set per job of a 10,000-job queue
        cost a second (issue 30). The groups are kept with it, so an id is never reused."""
        found = self._node_sets.get(id(groups))
        if found is None or found[0] is not groups:
            found = self._node_sets[id(groups)] = (groups, {n for g in groups for n in g})
        return found[1]

    def earliest(self, job: Job, groups: Sequence[Sequence[str]], length: float, *,
                 now_only: bool = False) -> tuple[float, tuple[str, ...]] | None:
        """The earliest start of ``job`` that delays no running job nor reservation, and the
        GPUs it takes then; None if there is none (or none now, with ``now_only``)."""
        allowed = self._nodes_in(groups)
        gpus = fit(job, groups, self.free(length), allowed)
        if gpus:
            return self.now, gpus
        if now_only:
            return None
        # later: the GPUs come free in the order of their holders' limits, added to what is
        # free now one release at a time (not every GPU looked at again for each time)
        later = {node: list(free) for node, free in self.free_now.items()}
        releases = sorted((until, _index(g), g) for g, until in self.busy_until.items())
        done = 0
        for at in self.times({n for nodes in groups for n in nodes})[1:]:
            while done < len(releases) and releases[done][0] <= at:
                gpu = releases[done][2]
                bisect.insort(later.setdefault(gpu.rpartition(":")[0], []), gpu,
                              key=_index)
                done += 1
            view = later if not self.windows else {
                node: [g for g in free if g not in self.windows or self._free(g, at, at + length)]
                for node, free in later.items()}
            gpus = fit(job, groups, view, allowed)
            if gpus:
                return at, gpus
        return None


class SlurmBackfillPolicy(PolicyBase):
    name = "slurm_backfill"
    Options = SlurmBackfillOptions
    #: a function of the snapshot alone; but a running job past its limit moves the shadow
    #: time with the clock, so it wants to see every event
    observes_every_event: ClassVar[bool] = True
    #: the decision in progress is a backfill pass (a round boundary, or no simulator told)
    _backfill_pass: bool = True

    def next_decision(self, preemptive: bool) -> None:
        """Told by the round loop (:class:`~gpufair.policy.replan.BoundaryAware`): a round
        boundary is Slurm's backfill pass, an event between boundaries its main scheduler
        (which only matters with ``backfill_at_boundaries``)."""
        self._backfill_pass = preemptive

    def time_limit(self, job: Job) -> float:
        return job.time_limit_s or self.options.default_time_limit_s

    def schedule(self, state: ClusterState, now: float) -> Plan:
        layout = state.layout()
        timeline = Timeline(layout.gpus_of, now, resolution_s=self.options.resolution_s,
                            node_of_gpu=layout.node_of_gpu if self.options.whole_nodes
                            else None, end_window_s=self.options.end_window_s)
        active = state.active_jobs()
        kept: list[Assignment] = []
        for job in active:
            if not job.gpus_held or not self.may_keep(job, state):
                continue   # none, or where the job may not run: placed anew below
            started = job.start_s if job.start_s is not None else now
            timeline.hold(job.gpus_held, started + self.time_limit(job))
            kept.append(Assignment(job.id, tuple(job.gpus_held)))
        running = {a.job_id for a in kept}
        queue = sorted((j for j in active if j.id not in running),
                       key=lambda j: j.arrival_s)   # stable: ties keep submission order
        most = self.options.reservations or len(queue)
        # Slurm's main scheduler: priority order, and the first job that cannot start
        # blocks the partition (22.05 schedule()); reservations are the backfill thread's
        in_order_only = self.options.backfill_at_boundaries and not self._backfill_pass
        started: list[Assignment] = []
        reserved: list[Reservation] = []
        groups_of: dict[tuple, tuple[tuple[str, ...], ...]] = {}
        for job in queue:
            now_only = len(reserved) >= most
            if (now_only or in_order_only) and job.gpus > timeline.free_count:
                if timeline.free_count == 0 or in_order_only:
                    break   # nothing free and no reservation left to give: all wait
                continue
            groups = self.nodes_for(job, state, groups_of)
            if not groups:
                continue   # no GPU of a type it may use: never runs, reserves nothing
            length = self.time_limit(job)
            found = timeline.earliest(job, groups, length, now_only=now_only or in_order_only)
            if in_order_only and found is None:
                break      # the main scheduler stops at the first job that cannot start
            if found is None:
                continue   # never fits (more GPUs than it may use), or not now
            at, gpus = found
            if at <= now:
                timeline.hold(gpus, now + length)
                started.append(Assignment(job.id, gpus))
            else:
                reserved.append(Reservation(job.id, at, at + length, gpus))
                timeline.reserve(reserved[-1])
        ranks = {j.id: -float(rank) for rank, j in enumerate(sorted(
            active, key=lambda j: j.arrival_s))}
        head = f", head {reserved[0].job_id} reserved at {reserved[0].start_s:g}" \
            if reserved else ""

        def explain() -> dict[str, Reason]:
            # in Slurm's terms: running to its time limit, started in submission order,
            # backfilled past a reservation it cannot delay, given a reservation, or waiting
            ends = {j.id: (j.start_s if j.start_s is not None else now) + self.time_limit(j)
                    for j in active if j.id in running}
            out: dict[str, Reason] = {j: Reason(f"{self.name}.running", {"ends_by_s": t})
                                      for j, t in ends.items()}
            behind_a_reservation = False   # a later job that starts now was backfilled
            planned = {a.job_id for a in started}
            starts = {r.job_id: r.start_s for r in reserved}
            for position, job in enumerate(queue, 1):
                figures: dict[str, float | int | str] = {"position": position,
                                                         "of": len(queue)}
                if job.id in planned:
                    code = "backfilled" if behind_a_reservation else "started"
                elif job.id in starts:
                    code = "reserved"
                    figures["start_s"] = starts[job.id]
                    behind_a_reservation = True
                else:
                    code = "waiting"
                out[job.id] = Reason(f"{self.name}.{code}", figures)
            return out

        return Plan(assignments=(*kept, *started), priorities=ranks,
                    reason=f"{self.name}: {len(started)} started, {len(reserved)} "
                           f"reserved{head}", explain=explain)

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
    def nodes_for(job: Job, state: ClusterState,
                  cache: dict[tuple, tuple[tuple[str, ...], ...]] | None = None
                  ) -> tuple[tuple[str, ...], ...]:
        """The usable nodes the job may run on, one group per GPU type it has a rate for
        (a gang never mixes types), types and nodes in the cluster's order. ``cache``: the
        groups of jobs with the same types and allowed nodes (one decision's)."""
        layout = state.layout()
        types = tuple(t for t in layout.nodes_of if job.rate(t) > 0)
        key = (types, job.allowed_nodes)
        if cache is not None and key in cache:
            return cache[key]
        allowed = None if job.allowed_nodes is None else set(job.allowed_nodes)
        groups = []
        for gpu_type in types:
            nodes = tuple(n for n in layout.nodes_of[gpu_type] if layout.gpus_of[n]
                          and (allowed is None or n in allowed))
            if nodes:
                groups.append(nodes)
        if cache is not None:
            cache[key] = tuple(groups)
        return tuple(groups)


def fit(job: Job, groups: Sequence[Sequence[str]], free: Mapping[str, list[str]],
        allowed: Container[str] | None = None) -> tuple[str, ...]:
    """The GPUs the job takes of ``free`` (nodes in the cluster's order), or ().
    ``allowed``: the nodes of ``groups`` as a set, when the caller keeps one.

    As Slurm places: a gang that fits on one node goes to the first node in the cluster's
    order with room for it, of any type it may use; a larger one spreads over the nodes of the
    first type where it fits (in order), or over exactly ``job.nodes`` nodes with equal GPUs.
    """
    if job.nodes is None or job.nodes == 1:
        if allowed is None:
            allowed = {n for nodes in groups for n in nodes}
        need = job.gpus   # (room first: on a busy site most nodes have none)
        whole = next((n for n, room in free.items() if len(room) >= need and n in allowed),
                     None)
        if whole is not None:
            return tuple(free[whole][: job.gpus])
        if job.nodes == 1:
            return ()
    for nodes in groups:
        gpus = spread(job, nodes, free)
        if gpus:
            return gpus
    return ()


def spread(job: Job, nodes: Sequence[str], free: Mapping[str, list[str]]) -> tuple[str, ...]:
    """The GPUs a gang larger than any node's room takes on ``nodes`` (of one type), or ()."""
    if job.nodes is not None:
        if job.gpus % job.nodes:
            return ()
        per = job.gpus // job.nodes
        fitting = [n for n in nodes if len(free[n]) >= per][: job.nodes]
        if len(fitting) < job.nodes:
            return ()
        return tuple(g for n in fitting for g in free[n][:per])
    if sum(len(free[n]) for n in nodes) < job.gpus:
        return ()
    gpus: list[str] = []
    for n in nodes:
        gpus.extend(free[n][: job.gpus - len(gpus)])
        if len(gpus) == job.gpus:
            return tuple(gpus)
    return ()


def batch_ends(ends: Sequence[float], window_s: float) -> set[float]:
    """The times at which Slurm's select plugin tests whether a waiting job fits, when it
    plans a start (cons_common's will-run test, 22.05): it takes the running jobs in the
    order of their ends and removes them in batches, the first up to ``window_s`` past the
    first end rounded up to a multiple of ``window_s`` (on the clock), each later batch
    up to a window twice as long (doubled again while no end falls in it); after each batch
    it tests, and the start it reports is the batch's last end. So a planned start is often
    later than the first end after which the job would fit, and a later job backfills in
    front of it. ``ends`` sorted."""
    if not ends:
        return set()
    barrier = ends[0] + window_s - math.fmod(ends[0], window_s)
    window = window_s
    out: set[float] = set()
    i = 0
    while i < len(ends):
        while ends[i] > barrier + window:
            window *= 2
        while i < len(ends) and ends[i] <= barrier + window:
            i += 1
        out.add(ends[i - 1])
    return out


def _index(gpu: str) -> int:
    """A GPU's index on its node (``node:index``): the order a node's free GPUs are kept."""
    return int(gpu.rpartition(":")[2])

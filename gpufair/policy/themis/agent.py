"""The AGENT: an app's valuation table {GPU bundle → ρ} for the GPUs on offer (spec §4.4–4.5).

Enumerating every subset of the offered GPUs is exponential, so bundles are placement-distinct
*pool rows* (spec U7, the compact form of §3.3): "k GPUs of type t anywhere", "k GPUs in rack
r", "k GPUs on machine m". Pools form a laminar tree (machine ⊂ rack ⊂ type), so any set of
rows whose per-pool totals fit is realisable as concrete GPUs, and the MILP only needs one
capacity row per pool. A narrower pool is offered only when it strictly lowers ρ (a placement
sensitive model), so an insensitive job bids one row per size and type, and a sensitive one a
few (capped) — small tables without losing the ILP's freedom to place apps side by side.

Rows are legal gang sizes only (spec U23): trace jobs are rigid, so an app's bundle sizes are
the GPUs of its k longest waiting jobs, k = 1, 2, ...
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from gpufair.model import Job
from gpufair.policy.themis.auction import Bid, BidRow
from gpufair.policy.themis.ftf import gang_makespan, rho, t_independent
from gpufair.policy.themis.topology import SlowdownModel, Topology

Pool = tuple  # ("type", t) | ("rack", t, rack) | ("machine", name)


@dataclass(frozen=True)
class Offer:
    """The GPUs on offer this round and the pool tree over them."""

    gpus: tuple[str, ...]
    topology: Topology
    free: Mapping[Pool, int] = field(default_factory=dict)
    parents: Mapping[Pool, Pool | None] = field(default_factory=dict)
    kids: Mapping[Pool, tuple[Pool, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, gpus: Sequence[str], topology: Topology) -> Offer:
        free: dict[Pool, int] = {}
        parents: dict[Pool, Pool | None] = {}
        for g in gpus:
            machine = topology.machine_of[g]
            gpu_type = topology.type_of[machine]
            chain = [("machine", machine), ("rack", gpu_type, topology.rack_of[machine]),
                     ("type", gpu_type)]
            for node, parent in zip(chain, [*chain[1:], None], strict=True):
                free[node] = free.get(node, 0) + 1
                parents[node] = parent
        kids: dict[Pool, list[Pool]] = {}
        for node, parent in parents.items():
            if parent is not None:
                kids.setdefault(parent, []).append(node)
        return cls(tuple(gpus), topology, free, parents,
                   {k: tuple(v) for k, v in kids.items()})

    def uses(self, pool: Pool, k: int) -> dict[Pool, int]:
        out: dict[Pool, int] = {}
        node: Pool | None = pool
        while node is not None:
            out[node] = k
            node = self.parents[node]
        return out

    def children(self, pool: Pool) -> tuple[Pool, ...]:
        return self.kids.get(pool, ())

    def span_level(self, pool: Pool, k: int) -> str:
        """The worst placement level k GPUs drawn from ``pool`` can end up at."""
        if k <= 1 or pool[0] == "machine":
            return "machine"
        kids = self.children(pool)
        if pool[0] == "rack":
            return "rack" if len(kids) > 1 else "machine"
        if len(kids) > 1:
            return "cluster"
        return self.span_level(kids[0], k) if kids else "machine"


@dataclass(frozen=True)
class AppView:
    """What the agent knows about its app this round (the paper's JobInfo list + times)."""

    app: str
    arrival_s: float
    running: tuple[Job, ...]  # jobs keeping GPUs under an unexpired lease
    waiting: tuple[Job, ...]  # jobs that need GPUs (pending, or lease expired)
    n_avg: float
    r_c: int

    @property
    def jobs(self) -> tuple[Job, ...]:
        return self.running + self.waiting

    # Each is a pure function of the view, asked for at every row of its bid (an app of
    # many array tasks prices dozens of rows): computed once per round, the same sums in
    # the same order (issue 30: 36,000 t_id and 165,000 remaining_s calls at 10,000 jobs).
    @cached_property
    def total_work_gpu_s(self) -> float:
        """Σ serial work of its jobs (:func:`work_gpu_s`), in job order."""
        return sum(work_gpu_s(j) for j in self.jobs)

    @cached_property
    def demand(self) -> int:
        return sum(j.gpus for j in self.jobs)

    @cached_property
    def remaining(self) -> dict[str, float]:
        """Each job's remaining time on its fastest type (:func:`remaining_s`), by id."""
        return {j.id: remaining_s(j, None) for j in self.jobs}


def best_rate(job: Job) -> float:
    return max((r for (_, n), r in job.throughput.rates.items() if n == job.gpus), default=0.0)


def iterations_left(job: Job) -> float:
    left = job.progress.iterations_left
    if left is None:  # no total known: assume it needs what it already had (LAS-style guess)
        return max(job.progress.iterations_done, 1.0)
    return left


def remaining_s(job: Job, gpu_type: str | None, slowdown: float = 1.0) -> float:
    """Remaining run time of a rigid gang on ``gpu_type`` (its fastest type when None)."""
    rate = best_rate(job) if gpu_type is None else job.rate(gpu_type)
    if rate <= 0:
        return math.inf
    return iterations_left(job) / rate * slowdown


def work_gpu_s(job: Job) -> float:
    """Serial work: the whole job's run time on its gang, at its fastest type, × gang."""
    rate = best_rate(job)
    total = job.progress.iterations_total
    if total is None:
        total = job.progress.iterations_done + iterations_left(job)
    return math.inf if rate <= 0 else total / rate * job.gpus


def launch_order(view: AppView) -> list[Job]:
    """The app-scheduler's order for waiting jobs: longest remaining first (LPT)."""
    return sorted(view.waiting, key=lambda j: (-remaining_s(j, None), j.id))


@dataclass(frozen=True)
class Agent:
    """Bid generation; stateless apart from its knobs, so the arbiter can call it inline."""

    slowdowns: SlowdownModel = field(default_factory=SlowdownModel)
    tid_mode: str = "paper"
    empty_rho: str = "cap"  # "cap": ρ = ∞ (capped by the auction); "deferred": served later
    defer_s: float = 600.0
    max_rows: int = 64
    max_local_rows: int = 8

    def t_id(self, view: AppView) -> float:
        return t_independent(view.total_work_gpu_s, view.r_c, view.demand, view.n_avg,
                             self.tid_mode)

    def _t_shared(self, view: AppView, now: float, started: Sequence[tuple[Job, float]],
                  free_after: int, delay_s: float = 0.0) -> float:
        remaining = view.remaining
        running = [(remaining[j.id], j.gpus) for j in view.running]
        running += [(rem + delay_s, j.gpus) for j, rem in started]
        ids = {j.id for j, _ in started}
        waiting = [(remaining[j.id], j.gpus) for j in view.waiting if j.id not in ids]
        return (now - view.arrival_s) + gang_makespan(running, waiting, free_after)

    def rho_current(self, view: AppView, now: float) -> float:
        """ρ_old: the app keeps what it holds and gets nothing new (∞ if it then starves)."""
        return rho(self._t_shared(view, now, (), 0), self.t_id(view))

    def rho_empty(self, view: AppView, now: float) -> float:
        """The empty row's ρ. ``deferred`` (an opt-in choice, see the module docs of
        themis.py): an app left out now is served ``defer_s`` later on its best GPUs."""
        current = self.rho_current(view, now)
        if math.isfinite(current) or self.empty_rho != "deferred" or not view.waiting:
            return current
        started = [(j, remaining_s(j, None)) for j in view.waiting]
        t_sh = self._t_shared(view, now, started, 0, delay_s=self.defer_s)
        return rho(t_sh, self.t_id(view))

    def _rho_with(self, view: AppView, now: float, jobs: Sequence[Job], gpu_type: str,
                  level: str) -> float:
        started = []
        for j in jobs:
            s = self.slowdowns.slowdown(j.model, level, j.gpus)
            started.append((j, remaining_s(j, gpu_type, s)))
        return rho(self._t_shared(view, now, started, 0), self.t_id(view))

    def bid(self, view: AppView, offer: Offer, now: float) -> Bid:
        rows: list[BidRow] = []
        order = launch_order(view)
        for pool, size in offer.free.items():
            if pool[0] != "type":
                continue
            gpu_type = pool[1]
            jobs: list[Job] = []
            for job in order:
                if job.rate(gpu_type) <= 0:
                    continue
                if sum(j.gpus for j in jobs) + job.gpus > size:
                    break
                jobs.append(job)
                rows.extend(self._rows_for(view, offer, now, pool, list(jobs)))
        rows.sort(key=lambda r: (r.rho, r.gpus))
        return Bid(view.app, self.rho_empty(view, now), tuple(rows[: self.max_rows]))

    def _rows_for(self, view: AppView, offer: Offer, now: float, type_pool: Pool,
                  jobs: list[Job]) -> list[BidRow]:
        """Rows of one bundle size on one GPU type: anywhere, then narrower pools that help."""
        k = sum(j.gpus for j in jobs)
        gpu_type = type_pool[1]
        # ρ depends on the pool only through its placement level: price each level once,
        # not once per rack (32 racks of one level on 2,048 GPUs)
        by_level: dict[str, float] = {}

        def value_at(level: str) -> float:
            if level not in by_level:
                by_level[level] = self._rho_with(view, now, jobs, gpu_type, level)
            return by_level[level]

        best = value_at(offer.span_level(type_pool, k))
        rows = [BidRow(offer.uses(type_pool, k), k, best, (type_pool, tuple(j.id for j in jobs)))]
        narrower = [p for p in offer.children(type_pool) if offer.free[p] >= k]
        for rack in narrower:
            value = value_at(offer.span_level(rack, k))
            if value < best - 1e-12:
                rows.append(BidRow(offer.uses(rack, k), k, value,
                                   (rack, tuple(j.id for j in jobs))))
        local_best = min((r.rho for r in rows), default=best)
        machine_value = value_at("machine")
        if len(jobs) == 1 and machine_value < local_best - 1e-12:
            machines = sorted((p for r in narrower for p in offer.children(r)
                               if offer.free[p] >= k), key=lambda p: (offer.free[p], p[1]))
            if machines:
                shift = zlib.crc32(view.app.encode()) % len(machines)
                machines = machines[shift:] + machines[:shift]
            for m in machines[: self.max_local_rows]:
                rows.append(BidRow(offer.uses(m, k), k, machine_value,
                                   (m, tuple(j.id for j in jobs))))
        return rows

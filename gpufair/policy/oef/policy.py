"""OEF as a gpufair policy: tenant shares of each GPU type, realised in whole GPUs per round.

Each call:

1. *virtual tenants*: a tenant's runnable jobs are grouped by their measured speedup vector
   (throughput per GPU type at the job's gang size over its throughput on the reference —
   slowest — type, from ``Job.throughput``; never a user's declaration). Each group is one
   virtual tenant with the tenant's weight split equally among its groups (paper §4.2.4).
2. *fair shares*: the OEF LP of the configured mode (``lp``), re-solved only when its inputs
   change; non-cooperative ratio-ordered inputs take the bisection shortcut (``fastpath``).
3. *rounding*: at each OEF round (``round_s``, default 300 s) the shares become whole GPUs
   per type with carried deviation and the small-share rule (``rounding``). Between OEF
   rounds the allocation in force is kept.
4. *jobs*: within a virtual tenant, the longest-starved jobs first (paper §6.1.3) take its
   GPUs, each gang on one type (the fastest for the job among those with room; the type it
   runs on now wins a tie, and between OEF rounds running jobs keep their place).
5. *backfill*: GPUs a share leaves unused (a tenant with fewer or larger jobs than its share
   fits) go to waiting jobs of the tenants furthest below their share, this round only and
   not charged to their deviation, so the cluster stays work-conserving.
6. *placement*: :func:`gpufair.policy.placement.place` (largest gangs first, one server when
   possible, jobs kept on the GPUs they hold), so actions appear only where the plan changes.

Options (``[policies.oef]``): ``mode`` (cooperative | non_cooperative), ``round_s``,
``weights`` (tenant → weight, over the snapshot's tenant weights), ``demand_cap``,
``fast_path``, ``backfill``, ``job_order``, ``span_types`` (gangs across GPU types,
:mod:`gpufair.policy.spanning`; off by default).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from gpufair.errors import InputError
from gpufair.model import ClusterState, Job, Plan, Reason
from gpufair.model.records import Figure
from gpufair.policy.base import PolicyBase, PolicyConfig
from gpufair.policy.oef.fastpath import solve_non_cooperative_fast
from gpufair.policy.oef.lp import (
    COOPERATIVE,
    MODES,
    NON_COOPERATIVE,
    OefProblem,
    OefSolution,
    solve_capped,
    solve_oef,
)
from gpufair.policy.oef.rounding import Rounder
from gpufair.policy.placement import capacity_by_type, greedy_walk, held_types, place
from gpufair.policy.solver import SolveOptions
from gpufair.policy.spanning import kept_span, place_spans, span_mix
from gpufair.settings import setting

#: Significant digits of a speedup that still tell two job types apart: measurements differ
#: in the last digits from one profiler round to the next, job types by far more.
SPEEDUP_DIGITS = 3
_EPS = 1e-9


@dataclass(frozen=True)
class OefOptions:
    mode: str = setting(COOPERATIVE, "cooperative: envy-free and sharing-incentive (eq. 10); "
                        "non_cooperative: equal normalized throughput, strategy-proof (eq. 9)",
                        choices=MODES)
    round_s: float = setting(300.0, "OEF round: whole GPUs are re-dealt (and deviations "
                             "charged) at most this often", gt=0.0)
    weights: Mapping[str, float] = setting(
        {}, "tenant -> weight, over the tenant weights of the snapshot (default 1)")
    demand_cap: bool = setting(False, "cap a tenant's share at the GPUs its runnable jobs use "
                               "and re-solve for the rest (not in the paper; spec §7.1)")
    fast_path: bool = setting(True, "non_cooperative: bisection instead of the LP when "
                              "speedups are ratio-ordered (same optimum; spec §3.8)")
    backfill: bool = setting(True, "GPUs a share leaves unused go to other tenants' waiting "
                             "jobs for the round (not charged to their deviation)")
    job_order: str = setting("starvation", "order of a tenant's jobs on its GPUs: starvation "
                             "(longest-starved first, round robin: the paper) or arrival "
                             "(first come first served within the tenant)",
                             choices=("starvation", "arrival"))
    span_types: bool = setting(False, "a gang no single type of the tenant's GPUs (or of the "
                               "backfill's) holds may run across the fastest types that "
                               "hold it, at the slowest one's rate (the straggler cost the "
                               "paper's placer keeps small, §4.4; spec §7.9)")

    def __post_init__(self) -> None:
        for tenant, weight in self.weights.items():
            if not (math.isfinite(weight) and weight > 0):
                raise ValueError(f"weights.{tenant} = {weight!r}: a weight must be > 0")


@dataclass(frozen=True)
class VirtualTenant:
    """One (tenant, job type): what the LP sees as a row."""

    key: str
    tenant: str
    speedups: tuple[float, ...]
    weight: float
    jobs: tuple[Job, ...]

    @property
    def demand(self) -> int:
        return sum(j.gpus for j in self.jobs)

    @property
    def min_gang(self) -> int:
        return min(j.gpus for j in self.jobs)


@dataclass
class RoundView:
    """What the last call decided, for metrics, dry runs and tests."""

    types: tuple[str, ...] = ()
    tenants: tuple[VirtualTenant, ...] = ()
    shares: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    real: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    backfilled: tuple[str, ...] = ()

    def tenant_shares(self) -> dict[str, dict[str, float]]:
        """Tenant → GPU type → fractional share (virtual tenants summed)."""
        out: dict[str, dict[str, float]] = {}
        for v, row in zip(self.tenants, self.shares, strict=True):
            mine = out.setdefault(v.tenant, dict.fromkeys(self.types, 0.0))
            for t, x in zip(self.types, row, strict=True):
                mine[t] += float(x)
        return out


def _explain(view: RoundView, active: Sequence[Job], chosen: set[str],
             capacity: Mapping[str, int]) -> dict[str, Reason]:
    """OEF's terms: the tenant's LP share of each GPU type and the whole GPUs its rounding
    gives this round, beside the tenant's weighted equal split of each type — the bound of
    sharing incentive (no tenant is worse off than with its split alone)."""
    shares = view.tenant_shares()
    weights: dict[str, float] = {}
    for v in view.tenants:
        weights[v.tenant] = weights.get(v.tenant, 0.0) + v.weight
    total = sum(weights.values()) or 1.0
    real: dict[str, dict[str, int]] = {}
    for v, row in zip(view.tenants, view.real, strict=True):
        mine = real.setdefault(v.tenant, {})
        for t, n in zip(view.types, row.tolist(), strict=True):
            mine[t] = mine.get(t, 0) + int(n)
    backfilled = set(view.backfilled)
    out = {}
    for job in active:
        if job.tenant not in shares:
            out[job.id] = Reason("oef.no_known_rate", {"gpus": job.gpus})
            continue
        figures: dict[str, Figure] = {"tenant": job.tenant}
        for t in view.types:
            figures[f"share_{t}"] = round(shares[job.tenant][t], 3)
            figures[f"gpus_{t}"] = real[job.tenant].get(t, 0)
            figures[f"equal_split_{t}"] = round(weights[job.tenant] / total * capacity[t], 3)
        code = ("oef.backfilled" if job.id in backfilled else "oef.in_share"
                if job.id in chosen else "oef.over_share")
        out[job.id] = Reason(code, figures)
    return out


def reference_type(jobs: Sequence[Job], types: Sequence[str],
                   rates: Sequence[Sequence[float]] | None = None) -> str | None:
    """The slowest GPU type: the lowest median, over jobs measured there, of the job's rate
    on it relative to its best rate (spec §7.3). Relative rates make jobs of very different
    absolute speeds comparable. Each job's rates are read once, not once per type (``rates``:
    the caller's, one row per job in ``types`` order): at 50 tenants of ~20 jobs this was a
    fifth of a simulated round."""
    table = [[job.rate(t) for t in types] for job in jobs] if rates is None else rates
    best: tuple[float, int] | None = None
    ref = None
    for order, t in enumerate(types):
        rel = []
        for rates in table:
            top = max(rates)
            if top > 0 and rates[order] > 0:
                rel.append(rates[order] / top)
        if rel:
            key = (float(np.median(rel)), order)
            if best is None or key < best:
                best, ref = key, t
    return ref


def speedup_vector(job: Job, types: Sequence[str], capacity: Mapping[str, int],
                   reference: str | None, span: bool = False) -> tuple[float, ...] | None:
    """The job's rates over its rate on the reference type (its own slowest usable type when
    it has none there); 0 where it cannot run (no rate, or its gang exceeds the type). With
    ``span`` (gangs may span types) a type too small for the gang alone still counts when
    the types the job has rates on hold it together: its GPUs can be part of a span."""
    return speedups_of_rates(tuple(job.rate(t) for t in types), job.gpus,
                             tuple(capacity[t] for t in types),
                             job.rate(reference) if reference is not None else 0.0, span)


@lru_cache(maxsize=4096)
def speedups_of_rates(rates: tuple[float, ...], gpus: int, sizes: tuple[int, ...],
                      base: float, span: bool = False) -> tuple[float, ...] | None:
    """:func:`speedup_vector` from what it depends on: the job's rates and the GPUs of each
    type (in the same order), its gang, its rate on the reference type. Jobs of one model
    share all of these, so a round of a thousand jobs formats a few dozen vectors, not a
    thousand (the formatting was a tenth of a 50-tenant simulation)."""
    if span and gpus <= sum(n for r, n in zip(rates, sizes, strict=True) if r > 0):
        usable = rates
    else:
        usable = tuple(r if gpus <= n else 0.0 for r, n in zip(rates, sizes, strict=True))
    if max(usable, default=0.0) <= 0:
        return None
    if not base > 0:
        base = min(r for r in usable if r > 0)
    return tuple(float(f"{r / base:.{SPEEDUP_DIGITS}g}") if r > 0 else 0.0 for r in usable)


class OefPolicy(PolicyBase):
    name = "oef"
    Options = OefOptions

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        self.rounder = Rounder()
        self._round_at: float | None = None
        self._real: dict[str, dict[str, int]] = {}
        self._last_ran: dict[str, float] = {}
        self._signature: Any = None
        self._solution: OefSolution | None = None
        self.view = RoundView()

    # -- state that must survive a restart ------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"rounder": self.rounder.state_dict(), "round_at": self._round_at,
                "real": {k: dict(v) for k, v in self._real.items()},
                "last_ran": dict(self._last_ran)}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        self.rounder.load_state_dict(data["rounder"])
        self._round_at = None if data["round_at"] is None else float(data["round_at"])
        self._real = {str(k): {str(t): int(n) for t, n in v.items()}
                      for k, v in data["real"].items()}
        self._last_ran = {str(k): float(v) for k, v in data["last_ran"].items()}
        self._signature = None

    # -- inputs ---------------------------------------------------------------------------
    def _weight(self, state: ClusterState) -> dict[str, float]:
        weights: dict[str, float] = {}
        for tenant in state.tenants:
            if not (math.isfinite(tenant.weight) and tenant.weight > 0):
                raise InputError("snapshot", "a tenant's weight must be > 0",
                                 field=f"tenants.{tenant.name}.weight", value=tenant.weight)
            weights[tenant.name] = tenant.weight
        weights.update(self.options.weights)
        return weights

    def virtual_tenants(self, state: ClusterState, types: Sequence[str],
                        capacity: Mapping[str, int]) -> list[VirtualTenant]:
        jobs = state.active_jobs()
        rates = [tuple(job.rate(t) for t in types) for job in jobs]
        reference = reference_type(jobs, types, rates)
        at = None if reference is None else types.index(reference)
        sizes = tuple(capacity[t] for t in types)
        groups: dict[tuple[str, tuple[float, ...]], list[Job]] = {}
        for job, row in zip(jobs, rates, strict=True):
            vector = speedups_of_rates(row, job.gpus, sizes, 0.0 if at is None else row[at],
                                       self.options.span_types)
            if vector is not None:
                groups.setdefault((job.tenant, vector), []).append(job)
        weights = self._weight(state)
        per_tenant: dict[str, int] = {}
        for tenant, _ in groups:
            per_tenant[tenant] = per_tenant.get(tenant, 0) + 1
        out = [VirtualTenant(json.dumps([tenant, list(vector)]), tenant, vector,
                             weights.get(tenant, 1.0) / per_tenant[tenant], tuple(members))
               for (tenant, vector), members in groups.items()]
        out.sort(key=lambda v: v.key)
        return out

    def _solve(self, tenants: Sequence[VirtualTenant], capacity: np.ndarray) -> np.ndarray:
        mode = self.options.mode
        w = np.array([v.speedups for v in tenants], dtype=float).reshape(len(tenants), -1)
        pi = np.array([v.weight for v in tenants], dtype=float)
        demand = np.array([v.demand for v in tenants], dtype=float)
        signature = (mode, tuple(v.key for v in tenants), tuple(pi.tolist()),
                     tuple(capacity.tolist()),
                     tuple(demand.tolist()) if self.options.demand_cap else None)
        if signature == self._signature and self._solution is not None:
            return self._solution.x
        problem = OefProblem(w, capacity, pi)
        options = SolveOptions(backend=self.config.solver_backend,
                               time_limit_s=self.config.solver_time_limit_s,
                               threads=self.config.solver_threads, seed=self.config.seed)
        solution = None
        if mode == NON_COOPERATIVE and self.options.fast_path and not self.options.demand_cap:
            solution = solve_non_cooperative_fast(problem)
        if solution is None:
            solution = (solve_capped(problem, demand, mode, options) if self.options.demand_cap
                        else solve_oef(problem, mode, options))
        self.stats.solves += solution.solves
        self.stats.solver_s += solution.solve_s
        self.stats.recomputes += 1
        self._signature, self._solution = signature, solution
        return solution.x

    # -- one call ---------------------------------------------------------------------------
    def schedule(self, state: ClusterState, now: float) -> Plan:
        capacity = capacity_by_type(state)
        types = tuple(capacity)
        active = {j.id for j in state.active_jobs()}
        self._last_ran = {k: v for k, v in self._last_ran.items() if k in active}
        for job in state.jobs:
            if job.id in active and job.gpus_held:
                self._last_ran[job.id] = now
        tenants = self.virtual_tenants(state, types, capacity)
        if not tenants:
            self.view = RoundView(types)
            waiting = state.active_jobs()
            return Plan(reason=f"oef({self.options.mode}): no runnable job",
                        explain=lambda: {j.id: Reason("oef.no_known_rate", {"gpus": j.gpus})
                                         for j in waiting})
        m = np.array([capacity[t] for t in types], dtype=float)
        shares = self._solve(tenants, m)
        new_round = self._round_at is None or now - self._round_at >= self.options.round_s - _EPS
        keys = [v.key for v in tenants]
        if new_round:
            usable = np.array([[s > 0 for s in v.speedups] for v in tenants], dtype=bool)
            real = self.rounder.round(keys, types, shares, [capacity[t] for t in types],
                                      usable, [v.min_gang for v in tenants], settle=False)
            self._round_at = now
            self._real = {k: {t: int(n) for t, n in zip(types, row, strict=True) if n}
                          for k, row in zip(keys, real, strict=True)}
        real_rows = np.array([[self._real.get(k, {}).get(t, 0) for t in types] for k in keys],
                             dtype=np.int64).reshape(len(keys), len(types))
        picks, spans, backfilled, used, blocked = self._select(
            state, tenants, types, real_rows, shares, capacity, now, keep_running=not new_round)
        if new_round:   # a tenant whose gangs did not fit its GPUs is charged what ran
            self.rounder.settle(np.where(blocked[:, None], np.minimum(real_rows, used),
                                         real_rows))
        if spans:   # a span that keeps its place is reserved before other gangs are placed
            type_of = state.layout().type_of
            keep = [g for job, mix in spans for g in kept_span(job, mix, type_of) or ()]
            assignments = place(state, picks, keep)
            assignments += place_spans(state, assignments, spans)
        else:
            assignments = place(state, picks)
        for a in assignments:
            self._last_ran[a.job_id] = now
        self.view = RoundView(types, tuple(tenants), shares, real_rows, tuple(backfilled))
        chosen = {a.job_id for a in assignments}
        priorities = {j.id: (2.0 if j.id in chosen and j.id not in backfilled else
                             1.0 if j.id in chosen else 0.0)
                      for v in tenants for j in v.jobs}
        view, active_jobs = self.view, state.active_jobs()
        return Plan(assignments=assignments, priorities=priorities,
                    reason=f"oef({self.options.mode}): {len(assignments)} jobs on the shares "
                    f"of {len({v.tenant for v in tenants})} tenants, "
                    f"{len(backfilled)} backfilled",
                    explain=lambda: _explain(view, active_jobs, chosen, capacity))

    def _starvation_order(self, jobs: Sequence[Job], now: float, running_first: bool,
                          held: Mapping[str, str]) -> list[Job]:
        """Longest-starved first: since it last ran, or since it arrived (paper §6.1.3)."""
        fifo = self.options.job_order == "arrival"

        def key(job: Job) -> tuple[bool, float, float, str]:
            waited = 0.0 if fifo else now - self._last_ran.get(job.id, job.arrival_s)
            return (not (running_first and job.id in held), -waited, job.arrival_s, job.id)
        return sorted(jobs, key=key)

    def _select(self, state: ClusterState, tenants: Sequence[VirtualTenant],
                types: tuple[str, ...], real: np.ndarray, shares: np.ndarray,
                capacity: Mapping[str, int], now: float, keep_running: bool
                ) -> tuple[list[tuple[Job, str]], list[tuple[Job, dict[str, int]]], list[str],
                           np.ndarray, np.ndarray]:
        """The jobs to run: each tenant's from its whole GPUs, then backfill; with
        ``span_types``, gangs no single type holds as spans (GPUs per type). Also the GPUs
        each tenant's jobs use per type and whether any of its jobs still wait."""
        held = held_types(state)
        span = self.options.span_types
        picks: list[tuple[Job, str]] = []
        spans: list[tuple[Job, dict[str, int]]] = []
        waiting: list[tuple[int, Job]] = []
        used = dict.fromkeys(types, 0)
        got = np.zeros(len(tenants))
        for i, v in enumerate(tenants):
            free = dict(zip(types, real[i].tolist(), strict=True))
            for job in self._starvation_order(v.jobs, now, keep_running, held):
                gpu_type = _fit(job, free, held.get(job.id), types)
                if gpu_type is None:
                    mix = span_mix(job, free) if span else None
                    if mix is None:
                        waiting.append((i, job))
                        continue
                    for t, n in mix.items():
                        free[t] -= n
                        used[t] += n
                    got[i] += job.gpus * min(v.speedups[types.index(t)] for t in mix)
                    spans.append((job, mix))
                    continue
                free[gpu_type] -= job.gpus
                used[gpu_type] += job.gpus
                got[i] += job.gpus * v.speedups[types.index(gpu_type)]
                picks.append((job, gpu_type))
        backfilled: list[str] = []
        if self.options.backfill and waiting:
            room = {t: capacity[t] - used[t] for t in types}
            ideal = np.einsum("lj,lj->l", np.array([v.speedups for v in tenants]), shares)
            behind = (ideal - got) / np.array([v.weight for v in tenants])
            starved = {job.id: now - self._last_ran.get(job.id, job.arrival_s)
                       for _, job in waiting}
            waiting.sort(key=lambda p: (-behind[p[0]], -starved[p[1].id], p[1].arrival_s,
                                        p[1].id))
            extra = greedy_walk([job for _, job in waiting], room, held)
            picks += extra
            backfilled = [job.id for job, _ in extra]
            if span:   # what single types left: gangs across them
                for job, gpu_type in extra:
                    room[gpu_type] -= job.gpus
                started = set(backfilled)
                for _, job in waiting:
                    mix = None if job.id in started else span_mix(job, room)
                    if mix is not None:
                        for t, n in mix.items():
                            room[t] -= n
                        spans.append((job, mix))
                        backfilled.append(job.id)
        owner = {job.id: i for i, v in enumerate(tenants) for job in v.jobs}
        used = np.zeros((len(tenants), len(types)), dtype=np.int64)
        for job, gpu_type in picks:
            used[owner[job.id], types.index(gpu_type)] += job.gpus
        for job, mix in spans:
            for t, n in mix.items():
                used[owner[job.id], types.index(t)] += n
        running = {job.id for job, _ in picks} | {job.id for job, _ in spans}
        blocked = np.array([any(job.id not in running for job in v.jobs) for v in tenants],
                           dtype=bool)
        return picks, spans, backfilled, used, blocked


def _fit(job: Job, free: Mapping[str, int], current: str | None,
         types: Sequence[str]) -> str | None:
    """The type of the tenant's whole GPUs this gang runs on: the one it holds now if it has
    room, else the fastest for the job with room (first in type order on a tie)."""
    if current is not None and free.get(current, 0) >= job.gpus and job.rate(current) > 0:
        return current
    best, best_rate = None, 0.0
    for t in types:
        rate = job.rate(t)
        if free[t] >= job.gpus and rate > best_rate:
            best, best_rate = t, rate
    return best

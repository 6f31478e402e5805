"""Gavel's round-based mechanism: realise an allocation of time fractions round by round.

An allocation policy (max-min fairness, max throughput, OSSP, ...) says which fraction A[j][t]
of time job j should spend on GPU type t. Rounds cannot split time, so each round the jobs
furthest behind their share run: priority = A / (received time share), ties broken by the
deficit carried over from earlier allocations, then by A. The bookkeeping follows
SIMULATION.md §2.5-2.6 exactly, including the recompute throttle (``recompute_interval_s``)
that the artifacts use and the ``clean`` semantics turns off.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gpufair.model import ClusterState, Job, Plan, Reason
from gpufair.policy.base import PolicyBase, PolicyConfig
from gpufair.policy.placement import capacity_by_type, place
from gpufair.policy.replan import replan_due, replan_interval, replan_interval_setting

Allocation = dict[str, dict[str, float]]


@dataclass(frozen=True)
class TimeFractionOptions:
    """What every time-fraction policy accepts (a policy's own options extend it)."""

    replan_interval_s: float | None = replan_interval_setting(
        "the policy's own fraction of a round, docs/policies/baselines.md; only between round"
        " boundaries: a boundary re-plans whenever something changed")


class TimeFractionPolicy(PolicyBase, ABC):
    name = "time_fractions"
    Options: ClassVar[type] = TimeFractionOptions
    #: unless ``replan_interval_s`` is set, an event re-plans only this many rounds after the
    #: last plan (each policy's default is measured: docs/policies/baselines.md)
    replan_rounds: ClassVar[float] = 1.0

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        half = self.config.round_s / 2
        self._half_round = half
        self._alloc: Allocation = {}
        self._tau: dict[str, dict[str, float]] = {}
        self._deficit: dict[str, dict[str, float]] = {}
        self._weight_sum: dict[str, float] = {}
        self._t_reset = 0.0
        self._dirty = True
        self._seen_attained: dict[str, float] = {}
        self._seen_batch: dict[str, int | None] = {}
        self._ran_on: dict[str, str] = {}
        self._capacity: dict[str, int] = {}
        # the last record absorbed per job: a simulator hands a waiting job's unchanged record
        # back at every event, and absorbing it again changes nothing (not state: a restored
        # policy simply absorbs everything once)
        self._seen_record: dict[str, Job] = {}
        self._replan_s = replan_interval(self.options.replan_interval_s, self.config.round_s,
                                         self.replan_rounds)
        self._preemptive = True   # unless told otherwise (BoundaryAware), every decision may

    _STATE = ("_alloc", "_tau", "_deficit", "_weight_sum", "_t_reset", "_dirty",
              "_seen_attained", "_seen_batch", "_ran_on", "_capacity")

    def state_dict(self) -> dict[str, Any]:
        """Allocation, received shares and deficits: what a restarted daemon must not lose."""
        return {name.lstrip("_"): copy.deepcopy(getattr(self, name)) for name in self._STATE}

    def load_state_dict(self, data: dict[str, Any]) -> None:
        for name in self._STATE:
            setattr(self, name, copy.deepcopy(data[name.lstrip("_")]))
        self._seen_record = {}

    @abstractmethod
    def allocate(self, jobs: Sequence[Job], capacity: dict[str, int], now: float) -> Allocation:
        """Time fractions per job and GPU type, each job's sum ≤ 1, capacity respected."""

    # -- bookkeeping ------------------------------------------------------------------------
    def _absorb(self, state: ClusterState, types: tuple[str, ...],
                type_of: Mapping[str, str]) -> None:
        """Charge each job the service it received since the last call (τ_j, W)."""
        changed = False
        seen, taus, attained, batches = self._seen_record, self._tau, self._seen_attained, \
            self._seen_batch
        weight_sum, half = self._weight_sum, self._half_round
        for job in state.jobs:
            jid = job.id
            if seen.get(jid) is job:   # the very record absorbed last time: nothing new
                continue
            seen[jid] = job
            tau = taus.get(jid)
            if tau is None:
                if not job.state.active:
                    continue
                taus[jid] = dict.fromkeys(types, half)
                self._deficit[jid] = dict.fromkeys(types, 0.0)
                attained[jid] = job.attained_s
                batches[jid] = job.batch_size
                changed = True
                continue
            delta = job.attained_s - attained[jid]
            attained[jid] = job.attained_s
            ran_on = type_of.get(job.gpus_held[0]) if job.gpus_held else self._ran_on.get(jid)
            if delta and ran_on is not None:
                tau[ran_on] = tau.get(ran_on, half) + delta
                weight_sum[ran_on] = weight_sum.get(ran_on, 0.0) + delta
            if not job.state.active:
                self._forget(jid)
                changed = True
            elif job.batch_size != batches[jid]:
                batches[jid] = job.batch_size
                changed = True
        self._dirty |= changed

    def _forget(self, job_id: str) -> None:
        for table in (self._tau, self._deficit, self._seen_attained, self._seen_batch,
                      self._ran_on, self._alloc, self._seen_record):
            table.pop(job_id, None)

    def _maybe_recompute(self, jobs: Sequence[Job], capacity: dict[str, int],
                         now: float) -> None:
        if capacity != self._capacity:
            self._capacity = dict(capacity)
            self._dirty = True
        if not self._dirty or not self._replan_due(now):
            return
        elapsed = now - self._t_reset
        for job in jobs:
            old = self._alloc.get(job.id, {})
            tau = self._tau[job.id]
            deficit = self._deficit[job.id]
            for t in capacity:
                deficit[t] = deficit.get(t, 0.0) + old.get(t, 0.0) * elapsed \
                    - (tau.get(t, self._half_round) - self._half_round)
                tau[t] = self._half_round
        self._weight_sum = {t: sum(self._tau[j.id][t] for j in jobs) for t in capacity}
        self._t_reset = now
        self._alloc = dict(zip((j.id for j in jobs),   # _clipped's dicts are fresh: no copy
                               self._clipped(self.allocate(jobs, capacity, now), jobs),
                               strict=True))
        self._dirty = False
        self.stats.recomputes += 1

    @property
    def observes_every_event(self) -> bool:
        """Only when re-planning at once: with a replan interval the allocation already lags
        events, and a decision that can start nothing (between boundaries, no waiting job
        fits the idle GPUs) may go unseen; its service is absorbed at the next one
        (core.simulation.run_to_end)."""
        return self._replan_s == 0

    def next_decision(self, preemptive: bool) -> None:
        """The round pipeline says whether the coming decision may preempt (BoundaryAware)."""
        self._preemptive = preemptive

    def _replan_due(self, now: float) -> bool:
        """The artifacts' throttle (``recompute_interval_s``) holds at every decision; the
        policy's own ``replan_interval_s`` only between round boundaries: a boundary, where
        the allocation decides who is preempted, always gets a fresh one."""
        last = self._t_reset or None   # 0: none yet (the artifacts' test)
        if not replan_due(last, now, self.config.recompute_interval_s):
            return False
        return self._preemptive or replan_due(last, now, self._replan_s)

    @staticmethod
    def _clipped(alloc: Allocation, jobs: Sequence[Job]) -> list[dict[str, float]]:
        return [{t: min(1.0, max(0.0, x)) for t, x in alloc.get(j.id, {}).items()} for j in jobs]

    def _walk(self, jobs: Sequence[Job], capacity: Mapping[str, int], newcomers_run: bool
              ) -> tuple[list[tuple[Job, str]], dict[str, float]]:
        """Per GPU type, the jobs by priority — A / (received share of the type) = a / (τ / W),
        0 without a share or a rate; ties by the deficit, then by a — each taking its gang
        while the type has room. Returns the picks and each job's priority on the first type.

        Written over arrays (every active job at every decision): the same IEEE operations
        as the scalar formula, and a stable sort on the negated keys orders ties as the
        descending stable sort it replaces, so the walk is the same to the bit.
        """
        alloc, deficit, tau = self._alloc, self._deficit, self._tau
        ids = [job.id for job in jobs]
        gangs = [job.gpus for job in jobs]
        smallest = min(gangs, default=0)
        shares = [alloc.get(jid) for jid in ids]
        taken: set[str] = set()
        picks: list[tuple[Job, str]] = []
        priorities: dict[str, float] | None = None
        for gpu_type in capacity:
            free = capacity[gpu_type]
            weight_sum = self._weight_sum.get(gpu_type, 0.0)
            a = np.array([0.0 if share is None else share.get(gpu_type, 0.0)
                          for share in shares], dtype=float)
            rate = np.array([job.rate(gpu_type) for job in jobs], dtype=float)
            none = (a <= 0) | (rate <= 0)
            if weight_sum == 0:
                p = np.where(none, 0.0, a * 1e9)
            else:   # τ of the type exists wherever a > 0 (set when the allocation was made)
                received = np.array([tau[jid].get(gpu_type, 1.0) for jid in ids], dtype=float)
                with np.errstate(divide="ignore", invalid="ignore"):
                    p = np.where(none, 0.0, a / (received / weight_sum))
            if priorities is None:
                priorities = dict(zip(ids, p.tolist(), strict=True))
            d = np.array([deficit[jid].get(gpu_type, 0.0) for jid in ids], dtype=float)
            runs = (~(rate <= 0)).tolist()   # as `rate <= 0` skipped a job before
            for k in np.lexsort((-a, -d, -p)).tolist():
                if free < smallest:
                    break   # no gang fits any more
                if not runs[k] or ids[k] in taken or gangs[k] > free:
                    continue
                free -= gangs[k]
                taken.add(ids[k])
                if newcomers_run or ids[k] in alloc:
                    picks.append((jobs[k], gpu_type))
        return picks, priorities or {}

    # -- one round --------------------------------------------------------------------------
    def schedule(self, state: ClusterState, now: float) -> Plan:
        capacity = capacity_by_type(state)
        types = tuple(capacity)
        type_of = state.layout().type_of
        self._absorb(state, types, type_of)
        jobs = state.active_jobs()
        self._maybe_recompute(jobs, capacity, now)
        # a job that arrived since the last allocation: under the artifacts' throttle it holds
        # GPUs in the walk but does not run (their rule); under the policy's own replan
        # interval it runs on what the allocated jobs leave (its priority is 0: it comes last)
        newcomers_run = not self.config.recompute_interval_s
        picks, priorities = self._walk(jobs, capacity, newcomers_run)
        assignments = place(state, picks)
        self._ran_on = {a.job_id: type_of[a.gpu_ids[0]] for a in assignments}
        alloc = self._alloc

        def explain() -> dict[str, Reason]:
            # the LP's time fraction per GPU type, and the walk's priority: the share over
            # the share received so far (a job that got less than its share goes first)
            return {j.id: Reason(f"{self.name}.lp_share",
                                 {**{f"share_{t}": round(x, 4)
                                     for t, x in alloc.get(j.id, {}).items() if x > 0},
                                  "priority": round(priorities.get(j.id, 0.0), 4)})
                    for j in jobs}

        return Plan(assignments=assignments, priorities=priorities,
                    reason=f"{self.name}: {len(assignments)} jobs by time-fraction priority",
                    explain=explain)

"""One round, once: snapshot → enrich → schedule → diff → guards → keyed actions.

The simulator, the daemon and the dry run all call :meth:`Round.run`; they differ only in what
they put around it (a virtual clock; a journal and a live resource manager; a recording
adapter). That is what makes a dry run show exactly what the daemon would do.

Stages:

1. *enrich*: the job history (first arrival and attained service that survive requeues and
   restarts) when the caller keeps one, then each enricher in order (measured profiles from
   the jobs' logs, neutral profiles for what is unmeasured);
2. *schedule*: the policy's plan for the enriched state;
3. *diff*: hard mode turns the plan into the smallest list of starts, moves and preemptions
   (:mod:`gpufair.core.actions`), and on a live cluster gives GPUs the round leaves idle to
   waiting jobs that fit (:mod:`gpufair.core.fill`); soft mode into priorities by rank;
4. *guards*: frozen nodes, minimum runtime, preemption cap (:mod:`gpufair.core.guards`);
5. *keys*: each action gets an idempotency key bound to the job's incarnation, so the same
   decision about the same run of a job is recognised across rounds and restarts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufair.core.actions import plan_actions
from gpufair.core.fill import fill_idle
from gpufair.core.guards import (
    Deferred,
    Guard,
    host_room,
    job_constraints,
    min_runtime,
    preemption_cap,
    rank_priorities,
    unusable_nodes,
)
from gpufair.core.history import merge_history
from gpufair.model import (
    Action,
    ClusterState,
    Job,
    JobState,
    Plan,
    Preempt,
    PreemptMode,
    Resume,
    SetPriority,
)
from gpufair.policy.base import Policy
from gpufair.policy.replan import BoundaryAware

Enricher = Callable[[ClusterState], ClusterState]


@dataclass(frozen=True)
class RoundRules:
    """What a round may do. The defaults guard nothing: a simulation's rounds act exactly on
    the plan; the daemon's come from ``[daemon]`` (:meth:`DaemonOptions.rules`)."""

    mode: str = "hard"                    # hard: start/place/preempt; soft: priorities only
    max_preempt_share: float = 1.0
    min_runtime_s: float = 0.0
    grace_s: float = 0.0
    preempt_mode: PreemptMode = PreemptMode.REQUEUE
    fill_idle: bool = False               # hard mode: idle GPUs go to waiting jobs that fit

    def guards(self) -> list[Guard]:
        return [unusable_nodes, job_constraints, host_room, min_runtime(self.min_runtime_s),
                preemption_cap(self.max_preempt_share)]


@dataclass
class RoundResult:
    state: ClusterState                   # what the policy saw (enriched)
    plan: Plan
    actions: list[Action]
    keys: list[str | None]                # idempotency key of each action (None: none)
    deferred: list[Deferred] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)  # rows for the store
    policy_s: float = 0.0
    preemptive: bool = True


def incarnation(job: Job) -> str:
    """One run of a job: a requeue or restart is a new incarnation of the same id."""
    started = "" if job.start_s is None or job.state is not JobState.RUNNING \
        else f"@{job.start_s:.0f}"
    return f"{job.id}#{job.restarts}{started}"


def action_key(action: Action, job: Job | None) -> str | None:
    """Stable across rounds for the same decision on the same incarnation of a job; None for
    an action that may rightly be repeated within one incarnation (a priority that comes
    back to an earlier value, a second suspension after a resume: Slurm keeps the start time
    and restart count across suspend/resume). Those are kept from harm by the resource
    manager's own check of the job's state right before acting."""
    if isinstance(action, (SetPriority, Resume)) or (
            isinstance(action, Preempt) and action.mode is PreemptMode.SUSPEND):
        return None
    what = ",".join(sorted(getattr(action, "gpu_ids", ()))) or \
        getattr(getattr(action, "mode", None), "value", "") or \
        f"{getattr(action, 'priority', '')}"
    who = incarnation(job) if job is not None else action.job_id
    return f"{type(action).__name__.lower()}:{who}:{what}"


class Round:
    """The round pipeline around one policy; keeps the policy's time for the benchmarks."""

    def __init__(self, policy: Policy, rules: RoundRules | None = None, *,
                 enrichers: Sequence[Enricher] = ()) -> None:
        self.policy = policy
        self.rules = rules or RoundRules()
        self.enrichers = tuple(enrichers)
        self.policy_s = 0.0
        self.decisions = 0
        self.skipped = 0     # of those, counted by skip(): the policy did not see them
        self._tell = policy.next_decision if isinstance(policy, BoundaryAware) else None

    def run(self, state: ClusterState, *, preemptive: bool = True,
            history: Mapping[str, Mapping[str, Any]] | None = None) -> RoundResult:
        rows: list[dict[str, Any]] = []
        if history is not None:
            state, rows = merge_history(state, history)
        for enrich in self.enrichers:
            state = enrich(state)
        started = time.perf_counter()
        if self._tell is not None:
            self._tell(preemptive)
        plan = self.policy.schedule(state, state.time_s)
        elapsed = time.perf_counter() - started
        self.policy_s += elapsed
        self.decisions += 1
        actions, deferred = self._guarded(state, self.diff(state, plan, preemptive))
        if self.rules.fill_idle and self.rules.mode == "hard":
            # after the guards: GPUs a held-back action would have taken (a job on a node
            # that is settling or drained, planned elsewhere) are idle this round too
            filled, held = self._guarded(state, fill_idle(state, plan, actions))
            actions += filled
            deferred += held
        keys: list[str | None] = []
        if actions:
            jobs = {j.id: j for j in state.jobs}
            keys = [action_key(a, jobs.get(a.job_id)) for a in actions]
        return RoundResult(state, plan, actions, keys, deferred, rows, elapsed, preemptive)

    def _guarded(self, state: ClusterState, actions: list[Action]
                 ) -> tuple[list[Action], list[Deferred]]:
        """The actions the guards let through, and those they hold back, with why."""
        deferred: list[Deferred] = []
        if actions:   # a guard only ever holds actions back: with none, each would only scan
            for guard in self.rules.guards():
                actions, held = guard(state, actions)
                deferred += held
        return actions, deferred

    def skip(self) -> None:
        """Count a decision its caller knows changes nothing and that the policy does not
        need to see (``observes_every_event`` False): a simulator's fill-only event with no
        idle GPU."""
        self.decisions += 1
        self.skipped += 1

    def diff(self, state: ClusterState, plan: Plan, preemptive: bool) -> list[Action]:
        if self.rules.mode == "soft":
            pending = {j.id for j in state.jobs if j.state is JobState.PENDING}
            wanted = rank_priorities({k: v for k, v in plan.priorities.items()
                                      if k in pending})
            return [SetPriority(job_id, float(p)) for job_id, p in wanted.items()]
        return plan_actions(state, plan, preemptive=preemptive,
                            preempt_mode=self.rules.preempt_mode, grace_s=self.rules.grace_s)

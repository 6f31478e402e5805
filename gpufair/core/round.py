"""The arbiter loop body: snapshot → policy → plan → diff → actions, for any adapter."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gpufair.adapters.base import Adapter
from gpufair.core.actions import plan_actions
from gpufair.model import Action, ActionResult, ClusterState, Plan, PreemptMode
from gpufair.policy.base import Policy


@dataclass
class RoundRecord:
    state: ClusterState
    plan: Plan
    actions: list[Action]
    results: list[ActionResult] = field(default_factory=list)
    policy_s: float = 0.0


class Arbiter:
    """One decision per call. ``dry_run`` computes and returns the actions without applying."""

    def __init__(self, adapter: Adapter, policy: Policy, *,
                 preempt_mode: PreemptMode = PreemptMode.REQUEUE, grace_s: float = 0.0,
                 dry_run: bool = False) -> None:
        self.adapter = adapter
        self.policy = policy
        self.preempt_mode = preempt_mode
        self.grace_s = grace_s
        self.dry_run = dry_run
        self.policy_s = 0.0
        self.decisions = 0

    def step(self, *, preemptive: bool = True) -> RoundRecord:
        state = self.adapter.snapshot()
        started = time.perf_counter()
        plan = self.policy.schedule(state, state.time_s)
        elapsed = time.perf_counter() - started
        self.policy_s += elapsed
        self.decisions += 1
        actions = plan_actions(state, plan, preemptive=preemptive,
                               preempt_mode=self.preempt_mode, grace_s=self.grace_s)
        record = RoundRecord(state, plan, actions, policy_s=elapsed)
        if not self.dry_run and actions:
            record.results = self.adapter.apply(actions)
        return record

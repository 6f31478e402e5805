"""A resource manager that records actions instead of taking them: the dry run's adapter.

It reads from a live adapter (``serve --dry-run``) or serves one fixed snapshot (``gpufair
dry-run`` of a saved state), and every write — the checkpoint warning included — is recorded
and reported as done. The daemon's round runs against it unchanged, which is what makes the
dry run show exactly the actions the daemon would take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gpufair.adapters.base import Adapter, Effect, RequeueCheck
from gpufair.model import Action, ActionResult, ClusterState


@dataclass
class RecordingAdapter:
    source: Adapter | ClusterState
    recorded: list[Action] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)   # jobs told to checkpoint

    @property
    def name(self) -> str:
        inner = getattr(self.source, "name", "snapshot")
        return f"recording({inner})"

    def snapshot(self) -> ClusterState:
        if isinstance(self.source, ClusterState):
            return self.source
        return self.source.snapshot()

    def warn_preemptions(self, actions: Sequence[Action]) -> float:
        self.warned += [a.job_id for a in actions if getattr(a, "grace_s", 0.0) > 0]
        return 0.0   # nothing will be preempted: nobody needs to wait

    def apply_one(self, action: Action) -> ActionResult:
        self.recorded.append(action)
        return ActionResult(action, True, "recorded (dry run)")

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        return [self.apply_one(a) for a in actions]

    def status(self) -> dict[str, float]:
        return {}

    def reconcile(self, ours: RequeueCheck | None = None) -> list[str]:
        return []   # a dry run re-asserts nothing

    def check(self, action: Action) -> Effect:
        return Effect.IN_EFFECT if action in self.recorded else Effect.NOT_YET

"""The one protocol every resource-manager adapter implements (Slurm, YARN, simulator)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from gpufair.model import Action, ActionResult, ClusterState


@runtime_checkable
class Adapter(Protocol):
    def snapshot(self) -> ClusterState:
        """One consistent view of nodes and jobs; never a half-read state."""
        ...

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        """Carry actions out in order; report each outcome rather than raising."""
        ...

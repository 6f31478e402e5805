"""The one protocol every policy implements, and the configuration every policy receives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from gpufair.model import ClusterState, Plan
from gpufair.settings import parse_settings


@dataclass(frozen=True)
class PolicyConfig:
    """What the arbiter tells a policy about the world it schedules.

    ``recompute_interval_s`` throttles allocation recomputes of the time-fraction policies:
    the artifacts recompute at most every 1000 s (an accident the ``clean`` semantics drop by
    setting it to 0). ``options`` carries the policy's own section of the config file (a
    table, or the policy's already-checked options object); ``options_source`` names where it
    came from, so an error points at the file.
    """

    round_s: float = 120.0
    recompute_interval_s: float = 0.0
    seed: int = 0
    solver_backend: str = "auto"
    solver_time_limit_s: float | None = None
    solver_threads: int | None = None
    options: Mapping[str, Any] | Any = field(default_factory=dict)
    options_source: str = "policy options"
    #: seconds one stop-and-restart costs a job where the caller knows (the simulator's restart
    #: overhead); None on a live cluster. Time-slicing policies size their quantum from it.
    preempt_cost_s: float | None = None


@runtime_checkable
class Policy(Protocol):
    """``schedule`` maps one consistent snapshot to the plan of the next round.

    Policies may keep state between calls (leases, passes, deficits) but must not touch the
    resource manager: the arbiter diffs the plan against what runs and acts.
    """

    name: str

    def schedule(self, state: ClusterState, now: float) -> Plan: ...


@runtime_checkable
class StatefulPolicy(Policy, Protocol):
    """A policy with state that must survive a daemon restart (leases, deficits, plans):
    plain JSON-able data out, the same data back in."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, data: Mapping[str, Any]) -> None: ...


@dataclass
class PolicyStats:
    """Counters a policy exposes for benchmarks and metrics (solver share of wall time)."""

    solves: int = 0
    solver_s: float = 0.0
    recomputes: int = 0


@dataclass(frozen=True)
class NoOptions:
    """The options of a policy that has none: any key given is an error, not ignored."""


class PolicyBase:
    """What every built-in policy shares: its config, its checked options, its counters.

    ``Options`` is the policy's frozen dataclass of :func:`gpufair.settings.setting` fields,
    declared beside the code that reads it; the same class is the ``[policies.NAME]`` schema.
    """

    name: ClassVar[str] = "policy"
    Options: ClassVar[type] = NoOptions

    def __init__(self, config: PolicyConfig | None = None) -> None:
        self.config = config or PolicyConfig()
        self.options = parse_settings(self.Options, self.config.options,
                                      source=self.config.options_source,
                                      section=f"policies.{self.name}",
                                      ignored=getattr(self.Options, "ARTIFACT_UNUSED", ()))
        self.stats = PolicyStats()

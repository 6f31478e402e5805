"""One simulation to its end with the policy's ``schedule`` calls counted: the tests of the
simulator's skipped decisions compare such runs with and without a skip (the same outcomes
to the bit, fewer calls)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.core.round import Round
from gpufair.core.simulation import SimulationSpec, build_simulator, run_to_end
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy


@dataclass
class CountedRun:
    sim: TraceSimulator
    rounds: Round
    asked: int          # the policy's schedule() calls


def run_counted(name: str, spec: SimulationSpec, monkeypatch: pytest.MonkeyPatch, *,
                options: dict | None = None, patch: tuple[str, Any] | None = None
                ) -> CountedRun:
    """``name`` on ``spec``'s simulator to the end; ``patch`` = (attribute, value) set on
    the policy's class for this run only (how a test turns a skip off)."""
    sim = build_simulator(spec)
    policy = create_policy(name, PolicyConfig(round_s=sim.round_s, options=options or {}))
    if patch is not None:
        monkeypatch.setattr(type(policy), patch[0], patch[1], raising=False)
    asked: list[float] = []
    schedule = policy.schedule
    policy.schedule = lambda state, now: asked.append(now) or schedule(state, now)
    rounds = Round(policy)
    try:
        assert run_to_end(sim, rounds)
    finally:
        monkeypatch.undo()
    return CountedRun(sim, rounds, len(asked))

"""The simulator's event loop skips what cannot change a plan (issue 31: a long history on a
full cluster). Each skip must leave every job's start and finish exactly where it was."""

from __future__ import annotations

import pytest

from gpufair.adapters.simulator.semantics import ARTIFACT
from gpufair.core.round import Round
from gpufair.core.simulation import SimulationSpec, build_simulator, run_to_end
from gpufair.model import Preempt, Start
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy


def _fifo_run(semantics: str, settles: bool, monkeypatch) -> tuple[list, list, int, int]:
    sim = build_simulator(SimulationSpec(semantics=semantics))   # the 60-job demo, 16 GPUs
    policy = create_policy("fifo", PolicyConfig(round_s=sim.round_s))
    monkeypatch.setattr(type(policy), "plans_from_changes_only", settles, raising=False)
    asked = []
    schedule = policy.schedule
    policy.schedule = lambda state, now: asked.append(now) or schedule(state, now)
    rounds = Round(policy)
    assert run_to_end(sim, rounds)
    monkeypatch.undo()
    starts = [(j.id, j.start_s, j.finish_s, j.restarts, j.attained_s) for j in sim.jobs]
    return sim.outcomes(), starts, rounds.decisions, len(asked)


@pytest.mark.parametrize("semantics", ["clean", ARTIFACT.name])
def test_fifo_skips_rounds_where_nothing_changed_with_the_same_outcomes(semantics,
                                                                        monkeypatch) -> None:
    """Once a round's plan asks for nothing, the rounds after it with no arrival, no end and
    no action are not planned: FIFO's plan depends on none of what they change (the clock,
    progress). Same outcomes, starts and finishes to the bit, same decisions counted, fewer
    plans made."""
    outcomes, starts, decisions, asked = _fifo_run(semantics, True, monkeypatch)
    full_outcomes, full_starts, full_decisions, full_asked = _fifo_run(semantics, False,
                                                                       monkeypatch)
    assert outcomes == full_outcomes and starts == full_starts
    assert decisions == full_decisions
    assert asked < full_asked


def test_las_is_shown_every_round_since_attained_service_moves_its_plan() -> None:
    """LAS reorders as running jobs gain service, with no arrival or end: it does not claim
    to plan from changes alone, so no round of it is skipped as settled."""
    assert not getattr(create_policy("las", PolicyConfig()), "plans_from_changes_only", False)
    assert not getattr(create_policy("srtf", PolicyConfig()), "plans_from_changes_only", False)


def test_a_job_started_and_preempted_between_two_snapshots_gets_a_new_record() -> None:
    """Waiting jobs keep their snapshot record from event to event; one that ran in between
    (started and preempted before the next snapshot) must not: it has started once."""
    sim = build_simulator(SimulationSpec())
    first = sim.snapshot()
    waiting = next(j for j in first.jobs if not j.gpus_held)
    assert waiting.start_s is None
    gpus = tuple(sorted(first.layout().type_of))[: waiting.gpus]
    sim.apply([Start(waiting.id, gpus)])
    sim.apply([Preempt(waiting.id)])
    again = next(j for j in sim.snapshot().jobs if j.id == waiting.id)
    assert not again.gpus_held and again.start_s == sim.now
    assert again is not waiting

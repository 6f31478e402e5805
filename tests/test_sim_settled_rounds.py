"""The simulator's event loop skips what cannot change a plan (issue 31: a long history on a
full cluster). Each skip must leave every job's start and finish exactly where it was."""

from __future__ import annotations

import math

import pytest
from counted_run import run_counted

from gpufair.adapters.simulator.semantics import ARTIFACT
from gpufair.core.simulation import SimulationSpec, build_simulator
from gpufair.model import ClusterState, Job, JobState, Preempt, Start
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy


def _run(name: str, options: dict, semantics: str, settles: bool, monkeypatch):
    run = run_counted(name, SimulationSpec(semantics=semantics), monkeypatch,  # 60-job demo
                      options=options, patch=None if settles else ("plan_holds_for_s", None))
    sim = run.sim
    starts = [(j.id, j.start_s, j.finish_s, j.restarts, j.attained_s) for j in sim.jobs]
    return sim.outcomes(), starts, run.rounds.decisions, run.asked


@pytest.mark.parametrize("semantics", ["clean", ARTIFACT.name])
@pytest.mark.parametrize(("name", "options"), [
    ("fifo", {}), ("las", {}), ("las", {"queue_thresholds_gpu_s": [300.0, 2000.0]})])
def test_rounds_where_nothing_the_plan_reads_changed_are_skipped_with_the_same_outcomes(
        name, options, semantics, monkeypatch) -> None:
    """Once a round's plan asks for nothing, the rounds after it with no arrival, no end and
    no action, before the policy's plan can move with the clock (FIFO: never; LAS: when a
    running job could reach its next queue threshold), are not planned. Same outcomes,
    starts and finishes to the bit, same decisions counted, fewer plans made; with low
    thresholds LAS demotes jobs mid-run, and those rounds are still planned."""
    outcomes, starts, decisions, asked = _run(name, options, semantics, True, monkeypatch)
    full_outcomes, full_starts, full_decisions, full_asked = _run(name, options, semantics,
                                                                  False, monkeypatch)
    assert outcomes == full_outcomes and starts == full_starts
    assert decisions == full_decisions
    assert asked < full_asked


def _running(job_id: str, gpus: int, attained_s: float) -> Job:
    return Job(id=job_id, gpus=gpus, state=JobState.RUNNING, attained_s=attained_s,
               gpus_held=tuple(f"g{job_id}:{i}" for i in range(gpus)))


def test_las_plan_holds_until_the_first_running_job_could_cross_a_threshold() -> None:
    las = create_policy("las", PolicyConfig(options={"queue_thresholds_gpu_s": [100.0, 400.0]}))
    state = ClusterState(time_s=0.0, nodes=(), jobs=(
        _running("a", 2, 10.0),      # 20 GPU-s: 80 to the first threshold, 40 s on 2 GPUs
        _running("b", 1, 150.0),     # past the first: 250 to the second
        Job(id="w", gpus=1, state=JobState.PENDING, attained_s=99.0),   # waits: gains none
        _running("c", 4, 200.0)))    # past the last threshold: never moves again
    assert las.plan_holds_for_s(state) == pytest.approx(40.0 - 1e-3)
    assert las.plan_holds_for_s(ClusterState(time_s=0.0, nodes=(), jobs=(
        _running("c", 4, 200.0),))) == math.inf
    assert create_policy("fifo", PolicyConfig()).plan_holds_for_s(state) == math.inf


def test_srtf_is_shown_every_round_since_progress_moves_its_plan() -> None:
    """SRTF reorders as running jobs progress, with no arrival or end: it does not say how
    long its plan holds, so no round of it is skipped as settled."""
    assert getattr(create_policy("srtf", PolicyConfig()), "plan_holds_for_s", None) is None


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

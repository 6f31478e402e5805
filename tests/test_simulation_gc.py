"""The simulation loop's collector setting is scoped to the loop: set while it runs, the
caller's own restored after it, on an error too."""

from __future__ import annotations

import gc

import pytest

from gpufair.core import simulation
from gpufair.core.simulation import SIMULATION_GC_THRESHOLD, fewer_collections


@pytest.fixture()
def thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 9, 8)
    yield
    gc.set_threshold(*saved)


def test_threshold_raised_inside_and_restored_after(thresholds) -> None:
    with fewer_collections():
        assert gc.get_threshold() == (SIMULATION_GC_THRESHOLD, 9, 8)
    assert gc.get_threshold() == (700, 9, 8)


def test_restored_after_an_error_and_never_lowered(thresholds) -> None:
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("a policy failed")
    assert gc.get_threshold() == (700, 9, 8)
    gc.set_threshold(10 * SIMULATION_GC_THRESHOLD, 9, 8)   # a caller's own higher setting
    with fewer_collections():
        assert gc.get_threshold()[0] == 10 * SIMULATION_GC_THRESHOLD


def test_a_simulation_runs_under_it(thresholds, monkeypatch) -> None:
    seen = []
    real = simulation._run

    def spy(*args):
        seen.append(gc.get_threshold()[0])
        return real(*args)

    monkeypatch.setattr(simulation, "_run", spy)
    report = simulation.simulate(simulation.SimulationSpec(), progress=False)
    assert seen == [SIMULATION_GC_THRESHOLD] and report.metrics.num_jobs > 0
    assert gc.get_threshold() == (700, 9, 8)

"""Metric definitions (SIMULATION.md §3) on hand-computed histories."""

from __future__ import annotations

import math

import pytest

from gpufair.metrics import (
    JobOutcome,
    compute_metrics,
    jain_index,
    rho_apps,
    rho_static,
    unfair_fractions,
)


def outcomes():
    return [JobOutcome("0", 0, 100, 50, avg_contention=2.0),
            JobOutcome("1", 10, 210, 100, avg_contention=1.0),
            JobOutcome("2", 20, 50, 30, avg_contention=0.5)]


def test_rho_static_uses_max_one_n_over_g():
    rho = rho_static(outcomes(), num_gpus=1)  # 3 jobs / 1 GPU: factor 3
    assert list(rho) == pytest.approx([100 / 150, 200 / 300, 30 / 90], abs=1e-5)
    rho = rho_static(outcomes(), num_gpus=8)  # factor max(1, 3/8) = 1
    assert list(rho) == pytest.approx([2.0, 2.0, 1.0])


def test_unfair_fraction_is_strict():
    import numpy as np
    fractions = unfair_fractions(np.array([1.0, 1.05, 1.1, 1.2]))
    assert fractions == {"1.0": 0.75, "1.05": 0.5, "1.1": 0.25}


def test_compute_metrics_all_fields():
    m = compute_metrics(outcomes(), num_gpus=8, makespan_s=210, busy_gpu_s=8 * 105)
    assert m.avg_jct_s == pytest.approx((100 + 200 + 30) / 3)
    assert m.worst_rho == 2.0
    assert m.unfair_fraction["1.0"] == pytest.approx(2 / 3)
    # Themis variant: factor = max(1, avg contention)
    assert m.worst_rho_themis == pytest.approx(2.0)
    assert m.utilization == pytest.approx(0.5)
    assert m.jain == pytest.approx(jain_index(__import__("numpy").array([0.5, 0.5, 1.0])))


def test_jain_bounds():
    import numpy as np
    assert jain_index(np.array([1.0, 1.0, 1.0])) == pytest.approx(1.0)
    assert jain_index(np.array([1.0, 0.0, 0.0])) == pytest.approx(1 / 3)
    assert math.isnan(jain_index(np.array([])))


def test_empty_history():
    m = compute_metrics([], num_gpus=4, makespan_s=0, busy_gpu_s=0)
    assert m.num_jobs == 0 and math.isnan(m.avg_jct_s)


def test_rho_apps_by_hand() -> None:
    """Two apps on 4 GPUs. A: two 1-GPU trials of 100 s alone, arriving at 0, the last done
    at 300; B: one 2-GPU job of 200 s alone, from 100 to 300. Over A's 300 s B is active
    200 s: N_A = 1 + 200/300; A alone with 4/N_A GPUs needs its 200 GPU-s of work over them
    (83.3 s), less than its longest trial (100 s): ρ_A = 300/100. N_B = 2 (A throughout):
    ρ_B = 200 / max(200, 400·2/4) = 1. A job missing from the map is its own app."""
    outcomes = [JobOutcome("a1", 0.0, 150.0, 100.0), JobOutcome("a2", 0.0, 300.0, 100.0),
                JobOutcome("b", 100.0, 300.0, 200.0, gpus=2)]
    rho = rho_apps(outcomes, {"a1": "A", "a2": "A", "b": "B"}, num_gpus=4)
    assert rho == pytest.approx({"A": 3.0, "B": 1.0})
    # on one GPU A's work dominates: 200·N_A / 1 GPU
    tight = rho_apps(outcomes, {"a1": "A", "a2": "A", "b": "B"}, num_gpus=1)
    assert tight["A"] == pytest.approx(300.0 / (200.0 * (1 + 200 / 300)))
    alone = rho_apps(outcomes, {"a1": "A", "a2": "A"}, num_gpus=4)
    assert set(alone) == {"A", "b"}

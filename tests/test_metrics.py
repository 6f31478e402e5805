"""Metric definitions (SIMULATION.md §3) on hand-computed histories."""

from __future__ import annotations

import math

import pytest

from gpufair.metrics import JobOutcome, compute_metrics, jain_index, rho_static, unfair_fractions


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

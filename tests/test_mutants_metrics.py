"""Pinned values of every metric field, so a wrong number cannot pass (issue 21).

Each expected value is worked out by hand in the comments (numpy's default percentile is linear
interpolation between order statistics: p at index p/100·(n−1) of the sorted values), never by
calling the code under test. These tests kill the mutants of ``gpufair/metrics.py`` that the
older tests let through (``python bench/mutation.py metrics``).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from gpufair.metrics import (
    JobOutcome,
    compute_metrics,
    jain_index,
    rho_static,
    rho_themis,
    unfair_fractions,
)


def history() -> list[JobOutcome]:
    # JCTs 100, 200, 30; isolated 50, 100, 30; contention 2, 1, 0.5 (0.5 < 1: factor 1)
    return [JobOutcome("0", 0, 100, 50, avg_contention=2.0),
            JobOutcome("1", 10, 210, 100, avg_contention=1.0),
            JobOutcome("2", 20, 50, 30, avg_contention=0.5, failed=True)]


def test_rho_themis_never_divides_by_a_contention_below_one():
    """A job that ran with the cluster half empty is not credited for it: factor max(1, c)."""
    # 100/(50·2) = 1; 200/(100·1) = 2; 30/(30·max(1, 0.5)) = 1 (not 30/15 = 2)
    assert rho_themis(history()).tolist() == [1.0, 2.0, 1.0]


def test_rho_themis_is_nan_without_a_contention_record():
    rho = rho_themis([JobOutcome("0", 0, 10, 5), JobOutcome("1", 0, 10, 5, avg_contention=1)])
    assert math.isnan(rho[0]) and rho[1] == 2.0


def test_rho_is_rounded_to_five_decimals_as_the_artifact_does():
    """Threshold counts must match the artifact's, which rounds ρ to 5 decimals."""
    one_third = [JobOutcome("0", 0, 1, 3, avg_contention=1.0)]
    assert rho_static(one_third, num_gpus=1).tolist() == [0.33333]
    assert rho_themis(one_third).tolist() == [0.33333]
    # 1.000004 rounds to 1.0: not above the 1.0 threshold
    almost = [JobOutcome("0", 0, 1.000004, 1.0, avg_contention=1.0)]
    assert rho_static(almost, num_gpus=1).tolist() == [1.0]
    assert compute_metrics(almost, 1, 2.0, 1.0).unfair_fraction["1.0"] == 0.0


def test_compute_metrics_every_field_by_hand():
    m = compute_metrics(history(), num_gpus=8, makespan_s=210, busy_gpu_s=8 * 105)
    assert m.num_jobs == 3
    assert m.makespan_s == 210.0
    assert m.avg_jct_s == pytest.approx(110.0)            # (100 + 200 + 30) / 3
    # sorted JCTs 30, 100, 200: p50 at index 1 → 100; p90 at 1.8 → 100 + 0.8·100 = 180;
    # p99 at 1.98 → 198 (p95 would be 190)
    assert (m.p50_jct_s, m.p90_jct_s, m.p99_jct_s) == pytest.approx((100.0, 180.0, 198.0))
    # static factor max(1, 3/8) = 1: ρ = 100/50, 200/100, 30/30
    assert m.worst_rho == 2.0
    assert m.mean_rho == pytest.approx(5 / 3)
    assert m.unfair_fraction == pytest.approx({"1.0": 2 / 3, "1.05": 2 / 3, "1.1": 2 / 3})
    assert m.worst_rho_themis == 2.0
    assert m.unfair_fraction_themis == pytest.approx({"1.0": 1 / 3, "1.05": 1 / 3,
                                                      "1.1": 1 / 3})
    # Jain of 1/ρ = (0.5, 0.5, 1): (2)² / (3 · 1.5) = 8/9
    assert m.jain == pytest.approx(8 / 9)
    assert m.utilization == pytest.approx(0.5)            # 840 / (8 · 210)
    assert m.failed_jobs == 1
    assert m.as_dict()["p99_jct_s"] == pytest.approx(198.0)
    assert set(m.as_dict()) >= {"num_jobs", "jain", "unfair_fraction_themis", "failed_jobs"}


def test_percentiles_of_a_longer_history():
    """Eleven JCTs 0, 10, ..., 100: p50 = 50, p90 = 90, p99 = 99 exactly."""
    jobs = [JobOutcome(str(i), 0, 10 * i, 10 * i or 1, avg_contention=1.0) for i in range(11)]
    m = compute_metrics(jobs, num_gpus=11, makespan_s=100, busy_gpu_s=0)
    assert (m.p50_jct_s, m.p90_jct_s, m.p99_jct_s) == pytest.approx((50.0, 90.0, 99.0))


def test_empty_history_every_field():
    m = compute_metrics([], num_gpus=4, makespan_s=12.5, busy_gpu_s=0)
    assert m.num_jobs == 0 and m.failed_jobs == 0
    assert m.makespan_s == 12.5
    for name in ("avg_jct_s", "p50_jct_s", "p90_jct_s", "p99_jct_s", "worst_rho", "mean_rho",
                 "worst_rho_themis", "jain", "utilization"):
        assert math.isnan(getattr(m, name)), name
    for table in (m.unfair_fraction, m.unfair_fraction_themis):
        assert sorted(table) == ["1.0", "1.05", "1.1"]
        assert all(math.isnan(v) for v in table.values())


def test_unfair_fractions_of_nothing_are_zero():
    assert unfair_fractions(np.array([])) == {"1.0": 0.0, "1.05": 0.0, "1.1": 0.0}
    assert unfair_fractions(np.array([math.nan, 2.0])) == {"1.0": 1.0, "1.05": 1.0, "1.1": 1.0}


def test_jain_of_one_value_and_of_zeros():
    assert jain_index(np.array([3.0])) == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # all zeros is "no answer", not a 0/0
        assert math.isnan(jain_index(np.array([0.0, 0.0])))
    assert jain_index(np.array([2.0, math.nan, 2.0])) == pytest.approx(1.0)


def test_a_zero_jct_job_is_left_out_of_jain_without_a_warning():
    """ρ = 0 (a job finished as it arrived) has no finite 1/ρ: it is dropped, silently."""
    jobs = [JobOutcome("0", 5, 5, 10, avg_contention=1.0),
            JobOutcome("1", 0, 10, 10, avg_contention=1.0),
            JobOutcome("2", 0, 20, 10, avg_contention=1.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = compute_metrics(jobs, num_gpus=4, makespan_s=20, busy_gpu_s=30)
    # 1/ρ of the other two: 1 and 0.5 → 1.5² / (2 · 1.25) = 0.9
    assert m.jain == pytest.approx(0.9)


def test_no_themis_rho_at_all_is_nan_without_a_warning():
    jobs = [JobOutcome("0", 0, 10, 5), JobOutcome("1", 0, 20, 5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = compute_metrics(jobs, num_gpus=2, makespan_s=20, busy_gpu_s=30)
    assert math.isnan(m.worst_rho_themis)
    assert m.unfair_fraction_themis == {"1.0": 0.0, "1.05": 0.0, "1.1": 0.0}


def test_utilization_over_a_short_or_empty_makespan():
    jobs = [JobOutcome("0", 0, 0.5, 0.5, avg_contention=1.0)]
    assert compute_metrics(jobs, 2, makespan_s=0.5, busy_gpu_s=0.5).utilization == 0.5
    assert math.isnan(compute_metrics(jobs, 2, makespan_s=0.0, busy_gpu_s=0.5).utilization)

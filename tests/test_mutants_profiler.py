"""The profiler's per-round reading and robust means, pinned (issue 21's surviving mutants).

``Accumulator.take_fresh`` is what the daemon attributes to the round's placement: after a
batch-size change (or a restart) mid-round only the new regime's times may count, or a round at
the new batch size is read at a blend of both speeds. Expected values are arithmetic on the
samples written here (the first sample of a log is warm-up and never counts).
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from gpufair.profiler.events import Sample, Samples
from gpufair.profiler.robust import Estimate, robust_mean, steady_kept, steady_mean
from gpufair.profiler.summary import Accumulator
from tests.test_profiler_summary_columns import feed_both, logs, split


def steps(first: int, last: int, seconds: float, batch: int | None = None) -> list[Sample]:
    return [Sample(step=s, iter_time_s=seconds, batch_size=batch) for s in range(first, last + 1)]


def test_a_batch_size_change_mid_round_keeps_only_the_new_regimes_times():
    acc = Accumulator()
    acc.add(steps(1, 10, 0.1, batch=32))
    acc.add(steps(11, 20, 0.2, batch=64))
    fresh = acc.take_fresh()
    assert fresh is not None and (fresh.value, fresh.n) == (pytest.approx(0.2), 10)
    assert acc.take_fresh() is None          # the round's times are taken once


def test_a_restart_mid_round_keeps_only_the_times_after_it():
    acc = Accumulator()
    acc.add(steps(1, 10, 0.1))
    acc.add(steps(1, 10, 0.3))               # the counter went back: a restart
    fresh = acc.take_fresh()
    assert fresh is not None and fresh.value == pytest.approx(0.3)


def test_a_speed_shift_alone_keeps_the_whole_round():
    """No batch-size change: 9 timed steps at 0.1 s (the first is warm-up) and 10 at 0.3 s
    are one round on one placement: (9·0.1 + 10·0.3) / 19."""
    acc = Accumulator()
    acc.add(steps(1, 10, 0.1))
    acc.add(steps(11, 20, 0.3))
    fresh = acc.take_fresh()
    assert fresh is not None and fresh.n == 19
    assert fresh.value == pytest.approx(3.9 / 19)


def test_take_fresh_without_an_estimate_still_starts_the_next_round():
    acc = Accumulator()
    acc.add(steps(1, 10, 0.1))
    assert acc.take_fresh(estimate=False) is None
    acc.add(steps(11, 15, 0.4))
    fresh = acc.take_fresh()
    assert fresh is not None and fresh.value == pytest.approx(0.4) and fresh.n == 5


def columns(first: int, last: int, seconds: float, batch: float = math.nan) -> Samples:
    """``steps`` as one columnar batch (long enough for the vectorised path)."""
    n = last - first + 1
    return Samples.build(n, step=np.arange(first, last + 1.0), iter_time_s=np.full(n, seconds),
                         batch_size=np.full(n, batch))


def test_columnar_rounds_start_over_with_or_without_an_estimate():
    acc = Accumulator()
    acc.add(columns(1, 40, 0.1))
    assert acc.take_fresh(estimate=False) is None
    acc.add(columns(41, 80, 0.4))
    fresh = acc.take_fresh()
    assert fresh is not None and fresh.value == pytest.approx(0.4) and fresh.n == 40
    assert acc.take_fresh() is None


def test_columnar_batch_size_change_keeps_only_the_new_regimes_times():
    acc = Accumulator()
    acc.add(Samples.concat([columns(1, 40, 0.1, 32.0), columns(41, 90, 0.2, 64.0)]))
    fresh = acc.take_fresh()
    assert fresh is not None and (fresh.value, fresh.n) == (pytest.approx(0.2), 50)


def test_a_round_of_rows_and_columns_counts_both():
    """Five rows (the first is warm-up: 4 times of 0.1 s), then 40 columnar times of 0.3 s,
    then 3 rows of 0.2 s: (0.4 + 12 + 0.6) / 47."""
    acc = Accumulator()
    acc.add(steps(1, 5, 0.1))
    acc.add(columns(6, 45, 0.3))
    acc.add(steps(46, 48, 0.2))
    fresh = acc.take_fresh()
    assert fresh is not None and fresh.n == 47
    assert fresh.value == pytest.approx(13.0 / 47)


# ---- robust.py against a brute-force reference written from its documented rules ---------------
# (median of the values; MAD × 1.4826; keep |v − median| ≤ 3 MADs, or ≤ 5 % of the median when
# the MAD is 0; steady_mean: drop values above 4 × the median when they are at most 5 % of the
# window (at least one allowed), and from the start of a segment a leading run above 1.1 × the
# median when it is at most a quarter of the window; values outside (0, 1e12] never count)


def _median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _spread(kept: list[float], mean: float) -> float:
    n = len(kept)
    if n == 1:
        return 1.0
    return math.sqrt(sum((v - mean) ** 2 for v in kept) / (n - 1) / n) / mean


def reference_robust_mean(values, weights=None):
    weights = [1.0] * len(values) if weights is None else weights
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if 0 < v <= 1e12]
    if not pairs:
        return None
    med = _median([v for v, _ in pairs])
    mad = _median([abs(v - med) for v, _ in pairs]) * 1.4826
    limit = 3 * mad if mad > 0 else 0.05 * med
    kept = [(v, w) for v, w in pairs if abs(v - med) <= limit] or [(med, 1.0)]
    mean = sum(v * w for v, w in kept) / sum(w for _, w in kept)
    return mean, len(kept), len(pairs) - len(kept), _spread([v for v, _ in kept], mean)


def reference_steady_mean(values, weights=None, from_start=False):
    weights = [1.0] * len(values) if weights is None else weights
    pairs = [(v, w) for v, w in zip(values, weights, strict=True)
             if 0 < v <= 1e12 and 0 < w <= 1e12]
    if not pairs:
        return None
    med = _median([v for v, _ in pairs])
    total = len(pairs)
    if from_start:
        lead = 0
        while lead < len(pairs) and pairs[lead][0] > 1.1 * med:
            lead += 1
        if lead <= 0.25 * len(pairs):
            pairs = pairs[lead:]
    slow = [p for p in pairs if p[0] > 4 * med]
    if slow and len(slow) <= max(1, int(0.05 * len(pairs))):
        pairs = [p for p in pairs if p[0] <= 4 * med]
    mean = sum(v * w for v, w in pairs) / sum(w for _, w in pairs)
    return mean, len(pairs), total - len(pairs), _spread([v for v, _ in pairs], mean)


def _same(found: Estimate | None, expected) -> bool:
    if expected is None or found is None:
        return found is None and expected is None
    mean, n, rejected, rel = expected
    return (found.n, found.rejected) == (n, rejected) and \
        found.value == pytest.approx(mean, rel=1e-9) and \
        found.rel_stderr == pytest.approx(rel, rel=1e-6, abs=1e-12)


def _window(rng: random.Random) -> list[float]:
    base = rng.choice([0.05, 0.3, 2.0])
    size = rng.choice([1, 2, 3, 5, 8, 20, 45])
    values = [base * rng.uniform(0.9, 1.1) for _ in range(size)]
    for _ in range(rng.choice([0, 0, 1, 2, 4])):   # pauses, warm-up, garbage
        where = rng.randrange(size)
        values[where] = rng.choice([base * 10, base * 5, base * 1.5, base * 0.2, 0.0, -1.0,
                                    math.nan, 1e13, base * 4.0, base * 1.2])
    if rng.random() < 0.3:                           # a slow leading run
        values[: rng.randint(1, 4)] = [base * 2] * min(size, 4)
        values = values[:size]
    if rng.random() < 0.1:                           # a flat window: MAD 0
        values = [base] * (size - 1) + [base * rng.choice([1.04, 1.06])]
    return values


@pytest.mark.parametrize("seed", range(4))
def test_robust_and_steady_means_equal_the_brute_force_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        values = _window(rng)
        weighted = [float(rng.choice([1, 2, 20])) for _ in values]
        assert _same(robust_mean(values), reference_robust_mean(values)), values
        assert _same(robust_mean(values, weighted), reference_robust_mean(values, weighted)), \
            (values, weighted)
        for start in (False, True):
            assert _same(steady_mean(values, from_start=start),
                         reference_steady_mean(values, from_start=start)), (values, start)
            assert _same(steady_mean(values, weighted, start),
                         reference_steady_mean(values, weighted, start)), (values, weighted)


def test_robust_and_steady_means_by_hand() -> None:
    # median 1.0, deviations 0, 0, 0.1, 0.1, 9 → MAD 0.1·1.4826: 10.0 rejected, mean of the rest
    est = robust_mean([1.0, 0.9, 1.1, 1.0, 10.0])
    assert (est.n, est.rejected) == (4, 1) and est.value == pytest.approx(1.0)
    # steady: one pause (10 > 4 × 1.0) in 5 values is rare: dropped; two in 5 are kept
    assert steady_mean([1.0, 1.0, 1.0, 1.0, 10.0]).value == pytest.approx(1.0)
    assert steady_mean([1.0, 1.0, 1.0, 10.0, 10.0]).value == pytest.approx(23 / 5)
    # a window of 20 iterations weighs 20: (1·20 + 2·1) / 21
    assert steady_mean([1.0, 2.0], [20.0, 1.0]).value == pytest.approx(22 / 21)
    # warm-up: from the start, the leading 1.5 (above 1.1 × median 1.0) goes
    assert steady_mean([1.5, 1.0, 1.0, 1.0, 1.0], from_start=True).value == pytest.approx(1.0)
    assert steady_mean([1.5, 1.0, 1.0, 1.0, 1.0]).value == pytest.approx(5.5 / 5)
    assert steady_mean([0.0, -1.0]) is None and robust_mean([math.nan]) is None
    with pytest.raises(ValueError, match="differ in length"):
        steady_mean([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="differ in length"):
        robust_mean([1.0, 2.0], [1.0])


def test_confidence_grows_with_samples_and_shrinks_with_spread() -> None:
    # (1 − e^(−n/5)) / (1 + 10 · rel)
    assert Estimate(1.0, 5, 0, 0.0).confidence == pytest.approx(1 - math.exp(-1))
    assert Estimate(1.0, 10, 0, 0.1).confidence == pytest.approx((1 - math.exp(-2)) / 2)
    assert Estimate(1.0, 0, 0, 0.0).confidence == 0.0


def test_the_bounds_of_what_counts_are_inclusive() -> None:
    """1e12 is the largest value that still counts (beyond it a line is malformed), for a
    value and for a weight; a zero weight does not count at all."""
    assert robust_mean([1e12]).value == 1e12
    assert robust_mean([1e12, 1e12], [2.0, 2.0]).value == 1e12
    assert steady_mean([1e12]).value == 1e12
    assert steady_mean([1e12, 1e12], [2.0, 2.0]).value == 1e12
    assert steady_kept([1e12, math.nan, -1.0]) == ([1e12], 1)
    assert steady_mean([1.0, 2.0], [1e12, 1.0]).value == pytest.approx(1.0)
    zero_weight = steady_mean([1.0, 5.0], [2.0, 0.0])
    assert (zero_weight.value, zero_weight.n) == (1.0, 1)


def test_boundaries_of_warm_up_pause_and_rejection_belong_to_the_kept_side() -> None:
    # exactly 1.1 × the median is not warm-up
    assert steady_mean([1.1, 1.0, 1.0, 1.0, 1.0], from_start=True).value == \
        pytest.approx(5.1 / 5)
    # exactly 4 × the median is not a pause: (1 + 1 + 1 + 1 + 4) / 5, weighted alike
    assert steady_mean([1.0, 1.0, 1.0, 1.0, 4.0], [2.0] * 5).value == pytest.approx(1.6)
    # MAD 0: the limit is 5 % of the median 20, i.e. 1; 21 is exactly on it and stays
    est = robust_mean([20.0, 20.0, 20.0, 20.0, 21.0], [2.0] * 5)
    assert (est.n, est.value) == (5, pytest.approx(20.2))


def test_steady_kept_sorts_and_counts_and_drops_warm_up_only_when_asked() -> None:
    assert steady_kept([1.5, 1.0, 1.0, 1.0, 1.0]) == ([1.0, 1.0, 1.0, 1.0, 1.5], 5)
    assert steady_kept([1.5, 1.0, 1.0, 1.0, 1.0], from_start=True) == ([1.0] * 4, 5)
    assert steady_kept([]) == ([], 0) and steady_kept([0.0]) == ([], 0)


def test_weights_of_another_length_are_refused() -> None:
    with pytest.raises(ValueError, match="shorter"):   # zip(strict=True) says it there
        robust_mean([1.0, 2.0, 3.0], [2.0, 3.0])
    for call in (lambda: robust_mean([1.0, 2.0], [1.0]),
                 lambda: steady_mean([1.0, 2.0, 3.0], [2.0, 3.0]),
                 lambda: steady_mean([1.0, 2.0], [1.0])):
        with pytest.raises(ValueError, match=r"^values and weights differ in length$"):
            call()


# ---- throughput-only logs and a resumed reading ---------------------------------------------
def test_samples_per_second_is_the_harmonic_mean_after_the_first():
    """Rates 100 (warm-up, left out), 200, 400 samples/s: the mean cost of a sample is
    (1/200 + 1/400)/2 = 3/800 s, so 800/3 samples/s (the arithmetic mean would say 300)."""
    from gpufair.profiler.summary import _mean_rate
    assert _mean_rate([100.0, 200.0, 400.0]) == pytest.approx(800 / 3)
    assert _mean_rate([50.0]) == pytest.approx(50.0)          # one rate: it is the reading
    assert _mean_rate([100.0, 0.0, -5.0]) is None               # nothing positive after it
    acc = Accumulator()
    acc.add([Sample(samples_per_s=r) for r in (100.0, 200.0, 400.0)])
    report = acc.report("hf")
    assert report.samples_per_s == pytest.approx(800 / 3) and report.iter_time_s is None


def test_a_stated_rate_with_a_batch_size_is_not_a_throughput_only_reading():
    acc = Accumulator()
    acc.add([Sample(step=s, samples_per_s=320.0, batch_size=32) for s in range(1, 12)])
    report = acc.report("hf")
    # 32 samples at 320 samples/s: 0.1 s an iteration, and samples/s from it
    assert report.iter_time_s == pytest.approx(0.1)
    assert report.samples_per_s == pytest.approx(320.0)


def test_a_seeded_reading_resumes_at_the_step_it_had_reached():
    acc = Accumulator()
    acc.seed(100)
    assert acc.report("pytorch").iterations_done == 100
    acc.add(steps(101, 105, 0.1))
    assert acc.report("pytorch").iterations_done == 105


# ---- the columnar path against the per-row reference, on a small fixed set of logs -------------
# test_profiler_summary_columns.py runs this comparison on 400 generated logs (~40 s): too slow
# to repeat for every mutant. The same generator, derandomized and on 300 logs, runs in ~6 s
# and still catches a columnar path that drifts from the row-by-row one.
@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(logs())
def test_columnar_add_equals_the_per_row_reference_on_a_few_logs(log: tuple) -> None:
    samples, cuts, warmup, seed, exact = log
    feed_both(split(samples, cuts), warmup, seed, exact)


# ---- what a report says, and on what basis ---------------------------------------------------
def test_a_whole_run_average_is_the_reading_with_one_sample_of_confidence():
    acc = Accumulator()
    acc.add([Sample(step=5, iter_time_s=0.2, cumulative=True)])    # Keras' "0.2 s/step" total
    report = acc.report("keras")
    assert (report.iter_time_s, report.iter_time_basis, report.timed_samples) == \
        (0.2, "whole_run", 1)
    assert report.confidence == pytest.approx(1 - math.exp(-1 / 5))


def test_a_log_with_only_its_warm_up_sample_is_read_at_low_confidence():
    acc = Accumulator()
    acc.add([Sample(step=1, iter_time_s=0.3)])
    report = acc.report("pytorch")
    assert (report.iter_time_s, report.iter_time_basis, report.warmup_skipped) == \
        (0.3, "warmup", 1)
    assert report.confidence == pytest.approx((1 - math.exp(-1 / 5)) / 11)   # rel. error 1
    assert Accumulator().report("pytorch").iter_time_s is None


def test_a_window_report_states_every_field():
    acc = Accumulator()
    acc.add([Sample(step=s, iter_time_s=0.1, batch_size=64, loss=1.0 / s, epoch=s / 10,
                    total_epochs=3, total_steps=30) for s in range(1, 12)])
    for exact in (True, False):
        report = acc.report("pytorch", exact=exact)
        assert (report.iter_time_s, report.iter_time_basis, report.timed_samples) == \
            (pytest.approx(0.1), "window", 10)
        assert report.confidence == pytest.approx(1 - math.exp(-2))
        assert report.samples_per_s == pytest.approx(640.0)      # 64 samples / 0.1 s
        assert (report.loss, report.epoch) == (pytest.approx(1 / 11), pytest.approx(1.1))
        assert (report.epochs_total, report.iterations_total, report.iterations_done) == \
            (3, 30, 11)
        assert (report.batch_size, report.family) == (64, "pytorch")


# ---- which lines were left out: DroppedLines against a brute-force reference --------------------
def reference_ranges(lines_by_reason: dict[str, list[float]], cap: int
                     ) -> tuple[list[dict], int]:
    """Runs of lines at most 1 apart per reason; the first ``cap`` runs of each reason are
    kept, the rest counted; then the first ``cap`` of all in line order, the rest counted."""
    every, more = [], 0
    for reason, lines in lines_by_reason.items():
        runs: list[list[int]] = []
        for line in (x for x in lines if x == x):
            if runs and line <= runs[-1][1] + 1:
                runs[-1][1] = max(runs[-1][1], int(line))
            else:
                runs.append([int(line), int(line)])
        every += [(a, b, reason) for a, b in runs[:cap]]
        more += max(0, len(runs) - cap)
    every.sort()
    return ([{"reason": r, "first": a, "last": b} for a, b, r in every[:cap]],
            more + max(0, len(every) - cap))


@pytest.mark.parametrize("seed", range(6))
def test_dropped_lines_equal_the_reference_one_by_one_and_in_chunks(seed: int) -> None:
    import numpy as np

    from gpufair.profiler.summary import MAX_RANGES, DroppedLines
    rng = random.Random(seed)
    by_reason: dict[str, list[float]] = {}
    for reason in ("warm-up", "evaluation", "duplicate"):
        line, lines = 0.0, []
        for _ in range(rng.choice([0, 5, 40, 3 * MAX_RANGES])):
            line += rng.choice([0, 1, 1, 1, 2, 7])
            lines.append(math.nan if rng.random() < 0.05 else line)
        by_reason[reason] = lines
    one, many = DroppedLines(), DroppedLines()
    for reason, lines in by_reason.items():
        for line in lines:
            one.note(reason, line)
        at = 0
        while at < len(lines):
            step = rng.choice([1, 2, 5, 30])
            many.note_many(reason, np.array(lines[at:at + step], dtype=float))
            at += step
    expected = reference_ranges(by_reason, MAX_RANGES)
    assert one.listed() == expected
    assert many.listed() == expected

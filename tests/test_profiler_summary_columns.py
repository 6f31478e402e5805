"""The columnar ``Accumulator.add`` (and ``RegimeTracker.observe_times``) against the
per-row reference: the same reports, fresh estimates and internal state, bit for bit."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufair.profiler import regimes as regimes_module
from gpufair.profiler.events import Sample, Samples
from gpufair.profiler.regimes import WINDOW, Regime, RegimeTracker, _until_due
from gpufair.profiler.summary import MIN_RUN, Accumulator, _seconds_per_iter

# -- comparing two accumulators ------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, recursively; NaN equals NaN, 0.0 is not -0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a)
                                                     == math.copysign(1, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def regime_state(r: Regime) -> tuple:
    return (r.start_step, r.end_step, r.batch_size, list(r.values), list(r.weights), r.cause,
            r._cached, r._stale)


def state(acc: Accumulator) -> dict[str, Any]:
    """Everything an Accumulator carries from one call to the next."""
    period = acc._period
    return {
        "recent": list(acc._recent.items()), "index": acc._index,
        "last_step": acc._last_step, "segment": acc._segment_samples,
        "period": None if period is None else (period.key, period.first, period.last,
                                               period.step, period.parts, period.sum_w,
                                               period.sum_wx, period.sum_wxx),
        "last_period": acc.regimes._period,
        "whole_run": acc._whole_run, "warmup_spi": acc._warmup_spi,
        "report": acc._report.as_dict(), "fresh": list(acc._fresh),
        "regimes": [regime_state(r) for r in acc.regimes.regimes],
        "pending": list(acc.regimes._pending),
        "dropped": acc._dropped.listed(),
    }


def assert_same_state(rows: Accumulator, cols: Accumulator) -> None:
    a, b = state(rows), state(cols)
    for key in a:
        assert same(a[key], b[key]), (key, a[key], b[key])


def feed_both(batches: list[Samples], warmup: int = 1, seed: int | None = None,
              exact: list[bool] | None = None) -> tuple[Accumulator, Accumulator]:
    """Feed the batches to a per-row and a columnar Accumulator; compare after each."""
    rows, cols = Accumulator(warmup), Accumulator(warmup)
    if seed is not None:
        rows.seed(seed)
        cols.seed(seed)
    line = 0
    for i, batch in enumerate(batches):
        if np.isnan(batch.line).all():  # number the lines: the dropped ranges must agree too
            batch.line = np.arange(line + 1.0, line + len(batch) + 1.0)
        line += len(batch)
        rows._add_rows(batch.rows(), batch.line.tolist())
        cols.add(batch)
        assert_same_state(rows, cols)
        flag = True if exact is None else exact[i % len(exact)]
        assert same(rows.report("f", exact=flag).as_dict(), cols.report("f", exact=flag).as_dict())
        assert_same_state(rows, cols)  # reports refresh estimates: alike too
    assert same(rows.take_fresh(), cols.take_fresh())
    assert len(rows.regimes.regimes) == len(cols.regimes.regimes)
    assert_same_state(rows, cols)
    return rows, cols


def split(samples: Samples, cuts: list[int]) -> list[Samples]:
    bounds = [0, *sorted({min(max(c, 0), len(samples)) for c in cuts}), len(samples)]
    return [samples.take(slice(a, b)) for a, b in itertools.pairwise(bounds)]


# -- random logs ---------------------------------------------------------------------------


@st.composite
def logs(draw: st.DrawFn) -> tuple[Samples, list[int], int, int | None, list[bool]]:
    """A random log as a Samples batch, with cut points, warm-up, a seed step and the
    exactness of the reports. Knobs come from hypothesis, values from a seeded generator."""
    n = draw(st.integers(0, 600))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p_none = draw(st.sampled_from([0.0, 0.02, 0.2, 1.0]))
    p_repeat = draw(st.sampled_from([0.0, 0.05, 0.5]))
    p_drop = draw(st.sampled_from([0.0, 0.005, 0.05]))
    p_eval = draw(st.sampled_from([0.0, 0.05, 0.3]))
    keras = draw(st.booleans())
    p_whole = draw(st.sampled_from([0.0, 0.01]))
    p_batch = draw(st.sampled_from([0.0, 0.3, 1.0]))  # how often a row states its batch
    p_change = draw(st.sampled_from([0.0, 0.003, 0.05]))
    p_shift = draw(st.sampled_from([0.0, 0.01, 0.05]))
    p_outlier = draw(st.sampled_from([0.0, 0.01, 0.1]))
    p_untimed = draw(st.sampled_from([0.0, 0.05, 0.5]))
    p_clash = draw(st.sampled_from([0.0, 0.1]))
    p_negative = draw(st.sampled_from([0.0, 0.02, 1.0]))  # malformed rates: no estimate
    p_fraction = draw(st.sampled_from([0.0, 0.05]))  # steps and sizes rows() truncates
    noise = draw(st.sampled_from([0.0, 0.03, 0.15]))
    how = draw(st.sampled_from(["time", "steps", "samples", "mixed"]))
    step = np.full(n, np.nan)
    loss = np.full(n, np.nan)
    it = np.full(n, np.nan)
    sps = np.full(n, np.nan)
    smp = np.full(n, np.nan)
    batch = np.full(n, np.nan)
    epoch = np.full(n, np.nan)
    period_n = np.full(n, np.nan)
    cumulative = np.zeros(n, dtype=bool)
    s, last_loss, base, size, per_epoch = int(rng.integers(0, 4)), 2.0, 0.1, 32, 25
    for i in range(n):
        u = rng.random()
        if u < p_none:
            pass
        elif u < p_none + p_repeat and i:
            step[i] = s
            loss[i] = last_loss if rng.random() >= p_clash else last_loss + 0.5
        elif u < p_none + p_repeat + p_drop:
            s = int(rng.integers(0, s + 1)) if rng.random() < 0.5 else max(s - 2, 0)
            step[i] = s
        else:
            s += 1 if rng.random() < 0.9 else int(rng.integers(2, 5))
            step[i] = s
            last_loss = float(rng.uniform(0.1, 3.0))
            loss[i] = last_loss if rng.random() > 0.1 else np.nan
        if rng.random() < p_fraction and not np.isnan(step[i]):
            step[i] += float(rng.choice([-0.5, 0.25, 0.75]))
        if rng.random() < p_change:
            size = int(rng.choice([16, 32, 64, 128]))
        if rng.random() < p_batch:
            batch[i] = size if rng.random() >= p_fraction else size + 0.5
        if rng.random() < p_shift:
            base *= float(rng.choice([0.6, 0.7, 1.3, 1.5]))
        t = base * (1 + noise * rng.standard_normal())
        if rng.random() < p_outlier:
            t *= float(rng.choice([0.1, 5.0, 40.0]))
        if keras:
            cumulative[i] = True
            done = s % per_epoch
            epoch[i] = s // per_epoch + done / per_epoch
            period_n[i] = done if rng.random() > 0.05 else done + 0.5
        elif rng.random() < p_whole:
            cumulative[i] = True
        if rng.random() < p_untimed:
            continue
        form = how if how != "mixed" else ["time", "steps", "samples"][int(rng.integers(3))]
        if form == "time":
            it[i] = t if rng.random() > 0.02 else -t
        elif form == "steps":
            sps[i] = 1 / t if rng.random() > 0.02 else 0.0
        else:
            smp[i] = size / t if rng.random() >= p_negative else -size / t
            batch[i] = size
    samples = Samples.build(
        n, step=step, loss=loss, iter_time_s=it, steps_per_s=sps, samples_per_s=smp,
        batch_size=batch, epoch=epoch, period_n=period_n, cumulative=cumulative,
        total_steps=np.where(rng.random(n) < 0.5, 1000.0, np.nan),
        total_epochs=np.where(rng.random(n) < 0.1, 7.0, np.nan),
        eval=rng.random(n) < p_eval)
    cuts = draw(st.lists(st.integers(0, n), max_size=6))
    warmup = draw(st.sampled_from([0, 1, 3]))
    seed = draw(st.sampled_from([None, None, 0, 5]))
    exact = draw(st.lists(st.booleans(), min_size=1, max_size=3))
    return samples, cuts, warmup, seed, exact


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs())
def test_columnar_add_equals_the_per_row_reference(log: tuple) -> None:
    samples, cuts, warmup, seed, exact = log
    feed_both(split(samples, cuts), warmup, seed, exact)


# -- targeted cases ------------------------------------------------------------------------


def timed_run(steps: Any, base: float = 0.1, noise: float = 0.02, seed: int = 0,
              **columns: Any) -> Samples:
    steps = np.asarray(steps, dtype=float)
    rng = np.random.default_rng(seed)
    times = base * (1 + noise * rng.standard_normal(len(steps)))
    columns.setdefault("iter_time_s", times)
    columns.setdefault("loss", rng.uniform(1, 2, len(steps)))
    return Samples.build(len(steps), step=steps, **columns)


def test_restart_in_the_middle_of_a_batch() -> None:
    steps = [*range(1, 301), *range(150, 451)]
    _, cols = feed_both([timed_run(steps)])
    report = cols.report("f")
    assert (report.restarts, report.duplicates, report.iterations_done) == (1, 0, 450)
    assert report.warmup_skipped == 2  # the first sample of each segment


def test_duplicate_ranks() -> None:
    steps = np.repeat(np.arange(1.0, 501.0), 2)
    loss = np.repeat(np.random.default_rng(1).uniform(1, 2, 500), 2)
    _, cols = feed_both(split(timed_run(steps, loss=loss), [333, 700]))
    report = cols.report("f")
    assert (report.duplicates, report.restarts, report.iterations_done) == (500, 0, 500)


def test_deepspeed_timed_copy_replaces_the_untimed_step() -> None:
    steps = np.repeat(np.arange(1.0, 201.0), 2)
    times = np.where(np.arange(400) % 2 == 1, 0.1, np.nan)  # step=N, then its throughput
    _, cols = feed_both([timed_run(steps, iter_time_s=times,
                                      loss=np.repeat(np.arange(200.0), 2))])
    report = cols.report("f")
    assert (report.duplicates, report.restarts, report.timed_samples) == (0, 0, 128)


def test_copies_are_judged_against_the_kept_copy() -> None:
    """A third copy is compared with the kept one, not with the copy just before it."""
    steps = np.repeat(np.arange(1.0, 201.0), 3)
    loss = np.repeat(np.arange(1.0, 201.0), 3)
    times = np.full(len(steps), 0.1)
    at = 3 * 99  # step 100: kept, an untimed copy with another loss, a timed one alike
    loss[at + 1:at + 3] += 0.5
    times[at + 1] = np.nan
    at = 3 * 149  # step 150: kept, a timed copy without loss, a timed one with another
    loss[at + 1], loss[at + 2] = np.nan, loss[at] + 1
    _, cols = feed_both([timed_run(steps, iter_time_s=times, loss=loss)])
    assert cols.report("f").restarts == 2


def test_keras_like_cumulative_epochs() -> None:
    per_epoch, epochs = 100, 6
    i = np.tile(np.arange(1, per_epoch + 1), epochs)
    ep = np.repeat(np.arange(epochs), per_epoch)
    avg = np.repeat(np.linspace(0.05, 0.06, epochs), per_epoch)
    samples = Samples.build(len(i), step=ep * per_epoch + i, epoch=ep + i / per_epoch,
                            total_epochs=epochs, iter_time_s=avg, period_n=i - 1,
                            cumulative=True)
    _, cols = feed_both(split(samples, [50, 250, 251, 480]))
    regime = cols.regimes.current
    # one window per epoch (differenced cumulative averages), none while the first is open
    assert regime is not None and len(regime.values) >= epochs - 1
    assert set(regime.weights) != {1.0}
    assert cols.report("f").iter_time_basis == "window"


def test_batch_size_ramp() -> None:
    steps = np.arange(1.0, 4001.0)
    sizes = np.minimum(256 * (1 + steps // 1000), 1024)
    samples = timed_run(steps, base=0.2, batch_size=sizes)
    samples.iter_time_s *= sizes / 256
    _, cols = feed_both(split(samples, [999, 1000, 2500]))
    assert [r.batch_size for r in cols.regimes.regimes] == [256, 512, 768, 1024]
    assert [r.start_step for r in cols.regimes.regimes] == [1, 1000, 2000, 3000]
    assert cols.batch_regimes == 3  # the first regime is the start


def test_throughput_shift_without_batch_size() -> None:
    steps = np.arange(1.0, 401.0)
    samples = timed_run(steps, noise=0.01)
    samples.iter_time_s[200:] *= 1.6
    _, cols = feed_both([samples])
    regimes = cols.regimes.regimes
    assert [r.cause for r in regimes] == ["start", "throughput"]
    assert regimes[1].start_step == 201
    assert regimes[1].estimate().value == pytest.approx(0.16, rel=0.05)


def test_outliers_held_as_pending_then_dropped() -> None:
    samples = timed_run(np.arange(1.0, 301.0), noise=0.01)
    samples.iter_time_s[[100, 101, 102, 103, 200]] *= 10  # four in a row: one short of a shift
    _, cols = feed_both([samples])
    assert len(cols.regimes.regimes) == 1
    assert len(cols.regimes.current.values) == WINDOW


def test_only_eval_rows_and_empty_batches() -> None:
    train = timed_run(np.arange(1.0, 101.0))
    evals = Samples.build(40, step=100, loss=0.5, iter_time_s=0.3, eval=True)
    rows, cols = feed_both([Samples.empty(), train, evals, Samples.empty(), evals])
    report = cols.report("f")
    assert (report.eval_samples, report.iterations_done) == (80, 100)
    cols.add([])  # an empty list of Sample rows too
    assert_same_state(rows, cols)


def test_short_stretches_between_restarts_walk_row_by_row() -> None:
    steps = [s for start in range(0, 50) for s in range(start, start + MIN_RUN // 2)]
    feed_both([timed_run(steps)])


def test_rows_beyond_exact_integers_take_the_per_row_path() -> None:
    steps = np.arange(1.0, 101.0)
    steps[50] = 2.0 ** 60  # a malformed line: every later step goes back from it
    feed_both([timed_run(steps)])


def test_sample_rows_still_accepted() -> None:
    acc = Accumulator()
    acc.add(Sample(step=s, loss=1.0, iter_time_s=0.1) for s in (1, 1, 2, 3))
    assert (acc.report("f").duplicates, acc.report("f").iterations_done) == (1, 3)


# -- the pieces ----------------------------------------------------------------------------


def test_until_due_matches_the_refresh_rule() -> None:
    for have in range(WINDOW + 1):
        for stale in range(2 * WINDOW):
            k = 0
            while not (stale + k and stale + k >= max(4, min(have + k, WINDOW) // 2)):
                k += 1
            assert _until_due(stale, have) == k, (stale, have)


def test_seconds_per_iter_columns_match_sample_rule() -> None:
    values = [np.nan, 0.0, -0.0, -1.0, 0.5, 2.0, np.inf, -np.inf, 5e-324, 1e308]
    grid = np.array(np.meshgrid(values, values, values, [np.nan, 0, 1, 3, -2, 0.5]),
                    dtype=float).reshape(4, -1)
    samples = Samples.build(grid.shape[1], iter_time_s=grid[0], steps_per_s=grid[1],
                            samples_per_s=grid[2], batch_size=grid[3])
    cols = _seconds_per_iter(samples.iter_time_s, samples.steps_per_s, samples.samples_per_s,
                             np.trunc(samples.batch_size)).tolist()
    for row, got in zip(samples.rows(), cols, strict=True):
        want = row.seconds_per_iter()
        assert same(float("nan") if want is None else float(want), got), (row, got)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 700), st.booleans(), st.booleans(),
       st.sampled_from([0.0, 0.01, 1.0]), st.lists(st.integers(0, 700), max_size=5),
       st.sampled_from([0.02, 0.1, 0.3]))
def test_observe_times_equals_observe_time(seed: int, n: int, weighted: bool, sized: bool,
                                           zeros: float, cuts: list[int], slow: float) -> None:
    """``slow``: the share of values far out of band (0.1: an ImageNet log's; 0.3: held
    runs long enough to be judged as shifts, and held values across refreshes)."""
    rng = np.random.default_rng(seed)
    base = np.where(rng.random(n) < 0.01, 5.0, 1.0).cumprod() ** 0.2 * 0.1
    values = base * (1 + 0.1 * rng.standard_normal(n))
    values[rng.random(n) < slow] *= rng.choice([0.5, 8.0])
    values[rng.random(n) < zeros] = 0.0  # no estimate while the window has only these
    steps = np.cumsum(rng.integers(0, 3, n))
    weights = rng.integers(1, 4, n).astype(float) if weighted else None
    one, bulk = RegimeTracker(), RegimeTracker()
    if sized:
        one.observe_batch(0, 64)
        bulk.observe_batch(0, 64)
    bounds = [0, *sorted(set(min(c, n) for c in cuts)), n]
    for a, b in itertools.pairwise(bounds):
        want = []
        for i in range(a, b):
            one.observe_time(int(steps[i]), float(values[i]),
                             1.0 if weights is None else float(weights[i]))
            want.append(len(one.regimes))
        got = bulk.observe_times(steps[a:b], values[a:b],
                                 None if weights is None else weights[a:b])
        assert got.tolist() == want
        assert same([regime_state(r) for r in one.regimes],
                    [regime_state(r) for r in bulk.regimes])
        assert same(one._pending, bulk._pending)


def test_observe_times_band_edges() -> None:
    """Values exactly on the shift band's edges, and just beyond, are judged alike."""
    est, shift = 0.1, 0.3
    up, down = est + shift * est, est - shift * est
    edges = [up, float(np.nextafter(up, 1.0)), down, float(np.nextafter(down, 0.0)), math.inf,
             math.nan]
    values = [est] * WINDOW + [v for edge in edges for v in [edge, est, edge, edge, edge, edge]]
    one, bulk = RegimeTracker(shift), RegimeTracker(shift)
    for step, value in enumerate(values):
        one.observe_time(step, value)
    bulk.observe_times(np.arange(len(values)), values)
    assert same([regime_state(r) for r in one.regimes],
                [regime_state(r) for r in bulk.regimes])
    assert same(one._pending, bulk._pending)


edge_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                        st.sampled_from([0.07, 0.1, 0.13, float(np.nextafter(0.13, 1.0)),
                                         float(np.nextafter(0.07, 0.0)), -0.1, 0.0]))


@settings(max_examples=500, deadline=None)
@given(block=st.lists(edge_floats, max_size=70),
       level=st.sampled_from([0.1, 1.0, 3.7e-5, 1e300]), shift=st.sampled_from([0.3, 0.0]))
def test_all_in_band_is_the_per_value_test(block: list[float], level: float,
                                           shift: float) -> None:
    """The block test of ``_join_in_band``'s fast path against its definition, value by
    value: NaN anywhere (where ``min`` and ``max`` pass over it), infinities, both edges."""
    band = shift * level
    want = bool(block) and all(abs(v - level) <= band for v in block)
    assert regimes_module._all_in_band(block, level, band) == want


def test_a_nan_at_the_end_of_a_block_is_held_as_one_by_one() -> None:
    """A NaN last in a block of values in band, behind others (``min`` and ``max`` skip it):
    out of band, so it is held (pending), as ``observe_time`` holds it. The input ends with
    it, after runs of every length up to two windows, so it ends blocks of every size."""
    for n in range(1, 2 * WINDOW):
        values = [0.1 + 0.001 * (i % 7) for i in range(n)] + [math.nan]
        one, bulk = RegimeTracker(), RegimeTracker()
        for step, value in enumerate(values):
            one.observe_time(step, value)
        bulk.observe_times(np.arange(len(values)), values)
        assert len(one._pending) == (1 if n >= one.confirm else 0)
        assert same([regime_state(r) for r in one.regimes],
                    [regime_state(r) for r in bulk.regimes]), n
        assert same(one._pending, bulk._pending), n

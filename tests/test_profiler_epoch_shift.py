"""Epochs as segment candidates: a period of a cumulative average (a timm or Keras epoch)
whose mean is off the previous period's by more than 10% and by more than three standard
errors of the difference starts a new regime, stated batch size or not (issue 14: the ViTAE
log whose data loader stalled less in its second epoch).

The logs are written in timm's format; every expected reading is computed here from the
printed averages, as a person reads them: the iterations between two lines of an epoch cost
(n_b x avg_b - n_a x avg_a) / (n_b - n_a), the epoch's first line being warm-up.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from gpufair.profiler import profile_file
from gpufair.profiler.events import Sample
from gpufair.profiler.regimes import RegimeTracker
from gpufair.profiler.stream import LogStream
from gpufair.profiler.summary import Accumulator

TRAIN = ("Train: {e} [{i:4d}/{n} ({p:3.0f}%)]  Loss:  6.9 (6.95)  Time: 0.700s, {r:7.2f}/s  "
         "({a:.3f}s, {ra:7.2f}/s)  LR: 1.000e-03  Data: 0.010 (0.020)")
BATCH = 128
EVERY = 50  # iterations between lines


def epoch(e: int, n: int, stretches: list[float], first: float = 9.0) -> list[tuple[str, int,
                                                                                   float]]:
    """Lines of epoch ``e`` (``n`` iterations): the first batch costs ``first`` seconds, the
    k-th stretch of EVERY iterations after it ``stretches[k]`` each. Returns (line,
    iterations so far, printed average)."""
    out, total, done = [], first, 1
    for k in range(len(stretches) + 1):
        avg = round(total / done, 3)
        out.append((TRAIN.format(e=e, i=done - 1, n=n, p=100 * (done - 1) / n, r=BATCH / 0.7,
                                 a=avg, ra=BATCH / avg), done, avg))
        if k < len(stretches):
            total += EVERY * stretches[k]
            done += EVERY
    return out


def window(lines: list[tuple[str, int, float]]) -> tuple[float, int]:
    """By hand: the mean cost of an epoch's iterations after its first line, and how many."""
    (_, n_a, a), (_, n_b, b) = lines[0], lines[-1]
    return (n_b * b - n_a * a) / (n_b - n_a), n_b - n_a


def write(tmp_path: Path, *epochs: list[tuple[str, int, float]]) -> Path:
    log = tmp_path / "train.log"
    log.write_text("".join(line + "\n" for lines in epochs for line, _, _ in lines))
    return log


def jitter(mean: float, size: float, k: int) -> list[float]:
    """k stretch means scattered +-size around ``mean``, alternating (mean exactly ``mean``
    when k is even)."""
    return [mean + (size if j % 2 else -size) for j in range(k)]


def test_a_faster_epoch_under_way_is_read_alone(tmp_path: Path) -> None:
    """Epoch 0 at 1.5 s, epoch 1 (half done) at 1.2 s: epoch 1 is the job's speed now."""
    e0 = epoch(0, 1000, jitter(1.5, 0.1, 19))
    e1 = epoch(1, 1000, jitter(1.2, 0.1, 10))
    rep = profile_file(str(write(tmp_path, e0, e1)))
    want, _ = window(e1)
    assert rep.iter_time_s == pytest.approx(want, rel=1e-12)
    assert rep.samples_per_s == pytest.approx(BATCH / want, rel=1e-12)
    assert abs(want - 1.2) < 0.02  # the oracle itself: epoch 1's speed, not a blend


def test_after_the_faster_epoch_closes_it_opens_a_regime(tmp_path: Path) -> None:
    """Epochs 0 (1.5 s), 1 and 2 (1.2 s): once epoch 1 is closed it starts a 'throughput'
    regime, and the reading blends epochs 1 and 2, weighted by their iterations, without
    epoch 0."""
    e0 = epoch(0, 1000, jitter(1.5, 0.1, 19))
    e1 = epoch(1, 1000, jitter(1.2, 0.1, 19))
    e2 = epoch(2, 1000, jitter(1.2, 0.1, 8))
    rep = profile_file(str(write(tmp_path, e0, e1, e2)))
    (m1, w1), (m2, w2) = window(e1), window(e2)
    assert rep.iter_time_s == pytest.approx((m1 * w1 + m2 * w2) / (w1 + w2), rel=1e-12)
    assert [r["cause"] for r in rep.regimes] == ["start", "throughput"]
    assert rep.regimes[1]["iter_time_s"] == pytest.approx(m1, rel=1e-12)


def test_epochs_at_one_speed_stay_one_regime(tmp_path: Path) -> None:
    e0 = epoch(0, 1000, jitter(1.3, 0.2, 19))
    e1 = epoch(1, 1000, jitter(1.3, 0.2, 19))
    e2 = epoch(2, 1000, jitter(1.3, 0.2, 10))
    rep = profile_file(str(write(tmp_path, e0, e1, e2)))
    parts = [window(e) for e in (e0, e1, e2)]
    want = sum(m * w for m, w in parts) / sum(w for _, w in parts)
    assert rep.iter_time_s == pytest.approx(want, rel=1e-12)
    assert [r["cause"] for r in rep.regimes] == ["start"]


def test_a_change_under_ten_percent_is_no_shift(tmp_path: Path) -> None:
    """1.30 s then 1.22 s (6% faster), scattered by 0.01 s only: plain in the data, but too
    small to matter; the reading blends both epochs."""
    e0 = epoch(0, 1000, jitter(1.30, 0.01, 19))
    e1 = epoch(1, 1000, jitter(1.22, 0.01, 10))
    rep = profile_file(str(write(tmp_path, e0, e1)))
    (m0, w0), (m1, w1) = window(e0), window(e1)
    assert rep.iter_time_s == pytest.approx((m0 * w0 + m1 * w1) / (w0 + w1), rel=1e-12)


def test_a_change_within_the_noise_is_no_shift(tmp_path: Path) -> None:
    """1.5 s then 1.2 s, but stretches that swing by 1 s either way over 6 stretches each:
    a standard error of about 0.41 s per epoch mean, so a 0.3 s gap is under one."""
    e0 = epoch(0, 1000, jitter(1.5, 1.0, 6))
    e1 = epoch(1, 1000, jitter(1.2, 1.0, 6))
    rep = profile_file(str(write(tmp_path, e0, e1)))
    (m0, w0), (m1, w1) = window(e0), window(e1)
    assert rep.iter_time_s == pytest.approx((m0 * w0 + m1 * w1) / (w0 + w1), rel=1e-12)


def test_an_epoch_of_too_few_lines_is_not_judged(tmp_path: Path) -> None:
    """Epoch 1 has 5 lines (4 stretches; 5 are needed to estimate its spread): blended."""
    e0 = epoch(0, 1000, jitter(1.5, 0.1, 19))
    e1 = epoch(1, 1000, jitter(1.2, 0.1, 4))
    rep = profile_file(str(write(tmp_path, e0, e1)))
    (m0, w0), (m1, w1) = window(e0), window(e1)
    assert rep.iter_time_s == pytest.approx((m0 * w0 + m1 * w1) / (w0 + w1), rel=1e-12)


def test_read_in_pieces_as_in_one_read(tmp_path: Path) -> None:
    """Chunks cut at every line end and in 7 pieces give the whole read's report."""
    log = write(tmp_path, epoch(0, 1000, jitter(1.5, 0.1, 19)),
                epoch(1, 1000, jitter(1.2, 0.1, 19)), epoch(2, 1000, jitter(1.2, 0.1, 8)))
    data = log.read_bytes()
    lines = data.splitlines(keepends=True)

    def report(chunks: list[bytes]) -> dict:
        stream, acc = LogStream(), Accumulator()
        for chunk in chunks:
            acc.add(stream.feed(chunk))
        rep = acc.report(stream.family, stream.stats).as_dict()
        rep.pop("lines")
        return rep

    whole = report([data])
    cuts = np.linspace(0, len(lines), 8).astype(int)
    assert report([b"".join(lines[a:b]) for a, b in itertools.pairwise(cuts)]) == whole
    assert report(lines) == whole
    assert [r["cause"] for r in whole["regimes"]] == ["start", "throughput"]


def test_a_periods_spread_by_hand() -> None:
    """Stretches of 10 iterations at 1.0, 1.2, 0.8, 1.0, 1.0 s: mean 1.0; weighted squares
    10 x (0.04 + 0.04) = 0.8 over 4 degrees of freedom, 0.2 per iteration; standard error
    sqrt(0.2 / 50)."""
    acc = Accumulator()
    total, done = 3.0, 1
    rows = [Sample(step=1, epoch=0.001, iter_time_s=total, cumulative=True, period_n=1)]
    for x in (1.0, 1.2, 0.8, 1.0, 1.0):
        total += 10 * x
        done += 10
        rows.append(Sample(step=done, epoch=done / 1000, iter_time_s=total / done,
                           cumulative=True, period_n=done))
    acc.add(rows[:-1])
    assert math.isnan(acc._period.spread())  # 4 stretches: too few
    acc.add(rows[-1:])
    assert acc._period.spread() == pytest.approx(math.sqrt(0.2 / 50), rel=1e-9)


@pytest.mark.parametrize(("mean", "spread", "shifted"), [
    (1.11, 0.01, True),     # 11% off, 7.8 standard errors
    (0.89, 0.01, True),     # slower or faster alike
    (1.09, 0.01, False),    # 9%: under 10%
    (1.20, 0.06, True),     # 0.2 > 3 x hypot(0.06, 0.01) = 0.1825
    (1.20, 0.07, False),    # 0.2 < 3 x hypot(0.07, 0.01) = 0.2121
    (2.00, math.nan, False),  # spread unknown
])
def test_period_shift_rule(mean: float, spread: float, shifted: bool) -> None:
    tracker = RegimeTracker()
    assert not tracker.period_shifted(mean, spread)   # nothing to compare with yet
    tracker.observe_time(100, 1.0, 100.0, 0.01)
    assert tracker.period_shifted(mean, spread) is shifted
    tracker.observe_time(200, mean, 100.0, spread)
    assert [r.cause for r in tracker.regimes] == ["start", "throughput"][:1 + shifted]


def test_a_restart_forgets_the_last_period() -> None:
    tracker = RegimeTracker()
    tracker.observe_time(100, 1.0, 100.0, 0.01)
    tracker.restart(0)
    assert not tracker.period_shifted(2.0, 0.01)

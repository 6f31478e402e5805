"""The profiler's per-round reading pinned by hand (issue 21's surviving mutants).

``Accumulator.take_fresh`` is what the daemon attributes to the round's placement: after a
batch-size change (or a restart) mid-round only the new regime's times may count, or a round at
the new batch size is read at a blend of both speeds. Expected values are arithmetic on the
samples written here (the first sample of a log is warm-up and never counts).
"""

from __future__ import annotations

import pytest

from gpufair.profiler.events import Sample
from gpufair.profiler.summary import Accumulator


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

"""Samples to what the scheduler wants to know about one job: progress, speed, regimes.

Handled here once for every family:

- **evaluation** samples never count as training speed or progress;
- **multi-rank duplicates**: a step seen in the last two samples, with the same loss, is
  another rank's copy;
- **restarts** after a requeue: the step counter goes back any other way;
  the warm-up after each (re)start is dropped again;
- **warm-up**: the first ``warmup`` windowed samples of each segment are not timed;
- **cumulative averages** (Keras' ``ms/step`` since the epoch began) are differenced into
  the mean over the span between the first and last sample of the period, which also drops
  the period's first iteration (graph building, data-loader start).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpufair.profiler.events import EVAL, LineStats, Sample
from gpufair.profiler.regimes import RegimeTracker
from gpufair.profiler.robust import Estimate, robust_mean

RECENT = 16


@dataclass(slots=True)
class _Period:
    """First and last (n, average) of one cumulative-average period (a Keras epoch)."""

    key: float
    first: tuple[int, float]
    last: tuple[int, float]
    step: int

    def window(self) -> tuple[float, int] | None:
        (n_a, a), (n_b, b) = self.first, self.last
        if n_b <= n_a:
            return None
        return (b * n_b - a * n_a) / (n_b - n_a), n_b - n_a


@dataclass(slots=True)
class JobReport:
    family: str | None
    iterations_done: int | None = None
    iterations_total: int | None = None
    epoch: float | None = None
    epochs_total: int | None = None
    iter_time_s: float | None = None
    # what iter_time_s averages over: "window" (recent iterations, warm-up excluded),
    # "whole_run" (the job's own closing average, e.g. HF's train_steps_per_second) or
    # "warmup" (the only timed sample there is)
    iter_time_basis: str | None = None
    confidence: float = 0.0
    timed_samples: int = 0
    samples_per_s: float | None = None
    batch_size: int | None = None
    restarts: int = 0
    duplicates: int = 0
    eval_samples: int = 0
    warmup_skipped: int = 0
    loss: float | None = None
    regimes: list[dict[str, Any]] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


# every field of a JobReport, in declaration order, fetched in one C call
_REPORT_FIELDS = operator.attrgetter(*JobReport.__slots__)  # type: ignore[attr-defined]


class Accumulator:
    """Incremental: ``add`` each round's new samples, ``report`` whenever asked."""

    def __init__(self, warmup: int = 1) -> None:
        self.warmup = warmup
        self.regimes = RegimeTracker()
        # step -> (index of its last sample, its loss, whether it was timed)
        self._recent: dict[int, tuple[int, float | None, bool]] = {}
        self._index = 0
        self._last_step: int | None = None
        self._segment_samples = 0
        self._period: _Period | None = None
        self._whole_run: float | None = None
        self._warmup_spi: float | None = None
        self._report = JobReport(family=None)
        self._fresh: list[tuple[int, float]] = []

    def seed(self, last_step: int) -> None:
        """Resume after a daemon restart: the step the previous process had reached."""
        self._last_step = last_step
        self._report.iterations_done = last_step

    def add(self, samples: Iterable[Sample]) -> None:
        """Fold samples in, in order.

        This runs once per parsed log line, so the common case (a new, higher step with a
        windowed time) is handled inline; duplicates, restarts, warm-up and cumulative
        averages branch off it (``_advance``, ``_cumulative``).
        """
        rep = self._report
        recent = self._recent
        regimes = self.regimes
        fresh = self._fresh
        for s in samples:
            if s.phase == EVAL:
                rep.eval_samples += 1
                continue
            if s.loss is not None:
                rep.loss = s.loss
            if s.epoch is not None:
                rep.epoch = s.epoch
            if s.total_epochs is not None:
                rep.epochs_total = s.total_epochs
            if s.total_steps is not None:
                rep.iterations_total = s.total_steps
            # seconds per iteration, once (Sample.seconds_per_iter, inlined)
            spi = s.iter_time_s
            if spi is None or not spi > 0:  # (NaN too)
                spi = s.steps_per_s
                if spi is not None and spi > 0:
                    spi = 1.0 / spi
                elif s.samples_per_s and s.batch_size:
                    spi = s.batch_size / s.samples_per_s
                else:
                    spi = None
            step = s.step
            if step is not None:
                last = self._last_step
                if last is None or step > last:
                    # a new step: no duplicate and no restart possible
                    recent[step] = (self._index, s.loss, spi is not None)
                    if len(recent) > RECENT:
                        del recent[next(iter(recent))]
                    self._index += 1
                    self._last_step = step
                    self._segment_samples += 1
                elif not self._advance(s, step, spi is not None):
                    continue
                rep.iterations_done = step
            if s.batch_size is not None:
                rep.batch_size = s.batch_size
                regimes.observe_batch(step if step is not None else 0, s.batch_size)
            if spi is None:
                continue
            if s.cumulative:
                if s.period_n is None:
                    self._whole_run = spi
                else:
                    self._cumulative(s, spi, step or 0)
                continue
            if self._segment_samples <= self.warmup and step is not None:
                rep.warmup_skipped += 1
                self._warmup_spi = spi
                continue
            regimes.observe_time(step or self._last_step or 0, spi)
            fresh.append((len(regimes.regimes), spi))

    def _advance(self, s: Sample, step: int, timed: bool) -> bool:
        """False for a duplicate; notes a restart when the counter goes back.

        The last step again, or a step seen in the last two samples with the same (or no)
        loss, is another rank's copy (all-reduced losses print alike on every rank). When
        the earlier copy had no timing and this one has, this one is kept instead
        (DeepSpeed prints ``step=N`` and then its throughput line).
        Going back to any other step is a restart (requeue, resume from a checkpoint).
        """
        last = self._last_step
        if last is not None and step <= last:
            seen = self._recent.get(step)
            if seen is not None and (step == last or self._index - seen[0] <= 2):
                if not seen[2] and timed:
                    self._recent[step] = (self._index, s.loss, True)
                    self._index += 1
                    return True
                if seen[1] == s.loss or None in (seen[1], s.loss) or not timed:
                    self._report.duplicates += 1
                    return False
            self._report.restarts += 1
            self._segment_samples = 0
            self._recent.clear()
            self._period = None
        self._recent[step] = (self._index, s.loss, timed)
        if len(self._recent) > RECENT:
            del self._recent[next(iter(self._recent))]
        self._index += 1
        self._last_step = step
        self._segment_samples += 1
        return True

    def _cumulative(self, s: Sample, avg: float, step: int) -> None:
        key = s.epoch if s.epoch is not None else 0.0
        key = float(int(key)) if s.period_n else key
        n = int(s.period_n or 0)
        period = self._period
        if period is None or period.key != key or n < period.last[0]:
            self._close_period()
            self._period = _Period(key, (n, avg), (n, avg), step)
            self._report.warmup_skipped += 1
            return
        period.last = (n, avg)
        period.step = step

    def _close_period(self) -> None:
        period = self._period
        if period is not None and (window := period.window()) is not None:
            self.regimes.observe_time(period.step, window[0], float(window[1]))
            self._fresh.append((len(self.regimes.regimes), window[0]))
        self._period = None

    def take_fresh(self) -> Estimate | None:
        """The robust iteration time over what was timed since the last call (one round).

        A batch-size change mid-round splits the round: only the new regime's times count.
        A throughput shift alone does not (it is what a move to another GPU type looks like,
        and the caller knows the placement of the round).
        """
        fresh, self._fresh = self._fresh, []
        cur = self.regimes.current
        if cur is not None and cur.cause == "batch_size":
            current = len(self.regimes.regimes)
            return robust_mean([v for r, v in fresh if r == current])
        return robust_mean([v for _, v in fresh])

    @property
    def batch_regimes(self) -> int:
        """How many regimes began with a batch-size change (not a mere speed shift)."""
        return sum(1 for r in self.regimes.regimes if r.cause == "batch_size")

    def estimate(self, exact: bool = True) -> tuple[Estimate, str] | None:
        """The job's own whole-run average when it printed one, else the current regime's."""
        if self._whole_run is not None:
            return Estimate(self._whole_run, 1, 0, 0.0), "whole_run"
        cur = self.regimes.current
        window = None if self._period is None else self._period.window()
        if window is None and cur is not None and (
                est := cur.final_estimate() if exact else cur.estimate()) is not None:
            return est, "window"
        values = list(cur.values) if cur else []
        weights = list(cur.weights) if cur else []
        if window is not None:
            values.append(window[0])
            weights.append(float(window[1]))
        if values and (est := robust_mean(values, weights)) is not None:
            return est, "window"
        if self._warmup_spi is not None:
            return Estimate(self._warmup_spi, 1, 0, 1.0), "warmup"
        return None

    def report(self, family: str | None, stats: LineStats | None = None, exact: bool = True
               ) -> JobReport:
        """What is known now. ``exact=False`` (a daemon's rounds) may reuse a window estimate
        up to half a window old instead of re-sorting the window for every report."""
        rep = self._report
        rep.family = family
        found = self.estimate(exact)
        if found is not None:
            est, rep.iter_time_basis = found
            rep.iter_time_s = est.value
            rep.confidence = est.confidence
            rep.timed_samples = est.n
            if rep.batch_size:
                rep.samples_per_s = rep.batch_size / est.value
        rep.regimes = [r.as_dict(exact) for r in self.regimes.regimes]
        if stats is not None:
            rep.lines = stats.as_dict()
        return JobReport(*_REPORT_FIELDS(rep))  # a snapshot: later rounds update ``rep``

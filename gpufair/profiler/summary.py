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

Parsers deliver columnar :class:`Samples` batches of up to 10^6 rows per second of log, so
``Accumulator.add`` folds a batch in with numpy: the rows whose steps rise (with other ranks'
copies, recognised per column) in bulk, and only the rare rows that need ``_advance``'s
judgement (a step going back: a restart, or a rank far behind) one by one through the
per-row reference ``_add_rows``. Both give the same state to the last bit.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from gpufair.profiler.events import EVAL, LineStats, Sample, Samples
from gpufair.profiler.regimes import PERIOD_PARTS, WINDOW, RegimeTracker
from gpufair.profiler.robust import Estimate, steady_mean

RECENT = 16
# ranges of dropped lines a report lists (``DroppedLines``); more are only counted
MAX_RANGES = 20
# A stretch of a batch shorter than this is walked row by row: numpy's fixed cost per call
# would exceed the per-row cost (a log of duplicates and restarts only).
MIN_RUN = 32
# Beyond this, float64 steps are not all exact integers: such rows go through ``_add_rows``.
_EXACT = 2.0 ** 53

# why lines were left out of the reading (``DroppedLines``)
WARMUP, EVALUATION, DUPLICATE = "warm-up", "evaluation", "duplicate"

# What a train row of a columnar batch is to the step bookkeeping (``_row_kinds``)
_NO_STEP = 0    # no step stated
_NEW = 1        # above the previous step (above ``_last_step`` is checked where a run starts)
_DUPLICATE = 2  # another rank's copy of the previous step: dropped (``_advance``)
_RETIMED = 3    # the first timed copy of an untimed step: kept instead (``_advance``)
_HARD = 4       # a step going back, a copy that is a restart, a value rows() must see


@dataclass(slots=True)
class _Period:
    """First and last (n, average) of one cumulative-average period (a Keras epoch), and
    the sums of what its successive lines say about the iterations between them (each
    line's average differenced with the previous line's: ``spread``).

    The sums are added to in line order, one line at a time (``extend``) or a column at a
    time (``fold``, a sequential accumulation in numpy): the same floats either way.
    """

    key: float
    first: tuple[int, float]
    last: tuple[int, float]
    step: int
    parts: int = 0       # differenced stretches between successive lines
    sum_w: float = 0.0   # their iterations
    sum_wx: float = 0.0  # iterations x mean
    sum_wxx: float = 0.0

    def continues(self, key: float, n: int) -> bool:
        """Whether a cumulative average with this key and count belongs to this period."""
        return self.key == key and n >= self.last[0]

    def extend(self, n: int, avg: float) -> None:
        """The period's next line: ``n`` iterations averaging ``avg`` so far."""
        n0, a0 = self.last
        if n > n0:
            w = n - n0
            x = (avg * n - a0 * n0) / w
            self.parts += 1
            self.sum_w += w
            self.sum_wx += w * x
            self.sum_wxx += w * x * x
        self.last = (n, avg)

    def fold(self, counts: np.ndarray, avgs: np.ndarray) -> None:
        """``extend`` for each (count, average) of the columns, in order."""
        n = np.concatenate(([float(self.last[0])], counts))
        a = np.concatenate(([self.last[1]], avgs))
        w = n[1:] - n[:-1]
        grew = w > 0
        if grew.any():
            w = w[grew]
            x = (a[1:] * n[1:] - a[:-1] * n[:-1])[grew] / w
            self.parts += len(w)
            self.sum_w = _running(self.sum_w, w)
            self.sum_wx = _running(self.sum_wx, w * x)
            self.sum_wxx = _running(self.sum_wxx, w * x * x)
        self.last = (int(counts[-1]), avgs[-1].item())

    def spread(self) -> float:
        """The standard error of the period's mean iteration time, from how the means of
        its stretches between lines scatter (each stretch weighted by its iterations, as
        a mean over w iterations varies as 1/w); NaN with fewer than ``PERIOD_PARTS``
        stretches, too few to say."""
        if self.parts < PERIOD_PARTS:
            return math.nan
        var = (self.sum_wxx - self.sum_wx * self.sum_wx / self.sum_w) / (self.parts - 1)
        return math.sqrt(max(var, 0.0) / self.sum_w)  # max: rounding below 0, not data

    def window(self) -> tuple[float, int] | None:
        (n_a, a), (n_b, b) = self.first, self.last
        if n_b <= n_a:
            return None
        return (b * n_b - a * n_a) / (n_b - n_a), n_b - n_a


class DroppedLines:
    """Which lines were left out of the reading, and why, as ranges of line numbers.

    Why: a reading a user doubts is checked against the log, and "3 warm-up, 40
    evaluation" does not say which lines to look at. A daemon keeps this for every job for
    as long as it runs, so it is bounded: the first MAX_RANGES ranges of each reason are
    kept, later ones only counted. Each reason's lines arrive in increasing order (rows
    are in log order), one at a time or many at once, and give the same ranges either way.
    """

    __slots__ = ("_more", "_open", "_ranges", "_tail")

    def __init__(self) -> None:
        self._ranges: dict[str, list[list[int]]] = {}
        self._more: dict[str, int] = {}
        self._tail: dict[str, float] = {}   # the last line noted, per reason
        self._open: dict[str, bool] = {}    # whether the range it is in is a kept one

    def note(self, reason: str, line: float) -> None:
        """One dropped line (NaN: its number is not known, not listed)."""
        if line != line:
            return
        tail = self._tail.get(reason)
        self._tail[reason] = line
        if tail is not None and line <= tail + 1:
            if self._open[reason]:
                self._ranges[reason][-1][1] = int(line)
        else:
            self._start(reason, [(line, line)])

    def note_many(self, reason: str, lines: np.ndarray) -> None:
        """Dropped lines, in increasing order (NaN: not known, not listed)."""
        lines = lines[~np.isnan(lines)]
        if len(lines) == 0:
            return
        starts = np.flatnonzero(np.diff(lines, prepend=-np.inf) > 1)
        tail = self._tail.get(reason)
        first_end = lines[starts[1] - 1 if len(starts) > 1 else -1]
        if tail is not None and lines[0] <= tail + 1:  # the first lines continue a range
            if self._open[reason]:
                self._ranges[reason][-1][1] = int(first_end)
            starts = starts[1:]
        self._tail[reason] = float(lines[-1])
        if len(starts) == 0:
            return
        room = MAX_RANGES - len(self._ranges.get(reason, ()))
        ends = np.append(starts[1:], len(lines)) - 1
        shown = max(0, min(room, len(starts)))
        self._start(reason, list(zip(lines[starts[:shown]].tolist(),
                                     lines[ends[:shown]].tolist(), strict=True)),
                    len(starts) - shown)

    def _start(self, reason: str, ranges: list[tuple[float, float]], more: int = 0) -> None:
        """New ranges of a reason (the last one open), kept while there is room."""
        kept = self._ranges.setdefault(reason, [])
        for first, last in ranges:
            if len(kept) < MAX_RANGES:
                kept.append([int(first), int(last)])
            else:
                more += 1
        self._open[reason] = not more  # (the last range is the one lines may continue)
        self._more[reason] = self._more.get(reason, 0) + more

    def listed(self) -> tuple[list[dict[str, Any]], int]:
        """The first MAX_RANGES ranges in line order, and how many more there are."""
        every = sorted((first, last, reason) for reason, ranges in self._ranges.items()
                       for first, last in ranges)
        more = sum(self._more.values()) + max(0, len(every) - MAX_RANGES)
        return ([{"reason": reason, "first": first, "last": last}
                 for first, last, reason in every[:MAX_RANGES]], more)


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
    # lines left out of the reading: {"reason", "first", "last"} (line numbers, inclusive),
    # at most MAX_RANGES of them in line order, and how many ranges more there were
    dropped: list[dict[str, Any]] = field(default_factory=list)
    dropped_more: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


class _Fresh:
    """The times taken since the last round (``take_fresh``), in order, each with the count
    of regimes when it was taken: the rows walked one by one as tuples (``rows``), a run's
    times as the arrays they came in (a tuple per time cost a fifth of parsing and
    summarising a plain log)."""

    __slots__ = ("_parts", "rows")

    def __init__(self) -> None:
        self.rows: list[tuple[int, float]] = []
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []

    def extend(self, regimes: np.ndarray, values: np.ndarray) -> None:
        self._flush()
        self._parts.append((regimes, values))

    def _flush(self) -> None:
        if self.rows:
            self._parts.append((np.array([r for r, _ in self.rows], dtype=np.int64),
                                np.array([v for _, v in self.rows], dtype=np.float64)))
            self.rows.clear()  # in place: ``_add_rows`` holds the list

    def __iter__(self) -> Iterator[tuple[int, float]]:
        """(regime count, time) of each, in order (the rows came after the last run)."""
        for regimes, values in self._parts:
            yield from zip(regimes.tolist(), values.tolist(), strict=True)
        yield from self.rows

    def clear(self) -> None:
        self.rows.clear()
        self._parts.clear()

    def take(self, regime: int | None = None) -> list[float]:
        """The times (only those taken when there were ``regime`` regimes, if given), and
        start over."""
        rows = self.rows
        if not self._parts:  # a daemon round's few rows of a log: no arrays
            values = ([v for _, v in rows] if regime is None
                      else [v for r, v in rows if r == regime])
            rows.clear()
            return values
        self._flush()
        parts, self._parts = self._parts, []
        regimes = np.concatenate([r for r, _ in parts])
        times = np.concatenate([v for _, v in parts])
        return (times if regime is None else times[regimes == regime]).tolist()


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
        self._fresh = _Fresh()
        # stated samples/s of rows without a batch size (throughput-only logs): the reading
        # in samples/s when no time per iteration can be had
        self._rates: deque[float] = deque(maxlen=WINDOW)
        self._dropped = DroppedLines()
        self._world_size: int | None = None  # the last the log stated

    def seed(self, last_step: int) -> None:
        """Resume after a daemon restart: the step the previous process had reached."""
        self._last_step = last_step
        self._report.iterations_done = last_step

    def add(self, samples: Samples | Iterable[Sample]) -> None:
        """Fold samples in, in order: a columnar batch (vectorised) or ``Sample`` rows.

        A batch shorter than a run (a daemon round's few new lines of one log) goes row by
        row: numpy's fixed cost per call would exceed what it saves."""
        if isinstance(samples, Samples):
            if len(samples) < MIN_RUN:
                self._add_rows(samples.rows(), samples.line.tolist())
            else:
                self._add_columns(samples)
        else:
            self._add_rows(samples)

    # -- the per-row reference ------------------------------------------------------------

    def _add_rows(self, rows: Iterable[Sample], lines: Iterable[float] | None = None) -> None:
        """Fold samples in one at a time: the reference semantics of ``add``.

        Used for ``Sample`` input and for the rows of a batch that the columnar path leaves
        to it. The common case (a new, higher step with a windowed time) goes straight
        through; duplicates, restarts, warm-up and cumulative averages branch off it
        (``_advance``, ``_cumulative``). ``lines``: each row's line number (for the lines
        left out, ``DroppedLines``), if known.
        """
        rep = self._report
        regimes = self.regimes
        fresh = self._fresh.rows
        dropped = self._dropped
        for s, line in zip(rows, repeat(math.nan) if lines is None else lines, strict=False):
            if s.world_size is not None:  # a statement of the world size (``extract.WORLD``)
                if self._world_size is not None and s.world_size != self._world_size:
                    self._new_segment("world_size")
                self._world_size = s.world_size
                continue
            if s.phase == EVAL:
                rep.eval_samples += 1
                dropped.note(EVALUATION, line)
                continue
            if s.samples_per_s is not None and s.batch_size is None:
                self._rates.append(s.samples_per_s)
            if s.loss is not None:
                rep.loss = s.loss
            if s.epoch is not None:
                rep.epoch = s.epoch
            if s.total_epochs is not None:
                rep.epochs_total = s.total_epochs
            if s.total_steps is not None:
                rep.iterations_total = s.total_steps
            spi = s.seconds_per_iter()
            step = s.step
            if step is not None:
                last = self._last_step
                if last is None or step > last:
                    # a new step: no duplicate and no restart possible
                    self._step_on(step, s.loss, spi is not None)
                elif not self._advance(s, step, spi is not None):
                    dropped.note(DUPLICATE, line)
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
                elif self._cumulative(s, spi, step or 0):
                    dropped.note(WARMUP, line)
                continue
            if self._segment_samples <= self.warmup and step is not None:
                rep.warmup_skipped += 1
                dropped.note(WARMUP, line)
                self._warmup_spi = spi
                continue
            regimes.observe_time(step or self._last_step or 0, spi)
            fresh.append((len(regimes.regimes), spi))

    def _remember(self, step: int, loss: float | None, timed: bool) -> None:
        """Note a kept sample of ``step`` for duplicate detection (the last RECENT steps)."""
        recent = self._recent
        recent[step] = (self._index, loss, timed)
        if len(recent) > RECENT:
            del recent[next(iter(recent))]
        self._index += 1

    def _step_on(self, step: int, loss: float | None, timed: bool) -> None:
        """The counter moved to ``step`` (forward, or back after a restart)."""
        self._remember(step, loss, timed)
        self._last_step = step
        self._segment_samples += 1

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
                    self._remember(step, s.loss, True)
                    return True
                if seen[1] == s.loss or None in (seen[1], s.loss) or not timed:
                    self._report.duplicates += 1
                    return False
            self._report.restarts += 1
            self._new_segment("restart", step)
        self._step_on(step, s.loss, timed)
        return True

    def _new_segment(self, cause: str, step: int | None = None) -> None:
        """A restart at ``step``, or a new world size (None: from the last step on): what
        was timed before is another segment's, and warm-up comes again."""
        self.regimes.restart(step if step is not None else self._last_step or 0, cause)
        self._segment_samples = 0
        self._recent.clear()
        self._period = None

    def _cumulative(self, s: Sample, avg: float, step: int) -> bool:
        """Fold a cumulative average in; True when it starts a period (its first line is
        warm-up: what it averages is not differenced with anything)."""
        key, n = _period_key(s.epoch, s.period_n)
        period = self._period
        if period is None or not period.continues(key, n):
            self._close_period()
            self._period = _Period(key, (n, avg), (n, avg), step)
            self._report.warmup_skipped += 1
            return True
        period.extend(n, avg)
        period.step = step
        return False

    def _close_period(self) -> None:
        period = self._period
        if period is not None and (window := period.window()) is not None:
            spread = period.spread()  # NaN (too few lines to judge): an ordinary value
            self.regimes.observe_time(period.step, window[0], float(window[1]),
                                      None if spread != spread else spread)
            self._fresh.rows.append((len(self.regimes.regimes), window[0]))
        self._period = None

    # -- the columnar path ----------------------------------------------------------------

    def _add_columns(self, batch: Samples) -> None:
        """Fold a batch in: runs of ordinary rows vectorised, the rest row by row.

        Evaluation rows only count, so they are dropped first. A run ends before the next
        ``_HARD`` row, and that row is walked one by one, with any ``_HARD`` rows close
        behind it (``_Columns.calm``: a stretch too short for a run is walked too). A run
        may start only where the first step is above ``_last_step`` (``_row_kinds``
        compares each step with the previous row's, which after a row walked one by one
        need not be the last kept step); else that row is walked on its own.
        """
        if batch.eval.any():
            self._report.eval_samples += int(np.count_nonzero(batch.eval))
            self._dropped.note_many(EVALUATION, batch.line[batch.eval])
            batch = batch.take(~batch.eval)
        n = len(batch)
        if n == 0:
            return
        cols = _Columns(batch)
        pos = 0
        while pos < n:
            end = cols.next_hard(pos)
            first = cols.next_stepped(pos)
            if first < end and not self._rises(cols, first):
                end, stop = first, first + 1
            else:
                stop = cols.calm(end)
            if end - pos >= MIN_RUN:
                self._add_run(cols, pos, end)
                pos = end
            if pos < stop:
                self._add_rows(cols.rows(pos, stop), batch.line[pos:stop].tolist())
            pos = stop

    def _rises(self, cols: _Columns, i: int) -> bool:
        """Whether row ``i`` (with a step) can start a run: a new step above the last."""
        return bool(cols.kind[i] == _NEW) and (
            self._last_step is None or bool(cols.step[i] > self._last_step))

    def _add_run(self, cols: _Columns, a: int, b: int) -> None:
        """Rows ``a:b`` at once, exactly as ``_add_rows`` would fold them.

        The caller guarantees no ``_HARD`` row and, if there are steps, a first step above
        ``_last_step``: steps rise, apart from copies of the previous step that
        ``_row_kinds`` has already judged as ``_advance`` would.
        """
        rows = slice(a, b)
        self._note_stated(cols.samples, rows)
        segment, last = self._count_steps(cols, rows)
        live = cols.kind[rows] != _DUPLICATE  # a dropped copy only updates the stated fields
        sizes = self._batch_sizes(cols, rows, live)
        times = self._times(cols, rows, live, segment, last)
        self._observe(sizes, times)

    def _note_stated(self, samples: Samples, rows: slice) -> None:
        """Loss, epoch and totals: the last value stated by any train row, copies too."""
        rep = self._report
        rates = samples.samples_per_s[rows]
        self._rates.extend(rates[~np.isnan(rates) & np.isnan(samples.batch_size[rows])]
                           [-WINDOW:].tolist())
        for column, name, integer in (("loss", "loss", False), ("epoch", "epoch", False),
                                      ("total_epochs", "epochs_total", True),
                                      ("total_steps", "iterations_total", True)):
            values = getattr(samples, column)[rows]
            stated = np.flatnonzero(~np.isnan(values))
            if len(stated):
                value = values[stated[-1]].item()
                setattr(rep, name, int(value) if integer else value)

    def _count_steps(self, cols: _Columns, rows: slice) -> tuple[np.ndarray, np.ndarray]:
        """Step bookkeeping of a run; per row, ``_segment_samples`` and ``_last_step`` (NaN
        for None) as they are after the row's own step.

        Each kept row (``_NEW`` or ``_RETIMED``) took the next ``_index``; ``_recent`` keeps
        only the last RECENT steps, which at most two kept rows each wrote: replaying the
        last 2 * RECENT kept rows through ``_remember`` leaves it as the whole run would.
        """
        kind = cols.kind[rows]
        step = cols.step[rows]
        new = kind == _NEW
        copies = kind == _DUPLICATE
        if copies.any():
            self._report.duplicates += int(np.count_nonzero(copies))
            self._dropped.note_many(DUPLICATE, cols.samples.line[rows][copies])
        segment = self._segment_samples + np.cumsum(new)
        last = _ffill(step, np.nan if self._last_step is None else float(self._last_step))
        kept = np.flatnonzero(new | (kind == _RETIMED))
        if len(kept) == 0:
            return segment, last
        replay = kept[-2 * RECENT:]
        self._index += len(kept) - len(replay)
        loss = cols.samples.loss[rows]
        timed = cols.timed[rows]
        for i in replay.tolist():
            lost = loss[i].item()
            self._remember(int(step[i]), None if lost != lost else lost, bool(timed[i]))
        self._last_step = self._report.iterations_done = int(last[-1])
        self._segment_samples = int(segment[-1])
        return segment, last

    def _batch_sizes(self, cols: _Columns, rows: slice, live: np.ndarray) -> _Sizes:
        """The run's batch-size observations (row, step or 0, size); notes the last size."""
        sizes = cols.batch[rows]
        at = np.flatnonzero(live & ~np.isnan(sizes))
        if len(at):
            self._report.batch_size = int(sizes[at[-1]])
        return _Sizes(at, _or_zero(cols.step[rows][at]).astype(np.int64), sizes[at])

    def _times(self, cols: _Columns, rows: slice, live: np.ndarray, segment: np.ndarray,
               last: np.ndarray) -> _Times:
        """Sort the run's timed rows as ``_add_rows`` does: whole-run averages, cumulative
        periods, warm-up; returns the time observations in row order (windowed times, and
        the windows of the cumulative periods that ended)."""
        spi = cols.spi[rows]
        timed = live & cols.timed[rows]
        cumulative = cols.samples.cumulative[rows]
        whole = np.isnan(cols.samples.period_n[rows])
        at = np.flatnonzero(timed & cumulative & whole)
        if len(at):
            self._whole_run = spi[at[-1]].item()
        periods = self._periods(cols, rows, np.flatnonzero(timed & cumulative & ~whole))
        windowed = timed & ~cumulative
        warm = windowed & ~np.isnan(cols.step[rows]) & (segment <= self.warmup)
        at = np.flatnonzero(warm)
        if len(at):
            self._report.warmup_skipped += len(at)
            self._warmup_spi = spi[at[-1]].item()
            self._dropped.note_many(WARMUP, cols.samples.line[rows][at])
        at = np.flatnonzero(windowed & ~warm)
        times = _Times(at, _or_zero(last[at]).astype(np.int64), spi[at], None)
        return times if periods is None else times.merge(periods)

    def _periods(self, cols: _Columns, rows: slice, at: np.ndarray) -> _Times | None:
        """``_cumulative`` for the run's cumulative rows with a period count (``at``).

        A period begins where the key changes or the count falls; only those rows are
        walked in Python. Returns the windows of the periods that ended, at the rows that
        ended them (None if there are none).
        """
        if len(at) == 0:
            return None
        samples = cols.samples
        keys, counts = _period_keys(samples.epoch[rows][at], samples.period_n[rows][at])
        avgs = cols.spi[rows][at]
        steps = _or_zero(cols.step[rows][at])
        begins = np.empty(len(at), dtype=bool)
        begins[0] = self._period is None or not self._period.continues(keys[0].item(),
                                                                       int(counts[0]))
        begins[1:] = (keys[1:] != keys[:-1]) | (counts[1:] < counts[:-1])
        ended: list[tuple[int, int, float, float, float]] = []
        self._dropped.note_many(WARMUP, samples.line[rows][at][begins])
        lo = 0  # the first row not yet folded into the open period
        for i in np.flatnonzero(begins).tolist():
            self._extend_period(counts, avgs, steps, lo, i)
            period = self._period
            if period is not None and (window := period.window()) is not None:
                ended.append((int(at[i]), period.step, window[0], float(window[1]),
                              period.spread()))
            n, avg = int(counts[i]), avgs[i].item()
            self._period = _Period(keys[i].item(), (n, avg), (n, avg), int(steps[i]))
            self._report.warmup_skipped += 1
            lo = i + 1
        self._extend_period(counts, avgs, steps, lo, len(at))
        if not ended:
            return None
        where, step, value, weight, spread = (np.array(column)
                                              for column in zip(*ended, strict=True))
        return _Times(where, step.astype(np.int64), value, weight, spread)

    def _extend_period(self, counts: np.ndarray, avgs: np.ndarray, steps: np.ndarray,
                       lo: int, hi: int) -> None:
        """Rows ``lo:hi`` continue the open period (``_cumulative``'s update)."""
        if lo >= hi:
            return
        period = self._period
        assert period is not None
        period.fold(counts[lo:hi], avgs[lo:hi])
        period.step = int(steps[hi - 1])

    def _observe(self, sizes: _Sizes, times: _Times) -> None:
        """Feed the run's batch sizes and times to the regimes, in row order.

        Only a batch size different from the previous one (or the first, while the regime
        has none) and a closed period's mean (``_Times.spread``) can open a regime, and a
        row's size is observed before its time; so the times go in bulk between those
        rows. A repeated size only extends the regime (``end_step``), which commutes with
        the times between them.
        """
        regimes = self.regimes
        cur = regimes.current
        value = sizes.value
        change = np.empty(len(value), dtype=bool)
        if len(value):
            change[0] = cur is None or cur.batch_size is None or value[0] != cur.batch_size
            change[1:] = value[1:] != value[:-1]
        opening = sizes.at[change]
        if times.spread is not None:
            opening = np.union1d(opening, times.at[~np.isnan(times.spread)])
        t0 = s0 = 0
        for row in [*opening.tolist(), None]:
            t = len(times.at) if row is None else int(np.searchsorted(times.at, row))
            s = len(value) if row is None else int(np.searchsorted(sizes.at, row))
            self._observe_times(times, t0, t)
            self._extend(sizes, s0, s)  # the same size again
            if s < len(value) and sizes.at[s] == row:  # the row's own size
                if change[s]:
                    regimes.observe_batch(int(sizes.step[s]), int(value[s]))
                else:
                    self._extend(sizes, s, s + 1)
                s += 1
            t0, s0 = t, s

    def _extend(self, sizes: _Sizes, a: int, b: int) -> None:
        """Sizes ``a:b``, each the current regime's again: they only extend it."""
        if a < b:
            cur = self.regimes.current
            assert cur is not None
            cur.end_step = max(cur.end_step, int(sizes.step[a:b].max()))

    def _observe_times(self, times: _Times, a: int, b: int) -> None:
        """Times ``a:b`` to the regimes, each noted in ``_fresh`` with its regime count."""
        if a == b:
            return
        value = times.value[a:b]
        counts = self.regimes.observe_times(
            times.step[a:b], value, None if times.weight is None else times.weight[a:b],
            None if times.spread is None else times.spread[a:b])
        self._fresh.extend(counts, value)

    def take_fresh(self, estimate: bool = True) -> Estimate | None:
        """The robust iteration time over what was timed since the last call (one round).

        A batch-size change mid-round splits the round: only the new regime's times count.
        A throughput shift alone does not (it is what a move to another GPU type looks like,
        and the caller knows the placement of the round). ``estimate=False`` only starts the
        next round: a log read without a placement (``gpufair profile``) has no use for
        the estimate, which over a 4 MB read's 40,000 times costs a third of parsing them.
        """
        if not estimate:
            self._fresh.clear()
            return None
        cur = self.regimes.current
        if cur is not None and cur.cause in ("batch_size", "restart"):
            return steady_mean(self._fresh.take(len(self.regimes.regimes)))
        return steady_mean(self._fresh.take())

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
        if window is not None and self.regimes.period_shifted(
                window[0], spread := self._period.spread()):
            # the period under way runs at another speed than the last one: it alone
            return Estimate(window[0], self._period.parts, 0, spread / window[0]), "window"
        if window is None and cur is not None and (
                est := cur.final_estimate() if exact else cur.estimate()) is not None:
            return est, "window"
        values = list(cur.values) if cur else []
        weights = list(cur.weights) if cur else []
        if window is not None:
            values.append(window[0])
            weights.append(float(window[1]))
        from_start = cur is not None and cur.seen == len(cur.values)
        if values and (est := steady_mean(values, weights, from_start)) is not None:
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
        elif self._rates:
            rep.samples_per_s = _mean_rate(list(self._rates))
        rep.regimes = [r.as_dict(exact) for r in self.regimes.regimes]
        rep.dropped, rep.dropped_more = self._dropped.listed()
        if stats is not None:
            rep.lines = stats.as_dict()
        return JobReport(*_REPORT_FIELDS(rep))  # a snapshot: later rounds update ``rep``


def _mean_rate(rates: list[float]) -> float | None:
    """Samples/s at the mean cost of a step: the harmonic mean of the stated rates (a
    rate is samples over a step's time; the mean of times, not of rates, is the cost),
    the first left out as warm-up when there are others, rare pauses dropped as for
    times (``steady_mean`` on the times per sample), of the rates since the last
    sustained shift: the times per sample go through the shift rule iteration times go
    through (``RegimeTracker``), so a job whose speed changed (an elastic job that grew,
    a node that slowed) is read at its speed now, not at a mean of before and after."""
    kept = rates[1:] if len(rates) > 1 else rates
    times = [1.0 / r for r in kept if r > 0]
    if not times:
        return None
    tracker = RegimeTracker()
    tracker.observe_times(np.zeros(len(times)), times)
    est = steady_mean(list(tracker.regimes[-1].values))
    return None if est is None else 1.0 / est.value


# -- the columns of a batch ---------------------------------------------------------------


class _Sizes(NamedTuple):
    """A run's batch-size observations: row, step (0 when none), size."""

    at: np.ndarray
    step: np.ndarray
    value: np.ndarray


class _Times(NamedTuple):
    """A run's time observations: row, step, seconds per iteration, weight (None: all 1)."""

    at: np.ndarray
    step: np.ndarray
    value: np.ndarray
    weight: np.ndarray | None
    spread: np.ndarray | None = None  # a closed period's (``_Period.spread``); NaN: none

    def weights(self) -> np.ndarray:
        return np.ones(len(self.at)) if self.weight is None else self.weight

    def spreads(self) -> np.ndarray:
        return np.full(len(self.at), np.nan) if self.spread is None else self.spread

    def merge(self, other: _Times) -> _Times:
        """Both sets in row order (no row makes two observations)."""
        order = np.argsort(np.concatenate([self.at, other.at]), kind="stable")
        return _Times(*(np.concatenate([mine, theirs])[order] for mine, theirs in (
            (self.at, other.at), (self.step, other.step), (self.value, other.value),
            (self.weights(), other.weights()), (self.spreads(), other.spreads()))))


class _Columns:
    """A batch's train rows, with what the summary derives from them once per batch."""

    def __init__(self, samples: Samples) -> None:
        self.samples = samples
        # Samples.rows() makes steps and batch sizes ints (3.7 is step 3)
        self.step = np.trunc(samples.step)
        self.batch = np.trunc(samples.batch_size)
        self.spi = _seconds_per_iter(samples.iter_time_s, samples.steps_per_s,
                                     samples.samples_per_s, self.batch)
        self.timed = ~np.isnan(self.spi)
        self.kind = _row_kinds(self.step, self.timed, samples.loss)
        self.kind[_unconvertible(samples) | ~np.isnan(samples.world_size)] = _HARD
        self._hard = np.flatnonzero(self.kind == _HARD)
        self._stepped = np.flatnonzero(~np.isnan(self.step))
        # the _HARD rows followed by a run long enough to fold at once (MIN_RUN rows)
        room = np.diff(self._hard, append=len(self.step)) - 1
        self._calm = self._hard[room >= MIN_RUN]

    def next_hard(self, pos: int) -> int:
        """The first ``_HARD`` row at or after ``pos`` (the number of rows if none)."""
        return _next(self._hard, pos, len(self.step))

    def calm(self, pos: int) -> int:
        """Where a walk row by row from ``pos`` may stop: after the first ``_HARD`` row at
        or after ``pos`` that a long run follows (the number of rows if none)."""
        return _next(self._calm, pos, len(self.step) - 1) + 1

    def next_stepped(self, pos: int) -> int:
        """The first row with a step at or after ``pos`` (the number of rows if none)."""
        return _next(self._stepped, pos, len(self.step))

    def rows(self, a: int, b: int) -> list[Sample]:
        return self.samples.take(slice(a, b)).rows()


def _next(positions: np.ndarray, pos: int, none: int) -> int:
    i = int(np.searchsorted(positions, pos))
    return int(positions[i]) if i < len(positions) else none


def _seconds_per_iter(iter_time_s: np.ndarray, steps_per_s: np.ndarray,
                      samples_per_s: np.ndarray, batch_size: np.ndarray) -> np.ndarray:
    """``Sample.seconds_per_iter`` on columns (``batch_size`` already an integer): the
    time if positive, else the inverse step rate if positive, else batch size over sample
    rate if both are nonzero; NaN where a row gives no time."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        by_samples = np.where((samples_per_s != 0) & ~np.isnan(samples_per_s)
                              & (batch_size != 0) & ~np.isnan(batch_size),
                              batch_size / samples_per_s, np.nan)
        by_steps = np.where(steps_per_s > 0, 1.0 / steps_per_s, by_samples)
        return np.where(iter_time_s > 0, iter_time_s, by_steps)


def _row_kinds(step: np.ndarray, timed: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """Each row's kind (``_NEW``, ``_HARD``...), judged against the previous step.

    A step above the previous one is ``_NEW``, one below it ``_HARD``; one equal to it is a
    copy (``_copy_kinds``). The first step is provisionally ``_NEW``: whether it is above
    ``_last_step`` is the caller's to check.
    """
    kind = np.full(len(step), _NO_STEP, dtype=np.int8)
    at = np.flatnonzero(~np.isnan(step))
    if len(at) == 0:
        return kind
    steps = step[at]
    prev = np.concatenate([[-np.inf], steps[:-1]])
    kinds = np.where(steps > prev, _NEW, _HARD).astype(np.int8)
    copy = steps == prev
    if copy.any():
        kinds[copy] = _copy_kinds(copy, timed[at], loss[at])[copy]
    kind[at] = kinds
    return kind


def _copy_kinds(copy: np.ndarray, timed: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """``_advance`` on the copies (``copy``) among the rows with a step.

    In a group of copies (a step and its repetitions) the first row is kept; copies before
    the group's first timed row are duplicates, that timed row (if not the first) is kept
    instead (``_RETIMED``), and later copies are duplicates unless they are timed and
    state another loss, which ``_advance`` calls a restart (``_HARD``).
    """
    group = np.cumsum(~copy) - 1
    # the first timed row of each group (its index among the rows; len if none)
    timed_at = np.flatnonzero(timed)
    timed_group = group[timed_at]
    lead = np.ones(len(timed_at), dtype=bool)
    lead[1:] = timed_group[1:] != timed_group[:-1]
    first_timed = np.full(group[-1] + 1, len(copy))
    first_timed[timed_group[lead]] = timed_at[lead]
    first = first_timed[group]
    index = np.arange(len(copy))
    kept_loss = loss[np.minimum(first, len(copy) - 1)]
    clash = timed & ~np.isnan(loss) & ~np.isnan(kept_loss) & (loss != kept_loss)
    return np.select([index < first, index == first, clash],
                     [_DUPLICATE, _RETIMED, _HARD], _DUPLICATE).astype(np.int8)


def _unconvertible(samples: Samples) -> np.ndarray:
    """Rows whose integers a run cannot convert as ``Samples.rows`` and ``_add_rows`` do
    (infinite, or steps beyond exact integers): left to them, errors and all."""
    step = samples.step
    bad = ~(np.abs(step) < _EXACT) & ~np.isnan(step)
    for column in (samples.total_steps, samples.total_epochs, samples.batch_size,
                   samples.period_n):
        bad |= np.isinf(column)
    return bad | (samples.cumulative & np.isinf(samples.epoch))


def _period_key(epoch: float | None, period_n: int | None) -> tuple[float, int]:
    """The period a cumulative average belongs to and the iterations it covers: when it
    counts iterations (Keras' i of i/n, epoch e + i/n), the epoch those iterations are in —
    e, also for the epoch's last line, where e + n/n is already e + 1 — else the epoch
    stated."""
    key = epoch if epoch is not None else 0.0
    return (max(math.ceil(key) - 1.0, 0.0) if period_n else key), int(period_n or 0)


def _period_keys(epoch: np.ndarray, period_n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_period_key`` on columns (``period_n`` stated)."""
    counts = np.trunc(period_n)
    epoch = _or_zero(epoch)
    within = np.maximum(np.ceil(epoch) - 1.0, 0.0) + 0.0  # + 0.0: no -0.0
    return np.where(counts != 0, within, epoch), counts


def _running(start: float, values: np.ndarray) -> float:
    """``start`` plus each of ``values`` in turn, rounding after each addition as a loop of
    ``+=`` does (an accumulation, unlike ``sum``, never regroups the additions)."""
    return float(np.add.accumulate(np.concatenate(([start], values)))[-1])


def _ffill(values: np.ndarray, init: float) -> np.ndarray:
    """Each NaN replaced by the last number before it (``init`` before the first)."""
    last = np.where(np.isnan(values), -1, np.arange(len(values)))
    np.maximum.accumulate(last, out=last)
    return np.where(last >= 0, values[np.maximum(last, 0)], init)


def _or_zero(values: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(values), 0.0, values)

"""Batch-size regimes: where a job's (global) batch size — and with it its speed — changed.

Shockwave's predictor needs each job's regime history (Accordion and GNS-style adaptation
grow the batch size during training). A regime starts where the logged batch size changes;
when a log never states a batch size, a sustained shift in iteration time (every one of the
last ``confirm`` values beyond ``shift`` of the regime's estimate, and their mean too: a
level that moved, not values scattered on both sides of it) starts one too, with the
batch size unknown. So does an epoch (a period of a cumulative average, read as one
weighted value with its standard error) whose mean differs from the previous epoch's by
more than 10% and by more than three standard errors of the difference (a data loader
that stalls less once the page cache holds the data set), stated batch size or not: epoch
means are averages of thousands of iterations, so a change the per-value 30% band would
blur is plain in them.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufair.profiler.robust import Estimate, kept_estimate, steady_kept, steady_mean

WINDOW = 128

# Epochs (periods of a cumulative average) as segment candidates: a period whose mean is
# off the previous period's by more than PERIOD_SHIFT of it and by more than PERIOD_Z
# standard errors of the difference starts a new regime. Each period's standard error
# comes from how the means between its lines scatter, so it takes PERIOD_PARTS lines.
PERIOD_SHIFT = 0.1
PERIOD_Z = 3.0
PERIOD_PARTS = 5


@dataclass(slots=True)
class Regime:
    start_step: int
    end_step: int
    batch_size: int | None
    values: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    weights: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    cause: str = "start"
    seen: int = 0  # values ever added: the window still starts at the regime's start while
    # seen == len(values) (``steady_mean``'s warm-up trimming)
    _cached: Estimate | None = None
    _stale: int = 0
    # a refresh of ``_cached`` not computed yet (``_refresh``): the window it is of
    _deferred: _Deferred | None = None

    def add(self, value: float, weight: float) -> None:
        self.values.append(value)
        self.weights.append(weight)
        self.seen += 1
        self._stale += 1

    def estimate(self) -> Estimate | None:
        """Steady-state mean of the window (``robust.steady_mean``); recomputed only after
        enough new values.

        A sort of the window per sample would dominate parsing; the estimate moves little
        with one more value, so it is refreshed after max(4, half the window) new ones
        (``final_estimate`` refreshes at once, for reports).
        """
        if self._due():
            self._refresh()
        return self._settled()

    def level(self) -> float | None:
        """``estimate().value``, which is all that shift detection compares new values
        with: for a deferred refresh, only the mean of what ``steady_mean`` keeps (a sort
        and an exact sum in C), not the rest of an ``Estimate`` (a pass in Python)."""
        if self._due():
            self._refresh()
        if self._deferred is not None:
            return self._deferred.level()
        return None if self._cached is None else self._cached.value

    def _due(self) -> bool:
        """Whether ``estimate`` would re-sort the window now (see there for why it waits)."""
        return bool(self._stale) and ((self._cached is None and self._deferred is None)
                                      or self._stale >= max(4, len(self.values) // 2))

    def _refresh(self) -> None:
        """Start the estimate over from the window as it is now: deferred (``_Deferred``)
        when the window allows, else computed at once."""
        deferred = _Deferred.of(self)
        if deferred is None:
            self._cached = self._steady()
        elif deferred.level() is None:  # no estimate: due again with the next value
            deferred = self._cached = None
        self._deferred = deferred
        self._stale = 0

    def _settled(self) -> Estimate | None:
        """The estimate of the last refresh, computed now if it was deferred."""
        if self._deferred is not None:
            self._cached = self._deferred.estimate()
            self._deferred = None
        return self._cached

    def _steady(self) -> Estimate | None:
        return steady_mean(list(self.values), list(self.weights),
                           self.seen == len(self.values))

    def final_estimate(self) -> Estimate | None:
        if self._stale:
            self._deferred = None
            self._cached = self._steady()
            self._stale = 0
        return self._settled()

    def as_dict(self, exact: bool = True) -> dict[str, Any]:
        est = self.final_estimate() if exact else self.estimate()
        return {"start_step": self.start_step, "end_step": self.end_step,
                "batch_size": self.batch_size, "cause": self.cause,
                "iter_time_s": None if est is None else est.value,
                "pauses_dropped": 0 if est is None else est.rejected,
                "samples_per_s": (self.batch_size / est.value
                                  if est is not None and self.batch_size else None)}


class RegimeTracker:
    def __init__(self, shift: float = 0.3, confirm: int = 5) -> None:
        self.shift = shift
        self.confirm = confirm
        self.regimes: list[Regime] = []
        self._pending: list[tuple[int, float, float]] = []
        # the last period's (mean, standard error), for ``period_shifted``
        self._period: tuple[float, float] | None = None

    @property
    def current(self) -> Regime | None:
        return self.regimes[-1] if self.regimes else None

    def observe_batch(self, step: int, batch_size: int) -> None:
        cur = self.current
        if cur is None:
            self.regimes.append(Regime(step, step, batch_size))
        elif cur.batch_size is None:
            cur.batch_size = batch_size  # the first batch size named: it was this regime's
        elif cur.batch_size != batch_size:
            self._pending.clear()
            self._period = None
            self.regimes.append(Regime(step, step, batch_size, cause="batch_size"))
        else:
            cur.end_step = max(cur.end_step, step)

    def restart(self, step: int, cause: str = "restart") -> None:
        """The job restarted (requeue, resume) or its world size changed: a new segment,
        whose speed is what counts now (another node, another world size); the batch size
        carries over until the log states another."""
        cur = self.current
        self._pending.clear()
        self._period = None
        if cur is not None and cur.values:
            self.regimes.append(Regime(step, step, cur.batch_size, cause=cause))

    def period_shifted(self, mean: float, spread: float) -> bool:
        """Whether a period with this mean and standard error runs at another speed than
        the last period judged (see ``PERIOD_SHIFT``); False when there is none, or the
        spread is unknown (NaN)."""
        last = self._period
        if last is None or spread != spread:
            return False
        gap = abs(mean - last[0])
        return gap > PERIOD_SHIFT * last[0] and gap > PERIOD_Z * math.hypot(spread, last[1])

    def _observe_period(self, step: int, mean: float, spread: float) -> None:
        """A closed period's mean, before it joins a regime: a new regime if it shifted."""
        cur = self.current
        if self.period_shifted(mean, spread) and cur is not None and cur.values:
            for _, v, w in self._pending:  # held values are the old regime's
                cur.add(v, w)
            self._pending.clear()
            self.regimes.append(Regime(step, step, cur.batch_size, cause="throughput"))
        self._period = (mean, spread)

    def observe_time(self, step: int, seconds: float, weight: float = 1.0,
                     spread: float | None = None) -> None:
        """One iteration time. Called once per timed log line, so the common path (the
        regime's cached estimate is fresh and the value is near it) is written inline.
        ``spread``: the value is a closed period's mean, with this standard error (None:
        not one, or one of too few lines to judge)."""
        if spread is not None:
            self._observe_period(step, seconds, spread)
        regimes = self.regimes
        if regimes:
            cur = regimes[-1]
        else:
            cur = Regime(step, step, None)
            regimes.append(cur)
        if step > cur.end_step:
            cur.end_step = step
        if cur.batch_size is None and len(cur.values) >= self.confirm and self._shifted(
                cur, step, seconds, weight):
            return
        cur.values.append(seconds)
        cur.weights.append(weight)
        cur.seen += 1
        cur._stale += 1

    def observe_times(self, steps: Any, values: Any, weights: Any = None,
                      spreads: Any = None) -> np.ndarray:
        """Many iteration times at once, exactly as ``observe_time`` for each in order.

        A log yields up to 10^6 timed lines per second, too many for a Python call each.
        With a stated batch size there is no shift detection, so the values just join the
        current regime. Without one, values join in bulk while they are within the shift
        band (``_join_in_band``); a value outside it goes through ``observe_time`` (it is
        held as pending, or opens a "throughput" regime).

        Returns ``len(self.regimes)`` after each value (what a caller records per value).
        Closed periods' means (a number in ``spreads``, NaN elsewhere: one per epoch at
        most) go one by one.
        """
        if spreads is not None:
            return self._observe_with_periods(steps, values, weights, spreads)
        values = np.asarray(values, dtype=np.float64).tolist()
        steps = np.asarray(steps, dtype=np.int64).tolist()
        weights = None if weights is None else np.asarray(weights, dtype=np.float64).tolist()
        n = len(values)
        if n and not self.regimes:
            self.regimes.append(Regime(steps[0], steps[0], None))
        ends: list[int] = []   # where each stretch of values ended, and the regimes then
        regimes: list[int] = []
        i = 0
        while i < n:
            cur = self.regimes[-1]
            if cur.batch_size is not None:
                _join(cur, steps, values, weights, i, n)
                end = n
            else:
                end = self._join_in_band(cur, steps, values, weights, i)
            if end == i:
                self.observe_time(steps[i], values[i], 1.0 if weights is None else weights[i])
                end = i + 1
            ends.append(end)
            regimes.append(len(self.regimes))
            i = end
        return np.repeat(np.array(regimes, dtype=np.int64),
                         np.diff(np.array(ends, dtype=np.int64), prepend=0))

    def _observe_with_periods(self, steps: Any, values: Any, weights: Any,
                              spreads: Any) -> np.ndarray:
        """``observe_times`` where some values are periods' means (``spreads`` given)."""
        steps = np.asarray(steps, dtype=np.int64)
        values = np.asarray(values, dtype=np.float64)
        n = len(values)
        weights = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
        spreads = np.asarray(spreads, dtype=np.float64)
        counts = np.empty(n, dtype=np.int64)
        a = 0
        for i in [*np.flatnonzero(~np.isnan(spreads)).tolist(), n]:
            if a < i:  # the times between periods' means, in bulk
                counts[a:i] = self.observe_times(steps[a:i], values[a:i], weights[a:i])
            if i < n:
                self.observe_time(int(steps[i]), float(values[i]), float(weights[i]),
                                  float(spreads[i]))
                counts[i] = len(self.regimes)
            a = i + 1
        return counts

    def _join_in_band(self, cur: Regime, steps: list[int], values: list[float],
                      weights: list[float] | None, i: int) -> int:
        """Join values from ``i`` on to ``cur`` (a regime without batch size) as
        ``observe_time`` would one by one; returns where it stopped, at a value that needs
        ``observe_time``'s judgement.

        The estimate changes only after enough values have joined (``_until_due``), so the
        values come in blocks judged against one level. In a block, a value out of band is
        held as pending and joins, in order, with the next value in band; so a block whose
        out-of-band values come in runs shorter than ``confirm`` (~8% of the values of an
        ImageNet log, scattered) joins up to its last value in band. What follows that value
        (values held at the block's end, or a run long enough to be a shift) is left to
        ``observe_time``. A block is a few dozen values: judged in a plain loop, which
        costs less than numpy's calls on arrays that small.
        """
        if self._pending:  # held values: the next one decides their fate (``_shifted``)
            return i
        n = len(values)
        have = len(cur.values)
        if have < self.confirm:  # too few values to judge a shift: they all join
            end = min(n, i + self.confirm - have)
            _join(cur, steps, values, weights, i, end)
            return end
        confirm = self.confirm
        while i < n:
            level = cur.level()
            if level is None:
                break
            band = self.shift * level
            stop = min(n, i + _until_due(cur._stale, len(cur.values)))
            end = i  # after the last value in band
            held = 0
            if _all_in_band(values[i:stop], level, band):
                end = stop  # what the loop below finds, at C speed (the usual block)
            for k in range(end, stop):
                if abs(values[k] - level) <= band:
                    end, held = k + 1, 0
                else:
                    held += 1
                    if held == confirm:  # a shift, maybe: for _shifted to judge
                        break
            if end > i:
                _join(cur, steps, values, weights, i, end)
                i = end
            if end < stop or stop == n:
                break
        return i

    def _shifted(self, cur: Regime, step: int, seconds: float, weight: float) -> bool:
        """Hold values far from the regime; open a new regime once ``confirm`` agree."""
        level = cur.level()
        if level is None or abs(seconds - level) <= self.shift * level:
            if self._pending:  # no shift after all: they were this regime's slow iterations
                for _, v, w in self._pending:
                    cur.add(v, w)
                self._pending.clear()
            return False
        self._pending.append((step, seconds, weight))
        if len(self._pending) < self.confirm:
            return True
        pending_level = (sum(v * w for _, v, w in self._pending)
                         / sum(w for _, _, w in self._pending))
        now = cur.final_estimate()  # a rare moment: judge against the window as it is
        if now is not None:
            level = now.value
        if abs(pending_level - level) <= self.shift * level:
            # scattered, not shifted: values far from the mean on both sides, as when
            # iterations wait on the data loader now and then; they are this regime's
            for _, v, w in self._pending:
                cur.add(v, w)
            self._pending.clear()
            return True
        first = self._pending[0][0]
        new = Regime(first, step, None, cause="throughput")
        for _, v, w in self._pending:
            new.add(v, w)
        self._pending.clear()
        self.regimes.append(new)
        return True


def _all_in_band(block: list[float], level: float, band: float) -> bool:
    """Whether ``abs(v - level) <= band`` for every v of ``block``, decided on its least and
    greatest values: the rounded difference is monotone in v, so every v between them has a
    difference between theirs; exactly the per-value test. A NaN, which ``min`` and ``max``
    can pass over, makes the sum NaN."""
    if not block:
        return False
    total = sum(block)
    return (total == total and abs(min(block) - level) <= band
            and abs(max(block) - level) <= band)


def _join(cur: Regime, steps: list[int], values: list[float], weights: list[float] | None,
          a: int, b: int) -> None:
    """Append values ``a:b`` to a regime in bulk: what ``observe_time`` does to it for each
    of them when no shift is detected (only the last WINDOW values stay; all count as
    stale)."""
    if a >= b:
        return
    lo = max(a, b - WINDOW)
    cur.values.extend(values[lo:b])
    cur.weights.extend([1.0] * (b - lo) if weights is None else weights[lo:b])
    cur._stale += b - a
    cur.seen += b - a
    top = max(steps[a:b])
    if top > cur.end_step:
        cur.end_step = top


@dataclass(slots=True)
class _Deferred:
    """A refresh of a regime's estimate (of unit-weighted values), not computed yet: the
    window it is of, and what has been computed of it so far.

    Shift detection compares new values with the estimate's level only: the mean of what
    ``steady_mean`` keeps, a sort and an exact sum in C (``steady_kept``). The rest of an
    ``Estimate`` (the spread, a pass in Python) waits until a report asks for it; parsing
    refreshes a regime's estimate every half window, thousands of times a second.
    """

    values: list[float]
    from_start: bool
    _kept: list[float] | None = None  # what steady_mean keeps of ``values``, sorted
    _total: int = 0

    @classmethod
    def of(cls, cur: Regime) -> _Deferred | None:
        """The refresh ``cur.estimate()`` would do now, deferred; None unless all weights
        are 1 (windows of weighted values, rare, are computed at once)."""
        if cur.weights.count(1.0) != len(cur.weights):
            return None
        return cls(list(cur.values), cur.seen == len(cur.values))

    def _keep(self) -> list[float]:
        if self._kept is None:
            self._kept, self._total = steady_kept(self.values, self.from_start)
        return self._kept

    def level(self) -> float | None:
        """The estimate's value, exactly as ``steady_mean`` computes it (None: no value in
        the window is a time)."""
        kept = self._keep()
        return math.fsum(kept) / len(kept) if kept else None

    def estimate(self) -> Estimate | None:
        """The whole estimate: ``steady_mean`` of the window."""
        return kept_estimate(self._keep(), self._total)


def _until_due(stale: int, have: int) -> int:
    """How many more values can join a regime (``stale`` values since its estimate, ``have``
    in its window) before ``Regime._due`` holds: the least k with
    ``stale + k >= max(4, min(have + k, WINDOW) // 2)``, the window growing as values join.
    """
    # below the cap, (have + k) // 2 <= stale + k  <=>  k >= have - 2 * stale - 1
    k = max(0, 4 - stale, have - 2 * stale - 1)
    if have + k > WINDOW:  # the window is full before then: stale + k >= WINDOW // 2
        k = max(WINDOW - have, WINDOW // 2 - stale)
    return k

"""Batch-size regimes: where a job's (global) batch size — and with it its speed — changed.

Shockwave's predictor needs each job's regime history (Accordion and GNS-style adaptation
grow the batch size during training). A regime starts where the logged batch size changes;
when a log never states a batch size, a sustained shift in iteration time (every one of the
last ``confirm`` values beyond ``shift`` of the regime's estimate, and their mean too: a
level that moved, not values scattered on both sides of it) starts one too, with the
batch size unknown.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufair.profiler.robust import MAX_VALUE, Estimate, steady_mean

WINDOW = 128


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
            self._cached = self._steady()
            self._stale = 0
        return self._cached

    def _due(self) -> bool:
        """Whether ``estimate`` would re-sort the window now (see there for why it waits)."""
        return bool(self._stale) and (self._cached is None
                                      or self._stale >= max(4, len(self.values) // 2))

    def _steady(self) -> Estimate | None:
        return steady_mean(list(self.values), list(self.weights),
                           self.seen == len(self.values))

    def final_estimate(self) -> Estimate | None:
        if self._stale:
            self._cached = self._steady()
            self._stale = 0
        return self._cached

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
            self.regimes.append(Regime(step, step, batch_size, cause="batch_size"))
        else:
            cur.end_step = max(cur.end_step, step)

    def restart(self, step: int) -> None:
        """The job restarted (requeue, resume): a new segment, whose speed is what counts
        now (another node, another world size); the batch size carries over until the log
        states another."""
        cur = self.current
        self._pending.clear()
        if cur is not None and cur.values:
            self.regimes.append(Regime(step, step, cur.batch_size, cause="restart"))

    def observe_time(self, step: int, seconds: float, weight: float = 1.0) -> None:
        """One iteration time. Called once per timed log line, so the common path (the
        regime's cached estimate is fresh and the value is near it) is written inline."""
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

    def observe_times(self, steps: Any, values: Any, weights: Any = None) -> np.ndarray:
        """Many iteration times at once, exactly as ``observe_time`` for each in order.

        A log yields up to 10^6 timed lines per second, too many for a Python call each.
        With a stated batch size there is no shift detection, so the values just join the
        current regime. Without one, values join in bulk while they are within the shift
        band (``_join_in_band``); a value outside it goes through ``observe_time`` (it is
        held as pending, or opens a "throughput" regime).

        Returns ``len(self.regimes)`` after each value (what a caller records per value).
        """
        values = np.asarray(values, dtype=np.float64)
        steps = np.asarray(steps, dtype=np.int64)
        weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        n = len(values)
        counts = np.empty(n, dtype=np.int64)
        if n and not self.regimes:
            self.regimes.append(Regime(int(steps[0]), int(steps[0]), None))
        i = 0
        while i < n:
            cur = self.regimes[-1]
            if cur.batch_size is not None:
                _join(cur, steps[i:], values[i:], None if weights is None else weights[i:])
                end = n
            else:
                end = self._join_in_band(cur, steps, values, weights, i)
            if end == i:
                self.observe_time(int(steps[i]), float(values[i]),
                                  1.0 if weights is None else float(weights[i]))
                end = i + 1
            counts[i:end] = len(self.regimes)
            i = end
        return counts

    def _join_in_band(self, cur: Regime, steps: np.ndarray, values: np.ndarray,
                      weights: np.ndarray | None, i: int) -> int:
        """Join values from ``i`` on to ``cur`` (a regime without batch size) as long as
        ``observe_time`` would just append them; returns where it stopped, the value that
        needs ``observe_time`` (out of band, or no estimate to compare it with).

        The cached estimate changes only after enough values have joined (``_until_due``),
        so the values come in runs judged against one estimate, refreshed between runs
        where ``_shifted`` would refresh it; the first value back in band drops the pending
        ones, as there. Refreshing sorts the window, which would cost more than the rest;
        but a run whose values are in band whatever the estimate (``_Deferred``) does not
        need it, so it is computed only for a run that does, and for the last refresh.
        """
        if self._pending:  # held values: the next one decides their fate (``_shifted``)
            return i
        n = len(values)
        have = len(cur.values)
        if have < self.confirm:  # too few values to judge a shift: they all join
            end = min(n, i + self.confirm - have)
            _join(cur, steps[i:end], values[i:end], None if weights is None else weights[i:end])
            return end
        deferred: _Deferred | None = None
        due = cur._due()
        while i < n:
            if due:
                deferred = _Deferred.of(cur)
                if deferred is None:
                    cur.estimate()
                else:
                    cur._stale = 0
            if deferred is None and cur._cached is None:
                break
            ahead = values[i:i + _until_due(cur._stale, len(cur.values))]
            if deferred is not None and deferred.surely_in_band(ahead, self.shift):
                run = len(ahead)
            else:
                if deferred is not None:
                    deferred.settle(cur)
                    deferred = None
                est = cur._cached
                assert est is not None
                outside = ~(np.abs(ahead - est.value) <= self.shift * est.value)
                run = int(outside.argmax()) if outside.any() else len(ahead)
            if run:
                _join(cur, steps[i:i + run], values[i:i + run],
                      None if weights is None else weights[i:i + run])
                i += run
            if run < len(ahead):
                break
            due = True  # (if values remain: the run had all the values _until_due allows)
        if deferred is not None:
            deferred.settle(cur)
        return i

    def _shifted(self, cur: Regime, step: int, seconds: float, weight: float) -> bool:
        """Hold values far from the regime; open a new regime once ``confirm`` agree."""
        est = cur.estimate()
        if est is None or abs(seconds - est.value) <= self.shift * est.value:
            if self._pending:  # no shift after all: they were this regime's slow iterations
                for _, v, w in self._pending:
                    cur.add(v, w)
                self._pending.clear()
            return False
        self._pending.append((step, seconds, weight))
        if len(self._pending) < self.confirm:
            return True
        level = (sum(v * w for _, v, w in self._pending)
                 / sum(w for _, _, w in self._pending))
        now = cur.final_estimate() or est  # a rare moment: judge against the window as it is
        if abs(level - now.value) <= self.shift * now.value:
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


def _join(cur: Regime, steps: np.ndarray, values: np.ndarray, weights: np.ndarray | None
          ) -> None:
    """Append values to a regime in bulk: what ``observe_time`` does to it for each of them
    when no shift is detected (only the last WINDOW values stay; all count as stale)."""
    tail = values[-WINDOW:].tolist()
    cur.values.extend(tail)
    cur.weights.extend([1.0] * len(tail) if weights is None else weights[-WINDOW:].tolist())
    cur._stale += len(values)
    cur.seen += len(values)
    top = int(steps.max())
    if top > cur.end_step:
        cur.end_step = top


@dataclass(slots=True)
class _Deferred:
    """A refresh of a regime's estimate, its robust mean not computed yet: the window it
    is of, and the range of that window.

    A robust mean (of positive values with unit weights) lies within the range of the
    values, so a value within the shift band of every point of that range is in band
    whatever the mean turns out to be. Iteration times stay within a few percent of each
    other, so nearly every run of a regime can be judged without sorting its window.
    """

    values: list[float]
    weights: list[float]
    low: float
    high: float
    from_start: bool

    @classmethod
    def of(cls, cur: Regime) -> _Deferred | None:
        """The refresh ``cur.estimate()`` would do now, deferred; None unless all weights
        are 1 and all values are ones the robust mean keeps, which makes sure it lies in
        their range (other windows are rare: they are sorted at once)."""
        values, weights = list(cur.values), list(cur.weights)
        if not values or weights.count(1.0) != len(weights):
            return None
        low, high, total = min(values), max(values), sum(values)
        if not (low > 0 and high <= MAX_VALUE and total == total):  # (no NaN either)
            return None
        return cls(values, weights, low, high, cur.seen == len(values))

    def surely_in_band(self, ahead: np.ndarray, shift: float) -> bool:
        """Whether every value is within ``shift`` of every estimate in the range.

        |v - e| - shift * e is convex in e, so checking both ends of the range suffices;
        the ends are widened and the band narrowed by 1e-9, far more than the rounding of
        the mean and of the comparison in ``_shifted``.
        """
        low, high, band = self.low * (1 - 1e-9), self.high * (1 + 1e-9), shift * (1 - 1e-9)
        return bool(((np.abs(ahead - low) <= band * low)
                     & (np.abs(ahead - high) <= band * high)).all())

    def settle(self, cur: Regime) -> None:
        """Compute the deferred estimate (the values joined since stay counted as stale)."""
        cur._cached = steady_mean(self.values, self.weights, self.from_start)


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

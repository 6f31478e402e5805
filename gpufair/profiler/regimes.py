"""Batch-size regimes: where a job's (global) batch size — and with it its speed — changed.

Shockwave's predictor needs each job's regime history (Accordion and GNS-style adaptation
grow the batch size during training). A regime starts where the logged batch size changes;
when a log never states a batch size, a sustained shift in iteration time (every one of the
last ``confirm`` values beyond ``shift`` of the regime's median) starts one too, with the
batch size unknown.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufair.profiler.robust import Estimate, robust_mean

WINDOW = 128


@dataclass(slots=True)
class Regime:
    start_step: int
    end_step: int
    batch_size: int | None
    values: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    weights: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    cause: str = "start"
    _cached: Estimate | None = None
    _stale: int = 0

    def add(self, value: float, weight: float) -> None:
        self.values.append(value)
        self.weights.append(weight)
        self._stale += 1

    def estimate(self) -> Estimate | None:
        """Robust mean of the window; recomputed only after enough new values.

        A sort of the window per sample would dominate parsing; the estimate moves little
        with one more value, so it is refreshed after max(4, half the window) new ones
        (``final_estimate`` refreshes at once, for reports).
        """
        if self._due():
            self._cached = robust_mean(list(self.values), list(self.weights))
            self._stale = 0
        return self._cached

    def _due(self) -> bool:
        """Whether ``estimate`` would re-sort the window now (see there for why it waits)."""
        return bool(self._stale) and (self._cached is None
                                      or self._stale >= max(4, len(self.values) // 2))

    def final_estimate(self) -> Estimate | None:
        if self._stale:
            self._cached = robust_mean(list(self.values), list(self.weights))
            self._stale = 0
        return self._cached

    def as_dict(self, exact: bool = True) -> dict[str, Any]:
        est = self.final_estimate() if exact else self.estimate()
        return {"start_step": self.start_step, "end_step": self.end_step,
                "batch_size": self.batch_size, "cause": self.cause,
                "iter_time_s": None if est is None else est.value,
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
        cur._stale += 1

    def observe_times(self, steps: Any, values: Any, weights: Any = None) -> np.ndarray:
        """Many iteration times at once, exactly as ``observe_time`` for each in order.

        A log yields up to 10^6 timed lines per second, too many for a Python call each.
        With a stated batch size there is no shift detection, so the values just join the
        current regime. Without one, every value is compared with the regime's cached
        estimate, which changes only when enough values have joined (``Regime._due``): the
        values are taken in runs during which the estimate cannot change, each run's
        in-band prefix joins in bulk and the first value outside the band goes through
        ``observe_time`` (it is held as pending, or opens a "throughput" regime).

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
            end = n if cur.batch_size is not None else self._in_band_run(cur, values, i)
            if end > i:
                _join(cur, steps[i:end], values[i:end],
                      None if weights is None else weights[i:end])
            else:
                self.observe_time(int(steps[i]), float(values[i]),
                                  1.0 if weights is None else float(weights[i]))
                end = i + 1
            counts[i:end] = len(self.regimes)
            i = end
        return counts

    def _in_band_run(self, cur: Regime, values: np.ndarray, i: int) -> int:
        """The end of the run of values from ``i`` on that ``observe_time`` would simply
        append to ``cur`` (a regime without batch size), with the same side effects on the
        way: the estimate refreshed where ``_shifted`` would refresh it, pending values
        dropped by the first value back in band. ``i`` itself when value ``i`` needs the
        per-value path (it is out of band, or there is no estimate to compare with)."""
        have = len(cur.values)
        if have < self.confirm:  # too few values to judge a shift: they all join
            return min(len(values), i + self.confirm - have)
        est = cur.estimate()
        if est is None:
            return i
        # the estimate stays as it is for this many more joining values
        ahead = values[i:i + _until_due(cur._stale, have)]
        outside = ~(np.abs(ahead - est.value) <= self.shift * est.value)
        run = int(outside.argmax()) if outside.any() else len(ahead)
        if run and self._pending:
            self._pending.clear()
        return i + run

    def _shifted(self, cur: Regime, step: int, seconds: float, weight: float) -> bool:
        """Hold values far from the regime; open a new regime once ``confirm`` agree."""
        est = cur.estimate()
        if est is None or abs(seconds - est.value) <= self.shift * est.value:
            if self._pending:
                self._pending.clear()
            return False
        self._pending.append((step, seconds, weight))
        if len(self._pending) < self.confirm:
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
    top = int(steps.max())
    if top > cur.end_step:
        cur.end_step = top


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

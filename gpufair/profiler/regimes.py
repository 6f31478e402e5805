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
        if self._stale and (self._cached is None
                            or self._stale >= max(4, len(self.values) // 2)):
            self._cached = robust_mean(list(self.values), list(self.weights))
            self._stale = 0
        return self._cached

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

    def _shifted(self, cur: Regime, step: int, seconds: float, weight: float) -> bool:
        """Hold values far from the regime; open a new regime once ``confirm`` agree."""
        est = cur._cached
        if cur._stale and (est is None or cur._stale >= max(4, len(cur.values) // 2)):
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

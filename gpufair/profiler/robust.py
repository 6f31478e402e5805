"""Robust location estimates for noisy iteration times: median/MAD rejection, then a mean.

Iteration times have heavy right tails (checkpoint saves, data-loader stalls, a preempted
neighbour): a plain mean chases them, a plain median ignores real drift. Rejecting beyond
3 scaled MADs and averaging what is left keeps both properties.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

MAD_SCALE = 1.4826
REJECT_MADS = 3.0
# No measurement is this large (seconds, samples/s, ...): beyond it a log line is malformed,
# and squaring such values would overflow a float and take the round down with it.
MAX_VALUE = 1e12


@dataclass(frozen=True, slots=True)
class Estimate:
    value: float
    n: int
    rejected: int
    rel_stderr: float

    @property
    def confidence(self) -> float:
        """0..1: grows with the number of kept samples, shrinks with their spread."""
        if self.n == 0:
            return 0.0
        return (1.0 - math.exp(-self.n / 5.0)) / (1.0 + 10.0 * self.rel_stderr)


def _median(sorted_values: Sequence[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else 0.5 * (sorted_values[mid - 1] + sorted_values[mid])


def robust_mean(values: Sequence[float], weights: Sequence[float] | None = None
                ) -> Estimate | None:
    """Weighted mean of the values within 3 scaled MADs of the median.

    Called for every job's window (up to a few hundred values) in every round and during
    parsing, so it is written for speed: one sort for the median, one for the MAD,
    comprehensions only. Unit weights (every windowed time) take a path without
    (value, weight) pairs; ``math.fsum`` is exact whatever the order, so summing the sorted
    values gives the same result to the last bit.
    """
    if weights is not None and weights.count(1.0) != len(weights):
        return _weighted(values, weights)
    if weights is not None and len(weights) != len(values):
        raise ValueError("values and weights differ in length")
    ordered = sorted([v for v in values if 0 < v <= MAX_VALUE])
    if not ordered:
        return None
    med = _median(ordered)
    mad = _median(sorted([abs(v - med) for v in ordered])) * MAD_SCALE
    limit = REJECT_MADS * mad if mad > 0 else 0.05 * med
    # |v - med| <= limit holds on one contiguous run of the sorted values (a rounded
    # difference is monotone in v): two binary searches find exactly the values it keeps
    def offset(v: float) -> float:
        return v - med

    kept = ordered[bisect_left(ordered, -limit, key=offset):
                   bisect_right(ordered, limit, key=offset)] or [med]
    n = len(kept)
    mean = math.fsum(kept) / n
    if n > 1:
        var = math.fsum([(v - mean) ** 2 for v in kept]) / (n - 1)
        rel = math.sqrt(var / n) / mean
    else:
        rel = 1.0
    return Estimate(mean, n, len(ordered) - n, rel)


def _weighted(values: Sequence[float], weights: Sequence[float]) -> Estimate | None:
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if 0 < v <= MAX_VALUE]
    if not pairs:
        return None
    ordered = sorted(v for v, _ in pairs)
    med = _median(ordered)
    mad = _median(sorted([abs(v - med) for v in ordered])) * MAD_SCALE
    limit = REJECT_MADS * mad if mad > 0 else 0.05 * med
    kept = [(v, w) for v, w in pairs if abs(v - med) <= limit] or [(med, 1.0)]
    total_w = math.fsum([w for _, w in kept])
    mean = math.fsum([v * w for v, w in kept]) / total_w
    n = len(kept)
    if n > 1:
        var = math.fsum([(v - mean) ** 2 for v, _ in kept]) / (n - 1)
        rel = math.sqrt(var / n) / mean
    else:
        rel = 1.0
    return Estimate(mean, n, len(pairs) - n, rel)

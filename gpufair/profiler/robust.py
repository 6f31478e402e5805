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


# A value this many times the window's median is a pause that is not training (evaluation,
# a checkpoint save, a stall) -- but only while such values are rare: when more than
# PAUSE_SHARE of the window is that slow, they are the job's own rhythm (every Nth
# iteration waiting on the data loader) and are part of what an iteration costs.
PAUSE_FACTOR = 4.0
PAUSE_SHARE = 0.05


WARMUP_EXCESS = 0.10
WARMUP_SHARE = 0.25


def steady_mean(values: Sequence[float], weights: Sequence[float] | None = None,
                from_start: bool = False) -> Estimate | None:
    """The mean cost of an iteration: iterations / wall time over the window.

    Why not the median (or a mean after median/MAD rejection, ``robust_mean``): iteration
    times are skewed, and the slow ones are real. A job whose every 10th iteration waits
    on data costs the mean, not the median; MAD rejection threw those iterations away and
    under-read such a job by ~47%, and a real ImageNet log by 9%. So every value counts,
    weighted by the iterations it covers (a window of 20 iterations weighs 20), except
    rare pauses: values above ``PAUSE_FACTOR`` times the median that make up at most
    ``PAUSE_SHARE`` of the window (at most one in a window of fewer than 20). ``rejected``
    says how many were dropped that way.

    Warm-up: the summary leaves the first timed sample of each segment out; a window that
    still ``from_start`` of its segment also loses its leading run of values more than
    ``WARMUP_EXCESS`` above the median (at most ``WARMUP_SHARE`` of it): smoothed rates
    (tqdm's moving average) carry the first iterations' slowness for a while.

    Unit weights (every windowed time, every round's fresh times) take ``steady_kept``'s
    path over sorted plain floats, which parsing calls thousands of times a second; the
    result is the same to the last bit (``math.fsum`` is exactly rounded in any order).
    """
    if weights is not None and len(weights) != len(values):
        raise ValueError("values and weights differ in length")
    if weights is None or weights.count(1.0) == len(weights):
        kept, total = steady_kept(values, from_start)
        return kept_estimate(kept, total)
    pairs = [(v, w) for v, w in zip(values, weights, strict=True)
             if 0 < v <= MAX_VALUE and 0 < w <= MAX_VALUE]
    if not pairs:
        return None
    med = _median(sorted(v for v, _ in pairs))
    total = len(pairs)
    if from_start:
        lead = _warmup_lead([v for v, _ in pairs], med)
        pairs = pairs[lead:]
    slow = [p for p in pairs if p[0] > PAUSE_FACTOR * med]
    if slow and len(slow) <= max(1, int(PAUSE_SHARE * len(pairs))):
        kept_pairs = [p for p in pairs if p[0] <= PAUSE_FACTOR * med]
    else:
        kept_pairs = pairs
    total_w = math.fsum(w for _, w in kept_pairs)
    mean = math.fsum(v * w for v, w in kept_pairs) / total_w
    return _estimate([v for v, _ in kept_pairs], mean, total)


def steady_kept(values: Sequence[float], from_start: bool = False) -> tuple[list[float], int]:
    """The values ``steady_mean`` keeps of unit-weighted ones, sorted, and how many values
    it considered (those in (0, MAX_VALUE]).

    Sorted, so the pauses are a tail found by bisection rather than a pass in Python; the
    mean of what is kept is ``fsum(kept) / len(kept)`` (what ``Regime`` compares new values
    with, without the rest of an ``Estimate``).
    """
    plain = list(values) if _all_times(values) else [v for v in values if 0 < v <= MAX_VALUE]
    ordered = sorted(plain)
    if not ordered:
        return ordered, 0
    med = _median(ordered)
    if from_start and (lead := _warmup_lead(plain, med)):
        ordered = sorted(plain[lead:])
    cut = bisect_right(ordered, PAUSE_FACTOR * med)
    slow = len(ordered) - cut
    if slow and slow <= max(1, int(PAUSE_SHARE * len(ordered))):
        del ordered[cut:]
    return ordered, len(plain)


def _all_times(values: Sequence[float]) -> bool:
    """Whether every value is in (0, MAX_VALUE], checked in C (the usual window, which then
    needs no filtering pass in Python). A NaN escapes ``min`` and ``max`` but not ``sum``."""
    return bool(values) and min(values) > 0 and max(values) <= MAX_VALUE and \
        not math.isnan(sum(values))


def _warmup_lead(values: list[float], med: float) -> int:
    """How many leading values are warm-up: the run above ``WARMUP_EXCESS`` over the
    median, if it is at most ``WARMUP_SHARE`` of them (else it is the job, not warm-up)."""
    lead = 0
    while lead < len(values) and values[lead] > (1 + WARMUP_EXCESS) * med:
        lead += 1
    return lead if lead <= WARMUP_SHARE * len(values) else 0


def kept_estimate(kept: list[float], total: int) -> Estimate | None:
    """``steady_mean`` of unit-weighted values from what ``steady_kept`` made of them."""
    if not kept:
        return None
    return _estimate(kept, math.fsum(kept) / len(kept), total)


def _estimate(kept: list[float], mean: float, total: int) -> Estimate:
    """The estimate of ``mean`` over the ``kept`` values, ``total`` considered."""
    n = len(kept)
    if n > 1:
        var = math.fsum([(v - mean) ** 2 for v in kept]) / (n - 1)
        rel = math.sqrt(var / n) / mean
    else:
        rel = 1.0
    return Estimate(mean, n, total - n, rel)

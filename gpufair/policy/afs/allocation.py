"""Algorithm 1 (AFS-L) and its length-unaware variant (AFS-P), on abstract jobs.

A job here is a *ladder*: the GPU counts it may hold (ascending) and its measured rate at
each. With every count 1..max on the ladder this is the paper's loop exactly: hand out the
GPUs one at a time, each to the "top priority" job found by a linear scan with the pairwise
rule (3). A ladder with gaps (counts never measured, sizes network packing forbids, a rigid
gang's single size) makes a step take several GPUs at once; rule (3) then compares the gains
of whole steps. Only measured rates are ever used: no throughput is interpolated.

The comparator is not transitive in the "shorter wins" direction (spec §2.7), so the scan is
kept literal, in the order the caller gives (arrival, then id): a heap or sort on a scalar
key would give different answers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

AFS_L = "afs_l"
AFS_P = "afs_p"


@dataclass(frozen=True, slots=True)
class Rung:
    """A job as Algorithm 1 sees it: ``counts`` ascending (no 0), ``rates[i]`` its iterations/s
    on ``counts[i]`` GPUs, strictly increasing (a count that is no faster than a smaller one
    is no use: the caller leaves it out). ``remaining`` iterations, None when unknown."""

    key: str
    counts: tuple[int, ...]
    rates: tuple[float, ...]
    remaining: float | None = None


class _Share:
    """A job's tentative share during one allocation, with what rule (3) and the length
    comparison read of it worked out once per change of share (the scan reads them n times
    per GPU): ``u`` = (p' - p)/p' (gain over the new rate), ``v`` = (p' - p)/p (gain over the
    current rate, infinite without a GPU), ``need`` = GPUs of the next rung (0: none)."""

    __slots__ = ("cnt", "first_length", "length", "level", "need", "rung", "thr", "u", "v")

    def __init__(self, rung: Rung, level: int = -1) -> None:
        self.rung = rung
        rem = rung.remaining
        # ``len(1)`` of a job without GPUs: remaining time on its first rung
        self.first_length = math.inf if rem is None else rem / rung.rates[0]
        self.move(level)

    def move(self, level: int) -> None:
        rung = self.rung
        self.level = level
        self.cnt = 0 if level < 0 else rung.counts[level]
        self.thr = 0.0 if level < 0 else rung.rates[level]
        # ``len(cnt)``: remaining time at the tentative share; infinite with no GPU or an
        # unknown length (such a job ranks as the longest, as SRTF ranks it last)
        self.length = math.inf if level < 0 or rung.remaining is None \
            else rung.remaining / self.thr
        if level + 1 < len(rung.counts):
            nxt = rung.rates[level + 1]
            self.need = rung.counts[level + 1] - self.cnt
            self.u = (nxt - self.thr) / nxt
            self.v = math.inf if self.thr == 0.0 else (nxt - self.thr) / self.thr
        else:
            self.need, self.u, self.v = 0, math.nan, math.nan


def cond3(a: _Share, b: _Share) -> bool:
    """Rule (3) with ``a`` as the shorter job j_a and ``b`` as the longer j_b: True when the
    next step should go to ``b``. ``(p'_b - p_b)/p'_b > (p'_a - p_a)/p_a``; a job without GPUs
    as j_a has an infinite right side, so (3) is false. Both must have a next rung."""
    return b.u > a.v


def top_priority_l(eligible: Sequence[_Share]) -> _Share:
    """TOPPRIORITY of Algorithm 1 (lines 1-13), scanning in the given order."""
    best = eligible[0]
    for job in eligible:
        a, b = best, job
        if a.level < 0 and b.level < 0:
            best = a if a.first_length < b.first_length else b
            continue
        if a.length >= b.length:
            a, b = b, a
        best = b if cond3(a, b) else a
    return best


def top_priority_p(eligible: Sequence[_Share], rng: random.Random) -> _Share:
    """The length-unaware TOPPRIORITY: (3) both ways; when neither holds, a seeded coin."""
    best = eligible[0]
    for job in eligible[1:]:
        # j wins when (3) says so with j as the longer job, or when (3) holds neither way
        # (undecidable without lengths) and the coin says so
        if cond3(best, job) or (not cond3(job, best) and rng.random() < 0.5):
            best = job
    return best


@dataclass
class Allocation:
    """GPU counts by job key, and the GPUs left idle (nobody could use another step)."""

    counts: dict[str, int] = field(default_factory=dict)
    idle: int = 0


def allocate(rungs: Sequence[Rung], gpus: int, *, mode: str = AFS_L,
             rng: random.Random | None = None) -> Allocation:
    """Algorithm 1's loop (lines 14-23) over ``gpus`` GPUs, from no GPU for everyone.

    A job is eligible while it has a next rung, that rung is no larger than the GPUs left
    and (by the ladder's construction) faster. GPUs nobody is eligible for stay idle (spec
    §3.3).
    """
    if gpus < 0:
        raise ValueError(f"gpus must be >= 0, not {gpus}")
    if mode not in (AFS_L, AFS_P):
        raise ValueError(f"mode must be {AFS_L!r} or {AFS_P!r}, not {mode!r}")
    rng = rng or random.Random(0)
    shares = [_Share(r) for r in rungs]
    left = gpus
    while left > 0:
        eligible = [s for s in shares if 0 < s.need <= left]
        if not eligible:
            break
        best = top_priority_l(eligible) if mode == AFS_L else top_priority_p(eligible, rng)
        left -= best.need
        best.move(best.level + 1)
    return Allocation({s.rung.key: s.cnt for s in shares}, left)


def processor_sharing(rungs: Sequence[Rung], gpus: int, *, keep: Sequence[str],
                      order: Sequence[str]) -> Allocation:
    """AFS-P's stage one (more jobs than GPUs): each job gets at most its first rung; jobs
    whose quantum runs on (``keep``) keep theirs, the rest go by ``order`` (fewest units run,
    then arrival), skipping a job whose first rung does not fit in what is left."""
    by_key = {r.key: r for r in rungs}
    counts = dict.fromkeys(by_key, 0)
    if gpus < 0:
        raise ValueError(f"gpus must be >= 0, not {gpus}")
    left = gpus
    for key in [*keep, *order]:
        if counts[key]:
            continue
        need = by_key[key].counts[0]
        if need <= left:
            counts[key] = need
            left -= need
    return Allocation(counts, left)

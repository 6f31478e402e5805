"""timm's ``train.py`` (PyTorch Image Models) and the many scripts copied from it.

``Train: 0 [  50/10009 (  0%)]  Loss:  6.973588 (6.9921)  Time: 0.316s,  405.65/s  (0.344s,
371.84/s)  LR: 5.000e-07  Data: 0.006 (0.033)`` — ``Time`` is the last batch's time and,
in brackets, the mean over the epoch's batches so far (an ``AverageMeter`` reset every
epoch); the rates are the global batch over each. The bracketed mean is what is read,
differenced between lines: the single batch a line shows is one of every ``log_interval``,
and a data loader that stalls every Nth batch can make every shown batch a fast one (or a
slow one), while the mean covers them all. ``Test: [ 50/195]  Time: ...`` and
``Test (EMA): [...]`` lines are evaluation.

The global batch is rate x time, printed rounded; it is taken only where the printed
figures leave exactly one whole number (the two pairs of a line narrow it together), and
not from an epoch's last batch, which may be a partial one.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser

_LOSS = rf"(?P<loss>{NUM}|nan|inf)"
_TRAIN = (rf"\bTrain: (?P<ep>\d+) \[\s*(?P<i>\d+)/(?P<n>\d+) \(\s*\d+%\)\]\s+"
          rf"Loss:\s*{_LOSS}\s*\([^)\n\r]*\)\s+"
          rf"Time:\s*(?P<t>{NUM})s,\s*(?P<r>{NUM})/s\s+\(\s*(?P<avg>{NUM})s,\s*(?P<ravg>{NUM})/s\)")
_TEST = r"\b(?P<test>Test(?: \(EMA\))?): \[\s*\d+/\d+\]\s+Time:\s*[\d.]+"


class TimmParser(Parser):
    family = "timm"
    signature = re.compile(r"\bTrain: \d+ \[\s*\d+/\d+ \(\s*\d+%\)\]\s+Loss:[^\n\r]*"
                           r"\bTime:\s*[\d.]+s,")
    pattern = re.compile(rf"^[^\n\r]*?(?:{_TRAIN}|{_TEST})")
    numbers = frozenset({"ep", "i", "n", "loss", "t", "r", "avg", "ravg"})
    lenient = frozenset({"loss"})
    hints = ("Train: ", "Loss:", "Time:", "LR:", "Data:")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        ep, i, n = f.num("ep"), f.num("i"), f.num("n")
        test = f.has("test")
        f.bad |= ~test & ((n == 0) | (i >= n))
        samples = Samples.build(
            f.n, eval=test, cumulative=~test, step=ep * n + i + 1,
            epoch=ep + (i + 1) / n, iter_time_s=f.num("avg"), period_n=i + 1,
            batch_size=np.where(i + 1 < n, _global_batch(f), np.nan), loss=f.num("loss"))
        return samples, np.ones(f.n, dtype=bool)


def _global_batch(f: Fields) -> np.ndarray:
    """The whole number that both (time, rate) pairs of a line allow, else NaN.

    A time printed as 0.316 is in [0.3155, 0.3165], a rate printed as 405.65 in
    [405.645, 405.655]; the batch is their product, so it lies in the product of the
    ranges. Only where the two pairs' ranges overlap on exactly one integer is it known.
    """
    lo = np.full(f.n, -np.inf)
    hi = np.full(f.n, np.inf)
    for time, rate in (("t", "r"), ("avg", "ravg")):
        t, r = f.num(time), f.num(rate)
        lo = np.fmax(lo, np.clip(t - 5e-4, 0, None) * (r - 5e-3))
        hi = np.fmin(hi, (t + 5e-4) * (r + 5e-3))
    first, last = np.ceil(lo), np.floor(hi)
    return np.where((first == last) & (first > 0), first, np.nan)

"""Meter lines of the self-supervised and vision-transformer trainers (DINO, DeiT, MAE,
MoCo v3, SwAV, and scripts built on the ImageNet example's ``AverageMeter``).

- ``MetricLogger`` (DINO/DeiT/MAE): ``Epoch: [0/100]  [2240/2502]  eta: 0:02:44  loss: ...
  time: 0.618063  data: 0.000170  max mem: 13871`` — ``time`` is the mean of the last 20
  iterations (windowed);
- ``AverageMeter`` (SwAV, MoCo forks): ``Epoch: [198][200/927] Time: 0.297 (0.297) ...`` —
  ``val (avg)``, the average since the epoch began, differenced between lines (cumulative
  per epoch).
The ImageNet example's own tab-separated form (``Epoch: [0][ 10/5005]\\tTime  0.123 ...``)
is the pytorch family's; ties in detection go to it.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser

_LINE = (rf"[^\n\r]*?\bEpoch: \[(?P<ep>\d+)(?:/(?P<eps>\d+))?\]\s*\[\s*(?P<i>\d+)"
         rf"(?:/\s*(?P<n>\d+))?\][^\n\r]*?\b[Tt]ime:?\s+(?P<t>{NUM})(?:\s+\(\s*(?P<avg>{NUM})\))?")


class MetersParser(Parser):
    family = "meters"
    signature = re.compile(r"\bEpoch: \[\d+(?:/\d+)?\]\s*\[\s*\d+(?:/\s*\d+)?\]"
                           r"[^\n\r]*\b[Tt]ime:?\s")
    pattern = re.compile(rf"^{_LINE}")
    numbers = frozenset({"ep", "eps", "i", "n", "t", "avg"})
    hints = ("Epoch: [", "max mem:")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        ep, i, n = f.num("ep"), f.num("i"), f.num("n")
        f.bad |= n == 0
        averaged = f.has("avg")
        # an AverageMeter's avg covers the i + 1 iterations of the epoch so far
        within = np.where(np.isnan(n), 0.5, (i + 1) / n)
        samples = Samples.build(
            f.n, cumulative=averaged, step=ep * n + i + 1, total_epochs=f.num("eps"),
            epoch=ep + within,
            iter_time_s=np.where(averaged, f.num("avg"), f.num("t")),
            period_n=np.where(averaged, i + 1, np.nan))
        return samples, np.ones(f.n, dtype=bool)

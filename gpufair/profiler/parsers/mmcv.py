"""OpenMMLab's text logger, mmcv 1.x and mmengine (mmdet, mmseg, mmcls, mmaction, ...).

- mmcv: ``2020-05-08 18:44:23,494 - mmdet - INFO - Epoch [1][1200/7517]\\tlr: 0.00125,
  eta: 4:44:04, time: 0.593, data_time: 0.031, memory: 6836, ..., loss: 0.4606``, and
  ``Iter [50/80000]`` for iteration-based runners;
- mmengine: ``Epoch(train)  [83][ 350/2693]  base_lr: ... time: 0.5674  data_time: 0.0034
  ...`` and ``Iter(train) [ 50/80000] ...``; ``Epoch(val)`` / ``Epoch(test)`` lines are
  evaluation.
``time`` is the mean over the logging interval (data loading included): windowed.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser, keyed

_HEAD = (r"[^\n\r]*?\b(?:Epoch(?:\((?P<mode>\w+)\))?\s*\[(?P<ep>\d+)\]"
         r"\[\s*(?P<i>\d+)/\s*(?P<n>\d+)\]|Iter(?:\((?P<imode>\w+)\))?\s*\[\s*(?P<it>\d+)/\s*(?P<itn>\d+)\])")


class MmcvParser(Parser):
    family = "mmcv"
    signature = re.compile(r"\b(?:Epoch(?:\(\w+\))?\s*\[\d+\]\[\s*\d+/\s*\d+\]|"
                           r"Iter(?:\(\w+\))?\s*\[\s*\d+/\s*\d+\])[^\n\r]*\btime: ")
    pattern = re.compile(rf"^{_HEAD}(?P<rest>[^\n\r]*)")
    numbers = frozenset({"ep", "i", "n", "it", "itn", "@time", "@loss"})
    texts = frozenset({"mode", "imode"})
    items = keyed("time", "loss")
    items_in = "rest"
    lenient = frozenset({"@loss"})
    hints = ("data_time:", "Epoch(train)", "Epoch [")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        evaluating = np.isin(f.text("mode"), ["val", "test"]) | np.isin(
            f.text("imode"), ["val", "test"])
        by_epoch = f.has("ep")
        ep, i, n = f.num("ep"), f.num("i"), f.num("n")
        f.bad |= by_epoch & (n == 0)
        samples = Samples.build(
            f.n, eval=evaluating,
            step=np.where(evaluating, np.where(by_epoch, i, f.num("it")),
                          np.where(by_epoch, (ep - 1) * n + i, f.num("it"))),
            total_steps=f.num("itn"), epoch=np.where(by_epoch, ep - 1 + i / n, np.nan),
            iter_time_s=f.num("@time"), loss=f.num("@loss"))
        return samples, np.ones(f.n, dtype=bool)

"""detectron2's ``CommonMetricPrinter`` (and its descendants: d2go, Mask2Former, ...).

``[11/01 11:23:38 d2.utils.events]: eta: 8:08:27  iter: 639  total_loss: 1.194 ...
time: 0.3326  data_time: 0.0328  lr: 0.006394  max_mem: 3961M``. ``iter`` counts from 0.
``time`` is the average iteration time since training began (its ``global_avg``), not a
window: successive lines are differenced into the mean of the iterations between them
(the summary's cumulative periods), so a slow start fades out of the reading instead of
weighing on it for the whole run.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser, keyed, since_start


class Detectron2Parser(Parser):
    family = "detectron2"
    signature = re.compile(r"\biter: \d+\s+total_loss: ")
    pattern = re.compile(r"^[^\n\r]*?\biter: (?P<step>\d+)\s+(?P<rest>total_loss: [^\n\r]*)")
    numbers = frozenset({"step", "@time", "@total_loss"})
    items = keyed("time", "total_loss")
    items_in = "rest"
    lenient = frozenset({"@total_loss"})
    hints = ("total_loss:", "data_time:")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        done = f.num("step") + 1
        samples = Samples.build(f.n, cumulative=True, step=done, loss=f.num("@total_loss"),
                                **since_start(f.num("@time"), done))
        return samples, np.ones(f.n, dtype=bool)

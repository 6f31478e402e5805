"""PaddlePaddle's suites (PaddleSeg, PaddleClas, PaddleOCR, PaddleNLP, PaddleDetection)
after their benchmark logging standard: ``[TRAIN] epoch: 1, iter: 20/500, loss: 2.0859, ...
batch_cost: 0.5344, reader_cost: 0.07273, ips: 3.7425 samples/sec``; the older
``epoch=1, iter=5/100, ... batch_cost=0.8913``; PaddleClas' ``train step:50 , ...
batch_cost: 0.28419 s``; PaddleNLP's ``global step 95 / 22140, ... avg_batch_cost: 0.67439
sec, avg_samples: 64.00000, ips: 94.9 sample/sec``.

``batch_cost`` is the mean time of an iteration over the logging interval, reader time
included (windowed); ``ips`` the samples per second; ``avg_samples`` the batch.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser, keyed

_LINE = (r"[^\n\r]*?\b(?:iter|step)[=:]?\s*(?P<step>\d+)(?:\s*/\s*(?P<total>\d+))?"
         r"(?P<rest>[^\n\r]*?\b(?:avg_)?batch_cost[=:][^\n\r]*)")


class PaddleParser(Parser):
    family = "paddle"
    signature = re.compile(r"\b(?:iter|step)[=:]?\s*\d+[^\n\r]*\b(?:avg_)?batch_cost[=:] ?[\d.]+")
    pattern = re.compile(rf"^{_LINE}")
    numbers = frozenset({"step", "total", "@batch_cost", "@avg_batch_cost", "@ips", "@loss",
                         "@avg_samples"})
    items = keyed("avg_batch_cost", "batch_cost", "ips", "loss", "avg_samples")
    items_in = "rest"
    lenient = frozenset({"@loss"})
    hints = ("batch_cost", "reader_cost", "ips:")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        cost = np.where(f.has("@batch_cost"), f.num("@batch_cost"), f.num("@avg_batch_cost"))
        samples = Samples.build(f.n, step=f.num("step"), total_steps=f.num("total"),
                                iter_time_s=cost, samples_per_s=f.num("@ips"),
                                batch_size=f.num("@avg_samples"), loss=f.num("@loss"))
        return samples, np.ones(f.n, dtype=bool)

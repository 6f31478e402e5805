"""maskrcnn-benchmark's ``MetricLogger``: ``eta: 11:21:28  iter: 1120  loss: 1.4617 (1.4511)
... time: 0.5088 (0.4600)  data: 0.0164 (0.0177) ... lr: 0.020000  max mem: 3150``.

Each meter prints ``median (global average)``. The median of the last 20 iterations would
under-read a job with periodic slow iterations; the global average since the start is the
mean cost, differenced between lines into the mean of the iterations between them.
``iter`` counts from 1 (it is incremented before the meters are updated).
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser, since_start

_LINE = (rf"[^\n\r]*?\biter: (?P<step>\d+)\s+loss: (?P<loss>{NUM}) \([^\n\r]*?"
         rf"\btime: (?P<med>{NUM}) \((?P<avg>{NUM})\)")


class MaskRcnnBenchmarkParser(Parser):
    family = "maskrcnn_benchmark"
    signature = re.compile(r"\biter: \d+\s+loss: \S+ \(\S+\)[^\n\r]*\btime: \S+ \(")
    pattern = re.compile(rf"^{_LINE}")
    numbers = frozenset({"step", "loss", "med", "avg"})
    hints = ("iter:", "max mem:")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        done = f.num("step")
        samples = Samples.build(f.n, cumulative=True, step=done, loss=f.num("loss"),
                                **since_start(f.num("avg"), done))
        return samples, np.ones(f.n, dtype=bool)

"""MXNet / Gluon's ``Speedometer`` callback (Module.fit and the Gluon examples).

``INFO:root:Epoch[3] Batch [100]\\tSpeed: 412.34 samples/sec\\taccuracy=0.98`` — the rate of the
batches since the previous line (windowed); the R package prints the same without the
``Epoch[N]``. Lines may carry a logger prefix (``2019-08-21 14:56:44,024 INFO``,
``Node[0]``) and be quoted (``> ``): anything before ``Epoch[`` is accepted.

The batch counter restarts every epoch and no line says how many batches an epoch has, so
no step is emitted: a step going back would read as a restart. The lines give samples/s
only (throughput-only; the batch size is not printed).
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser

_LINE = (rf"[^\n\r]*?\b(?:Epoch\[(?P<ep>\d+)\] )?Batch \[(?P<b>\d+)\]\s+"
         rf"Speed: (?P<sps>{NUM}) samples/sec")


class MxnetParser(Parser):
    family = "mxnet"
    signature = re.compile(r"\bBatch \[\d+\]\s+Speed: [\d.]+ samples/sec")
    pattern = re.compile(rf"^{_LINE}")
    numbers = frozenset({"ep", "b", "sps"})
    keywords = ("samples/sec",)
    hints = ("Speed:", "samples/sec", "Batch [")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        samples = Samples.build(f.n, epoch=f.num("ep"), samples_per_s=f.num("sps"))
        return samples, np.ones(f.n, dtype=bool)

"""Megatron-LM's ``training_log`` lines and its validation reports.

`` [2024-05-01 10:00:00] iteration       10/     100 | consumed samples:          640 |
elapsed time per iteration (ms): 1234.5 | learning rate: 1.5E-04 | global batch size:    64 |
lm loss: 1.0E+01 | loss scale: 1.0 | ...``, and ``validation loss at iteration 100 | lm loss
value: ...``. The elapsed time is averaged over the log interval: a windowed figure. The
global batch size on every line is what batch-size ramp-up regimes are read from.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser

_ITER = (r"[^\n\r]*?\biteration\s+(?P<step>\d+)/\s*(?P<total>\d+) \|"
         r"[^\n\r]*?elapsed time per iteration \(ms\): (?P<ms>[\d.]+)"
         r"(?:[^\n\r]*?global batch size:\s*(?P<batch>\d+))?"
         r"(?:[^\n\r]*?lm loss: (?P<loss>[-+\d.eE]+|nan|inf))?")
_VALID = r"[^\n\r]*?validation loss at iteration (?P<vstep>\d+)"


class MegatronParser(Parser):
    family = "megatron"
    signature = re.compile(r"\biteration\s+\d+/\s*\d+ \|.*elapsed time per iteration \(ms\)")
    pattern = re.compile(rf"^(?:{_ITER}|{_VALID})")
    numbers = frozenset({"step", "total", "ms", "batch", "loss", "vstep"})
    keywords = ("elapsed time per iteration",)

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        valid = f.has("vstep")
        samples = Samples.build(
            f.n, eval=valid, step=np.where(valid, f.num("vstep"), f.num("step")),
            total_steps=f.num("total"), iter_time_s=f.num("ms") / 1000.0,
            batch_size=f.num("batch"), loss=f.num("loss"))
        return samples, np.ones(f.n, dtype=bool)

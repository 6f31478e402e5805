"""litgpt / lit-gpt: ``iter 76 step 38: loss 10.8259, iter time: 197.87ms`` and the newer
``Epoch 1 | iter 46 step 1 | loss train: 3.724, val: n/a | iter time: 45.73 ms``.

An ``iter`` is one micro-batch; ``step`` counts optimizer steps (one per gradient
accumulation cycle, marked ``(optimizer.step)``/``(opt.step)``; those iterations are a
little slower, a periodic cost the mean keeps). The iteration counted is the iter, whose
time is what the line states.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser

_LINE = (rf"[^\n\r]*?\biter (?P<step>\d+)(?: \|)? step (?P<opt>\d+)\b"
         rf"(?:[^\n\r]*?\bloss(?: train)?:? (?P<loss>{NUM}))?"
         rf"[^\n\r]*?\biter time: (?P<t>{NUM})\s*(?P<unit>ms|s)\b")


class LitGptParser(Parser):
    family = "litgpt"
    signature = re.compile(r"\biter \d+(?: \|)? step \d+\b[^\n\r]*\biter time: ")
    pattern = re.compile(rf"^{_LINE}")
    numbers = frozenset({"step", "opt", "loss", "t"})
    texts = frozenset({"unit"})
    lenient = frozenset({"loss"})
    hints = ("iter time:",)

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        scale = np.where(f.text("unit") == "ms", 1e-3, 1.0)
        samples = Samples.build(f.n, step=f.num("step"), iter_time_s=f.num("t") * scale,
                                loss=f.num("loss"))
        return samples, np.ones(f.n, dtype=bool)

"""Hugging Face Accelerate training scripts: the diffusers ``train_*.py`` scripts, the
transformers ``*_no_trainer.py`` examples and the many scripts written after them.

Accelerate prints no progress line of its own; these scripts log a header through
Accelerate's logger and then draw a tqdm bar over the optimisation steps:

- ``***** Running training *****`` ... ``Total train batch size (w. parallel, distributed &
  accumulation) = 256`` ... ``Total optimization steps = 101`` (behind the logger's
  ``03/06/2024 17:32:14 - INFO - __main__ -`` prefix): the samples of one step, which the
  bar's steps are;
- ``Steps:   1%|          | 1/101 [00:04<08:00,  4.80s/it, lr=1e-5, step_loss=0.0609]``
  (diffusers names its bar ``Steps``; the no_trainer examples draw it bare). The rate is
  tqdm's smoothed one (windowed). diffusers redraws the bar for every micro-batch of a
  gradient accumulation, with the same step and a new ``step_loss``: only a step's first
  drawing is read (the first bar of a log is taken for a redraw, as what it redraws is not
  known: it is a warm-up line anyway).
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser
from gpufair.profiler.parsers.tqdm import BAR, seconds_per_iter

_HEADER = (r"[^\n\r]*?\bTotal (?:train batch size \(w\. parallel, distributed & accumulation\)"
           r"|(?P<opt>optimization steps)) = (?P<value>[\d,]+)")
_BAR = (rf"[^\n\r|]*?\d+%\|[^|\n\r]*\|\s*{BAR}"
        rf"(?:[^\n\r\]]*?\b(?:step_)?loss=(?P<loss>{NUM}|nan|inf))?")


class AccelerateParser(Parser):
    family = "accelerate"
    signature = re.compile(r"Total train batch size \(w\. parallel, distributed & accumulation\)"
                           r"|^[Ss]teps:\s+\d+%\|")
    pattern = re.compile(rf"^(?:{_HEADER}|{_BAR})")
    numbers = frozenset({"value", "n", "total", "rate", "loss"})
    texts = frozenset({"unit"})
    lenient = frozenset({"rate", "loss"})  # tqdm prints "?" before its first rate
    hints = ("Running training", "Total train batch size", "Steps:")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        header, bar = f.has("value"), f.has("n")
        value = f.num("value")  # (a count printed with thousands separators is not read)
        steps_stated = header & f.has("opt")
        batch = f.carry(np.where(header & ~f.has("opt"), value, np.nan), "batch")
        total = f.carry(np.where(steps_stated, value, np.nan), "total")
        done = f.num("n")
        rows = np.flatnonzero(bar)
        redrawn = np.zeros(f.n, dtype=bool)  # the same step drawn again: not a step
        if len(rows):  # (a chunk of header lines only: no bar to compare)
            redrawn[rows] = f.previous(rows, done, "n") == done[rows]
        drawn = bar & (done != 0) & ~redrawn  # (drawn before the first step: no rate yet)
        samples = Samples.build(
            f.n, step=done, total_steps=np.where(bar, f.num("total"), total),
            iter_time_s=seconds_per_iter(f.num("rate"), f.text("unit")),
            batch_size=np.where(drawn, batch, np.nan), loss=f.num("loss"))
        return samples, drawn

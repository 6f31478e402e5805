"""NVIDIA NeMo 2 (and BioNeMo, NeMo-Run) progress lines of its Megatron strategy.

``Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 |
global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in
s: 0.03146`` — ``train_step_timing`` is the time of the step (NeMo's exp_manager timer,
reduced over the logging interval: windowed). NeMo 1's progress bar is a Lightning bar
and read by the lightning family.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser

_LINE = (rf"[^\n\r]*?\bTraining epoch (?P<ep>\d+), iteration (?P<i>\d+)/(?P<n>\d+)"
         rf"(?:[^\n\r]*?\bglobal_batch_size: (?P<batch>\d+))?"
         rf"(?:[^\n\r]*?\bglobal_step: (?P<gstep>\d+))?"
         rf"(?:[^\n\r]*?\breduced_train_loss: (?P<loss>{NUM}))?"
         rf"(?:[^\n\r]*?\btrain_step_timing in s: (?P<t>{NUM}))?")


class NemoParser(Parser):
    family = "nemo"
    signature = re.compile(r"\bTraining epoch \d+, iteration \d+/\d+ \|")
    pattern = re.compile(rf"^{_LINE}")
    numbers = frozenset({"ep", "i", "n", "batch", "gstep", "loss", "t"})
    lenient = frozenset({"loss"})
    hints = ("train_step_timing", "reduced_train_loss", "Training epoch")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        # global_step counts across epochs; the iteration restarts every epoch
        step = np.where(f.has("gstep"), f.num("gstep"), f.num("i"))
        samples = Samples.build(f.n, step=step, epoch=f.num("ep"), iter_time_s=f.num("t"),
                                batch_size=f.num("batch"), loss=f.num("loss"))
        return samples, np.ones(f.n, dtype=bool)

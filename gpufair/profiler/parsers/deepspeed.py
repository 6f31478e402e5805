"""DeepSpeed's engine and throughput-timer lines.

- ``[Rank 0] step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]`` (every steps_per_print);
- ``epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=123.4,
  CurrSamplesPerSec=130.2, MemAllocated=1.2GB, MaxMemAllocated=2.3GB`` — the current rate is
  the windowed figure used; the running average is kept for the cumulative estimate;
- ``train_batch_size ............. 64`` from the config dump gives the global batch size.
"""

from __future__ import annotations

import re

from gpufair.profiler.events import Sample
from gpufair.profiler.parsers.base import Parser

_STEP = r".*?\bstep=(?P<step>\d+), skipped=(?P<skipped>\d+)"
_TPUT = (r".*?epoch=(?P<ep>\d+)/micro_step=(?P<micro>\d+)/global_step=(?P<gstep>\d+), "
         r"RunningAvgSamplesPerSec=(?P<avg>[\d.eE+-]+), CurrSamplesPerSec=(?P<cur>[\d.eE+-]+)")
_CONFIG = r".*?\btrain_batch_size \.+ (?P<batch>\d+)"


class DeepSpeedParser(Parser):
    family = "deepspeed"
    signature = re.compile(r"RunningAvgSamplesPerSec=|\bstep=\d+, skipped=\d+, lr=")
    pattern = re.compile(rf"^(?:{_TPUT}|{_STEP}|{_CONFIG})", re.M)
    keywords = ("CurrSamplesPerSec=",)
    context_pattern = re.compile(r"^.*?\btrain_batch_size \.+ \d+.*$", re.M)

    def convert(self, m: re.Match[str]) -> Sample | None:
        if m.group("batch") is not None:
            self.context["batch"] = int(m.group("batch"))
            return None
        batch = self.context.get("batch")
        if m.group("gstep") is not None:
            return Sample(step=int(m.group("gstep")), epoch=float(m.group("ep")),
                          samples_per_s=float(m.group("cur")), batch_size=batch)
        return Sample(step=int(m.group("step")), batch_size=batch)

"""DeepSpeed's engine and throughput-timer lines.

- ``[Rank 0] step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]`` (every steps_per_print);
- ``epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=123.4,
  CurrSamplesPerSec=130.2, MemAllocated=1.2GB, MaxMemAllocated=2.3GB`` — the current rate is
  the windowed figure used; the running average is kept for the cumulative estimate;
- older releases: ``[timer.py:197:stop] 0/17, RunningAvgSamplesPerSec=158.3,
  CurrSamplesPerSec=159.6, ...`` and ``0/40, SamplesPerSec=83.48`` (a running average);
- the pipeline engine: ``steps: 10 loss: 0.6931 iter time (s): 0.500 samples/sec: 128.000``
  (time per step and throughput both stated: the time is read);
- ``train_batch_size ............. 64`` from the config dump gives the global batch size.
Without a batch size these are throughput only: the report gives samples/s.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser

_STEP = r".*?\bstep=(?P<step>\d+), skipped=(?P<skipped>\d+)"
_TPUT = (r".*?(?:epoch=(?P<ep>\d+)/micro_step=(?P<micro>\d+)/global_step=(?P<gstep>\d+)"
         r"|\] (?P<ep2>\d+)/(?P<gstep2>\d+)), "
         r"(?:RunningAvgSamplesPerSec=(?P<avg>[\d.eE+-]+), CurrSamplesPerSec=(?P<cur>[\d.eE+-]+)"
         r"|SamplesPerSec=(?P<sps>[\d.eE+-]+))")
_CONFIG = r".*?\btrain_batch_size \.+ (?P<batch>\d+)"
_PIPE = (r".*?\bsteps: (?P<psteps>\d+) loss: (?P<ploss>[\d.eE+-]+) "
         r"iter time \(s\): (?P<ptime>[\d.eE+-]+) samples/sec: (?P<psps>[\d.eE+-]+)")


class DeepSpeedParser(Parser):
    family = "deepspeed"
    signature = re.compile(r"RunningAvgSamplesPerSec=|\bstep=\d+, skipped=\d+, lr=|"
                           r"\] \d+/\d+, SamplesPerSec=|iter time \(s\): [\d.]+ samples/sec: ")
    pattern = re.compile(rf"^(?:{_TPUT}|{_PIPE}|{_STEP}|{_CONFIG})")
    numbers = frozenset({"step", "ep", "gstep", "cur", "batch", "ep2", "gstep2", "sps",
                         "psteps", "ploss", "ptime", "psps"})
    keywords = ("CurrSamplesPerSec=",)
    hints = ("SamplesPerSec", "samples/sec", "train_batch_size")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        batch = f.carry(f.num("batch"), "batch")
        tput, old, pipe = f.has("gstep"), f.has("gstep2"), f.has("psteps")
        step = np.where(tput, f.num("gstep"), np.where(old, f.num("gstep2"), f.num("step")))
        samples = Samples.build(
            f.n, step=np.where(pipe, f.num("psteps"), step),
            epoch=np.where(old, f.num("ep2"), f.num("ep")), iter_time_s=f.num("ptime"),
            loss=f.num("ploss"),
            samples_per_s=np.where(f.has("sps"), f.num("sps"),
                                   np.where(pipe, f.num("psps"), f.num("cur"))),
            batch_size=batch)
        return samples, ~f.has("batch")

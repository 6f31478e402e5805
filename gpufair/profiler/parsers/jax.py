"""JAX trainers: Flax examples and t5x (clu's metric writer) and MaxText.

- clu ``LoggingWriter``: ``[400] steps_per_second=1.583725, train_accuracy=..., train_loss=...``
  (usually behind an absl prefix, one copy per host: the copies of a step agree on the
  loss and are dropped as duplicates); ``steps_per_second`` covers the steps since the
  previous report (windowed), as t5x's ``timing/steps_per_second``;
- MaxText: ``completed step: 15107, seconds: 2.167, TFLOP/s/device: ..., loss: 2.191`` —
  the time of that one step.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import LOG_PREFIX, NUM, Parser, keyed

_CLU = (r"\[(?P<cstep>\d+)\] (?P<rest>[^\n\r]*?\b(?:timing/)?steps_per_sec(?:ond)?="
        r"[^\n\r]*)")
_MAXTEXT = (rf"completed step: (?P<mstep>\d+), seconds: (?P<sec>{NUM})"
            rf"(?:[^\n\r]*?\bloss: (?P<mloss>{NUM}))?")


class JaxParser(Parser):
    family = "jax"
    signature = re.compile(r"^[^\n\r]*?\[\d+\] [^\n\r]*\bsteps_per_sec(?:ond)?=|"
                           r"\bcompleted step: \d+, seconds: ")
    pattern = re.compile(rf"^{LOG_PREFIX}(?:{_CLU}|{_MAXTEXT})")
    numbers = frozenset({"cstep", "mstep", "sec", "mloss", "@steps_per_second",
                         "@timing/steps_per_second", "@steps_per_sec", "@train_loss", "@loss"})
    items = keyed("timing/steps_per_second", "steps_per_second", "steps_per_sec", "train_loss",
                  "loss", sep="=")
    items_in = "rest"
    lenient = frozenset({"@train_loss", "@loss", "mloss"})
    hints = ("steps_per_second=", "completed step:")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        clu = f.has("cstep")
        rate = f.num("@steps_per_second")
        for name in ("@timing/steps_per_second", "@steps_per_sec"):
            rate = np.where(np.isnan(rate), f.num(name), rate)
        loss = np.where(np.isnan(f.num("@train_loss")), f.num("@loss"), f.num("@train_loss"))
        samples = Samples.build(
            f.n, step=np.where(clu, f.num("cstep"), f.num("mstep")),
            steps_per_s=np.where(clu, rate, np.nan), iter_time_s=f.num("sec"),
            loss=np.where(clu, loss, f.num("mloss")))
        f.bad |= clu & np.isnan(rate)
        return samples, np.ones(f.n, dtype=bool)

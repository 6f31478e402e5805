"""NiftyNet's application driver: ``INFO:niftynet:2018-02-04 05:22:25,146: Training iter
3151, loss=0.3117 (3.145937s)`` -- the time of that one iteration, data loading included
(waits on the loader show as iterations many times slower: part of the mean cost).
``Validation iter`` lines are evaluation.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser

_LINE = (rf"[^\n\r]*?\b(?P<phase>Training|Validation) iter (?P<step>\d+), "
         rf"loss=(?P<loss>{NUM}|nan|inf)[^\n\r]*?\((?P<t>{NUM})s\)")


class NiftyNetParser(Parser):
    family = "niftynet"
    signature = re.compile(r"\bTraining iter \d+, loss=\S+ \([\d.]+s\)")
    pattern = re.compile(rf"^{_LINE}")
    numbers = frozenset({"step", "loss", "t"})
    texts = frozenset({"phase"})
    lenient = frozenset({"loss"})
    hints = ("Training iter",)

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        samples = Samples.build(f.n, eval=f.text("phase") == "Validation", step=f.num("step"),
                                iter_time_s=f.num("t"), loss=f.num("loss"))
        return samples, np.ones(f.n, dtype=bool)

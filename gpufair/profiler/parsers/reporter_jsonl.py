"""Lines written by :mod:`gpufair.profiler.reporter` (``{"gpufair": 1, "iteration": ...}``).

Exact numbers from the job itself: nothing is inferred except seconds per iteration from the
samples rate when only that is given. Each field is read where the record states it, so
records with fields missing, reordered or added still parse; a field of the wrong JSON type
(a string or boolean where a number belongs) makes the line malformed.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser

# sample field <- record key
_FIELDS = {"step": "@iteration", "total_steps": "@total_iterations", "epoch": "@epoch",
           "total_epochs": "@total_epochs", "iter_time_s": "@iter_time_s",
           "samples_per_s": "@samples_per_s", "batch_size": "@batch_size", "loss": "@loss"}
_ITEM = re.compile(r'"(?P<key>\w+)": ?(?P<value>-?[0-9][-+0-9.eE]*|null|true|false|"[^"]*")')


class ReporterParser(Parser):
    family = "reporter"
    signature = re.compile(r'^\{"gpufair": ?1\b')
    signature_reads_digits = True  # version 1 only: ``{"gpufair": 2`` has the same shape
    pattern = re.compile(r'^\{"gpufair": ?(?P<version>[0-9]+)\b[^\n\r]*\}[^\S\n\r]*$')
    numbers = frozenset({"version", *_FIELDS.values()})
    texts = frozenset({"@phase"})
    items = _ITEM

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        samples = Samples.build(f.n, eval=f.text("@phase") == '"eval"',
                                **{field: f.num(key) for field, key in _FIELDS.items()})
        return samples, f.num("version") == 1

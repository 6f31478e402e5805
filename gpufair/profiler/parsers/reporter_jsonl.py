"""Lines written by :mod:`gpufair.profiler.reporter` (``{"gpufair": 1, "iteration": ...}``).

Exact numbers from the job itself: nothing is inferred except seconds per iteration from the
samples rate when only that is given.
"""

from __future__ import annotations

import json
import re

from gpufair.profiler.events import TRAIN, Sample
from gpufair.profiler.parsers.base import Parser

_FIELDS = {"iteration": "step", "total_iterations": "total_steps", "epoch": "epoch",
           "total_epochs": "total_epochs", "iter_time_s": "iter_time_s",
           "samples_per_s": "samples_per_s", "batch_size": "batch_size", "loss": "loss"}
_KEYS = frozenset(_FIELDS)
_INTS = {"step", "total_steps", "total_epochs", "batch_size"}


class ReporterParser(Parser):
    family = "reporter"
    signature = re.compile(r'^\{"gpufair": ?1\b')
    pattern = re.compile(r'^(?P<line>\{"gpufair": ?1\b[^\n\r]*)', re.M)

    def convert(self, m: re.Match[str]) -> Sample | None:
        record = json.loads(m.group("line"))
        if not isinstance(record, dict):
            raise ValueError("not an object")
        sample = Sample(phase=str(record.get("phase", TRAIN)))
        # only the fields the record has (any bad one drops the whole line, so order is moot)
        for key in _KEYS.intersection(record):
            value = record[key]
            if value is None:
                continue
            attr = _FIELDS[key]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{key} is not a number")
            setattr(sample, attr, int(value) if attr in _INTS else float(value))
        return sample

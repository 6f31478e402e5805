"""Measured throughputs (Gavel/Shockwave format): isolated iterations/s per job type and gang."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpufair.adapters.simulator.trace import split_job_type
from gpufair.errors import InputError, parse_json, read_text

_KEY = re.compile(r"^\('(.*)', (\d+)\)$")
#: A measured rate is 0 (the job cannot run on that GPU type) or within these iterations/s: a
#: rate of 1e-300 would make one job run for longer than the universe has existed, and the
#: simulator step through every round of it.
MIN_RATE, MAX_RATE = 1e-6, 1e6
#: Largest gang a key may name (as many GPUs as the largest simulated cluster).
MAX_GANG = 65536


@dataclass(frozen=True)
class Throughputs:
    """``rate(gpu_type, job_type, scale_factor)`` in iterations/s for the whole job.

    Only the isolated (``null``) values are kept: co-location pairs feed packing policies,
    which gpufair does not implement, and ``*_unconsolidated`` entries are read by no code path
    of either artifact (FORMATS.md §5), so they are kept apart for placement-aware policies.
    """

    isolated: Mapping[str, Mapping[tuple[str, int], float]]
    unconsolidated: Mapping[str, Mapping[tuple[str, int], float]]
    source: str = "<throughputs>"

    def gpu_types(self) -> tuple[str, ...]:
        return tuple(self.isolated)

    def rate(self, gpu_type: str, job_type: str, scale_factor: int) -> float | None:
        return self.isolated.get(gpu_type, {}).get((job_type, scale_factor))

    def batch_rates(self, gpu_type: str, model: str, scale_factor: int
                    ) -> tuple[tuple[int, float], ...]:
        """(batch size, rate) of every measured batch size of ``model`` on this gang."""
        out = []
        for (job_type, sf), rate in self.isolated.get(gpu_type, {}).items():
            name, batch = split_job_type(job_type)
            if sf == scale_factor and name == model and batch is not None:
                out.append((batch, rate))
        return tuple(sorted(out))


def parse_key(key: str, source: str, where: str) -> tuple[str, int]:
    match = _KEY.match(key)
    if not match:
        raise InputError(source, "expected a key like \"('ResNet-18 (batch size 32)', 1)\"",
                         field=where, value=key)
    gang = int(match.group(2)) if len(match.group(2)) <= 6 else MAX_GANG + 1
    if not 1 <= gang <= MAX_GANG:
        raise InputError(source, f"the gang size must be from 1 to {MAX_GANG} GPUs",
                         field=where, value=key)
    return match.group(1), gang


def throughputs_from_dict(data: object, source: str = "<throughputs>") -> Throughputs:
    if not isinstance(data, dict) or not data:
        raise InputError(source, "expected a non-empty JSON object keyed by GPU type")
    isolated: dict[str, dict[tuple[str, int], float]] = {}
    unconsolidated: dict[str, dict[tuple[str, int], float]] = {}
    for worker, entries in data.items():
        if not isinstance(entries, dict):
            raise InputError(source, "expected an object of job entries", field=worker)
        table: dict[tuple[str, int], float] = {}
        for key, entry in entries.items():
            where = f"{worker}.{key}"
            job = parse_key(key, source, where)
            if not isinstance(entry, dict) or "null" not in entry:
                raise InputError(source, "expected an object with a 'null' throughput",
                                 field=where)
            value = entry["null"]
            if not _rate_ok(value):
                raise InputError(source, f"throughput must be 0 (cannot run) or a number of "
                                 f"iterations/s from {MIN_RATE:g} to {MAX_RATE:g}",
                                 field=f"{where}.null", value=value)
            table[job] = float(value)
        if worker.endswith("_unconsolidated"):
            unconsolidated[worker.removesuffix("_unconsolidated")] = table
        else:
            isolated[worker] = table
    if not isolated:
        raise InputError(source, "no consolidated GPU type (e.g. 'v100') in the file")
    return Throughputs(isolated, unconsolidated, source)


def _rate_ok(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return value == 0 or MIN_RATE <= value <= MAX_RATE   # exact for ints of any size


def load_throughputs(path: str | Path) -> Throughputs:
    text = read_text(path, "throughputs file")
    return throughputs_from_dict(parse_json(text, str(path)), str(path))

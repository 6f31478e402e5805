"""Measured throughputs (Gavel/Shockwave format): isolated iterations/s per job type and gang."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpufair.adapters.simulator.trace import split_job_type
from gpufair.errors import InputError

_KEY = re.compile(r"^\('(.*)', (\d+)\)$")


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
    return match.group(1), int(match.group(2))


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
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 \
                    or value != value:
                raise InputError(source, "throughput must be a number >= 0",
                                 field=f"{where}.null", value=value)
            table[job] = float(value)
        if worker.endswith("_unconsolidated"):
            unconsolidated[worker.removesuffix("_unconsolidated")] = table
        else:
            isolated[worker] = table
    if not isolated:
        raise InputError(source, "no consolidated GPU type (e.g. 'v100') in the file")
    return Throughputs(isolated, unconsolidated, source)


def load_throughputs(path: str | Path) -> Throughputs:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot read throughputs file: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"invalid JSON: {exc.msg} (column {exc.colno})",
                         line=exc.lineno) from exc
    return throughputs_from_dict(data, str(path))

"""Job traces: Shockwave's 12-column, Gavel's 10-column and the old 7-column MSR/Philly format.

The format is recognised from the column count of the first job line and must hold for every
line, so a truncated or mixed file is caught at the line where it goes wrong.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from gpufair.errors import InputError, read_text
from gpufair.model import Adaptation

_BATCH = re.compile(r"^(\S+)(?: .*\(batch size (\d+)\))?$")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One trace line. ``total_steps`` counts iterations at the initial batch size."""

    index: int
    job_type: str
    total_steps: int
    scale_factor: int
    arrival_s: float
    mode: Adaptation = Adaptation.STATIC
    priority_weight: float = 1.0
    slo: float | None = None
    #: the job's wall-time limit where its source has one (a history's Timelimit): what a
    #: backfill policy plans with; the trace formats have none
    time_limit_s: float | None = None
    #: exactly this many nodes with equal GPUs on each (a history's ``--nodes``); None: any
    nodes: int | None = None
    duration_s: float | None = None
    line: int = 0
    source: str = "<trace>"   # the file, so that later checks can name it
    #: who the job belongs to (a replayed history's account, user, ...); the trace formats
    #: have no such column, so their jobs all share one tenant, as the artifacts' do
    tenant: str = "default"
    #: the app (a hyper-parameter search, Themis's unit of fairness) the job belongs to;
    #: None: an app of its own. Only generated traces set it (the trace formats have no column)
    app: str | None = None

    @property
    def model(self) -> str:
        return split_job_type(self.job_type)[0]

    @property
    def batch_size(self) -> int | None:
        return split_job_type(self.job_type)[1]


def split_job_type(job_type: str) -> tuple[str, int | None]:
    """``'ResNet-18 (batch size 32)'`` → ``('ResNet-18', 32)``; ``'A3C'`` → ``('A3C', None)``."""
    match = _BATCH.match(job_type)
    if not match:
        return job_type, None
    return match.group(1), int(match.group(2)) if match.group(2) else None


def job_type_with_batch(job_type: str, batch_size: int) -> str:
    model, _ = split_job_type(job_type)
    return f"{model} (batch size {batch_size})"


# column layouts: name -> index, per column count
_LAYOUTS: dict[int, dict[str, int]] = {
    12: {"job_type": 0, "total_steps": 5, "scale_factor": 6, "mode": 7, "priority_weight": 8,
         "slo": 9, "duration": 10, "arrival": 11},
    10: {"job_type": 0, "total_steps": 5, "scale_factor": 6, "priority_weight": 7, "slo": 8,
         "arrival": 9},
    7: {"job_type": 0, "total_steps": 4, "arrival": 5, "scale_factor": 6},
}
FORMAT_NAMES = {12: "shockwave-12", 10: "gavel-10", 7: "msr-7"}


def parse_trace(text: str, source: str = "<trace>") -> list[TraceJob]:
    jobs: list[TraceJob] = []
    layout: dict[str, int] | None = None
    width = 0
    previous_arrival = float("-inf")
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        cols = raw.split("\t")
        if layout is None:
            width = len(cols)
            if width not in _LAYOUTS:
                raise InputError(source, f"expected 12 (Shockwave), 10 (Gavel) or 7 (MSR) "
                                 f"tab-separated columns, found {width}", line=lineno)
            layout = _LAYOUTS[width]
        elif len(cols) != width:
            raise InputError(source, f"expected {width} tab-separated columns like the first "
                             f"line ({FORMAT_NAMES[width]}), found {len(cols)}", line=lineno)
        job = _parse_line(cols, layout, len(jobs), source, lineno)
        if job.arrival_s < previous_arrival:
            raise InputError(source, "arrival times must be non-decreasing",
                             line=lineno, field="arrival_time", value=job.arrival_s)
        previous_arrival = job.arrival_s
        jobs.append(job)
    if not jobs:
        raise InputError(source, "the trace has no jobs")
    return jobs


#: What a field may hold. A trace is data, not a program: a job of 1e308 steps or arriving in
#: 1e308 s would make the simulator step through rounds until the heat death of the
#: universe, so every number has a range, wide enough for every published trace (the largest
#: has 3.2e8 steps, arrivals up to 8.5e6 s, gangs of 32).
_RANGES: dict[str, tuple[float, float, str]] = {
    "total_steps": (1, 1e10, ""),
    "scale_factor": (1, 4096, " GPU"),
    "arrival": (0, 1e9, " s"),
    "priority_weight": (1e-6, 1e6, ""),
    "slo": (-1e9, 1e9, " s"),              # negative: no SLO
    "duration": (0, 1e9, " s"),
}


def _number(cols: list[str], layout: dict[str, int], name: str, kind: type, source: str,
            lineno: int) -> float | int:
    """The field as a number within its range, or an InputError naming line and field."""
    text = cols[layout[name]].strip()
    lo, hi, unit = _RANGES[name]
    try:
        if not text.isascii() or "_" in text:   # float() takes "١٢" and "1_0": a trace not
            raise ValueError                     # written by a program
        number = float(text)
    except ValueError:
        raise InputError(source, f"expected {'a number' if kind is float else 'an integer'}",
                         line=lineno, field=name, value=text) from None
    if not math.isfinite(number):
        raise InputError(source, "must be finite", line=lineno, field=name, value=text)
    shown: float | int = int(number) if kind is int and number.is_integer() else number
    if number < lo:
        raise InputError(source, f"must be >= {lo:g}{unit}", line=lineno, field=name,
                         value=shown)
    if number > hi:
        raise InputError(source, f"must be <= {hi:g}{unit}{'s' * (unit == ' GPU')} (larger "
                         "is no real job)", line=lineno, field=name, value=shown)
    if kind is int:
        if not number.is_integer():
            raise InputError(source, "expected an integer", line=lineno, field=name,
                             value=text)
        return int(number)
    return number


def _parse_line(cols: list[str], layout: dict[str, int], index: int, source: str,
                lineno: int) -> TraceJob:
    job_type = cols[layout["job_type"]].strip()
    if not job_type:
        raise InputError(source, "empty job type", line=lineno, field="job_type")
    steps = int(_number(cols, layout, "total_steps", int, source, lineno))
    sf = int(_number(cols, layout, "scale_factor", int, source, lineno))
    arrival = float(_number(cols, layout, "arrival", float, source, lineno))
    mode = Adaptation.STATIC
    if "mode" in layout:
        text = cols[layout["mode"]].strip().lower()
        try:
            mode = Adaptation(text)
        except ValueError:
            raise InputError(source, "expected static, accordion or gns", line=lineno,
                             field="mode", value=text) from None
    weight = 1.0
    if "priority_weight" in layout:
        weight = float(_number(cols, layout, "priority_weight", float, source, lineno))
    slo = None
    if "slo" in layout:
        slo_value = float(_number(cols, layout, "slo", float, source, lineno))
        slo = slo_value if slo_value >= 0 else None
    duration = None
    if "duration" in layout:
        duration = float(_number(cols, layout, "duration", float, source, lineno))
    return TraceJob(index=index, job_type=job_type, total_steps=steps, scale_factor=sf,
                    arrival_s=arrival, mode=mode, priority_weight=weight, slo=slo,
                    duration_s=duration, line=lineno, source=source)


def load_trace(path: str | Path) -> list[TraceJob]:
    return parse_trace(read_text(path, "trace"), str(path))

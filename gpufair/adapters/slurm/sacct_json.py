"""Saved ``sacct --json`` output as a job history (Slurm 22.05 onward).

The shapes differ by release, and the reader takes each where it differs:

- 22.05 (data_parser 0.0.38): ``state.current`` a string, ``time.limit`` a number
  (minutes, the job's time limit, as ``allocation_nodes`` is its node count),
  ``array.task_id`` a number or null, ``user``/``account``/``partition``/``qos`` at the top;
- 23.02 onward (0.0.39+): ``state.current`` a list of flags (``["COMPLETED"]``), numbers
  that may be unset as ``{"set": bool, "infinite": bool, "number": N}``, ``array.task_id``
  such an object;
- every release: ``time.submission/start/end`` epoch seconds with 0 for "not yet",
  ``tres.allocated``/``tres.requested`` lists of ``{"type", "name", "id", "count"}`` where
  GPUs are ``type == "gres"`` with ``name`` ``gpu`` or ``gpu:TYPE``; job steps are nested under
  each job (``steps``), so every top-level item is an allocation.

Errors name the item: ``jobs[3].time.end``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpufair.adapters.history.table import History, build_history
from gpufair.adapters.slurm.sacct_limits import MAX_NODES, limit_from_minutes
from gpufair.errors import InputError, json_kind, parse_json

_BAD_BYTE = re.compile("[\udc80-\udcff]")
FIELDS = {"job_id": "job_id", "user": "user", "account": "account", "qos": "qos",
          "partition": "partition", "submit": "time.submission", "start": "time.start",
          "end": "time.end", "state": "state.current", "gpus": "tres", "nodes":
          "allocation_nodes", "time_limit_s": "time.limit"}


def read_sacct_json(path: str | Path, *, tenant: str | None = None,
                    now: float | None = None) -> History:
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(source, f"cannot read the history: {exc.strerror or exc}") from None
    # sacct --json writes a job name's bytes as they are: text that is not UTF-8 is kept as
    # it is, and an error only in a field the replay reads
    data = parse_json(raw.decode("utf-8", errors="surrogateescape"), source, unique_keys=False)
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise InputError(source, "expected sacct --json output: an object with a 'jobs' list",
                         field="jobs", value=None if jobs is None else json_kind(jobs))
    rows = [_row(job, i, source) for i, job in enumerate(jobs)]
    columns = ("line", "job_id", "user", "account", "qos", "partition", "submit", "start",
               "end", "state", "gpus", "gpu_type", "nodes", "time_limit_s")
    raw = pd.DataFrame(rows, columns=list(columns))
    if raw.empty:
        raise InputError(source, "the history has no jobs", field="jobs")
    for key in ("submit", "start", "end", "gpus", "nodes", "time_limit_s"):
        raw[key] = raw[key].astype(float)
    return build_history(raw, source, FIELDS, tenant=tenant,
                         now=_clock() if now is None else now, records="jobs")


def _row(job: Any, index: int, source: str) -> tuple:
    where = f"jobs[{index}]"
    if not isinstance(job, dict):
        raise InputError(source, "expected an object", field=where, value=json_kind(job))

    def number(value: Any, name: str) -> float:
        """A number, or an unset ``{"set": false}`` one (NaN); 0 means "not yet" for times."""
        if isinstance(value, dict):
            if not value.get("set", True) or value.get("infinite", False):
                return math.nan
            value = value.get("number")
        if value is None:
            return math.nan
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise InputError(source, "expected a number", field=f"{where}.{name}",
                             value=value)
        return float(value)

    def text(value: Any, name: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise InputError(source, "expected text", field=f"{where}.{name}",
                             value=json_kind(value))
        if _BAD_BYTE.search(value):
            raise InputError(source, "bytes that are not UTF-8", field=f"{where}.{name}",
                             value=value.encode("utf-8", "surrogateescape"))
        return value

    association = job.get("association") if isinstance(job.get("association"), dict) else {}
    times = job.get("time")
    if not isinstance(times, dict):
        raise InputError(source, "expected an object of times", field=f"{where}.time",
                         value=json_kind(times))
    submit, start, end = (number(times.get(k), f"time.{k}") for k in
                          ("submission", "start", "end"))
    start = math.nan if start == 0 else start       # 0: never started / not ended
    tres = job.get("tres")
    if isinstance(tres, dict) and tres.get("allocated") == []:
        start = math.nan      # never allocated: 22.05 gives a job cancelled while pending
    end = math.nan if end == 0 or math.isnan(start) else end   # start = end, the cancel time
    gpus, gpu_type = _gpus(job.get("tres"), where, source)
    return (index, _job_id(job, where, source, number),
            text(job.get("user", association.get("user")), "user"),
            text(job.get("account", association.get("account")), "account"),
            text(job.get("qos"), "qos"),
            text(job.get("partition", association.get("partition")), "partition"),
            submit, start, end, _state(job.get("state"), where, source), gpus, gpu_type,
            _nodes(number(job.get("allocation_nodes"), "allocation_nodes"), where, source),
            _time_limit(number(times.get("limit"), "time.limit"), where, source))


def _nodes(count: float, where: str, source: str) -> float:
    """A node count (NaN: none given; 0, a job never allocated, is none either)."""
    if not math.isnan(count) and (count < 0 or count > MAX_NODES or count != int(count)):
        raise InputError(source, f"expected a whole node count from 1 to {MAX_NODES}",
                         field=f"{where}.allocation_nodes", value=count)
    return math.nan if count == 0 else count


def _time_limit(minutes: float, where: str, source: str) -> float:
    """``time.limit`` (minutes; unset or infinite is NaN already) in seconds, NaN: none."""
    try:
        seconds = limit_from_minutes(minutes)
    except ValueError as exc:
        raise InputError(source, str(exc), field=f"{where}.time.limit", value=minutes) from None
    return math.nan if seconds is None else seconds


def _job_id(job: dict, where: str, source: str, number) -> str:
    """``123``, an array task ``100_3``, or a pending array record ``100_[4-9]``."""
    job_id = number(job.get("job_id"), "job_id")
    if math.isnan(job_id):
        raise InputError(source, "expected a job id", field=f"{where}.job_id")
    array = job.get("array") if isinstance(job.get("array"), dict) else {}
    parent = number(array.get("job_id"), "array.job_id")
    if math.isnan(parent) or parent == 0:
        return str(int(job_id))
    task = number(array.get("task_id"), "array.task_id")
    if not math.isnan(task):
        return f"{int(parent)}_{int(task)}"
    tasks = array.get("task")
    if isinstance(tasks, str) and tasks:
        return f"{int(parent)}_[{tasks}]"
    return str(int(job_id))


def _state(state: Any, where: str, source: str) -> str:
    current = state.get("current") if isinstance(state, dict) else state
    if isinstance(current, list):      # 23.02+: the base state, then flags
        current = current[0] if current and isinstance(current[0], str) else None
    if not isinstance(current, str) or not current:
        raise InputError(source, "expected the job's state", field=f"{where}.state.current",
                         value=json_kind(current))
    return current


def _gpus(tres: Any, where: str, source: str) -> tuple[float, str]:
    """GPUs and their type from ``tres.allocated`` (``tres.requested`` when none was)."""
    if tres is None:
        return math.nan, ""
    if not isinstance(tres, dict):
        raise InputError(source, "expected an object", field=f"{where}.tres",
                         value=json_kind(tres))
    for key in ("allocated", "requested"):
        entries = tres.get(key) or []
        if not isinstance(entries, list):
            raise InputError(source, "expected a list", field=f"{where}.tres.{key}",
                             value=json_kind(entries))
        total, types, typed_count = math.nan, [], 0.0
        for n, entry in enumerate(entries):
            if not isinstance(entry, dict) or entry.get("type") != "gres":
                continue
            name = entry.get("name") or ""
            if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
                continue
            count = entry.get("count")
            if isinstance(count, bool) or not isinstance(count, int | float) \
                    or not math.isfinite(count):
                raise InputError(source, "expected a GPU count",
                                 field=f"{where}.tres.{key}[{n}].count", value=count)
            if name == "gpu":
                total = float(count)
            else:
                types.append(name.partition(":")[2])
                typed_count += float(count)
        if not math.isnan(total) or types:   # a type only when one is named (see gpu_entries)
            return (typed_count if math.isnan(total) else total), \
                types[0] if len(types) == 1 else ""
    return math.nan, ""


def _clock() -> float:
    """Now as epoch seconds: sacct --json times are epoch seconds, not local time."""
    return float(np.datetime64("now", "s").astype(np.int64))

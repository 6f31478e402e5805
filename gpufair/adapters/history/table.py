"""The rules every job history follows once read, whatever its source.

A reader turns its file into a *raw table* (pandas, one row per record, canonical column
names, times as epoch seconds with NaN for "unknown") and names the source column behind each
canonical one, so an error can name what the admin sees in the file. :func:`build_history`
then applies the rules of ``docs/replay.md``:

- the tenant is one column (account by default: ``--tenant user|account|qos|partition|vc``);
- a pending array record (``123_[4-9%2]``) stands for each of its tasks (counted one by one);
- incarnations of a requeued job (``sacct --duplicates``: one row per start, the earlier ones
  ended REQUEUED, PREEMPTED or NODE_FAIL) are one job: first submit, first start, last end,
  and the time it ran summed as its attained time; two rows of one job id otherwise are a
  duplicate and an error;
- jobs without GPUs, never started, cancelled before they started and still running are
  counted and reported, never dropped silently;
- end before start, GPU counts below 0 or above any real job, end times in the future and
  missing submit times are errors naming file, line and field.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gpufair.adapters.simulator.cluster_spec import MAX_GPUS
from gpufair.adapters.slurm.arrays import parse_task_list
from gpufair.errors import InputError

#: canonical columns a reader fills (``tenant`` columns may be absent when the source has none)
TIME_COLUMNS = ("submit", "start", "end")
TENANT_KEYS = ("account", "user", "qos", "partition", "vc")
#: the tenant when none is chosen: the first of these a history has
DEFAULT_TENANTS = ("account", "vc", "user")
#: the most GPUs one job may hold: the largest job the simulator runs (more is no real job)
MAX_JOB_GPUS = 4096
#: how far an end time may lie past the clock before it is "in the future" (clock skew)
FUTURE_SLACK_S = 86_400.0
#: the states an earlier incarnation of a requeued job ends in
REQUEUE_STATES = frozenset({"REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "PREEMPTED",
                            "NODE_FAIL", "RESIZING"})
_PENDING_ARRAY = re.compile(r"^(\d+)_\[(.+)\]$")
_TIME_RE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")
#: what :class:`History.excluded` counts, in the order reports print them
EXCLUDED_KINDS = ("no_gpus", "never_started", "cancelled_before_start", "unfinished")


@dataclass(frozen=True)
class History:
    """Finished GPU jobs of one source, one row each, plus what was left out and why.

    ``jobs`` columns: ``job_id, tenant, submit, start, end`` (epoch s), ``attained_s`` (the
    seconds it ran, summed over requeued incarnations), ``gpus``, ``gpu_type`` ("" untyped),
    ``incarnations``, ``state``, ``line`` (of its first row), ``nodes`` and ``time_limit_s``
    (its node count and time limit; NaN where the source gives none), ``spans`` (a requeued
    job's (start, end) of each incarnation, else None), sorted by submit then line.
    """

    source: str
    tenant_key: str
    jobs: pd.DataFrame
    excluded: dict[str, int] = field(default_factory=dict)
    #: requeued jobs merged from more than one row
    merged_requeues: int = 0
    #: what the reader noticed about its format (said beside the results)
    notes: tuple[str, ...] = ()
    #: False: the source has no start times (starts are the submits): no "as run" waits
    starts_known: bool = True

    @property
    def t0(self) -> float:
        """The first submit: the zero of every replayed time."""
        return float(self.jobs["submit"].min()) if len(self.jobs) else 0.0


def build_history(raw: pd.DataFrame, source: str, fields: dict[str, str], *,
                  tenant: str | None = None, now: float | None = None,
                  notes: tuple[str, ...] = (), records: str | None = None,
                  starts_known: bool = True) -> History:
    """Apply the rules to a reader's raw table. ``fields`` maps canonical column names to the
    source's (for errors); ``now``: the clock end times are checked against; ``records``:
    the rows are not lines but the items of this JSON list (``jobs``), and errors name the
    item (``jobs[3].time.end``) instead of a line."""
    if raw.empty:
        raise InputError(source, "the history has no jobs")
    if tenant is None:   # account, or the nearest a trace without accounts has
        tenant = next((k for k in DEFAULT_TENANTS if k in raw.columns), None)
        if tenant is None:
            tenant = "account"
            raw = raw.assign(account="")
            notes = (*notes, "the history names no account, vc or user: one tenant")
        elif tenant != "account":
            notes = (*notes, f"tenant = {tenant} (the history has no account column)")
    if tenant not in TENANT_KEYS:
        raise InputError("--tenant", f"expected one of {', '.join(TENANT_KEYS)}",
                         field="tenant", value=tenant)
    if tenant not in raw.columns:
        raise InputError(source, f"--tenant {tenant}: the history has no such column "
                         f"(it has {', '.join(k for k in TENANT_KEYS if k in raw.columns)})",
                         field=tenant)

    def fail(mask: pd.Series, column: str, problem: str) -> None:
        if mask.any():
            row = raw[mask].iloc[0]
            raise at(source, problem, int(row["line"]), fields.get(column, column), records,
                     _shown(row.get(f"{column}_text", row[column])))

    fail(raw["submit"].isna(), "submit", "expected a submit time")
    fail(raw["end"] < raw["start"], "end", "the job ends before it starts")
    fail(raw["start"] < raw["submit"] - FUTURE_SLACK_S, "start",
         "the job starts a day or more before it was submitted")
    gpus = raw["gpus"]
    fail(gpus < 0, "gpus", "a negative GPU count")
    fail(gpus > MAX_JOB_GPUS, "gpus", f"more than {MAX_JOB_GPUS} GPUs (no real job)")
    fail(gpus.notna() & (gpus != np.floor(gpus)), "gpus", "expected a whole number of GPUs")
    clock = time.time() if now is None else now
    fail(raw["end"] > clock + FUTURE_SLACK_S, "end",
         "the job ends in the future (a finished history; is the clock or the file wrong?)")

    state = pd.Series([s.partition(" ")[0].upper() for s in raw["state"].astype(str)],
                      index=raw.index)   # "CANCELLED by 1000" → CANCELLED
    started = raw["start"].notna()
    pending_array = ~started & raw["job_id"].astype(str).str.contains("_[", regex=False)
    weight = pd.Series(1, index=raw.index)
    for i in raw.index[pending_array]:
        weight[i] = _tasks(str(raw.at[i, "job_id"]), source, int(raw.at[i, "line"]),
                           fields.get("job_id", "job_id"), records)
    cancelled = ~started & state.str.startswith("CANCELLED")
    excluded = {
        "cancelled_before_start": int(weight[cancelled].sum()),
        "never_started": int(weight[~started & ~cancelled].sum()),
    }
    ran = raw[started].assign(state=state[started])
    unfinished = ran["end"].isna()
    ran = ran[~unfinished]
    no_gpus = ran["gpus"].fillna(0) == 0
    ran = ran[~no_gpus]
    excluded["no_gpus"] = int(no_gpus.sum())
    excluded["unfinished"] = int(unfinished.sum())
    excluded = {kind: excluded[kind] for kind in EXCLUDED_KINDS}
    jobs, merged = _merge_incarnations(ran, source, fields.get("job_id", "job_id"), records)
    tenants = jobs[tenant].fillna("").astype(str).str.strip()
    out = pd.DataFrame({
        "job_id": jobs["job_id"].astype(str).to_numpy(),
        "tenant": tenants.where(tenants != "", "(none)").to_numpy(),
        "submit": jobs["submit"].to_numpy(float), "start": jobs["start"].to_numpy(float),
        "end": jobs["end"].to_numpy(float), "attained_s": jobs["attained_s"].to_numpy(float),
        "gpus": jobs["gpus"].to_numpy().astype(np.int64),
        "gpu_type": jobs["gpu_type"].fillna("").astype(str).str.lower().to_numpy(),
        "incarnations": jobs["incarnations"].to_numpy().astype(np.int64),
        "state": jobs["state"].astype(str).to_numpy(),
        "line": jobs["line"].to_numpy().astype(np.int64),
        # what the source gives of the job's request (NaN: not given): backfill plans with it
        "nodes": _optional(jobs, "nodes"), "time_limit_s": _optional(jobs, "time_limit_s"),
        # a requeued job's (start, end) of each incarnation; None: one run, start to end
        "spans": jobs["spans"].to_numpy() if "spans" in jobs.columns else None,
    })
    out = out.sort_values(["submit", "line"], kind="stable").reset_index(drop=True)
    if out.empty:
        raise InputError(source, "no finished job with GPUs to replay (" + ", ".join(
            f"{k.replace('_', ' ')}: {v}" for k, v in excluded.items() if v) + ")")
    return History(source=source, tenant_key=tenant, jobs=out, excluded=excluded,
                   merged_requeues=merged, notes=notes, starts_known=starts_known)


def _optional(jobs: pd.DataFrame, column: str) -> np.ndarray:
    """A numeric column a source may lack, NaN where it does."""
    if column not in jobs.columns:
        return np.full(len(jobs), np.nan)
    return jobs[column].to_numpy(dtype=float, na_value=np.nan)


def _merge_incarnations(ran: pd.DataFrame, source: str, id_field: str,
                        records: str | None) -> tuple[pd.DataFrame, int]:
    """One row per job id: a requeued job's incarnations merged, a true duplicate refused."""
    ran = ran.assign(attained_s=ran["end"] - ran["start"], incarnations=1)
    repeated = ran["job_id"].duplicated(keep=False)
    if not repeated.any():
        return ran, 0
    single = ran[~repeated]
    merged_rows = []
    for job_id, group in ran[repeated].groupby("job_id", sort=False):
        group = group.sort_values(["start", "line"], kind="stable")
        earlier = group.iloc[:-1]
        not_requeued = ~earlier["state"].isin(REQUEUE_STATES)
        overlap = earlier["end"].to_numpy() > group["start"].to_numpy()[1:]
        if not_requeued.any() or overlap.any():
            later = group.iloc[1:][list(not_requeued | overlap)].iloc[0] \
                if (not_requeued | overlap).any() else group.iloc[1]
            raise at(source, "the job id appears twice and the earlier row is not a "
                     "requeued incarnation (state REQUEUED, PREEMPTED or NODE_FAIL, ended "
                     "before the next start)", int(later["line"]), id_field, records,
                     str(job_id))
        last = group.iloc[-1].copy()
        last["submit"] = group["submit"].min()
        last["start"] = group["start"].iloc[0]
        last["attained_s"] = group["attained_s"].sum()
        last["incarnations"] = len(group)
        last["line"] = group["line"].min()
        last["spans"] = list(zip(group["start"].tolist(), group["end"].tolist(), strict=True))
        merged_rows.append(last)
    merged = pd.DataFrame(merged_rows)
    return pd.concat([single, merged], ignore_index=True), len(merged_rows)


def _tasks(job_id: str, source: str, line: int, id_field: str, records: str | None) -> int:
    """How many tasks a pending array record ``123_[0-9%2]`` stands for."""
    match = _PENDING_ARRAY.match(job_id)
    if match is None:
        raise at(source, "expected an array record like 123_[0-9]", line, id_field, records,
                 job_id)
    try:
        tasks = parse_task_list(match.group(2))
    except ValueError as exc:
        raise at(source, str(exc), line, id_field, records, job_id) from None
    return tasks.count if tasks.count is not None else 1


def at(source: str, problem: str, line: int, field: str, records: str | None,
       value: object = None) -> InputError:
    """The error of one row: at its line, or at its item of a JSON list (``jobs[3].x``)."""
    if records is None:
        return InputError(source, problem, line=line, field=field, value=value)
    return InputError(source, problem, field=f"{records}[{line}].{field}", value=value)


def _shown(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def peak_use(history: History) -> dict[str, int]:
    """The most GPUs of each type in use at once (``""``: untyped), by a sweep over starts and
    ends; an end at the same second as a start frees its GPUs first."""
    out: dict[str, int] = {}
    for gpu_type, jobs in history.jobs.groupby("gpu_type", sort=True):
        times = np.concatenate([jobs["start"].to_numpy(), jobs["end"].to_numpy()])
        deltas = np.concatenate([jobs["gpus"].to_numpy(), -jobs["gpus"].to_numpy()])
        order = np.lexsort((deltas, times))   # ends (negative) before starts at one time
        out[str(gpu_type)] = int(min(MAX_GPUS, np.cumsum(deltas[order]).max()))
    return out


def checked_lines(data: bytes, header_line: int, header: list[str], sep: str,
                  trailing: bool, source: str) -> np.ndarray:
    """The line number of each data line; a line with another number of fields than the
    header (cut short, a separator inside a field, another file's line) is an error
    naming it. Counted on the bytes with numpy: a million lines in a fraction of a second,
    and no list of a million line strings."""
    buf = np.frombuffer(data, np.uint8)
    newlines = np.flatnonzero(buf == 10)
    starts = np.concatenate([[0], newlines + 1])[header_line:]
    ends = np.concatenate([newlines, [len(buf)]])[header_line:]
    seps = np.flatnonzero(buf == ord(sep))
    bars = np.searchsorted(seps, ends) - np.searchsorted(seps, starts)
    width = ends - starts
    if len(width):   # a line ending in \r\n is as long as its text
        crlf = (width > 0) & (buf[np.maximum(ends - 1, 0)] == 13)
        width = width - crlf
    blank = (width == 0) & (bars == 0)
    expected = len(header) - 1 + trailing
    wrong = np.flatnonzero((bars != expected) & ~blank)
    if len(wrong):
        index = int(wrong[0])
        found = int(bars[index]) + 1 - trailing
        line = header_line + 1 + index
        if found < len(header):
            raise InputError(source, f"expected {len(header)} {sep!r}-separated fields like the "
                             f"header, found {found} (a truncated line?)", line=line,
                             field=header[found].strip())
        raise InputError(source, f"expected {len(header)} {sep!r}-separated fields like the "
                         f"header, found {found} (a {sep!r} inside a field, or another file's "
                         "line?)", line=line)
    return header_line + 1 + np.flatnonzero(~blank)


def iso_times(raw: pd.DataFrame, key: str, fields: dict[str, str], source: str,
              no_time: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """Epoch seconds (NaN: not yet, any text of ``no_time``) of a column of times such as
    ``2024-01-31T23:59:00`` or ``2024-01-31 23:59:00``, and its text for messages. Seconds
    count from 1970 in whatever zone the file's times are: only differences are used."""
    text = raw[key].fillna("")
    known = ~text.isin(no_time)
    values = text[known].to_numpy(dtype=str)
    bad = None
    try:   # numpy's datetime64[s] reaches far past pandas' nanoseconds (year 2262)
        stamps = np.array(np.char.replace(values, " ", "T", count=1) if " " in "".join(
            values[:100]) else values, dtype="datetime64[s]")
    except ValueError:    # not a time, or a date that does not exist (25:61:00)
        bad = known & text.map(_not_a_time).astype(bool)
    else:
        lengths = np.char.str_len(values) if len(values) else np.zeros(0, int)
        odd = np.isnat(stamps) | (lengths != 19)     # numpy also takes "NaT", "2024-01"
        if odd.any():
            bad = known & text.map(_not_a_time).astype(bool)
    if bad is not None and bad.any():
        row = raw[bad].iloc[0]
        raise InputError(source, "expected a time like 2024-01-31T23:59:00" + (
            f" or {', '.join(sorted(t for t in no_time if t))}" if any(no_time) else ""),
            line=int(row["line"]), field=fields[key], value=row[key])
    seconds = np.full(len(text), np.nan)
    seconds[known.to_numpy()] = stamps.astype(np.int64)
    return seconds, text.to_numpy()


def _not_a_time(text: str) -> bool:
    """A text that is neither empty nor a whole ``YYYY-MM-DD[T ]HH:MM:SS`` time."""
    if not text:
        return False
    if _TIME_RE.fullmatch(text) is None:
        return True
    try:
        np.datetime64(text.replace(" ", "T", 1), "s")
    except ValueError:
        return True
    return False

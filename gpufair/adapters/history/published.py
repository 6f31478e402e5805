"""Published cluster traces (CSV) as job histories, through the column maps of
``column_maps.toml`` (or a site's own map file): one reader for every shape, the shapes data.

A map names which column holds each canonical field, how times are written, what the states
mean and, for Slurm database tables, what each TRES id is. The rules of ``table.py`` then
apply as to ``sacct`` output.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gpufair.adapters.history.table import History, build_history, checked_lines, iso_times
from gpufair.adapters.slurm.sacct_limits import node_count_column, time_limit_column
from gpufair.errors import InputError, read_text

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10
    import tomli as tomllib

CANONICAL = ("job_id", "user", "account", "qos", "partition", "vc", "submit", "start", "end",
             "state", "gpus", "nodes", "tres_alloc", "tres_req", "array_job", "array_task",
             "submit_gap", "run_time", "time_limit")
#: canonical fields a map may name that a file of its shape may lack (older exports)
OPTIONAL = ("vc", "nodes", "time_limit")
#: Slurm's NO_VAL: the array task id of a job that is not an array task
NO_TASK = "4294967294"
_EPOCH_NOT_YET = 0


@dataclass(frozen=True)
class ColumnMap:
    name: str
    about: str
    detect: tuple[str, ...]
    times: str
    columns: dict[str, str]
    states: dict[str, str] = field(default_factory=dict)
    tres_ids: dict[str, str] = field(default_factory=dict)
    #: the tenant column when --tenant is not given (None: account, else vc, else user)
    tenant: str | None = None


def bundled_maps() -> dict[str, ColumnMap]:
    text = (resources.files("gpufair.adapters.history") / "column_maps.toml").read_text(
        encoding="utf-8")
    return parse_maps(text, "column_maps.toml (bundled)")


def load_maps(path: str | None) -> dict[str, ColumnMap]:
    """The bundled maps, and a site's map file's (which win on a name both have)."""
    maps = bundled_maps()
    if path is not None:
        maps.update(parse_maps(read_text(path, "column map"), path))
    return maps


def parse_maps(text: str, source: str) -> dict[str, ColumnMap]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(source, f"invalid TOML: {exc}") from None
    maps = {}
    for name, table in data.items():
        if not isinstance(table, dict):
            raise InputError(source, "expected a table per map", field=name)
        unknown = set(table) - {"about", "detect", "times", "columns", "states", "tres_ids",
                                "tenant"}
        if unknown:
            raise InputError(source, "unknown key", field=f"{name}.{sorted(unknown)[0]}")
        columns = _strings(table.get("columns"), source, f"{name}.columns")
        bad = set(columns) - set(CANONICAL)
        if bad:
            raise InputError(source, f"not a canonical field (one of {', '.join(CANONICAL)})",
                             field=f"{name}.columns.{sorted(bad)[0]}")
        if "job_id" not in columns or not ({"submit", "submit_gap"} & set(columns)):
            raise InputError(source, "a map needs job_id and submit (or submit_gap)",
                             field=f"{name}.columns")
        if not ({"end", "run_time"} & set(columns)):
            raise InputError(source, "a map needs end (or run_time)", field=f"{name}.columns")
        times = table.get("times", "iso")
        if times not in ("iso", "epoch", "seconds"):
            raise InputError(source, "expected \"iso\", \"epoch\" or \"seconds\"",
                             field=f"{name}.times", value=times)
        default_tenant = table.get("tenant")
        if default_tenant is not None and default_tenant not in columns:
            raise InputError(source, "expected a canonical field the map names",
                             field=f"{name}.tenant", value=default_tenant)
        detect = table.get("detect", list(columns.values()))
        if not isinstance(detect, list) or not all(isinstance(d, str) for d in detect):
            raise InputError(source, "expected a list of column names", field=f"{name}.detect")
        maps[name] = ColumnMap(name=name, about=str(table.get("about", "")),
                               detect=tuple(detect), times=times, columns=columns,
                               states=_strings(table.get("states", {}), source,
                                               f"{name}.states"),
                               tres_ids=_strings(table.get("tres_ids", {}), source,
                                                 f"{name}.tres_ids"),
                               tenant=default_tenant)
    return maps


def _strings(value: Any, source: str, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InputError(source, "expected a table of text values", field=where)
    return dict(value)


def detect_map(header: list[str], maps: dict[str, ColumnMap]) -> ColumnMap | None:
    present = set(header)
    for column_map in maps.values():
        if set(column_map.detect) <= present:
            return column_map
    return None


def read_published(path: str | Path, column_map: ColumnMap | None = None, *,
                   maps: dict[str, ColumnMap] | None = None, tenant: str | None = None,
                   now: float | None = None) -> History:
    """The history in a published trace's CSV file, read with ``column_map`` (default: the
    first map whose ``detect`` columns the header has)."""
    source = str(path)
    text = read_text(path, "history", bom=True)
    header_line, header = _header(text, source)
    if column_map is None:
        column_map = detect_map(header, maps if maps is not None else bundled_maps())
        if column_map is None:
            raise InputError(source, "the header matches no column map (give --format NAME "
                             "or --column-map FILE; the bundled maps are in docs/replay.md)",
                             line=header_line)
    missing = [column_map.columns[k] for k in column_map.columns
               if column_map.columns[k] not in header and k not in OPTIONAL]
    if missing:
        raise InputError(source, f"the header lacks the column(s) {', '.join(missing)} of "
                         f"the {column_map.name} map", line=header_line)
    if '"' in text:
        raw = pd.read_csv(io.StringIO(text), skiprows=header_line - 1, dtype=str,
                          keep_default_na=False, skip_blank_lines=True)
        raw["line"] = np.arange(header_line + 1, header_line + 1 + len(raw))   # approximate
    else:   # no quoting: every line's field count is checked, and each row keeps its line
        lines = checked_lines(text.encode("utf-8"), header_line, header, ",", False, source)
        raw = pd.read_csv(io.StringIO(text), skiprows=header_line - 1, dtype=str,
                          keep_default_na=False, skip_blank_lines=True, quoting=3)
        raw["line"] = lines
    table, fields, starts_known = _canonical(raw, column_map, source)
    notes = [f"read with the {column_map.name} column map"]
    if not starts_known:
        notes.append("the trace has no start times: jobs are taken to start when submitted "
                     "(for the cluster's size), and 'as run' is not measured")
    if tenant is None and column_map.tenant is not None:
        tenant = column_map.tenant
        notes.append(f"tenant = {tenant} (the {column_map.name} map's default)")
    return build_history(table, source, fields, tenant=tenant, now=now, notes=tuple(notes),
                         starts_known=starts_known)


def _header(text: str, source: str) -> tuple[int, list[str]]:
    for number, line in enumerate(io.StringIO(text), start=1):
        if line.strip():
            return number, [h.strip().strip('"') for h in line.rstrip("\r\n").split(",")]
    raise InputError(source, "the history is empty")


def _canonical(raw: pd.DataFrame, column_map: ColumnMap, source: str
               ) -> tuple[pd.DataFrame, dict[str, str], bool]:
    """The reader's raw table in canonical columns, the source's name of each, and whether
    the trace has start times."""
    cols = {k: v for k, v in column_map.columns.items() if v in raw.columns}
    fields = dict(cols)
    table = pd.DataFrame({"line": raw["line"].to_numpy()})
    job_id = raw[cols["job_id"]].astype(str).str.strip()
    if "array_job" in cols and "array_task" in cols:
        parent = raw[cols["array_job"]].str.strip()
        task = raw[cols["array_task"]].str.strip()
        in_array = ~parent.isin(["", "0"]) & ~task.isin(["", NO_TASK])
        job_id = job_id.where(~in_array, parent + "_" + task)
    table["job_id"] = job_id.to_numpy()
    for key in ("user", "account", "qos", "partition", "vc"):
        if key in cols:
            table[key] = raw[cols[key]].to_numpy()
    state = raw[cols["state"]].str.strip() if "state" in cols else pd.Series("COMPLETED",
                                                                              raw.index)
    if column_map.times == "epoch" and column_map.states and state.str.isdigit().all():
        state = (pd.to_numeric(state) % 256).astype(int).astype(str)   # low byte: the state
    table["state"] = state.map(lambda s: column_map.states.get(s, s)).to_numpy()
    for key in ("submit", "start", "end"):
        if key in cols:
            table[key], table[f"{key}_text"] = _times(raw, cols[key], key, column_map,
                                                       fields, source)
    if "submit" not in cols:
        gaps = _numbers(raw, cols["submit_gap"], source, fields.get("submit_gap"))
        table["submit"] = np.cumsum(np.nan_to_num(gaps))
        fields["submit"] = cols["submit_gap"]
    known_start = "start" in cols
    if not known_start:
        table["start"] = table["submit"]
    if "end" not in cols:
        run = _numbers(raw, cols["run_time"], source, cols["run_time"])
        table["end"] = table["start"] + run
        fields["end"] = cols["run_time"]
    if "gpus" in cols:
        table["gpus"] = _numbers(raw, cols["gpus"], source, cols["gpus"])
        table["gpus_text"] = raw[cols["gpus"]].to_numpy()
        table["gpu_type"] = ""
    else:
        gpus, types, text, name = _tres_gpus(raw, cols, column_map, source)
        table["gpus"], table["gpu_type"], table["gpus_text"] = gpus, types, text
        fields["gpus"] = name
    if "nodes" in cols:
        table["nodes"] = node_count_column(raw[cols["nodes"]], raw["line"], source,
                                           cols["nodes"])
    if "time_limit" in cols:   # minutes, as the Slurm database keeps it
        table["time_limit_s"] = time_limit_column(None, raw[cols["time_limit"]], raw["line"],
                                                  source, cols["time_limit"],
                                                  cols["time_limit"])
    return table, fields, known_start


def _times(raw: pd.DataFrame, column: str, key: str, column_map: ColumnMap,
           fields: dict[str, str], source: str) -> tuple[np.ndarray, np.ndarray]:
    if column_map.times == "iso":
        frame = pd.DataFrame({key: raw[column], "line": raw["line"]})
        return iso_times(frame, key, {key: column}, source, frozenset({""}))
    seconds = _numbers(raw, column, source, column)
    if key != "submit" and column_map.times == "epoch":
        seconds = np.where(seconds == _EPOCH_NOT_YET, np.nan, seconds)
    return seconds, raw[column].to_numpy()


def _numbers(raw: pd.DataFrame, column: str, source: str, name: str | None) -> np.ndarray:
    text = raw[column].str.strip()
    values = pd.to_numeric(text, errors="coerce")
    bad = values.isna() & (text != "")
    if bad.any():
        row = raw[bad].iloc[0]
        raise InputError(source, "expected a number", line=int(row["line"]),
                         field=name or column, value=row[column])
    return values.to_numpy(dtype=float, na_value=np.nan)


def _tres_gpus(raw: pd.DataFrame, cols: dict[str, str], column_map: ColumnMap, source: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """GPUs and type from TRES id strings (``1=20,2=170000,4=1,1001=2``); AllocTRES first,
    ReqTRES for jobs never allocated. An id the map does not know is an error."""
    alloc = raw[cols["tres_alloc"]].fillna("") if "tres_alloc" in cols else None
    req = raw[cols["tres_req"]].fillna("") if "tres_req" in cols else None
    if alloc is None and req is None:
        raise InputError(source, f"the {column_map.name} map names neither gpus nor "
                         "tres_alloc/tres_req", field="columns")
    text = alloc if req is None else req if alloc is None else \
        alloc.where(alloc.str.strip() != "", req)
    name = cols["tres_alloc" if alloc is not None else "tres_req"]
    ids = column_map.tres_ids
    gpus = np.full(len(text), np.nan)
    types = np.full(len(text), "", dtype=object)
    for i, (value, line) in enumerate(zip(text.tolist(), raw["line"].tolist(), strict=True)):
        total, typed, typed_count = math.nan, "", math.nan
        for item in filter(None, (p.strip() for p in value.split(","))):
            key, eq, count = item.partition("=")
            tres = ids.get(key.strip())
            if not eq or tres is None:
                raise InputError(source, f"unknown TRES id {key.strip()!r} (the "
                                 f"{column_map.name} map knows {', '.join(ids)}; give a map "
                                 "with your `sacctmgr show tres` ids: --column-map)",
                                 line=line, field=name, value=value)
            if tres != "gres/gpu" and not tres.startswith("gres/gpu:"):
                continue
            try:
                number = float(count) if count.strip().lstrip("-").isdigit() else math.nan
            except ValueError:
                number = math.nan
            if math.isnan(number):
                raise InputError(source, "expected id=count with a whole count", line=line,
                                 field=name, value=value)
            if tres == "gres/gpu":
                total = number
            else:
                typed, typed_count = tres.partition(":")[2], number
        gpus[i] = typed_count if math.isnan(total) else total
        types[i] = typed
    return gpus, types, text.to_numpy(), name

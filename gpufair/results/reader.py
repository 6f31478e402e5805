"""Reading results directories: the only reader, and the one place that refuses what it cannot
trust — a directory that is missing, unfinished (no ``meta.json``), truncated or edited (a
sha256 differs), of another format version, or, when several are read together, of different
inputs (two traces cannot be compared job by job). Each refusal is an ``InputError`` naming
the directory and the file, which the command line turns into exit 2.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gpufair.errors import InputError, json_kind, parse_json, read_text
from gpufair.results.schema import FORMAT, KINDS, META, TABLES, VERSION, Table
from gpufair.results.writer import parquet_available, sha256_of

#: the inputs that identify a workload, in the order they are looked for in ``meta.json``
WORKLOAD_KEYS = ("trace", "history", "snapshot")


@dataclass
class Results:
    """One or more results directories read as one: each table a DataFrame with every run's
    rows (``nodes`` has no run column: one dry run per directory), ``meta`` each directory's
    ``meta.json`` in the order given, ``run_dirs`` which directory each run came from."""

    metas: list[dict[str, Any]]
    run_dirs: dict[str, Path]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def runs(self) -> list[str]:
        return list(self.run_dirs)

    @property
    def kinds(self) -> list[str]:
        return [m["kind"] for m in self.metas]

    @property
    def metrics(self) -> pd.DataFrame:
        return self.tables["metrics"]

    @property
    def jobs(self) -> pd.DataFrame:
        return self.tables["jobs"]

    @property
    def allocations(self) -> pd.DataFrame:
        return self.tables["allocations"]

    @property
    def cluster(self) -> pd.DataFrame:
        return self.tables["cluster"]

    @property
    def tenants(self) -> pd.DataFrame:
        return self.tables["tenants"]

    @property
    def actions(self) -> pd.DataFrame:
        return self.tables["actions"]

    @property
    def nodes(self) -> pd.DataFrame:
        return self.tables["nodes"]


def read_results(dirs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str]) -> Results:
    """Read one or several results directories (several: the runs of each, side by side).

    Several directories must be of the same workload (the same trace, history or snapshot,
    by content) and must not name one run twice."""
    paths = [Path(dirs)] if isinstance(dirs, (str, os.PathLike)) else [Path(d) for d in dirs]
    if not paths:
        raise InputError("results", "name at least one results directory")
    metas: list[dict[str, Any]] = []
    run_dirs: dict[str, Path] = {}
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
    first_workload: tuple[Path, str, str] | None = None
    for path in paths:
        meta = read_meta(path)
        workload = _workload(meta)
        if first_workload is None:
            first_workload = (path, *workload)
        elif workload[1] != first_workload[2]:
            raise InputError(str(path), f"mixed results: its {workload[0]} "
                             f"({_input_path(meta, workload[0])}) differs from the "
                             f"{first_workload[1]} of {first_workload[0]}; a report compares "
                             "runs of one workload only")
        for run in meta["runs"]:
            if run in run_dirs:
                raise InputError(str(path), f"run {run!r} is also in {run_dirs[run]}; "
                                 "a report shows each run once", field="runs")
            run_dirs[run] = path
        for name, spec in TABLES.items():
            if spec.csv in meta["files"]:
                frame = _read_table(path, spec, meta)
                _check_runs(path, spec, frame, meta["runs"])
                parts[name].append(frame)
        metas.append(meta)
    tables = {}
    for name, spec in TABLES.items():
        frames = [f for f in parts[name] if len(f.columns)]
        tables[name] = pd.concat(frames, ignore_index=True) if frames else \
            pd.DataFrame({c: pd.Series([], dtype=_DTYPES[t]) for c, t in spec.columns})
    return Results(metas=metas, run_dirs=run_dirs, tables=tables)


def read_meta(path: Path) -> dict[str, Any]:
    """``meta.json`` of ``path``, checked: the format, the version, and every listed file
    present with the sha256 it was written with."""
    if not path.exists():
        raise InputError(str(path), "no such results directory")
    if not path.is_dir():
        raise InputError(str(path), "not a directory (a results directory is one, written "
                         "by --out)")
    meta_path = path / META
    if not meta_path.is_file():
        raise InputError(str(path), f"incomplete results directory: no {META} (the command "
                         "that wrote it did not finish, or this is not a results directory)")
    source = str(meta_path)
    meta = parse_json(read_text(meta_path, "results metadata"), source)
    if not isinstance(meta, dict):
        raise InputError(source, f"must be a JSON object, not {json_kind(meta)}")
    if meta.get("format") != FORMAT:
        raise InputError(source, f"not a gpufair results directory (format must be "
                         f"{FORMAT!r})", field="format", value=meta.get("format"))
    version = meta.get("version")
    if type(version) is not int or version != VERSION:
        raise InputError(source, f"results format version {version!r}, written by gpufair "
                         f"{meta.get('gpufair', '?')}; this gpufair reads version {VERSION} "
                         "only: re-run the command with this version", field="version")
    for key, kind in (("kind", str), ("runs", list), ("files", dict), ("inputs", dict)):
        if not isinstance(meta.get(key), kind):
            raise InputError(source, f"missing or not {kind.__name__}", field=key,
                             value=meta.get(key))
    if meta["kind"] not in KINDS:
        raise InputError(source, f"unknown kind (one of {', '.join(KINDS)})", field="kind",
                         value=meta["kind"])
    for name, digest in meta["files"].items():
        file = path / name
        if Path(name).name != name or not file.is_file():
            raise InputError(str(file), f"missing from the results directory ({META} lists "
                             "it)")
        if sha256_of(file) != digest:
            raise InputError(str(file), f"truncated or changed after it was written (its "
                             f"sha256 differs from the one in {META})")
    return meta


def _workload(meta: Mapping[str, Any]) -> tuple[str, str]:
    inputs = meta["inputs"]
    for key in WORKLOAD_KEYS:
        value = inputs.get(key)
        if isinstance(value, Mapping) and isinstance(value.get("sha256"), str):
            return key, value["sha256"]
    return "inputs", json.dumps(inputs, sort_keys=True)


def _input_path(meta: Mapping[str, Any], key: str) -> str:
    value = meta["inputs"].get(key)
    return str(value.get("path", "?")) if isinstance(value, Mapping) else "inputs"


_DTYPES = {"str": object, "float": "float64", "int": "int64"}


def _read_table(path: Path, spec: Table, meta: Mapping[str, Any]) -> pd.DataFrame:
    """The table, from its Parquet twin when there is one and pyarrow reads it (faster, and
    typed), else from the CSV with each column's type checked."""
    if spec.parquet in meta["files"] and parquet_available():
        frame = pd.read_parquet(path / spec.parquet)
        return _typed(path / spec.parquet, spec, frame, csv=False)
    source = path / spec.csv
    try:
        frame = pd.read_csv(source, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise InputError(str(source), "empty (not even the header line)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(str(source), f"not a readable CSV table: {exc}") from None
    return _typed(source, spec, frame, csv=True)


def _typed(source: Path, spec: Table, frame: pd.DataFrame, *, csv: bool) -> pd.DataFrame:
    wanted = ["run"] if spec.free else spec.names
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise InputError(str(source), f"missing column(s) {', '.join(missing)}",
                         line=1 if csv else None)
    if spec.free:
        return _inferred(frame, csv=csv)
    out = {}
    for column in frame.columns:
        kind = spec.dtype(column)
        values = frame[column]
        if kind == "str":
            out[column] = values.map(lambda v: "" if v is None or v != v else str(v)) \
                .astype(object)
            continue
        text = values.astype(object)
        numbers = pd.to_numeric(values, errors="coerce")
        blank = text.map(lambda v: v is None or v == "" or v != v)
        bad = numbers.isna() & ~blank
        if kind == "int":
            bad |= blank | (numbers.notna() & (numbers != numbers.round()))
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise InputError(str(source), f"{'a whole number' if kind == 'int' else 'a number'}"
                             " expected", line=row + 2 if csv else None, field=column,
                             value=text.iloc[row])
        out[column] = numbers.astype("int64" if kind == "int" else "float64")
    return pd.DataFrame(out, columns=list(frame.columns))


def _inferred(frame: pd.DataFrame, *, csv: bool) -> pd.DataFrame:
    """A free table (metrics): ``run`` is text; from CSV, a column whose every value is a
    number (or blank) is float, one of True/False is bool, any other stays text."""
    out = {"run": frame["run"].astype(str).astype(object)}
    for column in frame.columns:
        if column == "run":
            continue
        values = frame[column]
        if not csv:
            out[column] = values
            continue
        if len(values) and values.isin(["True", "False"]).all():
            out[column] = values == "True"
            continue
        numbers = pd.to_numeric(values, errors="coerce")
        blank = values == ""
        out[column] = numbers.astype("float64") if not (numbers.isna() & ~blank).any() \
            else values.astype(object)
    return pd.DataFrame(out, columns=list(frame.columns))


def _check_runs(path: Path, spec: Table, frame: pd.DataFrame, runs: list[str]) -> None:
    if "run" not in frame.columns or not len(frame):
        return
    stray = sorted(set(frame["run"]) - set(runs))
    if stray:
        raise InputError(str(path / spec.csv), f"rows of run(s) {', '.join(map(repr, stray))}"
                         f" that {META} does not list (a mixed directory?)", field="run")

"""Writing a results directory: every table in memory until ``commit``, then all files into a
temporary sibling directory, ``meta.json`` last (with each file's sha256), and one rename.

Why so: a results directory is read by people and by ``gpufair report`` long after the command
that wrote it; a run that crashed or was killed half-way must not leave something that looks
complete. Until the rename there is no directory under the final name; after it, every file
is there and ``meta.json`` vouches for each byte.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

import gpufair
from gpufair.errors import InputError
from gpufair.results.schema import FORMAT, KINDS, META, OUTCOMES, PHASES, TABLES, VERSION, Table

Rows = pd.DataFrame | Iterable[Mapping[str, Any]] | Iterable[Sequence[Any]]


def parquet_available() -> bool:
    """Parquet twins are written (and preferred by the reader) when pyarrow is installed; CSV
    is always there, so a directory stays readable without it."""
    return importlib.util.find_spec("pyarrow") is not None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def scalar_metrics(values: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar fields of a metrics dict (``SimulationReport.as_dict()``), a dict of scalars
    flattened as ``name.key`` (``unfair_fraction.1.1``); lists (dropped jobs) are left out:
    they are rows of other tables, not a metric."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            for sub, inner in value.items():
                if _is_scalar(inner):
                    flat[f"{key}.{sub}"] = inner
        elif _is_scalar(value):
            flat[key] = value
    return flat


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


class ResultsWriter:
    """The one writer of results directories (docs/FORMATS.md, section 9).

    ``inputs`` says what the runs ran on; give the trace (or history, or snapshot) as
    ``{"path": ..., "sha256": ...}`` under ``trace`` / ``history`` / ``snapshot``
    (``input_file`` builds it): the reader refuses to mix directories of different inputs.
    """

    def __init__(self, out: str | os.PathLike[str], *, kind: str, command: Sequence[str],
                 inputs: Mapping[str, Any]) -> None:
        if kind not in KINDS:
            raise ValueError(f"results kind {kind!r} is not one of {', '.join(KINDS)}")
        self.out = Path(out)
        self.kind = kind
        self.command = [str(a) for a in command]
        self.inputs = dict(inputs)
        self.runs: list[str] = []
        self._metrics: list[dict[str, Any]] = []
        self._frames: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}

    def add_run(self, name: str, metrics: Mapping[str, Any] | None = None) -> None:
        """A run (a policy, ``as_run``, ``slurm``), in the order a report shows them, with
        its scalar metrics (nested dicts are flattened, lists left out)."""
        if not name or name in self.runs:
            raise ValueError(f"run name {name!r} is empty or given twice")
        self.runs.append(name)
        self._metrics.append({"run": name, **scalar_metrics(metrics or {})})

    def add_rows(self, table: str, rows: Rows, *, run: str | None = None) -> None:
        """Rows of ``table`` (not metrics): a DataFrame, mappings, or sequences in the
        table's column order. ``run`` fills the ``run`` column when the rows lack it."""
        spec = TABLES[table]
        if spec.free:
            raise ValueError(f"{table}: add metrics with add_run")
        columns = spec.names
        if isinstance(rows, pd.DataFrame):
            frame = rows.copy()
        else:
            rows = list(rows)
            if rows and not isinstance(rows[0], Mapping):
                given = len(rows[0])
                names = columns[1:] if run is not None and given == len(columns) - 1 \
                    else columns
                frame = pd.DataFrame.from_records(rows, columns=names)
            else:
                frame = pd.DataFrame.from_records(rows) if rows else \
                    pd.DataFrame(columns=[c for c in columns if c != "run" or run is None])
        if run is not None and "run" in columns and "run" not in frame.columns:
            frame.insert(0, "run", run)
        missing = [c for c in columns if c not in frame.columns]
        extra = [c for c in frame.columns if c not in columns]
        if missing or extra:
            raise ValueError(f"{spec.csv}: columns missing {missing}, unknown {extra}")
        self._frames[table].append(frame[columns])

    def commit(self) -> Path:
        """Write everything and put it in place under ``out`` (replacing an earlier results
        directory there, never any other directory). Returns ``out``."""
        tables = {name: self._table(spec) for name, spec in TABLES.items()}
        self._check(tables)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        _refuse_foreign(self.out)
        staging = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.", suffix=".tmp",
                                        dir=self.out.parent))
        try:
            files: dict[str, str] = {}
            parquet = parquet_available()
            for name, frame in tables.items():
                spec = TABLES[name]
                frame.to_csv(staging / spec.csv, index=False, lineterminator="\n")
                files[spec.csv] = sha256_of(staging / spec.csv)
                if parquet:
                    frame.to_parquet(staging / spec.parquet, index=False)
                    files[spec.parquet] = sha256_of(staging / spec.parquet)
            meta = {"format": FORMAT, "version": VERSION, "gpufair": gpufair.__version__,
                    "kind": self.kind,
                    "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "command": self.command, "inputs": _jsonable(self.inputs),
                    "runs": list(self.runs), "files": files}
            with open(staging / META, "w", encoding="utf-8") as f:   # last: it marks done
                json.dump(meta, f, indent=2, sort_keys=True, allow_nan=False)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            _swap_into_place(staging, self.out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return self.out

    def _table(self, spec: Table) -> pd.DataFrame:
        if spec.free:
            frame = pd.DataFrame.from_records(self._metrics) if self._metrics else \
                pd.DataFrame(columns=["run"])
            return frame
        parts = [f for f in self._frames[spec.name] if len(f)]
        frame = pd.concat(parts, ignore_index=True) if parts else \
            pd.DataFrame({c: pd.Series([], dtype=_EMPTY[t]) for c, t in spec.columns})
        for column, kind in spec.columns:
            if kind == "int":
                frame[column] = frame[column].astype("int64")
            elif kind == "float":
                frame[column] = frame[column].astype("float64")
            else:
                frame[column] = frame[column].map(lambda v: "" if v is None or (
                    isinstance(v, float) and math.isnan(v)) else str(v)).astype(object)
        return frame

    def _check(self, tables: dict[str, pd.DataFrame]) -> None:
        """A writer's mistake (a row of a run never added, an unknown outcome) is a bug in
        the command, caught here before it becomes a directory every reader refuses."""
        known = set(self.runs)
        for name, frame in tables.items():
            if "run" in frame.columns and len(frame):
                stray = sorted(set(frame["run"]) - known)
                if stray:
                    raise ValueError(f"{name}.csv: rows of runs never added: {stray}")
        bad = sorted(set(tables["jobs"]["outcome"]) - set(OUTCOMES))
        if bad:
            raise ValueError(f"jobs.csv: unknown outcomes {bad}")
        bad = sorted(set(tables["nodes"]["phase"]) - set(PHASES))
        if bad:
            raise ValueError(f"nodes.csv: unknown phases {bad}")


_EMPTY = {"str": object, "float": "float64", "int": "int64"}


def input_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """An input file as ``meta.json`` records it: its path and its content's sha256 (what
    tells two directories of the same trace from two of different traces)."""
    return {"path": os.fspath(path), "sha256": sha256_of(Path(path))}


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def _refuse_foreign(out: Path) -> None:
    """``--out`` may name a new path, an empty directory or an earlier results directory;
    anything else (a file, a directory of other things) is the user's and is left alone."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_dir() and not out.is_symlink():
        entries = list(out.iterdir())
        if not entries or ((out / META).is_file() and _is_results(out / META)):
            return
    raise InputError(str(out), "exists and is not a gpufair results directory; not "
                     "overwriting it (choose a new --out, or remove it)")


def _is_results(meta: Path) -> bool:
    try:
        return json.loads(meta.read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _swap_into_place(staging: Path, out: Path) -> None:
    """Rename ``staging`` to ``out``; an earlier directory there is renamed aside first and
    removed after, so ``out`` is the old directory whole, then (for an instant) absent, then
    the new one whole: never a mix of both."""
    if not out.exists():
        os.rename(staging, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.rename(out, old / out.name)
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(old / out.name, out)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)

"""A sweep file (``SWEEP.toml``) → its cells: every combination of the grid, each one
simulation, checked whole before anything runs or is submitted.

Why checked up front: a sweep may go to a cluster as a job array of hundreds of tasks; a typo
in one policy's option found by task 173 an hour later wastes the queue wait and the other
tasks' work. So every policy name, every option value (through the policy's own ``Options``),
every trace, throughputs file and cluster spec is read here, and a grid that repeats a cell
is refused: each error names the sweep file and the key.

The format (docs/sweeps.md)::

    name = "canonical"            # optional: the file's stem
    out = "canonical.results"     # optional: <stem>.results beside the file
    time_limit = 600              # optional: wall seconds per cell (then partial)

    [grid]                        # each key a list of values (a scalar: one value)
    policy = ["fifo", "las"]
    trace = ["shockwave_120jobs_32gpus"]
    seed = [0, 1, 2]

    [policies.las]                # option values swept for that policy's cells only:
    queue_thresholds_gpu_s = [[3600.0], [1800.0, 7200.0]]   # always a list of values

    [slurm]                       # gpufair sweep --slurm: the job array
    partition = "cpu"
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.semantics import semantics_named
from gpufair.adapters.simulator.throughputs import load_throughputs
from gpufair.adapters.simulator.trace import load_trace
from gpufair.core.config import DEFAULT_ROUND_S
from gpufair.core.simulation import SimulationSpec
from gpufair.data import resolve
from gpufair.errors import InputError, read_text
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy, resolve_policy
from gpufair.sweep.slurm_options import SlurmArrayOptions

if sys.version_info >= (3, 11):
    import tomllib
else:   # pragma: no cover - the floor's Python
    import tomli as tomllib

#: grid key → (SimulationSpec field, default when the grid does not name it: None is
#: ``gpufair simulate``'s own default, the demo trace and its cluster)
GRID_KEYS: dict[str, tuple[str, Any]] = {
    "policy": ("policy", None),
    "trace": ("trace", None),
    "throughputs": ("throughputs", None),
    "cluster": ("cluster", None),
    "gpus_per_server": ("gpus_per_server", None),
    "round": ("round_s", DEFAULT_ROUND_S),
    "seed": ("seed", 0),
    "semantics": ("semantics", "clean"),
}
TOP_KEYS = ("name", "out", "time_limit", "grid", "policies", "slurm")


@dataclass(frozen=True)
class Cell:
    """One simulation of the sweep. ``key`` is what the cell *is* (every parameter and the
    content of its input files): the same key in the results directory means the same
    result, so a finished cell is never run again and an edited trace is."""

    index: int
    params: Mapping[str, Any]
    options: Mapping[str, Any]
    key: str

    @property
    def name(self) -> str:
        return f"{self.index:04d}-{self.key[:12]}"

    def spec(self) -> SimulationSpec:
        p = self.params
        return SimulationSpec(trace=p["trace"], throughputs=p["throughputs"],
                              cluster=p["cluster"], gpus_per_server=p["gpus_per_server"],
                              policy=p["policy"], round_s=float(p["round"]), seed=int(p["seed"]),
                              semantics=p["semantics"], policy_options=dict(self.options))

    def label(self) -> dict[str, Any]:
        """The cell's parameters as a table row shows them: file names, not paths."""
        row = {k: (Path(v).name if k in ("trace", "throughputs") and v else v)
               for k, v in self.params.items()}
        row.update({f"{self.params['policy']}.{k}": v for k, v in self.options.items()})
        return row


@dataclass(frozen=True)
class Sweep:
    source: str
    name: str
    out: Path
    time_limit_s: float | None
    cells: tuple[Cell, ...]
    slurm: SlurmArrayOptions = field(default_factory=SlurmArrayOptions)

    @property
    def key(self) -> str:
        """The sweep's identity: its cells' keys in order. A results directory holding
        another key is another sweep's, and is refused rather than mixed."""
        return hashlib.sha256("\n".join(c.key for c in self.cells).encode()).hexdigest()


def load_sweep(path: str | os.PathLike[str]) -> Sweep:
    source = str(path)
    text = read_text(path, "sweep file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(source, f"invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError(source, "nested too deeply") from None
    return sweep_from_dict(data, source, base=Path(path).resolve().parent)


def sweep_from_dict(data: Mapping[str, Any], source: str, *, base: Path) -> Sweep:
    for key in data:
        if key not in TOP_KEYS:
            raise InputError(source, f"unknown key; expected one of {', '.join(TOP_KEYS)}",
                             field=key)
    stem = Path(source).stem
    name = _text(data.get("name", stem), source, "name")
    out = Path(_text(data.get("out", f"{stem}.results"), source, "out"))
    time_limit = data.get("time_limit")
    if time_limit is not None and (isinstance(time_limit, bool) or
                                   not isinstance(time_limit, int | float) or time_limit <= 0):
        raise InputError(source, "must be a positive number of seconds", field="time_limit",
                         value=time_limit)
    grid = _table(data.get("grid"), source, "grid")
    if "policy" not in grid:
        raise InputError(source, "the grid must name at least one policy", field="grid.policy")
    axes = {key: _axis(grid, key, source) for key in grid}
    for key in axes:
        if key not in GRID_KEYS:
            raise InputError(source, f"unknown grid key; expected one of "
                             f"{', '.join(GRID_KEYS)}", field=f"grid.{key}")
    axes["policy"] = [resolve_policy(_text(p, source, "grid.policy"), source=source,
                                     field="grid.policy") for p in axes["policy"]]
    for key, (_, default) in GRID_KEYS.items():
        axes.setdefault(key, [default])
    axes["trace"] = [_input(v, source, base, "grid.trace", load_trace) for v in axes["trace"]]
    axes["throughputs"] = [_input(v, source, base, "grid.throughputs", load_throughputs)
                           for v in axes["throughputs"]]
    _check_values(axes, source)
    options = _policy_options(data.get("policies"), axes["policy"], source)
    cells = _expand(axes, options, source)
    slurm = SlurmArrayOptions.from_table(data.get("slurm"), source)
    return Sweep(source=source, name=name, out=out if out.is_absolute() else base / out,
                 time_limit_s=None if time_limit is None else float(time_limit),
                 cells=tuple(cells), slurm=slurm)


def _text(value: Any, source: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(source, "must be a non-empty string", field=key, value=value)
    return value


def _table(value: Any, source: str, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(source, "missing or not a table", field=key)
    return value


def _axis(table: Mapping[str, Any], key: str, source: str, *, prefix: str = "grid") -> list:
    value = table[key]
    values = value if isinstance(value, list) else [value]
    if not values:
        raise InputError(source, "empty grid: give at least one value", field=f"{prefix}.{key}")
    return values


def _input(value: Any, source: str, base: Path, key: str, reader: Any) -> str | None:
    """An input file of the grid, as an absolute path, read once here so that a missing or
    malformed file stops the sweep before it starts (the error names the key)."""
    if value is None:
        return None
    name = _text(value, source, key)
    local = base / name
    path = str(local) if local.exists() or Path(name).name != name else resolve(name)
    try:
        reader(path)
    except InputError as exc:
        raise InputError(source, f"{key} = {name!r} cannot be read: {exc}") from None
    return str(Path(path).resolve())


def _check_values(axes: dict[str, list], source: str) -> None:
    for value in (v for v in axes["cluster"] if v is not None):
        try:
            parse_cluster_spec(_text(value, source, "grid.cluster"))
        except InputError as exc:
            raise InputError(source, f"grid.cluster = {value!r}: {exc}") from None
    for value in axes["semantics"]:
        try:
            semantics_named(_text(value, source, "grid.semantics"))
        except (KeyError, ValueError, InputError):
            raise InputError(source, "unknown semantics (artifact or clean)",
                             field="grid.semantics", value=value) from None
    for key, kind in (("round", (int, float)), ("seed", (int,))):
        for value in axes[key]:
            if isinstance(value, bool) or not isinstance(value, kind) or value < 0 or \
                    (key == "round" and value == 0):
                raise InputError(source, "must be a positive number" if key == "round" else
                                 "must be a whole number >= 0", field=f"grid.{key}",
                                 value=value)


def _policy_options(table: Any, policies: list[str], source: str
                    ) -> dict[str, list[dict[str, Any]]]:
    """Each policy's option combinations (one empty combination when it has none), each
    checked by building the policy with it: the policy's own schema is the judge."""
    table = {} if table is None else _table(table, source, "policies")
    combos: dict[str, list[dict[str, Any]]] = {}
    for raw_name, options in table.items():
        name = resolve_policy(raw_name, source=source, field=f"policies.{raw_name}")
        if name not in policies:
            raise InputError(source, "options for a policy the grid does not run",
                             field=f"policies.{raw_name}")
        options = _table(options, source, f"policies.{raw_name}")
        keys = list(options)
        values = [_axis(options, k, source, prefix=f"policies.{raw_name}") for k in keys]
        combos[name] = [dict(zip(keys, combo, strict=True))
                        for combo in itertools.product(*values)]
    for name in policies:
        for combo in combos.setdefault(name, [{}]):
            try:
                create_policy(name, PolicyConfig(options=combo,
                                                 options_source=f"{source} [policies.{name}]"))
            except InputError:
                raise
            except (TypeError, ValueError) as exc:
                raise InputError(source, f"invalid options {combo}: {exc}",
                                 field=f"policies.{name}") from None
    return combos


def _expand(axes: dict[str, list], options: dict[str, list[dict[str, Any]]], source: str
            ) -> list[Cell]:
    keys = list(GRID_KEYS)
    cells: list[Cell] = []
    seen: dict[str, int] = {}
    digests = {v: _file_sha256(v) for k in ("trace", "throughputs") for v in axes[k] if v}
    for combo in itertools.product(*(axes[k] for k in keys)):
        params = dict(zip(keys, combo, strict=True))
        for opts in options[params["policy"]]:
            identity = {**params, "options": opts,
                        "files": {k: digests.get(params[k]) for k in ("trace", "throughputs")}}
            key = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str)
                                 .encode()).hexdigest()
            if key in seen:
                raise InputError(source, f"duplicate cells: {_describe(params, opts)} is "
                                 f"both cell {seen[key]} and cell {len(cells)} (a value "
                                 "repeated in the grid)", field="grid")
            seen[key] = len(cells)
            cells.append(Cell(index=len(cells), params=params, options=opts, key=key))
    return cells


def _describe(params: Mapping[str, Any], opts: Mapping[str, Any]) -> str:
    shown = {k: (Path(v).name if k in ("trace", "throughputs") and v else v)
             for k, v in params.items() if v is not None}
    return json.dumps({**shown, **opts}, sort_keys=True, default=str)


def _file_sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()

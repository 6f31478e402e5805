"""The versioned JSON snapshot of a :class:`ClusterState`.

A snapshot lets an admin save the queue exactly as an adapter saw it and replay scheduling
decisions on it (``gpufair dry-run``) or attach it to a bug report. It is therefore strict in
both directions:

* every field of every record is written, so a loaded snapshot equals the state that was saved
  (``state_from_dict(state_to_dict(s)) == s``), and a policy sees the same input on replay;
* a hand-edited snapshot is validated before use, and every problem is reported with its JSON
  path and value (``snap.json: field 'jobs[3].gpus' = -2: must be >= 1``), because a dry run
  on a silently "repaired" state would explain decisions about a cluster that never existed.

The structure lives in ``snapshot.schema.json`` (JSON Schema draft 2020-12, shipped with the
package so that other tools can check snapshots too); the rules a schema cannot express
(unique names, references between records, GPUs held) are checked here.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

from gpufair.errors import InputError, json_kind, parse_json, read_text
from gpufair.model.records import (
    Adaptation,
    ClusterState,
    GpuType,
    HostRequest,
    Job,
    JobState,
    Node,
    NodeState,
    Progress,
    Tenant,
    ThroughputProfile,
)

__all__ = [
    "FORMAT",
    "SNAPSHOT_VERSION",
    "SUPPORTED_VERSIONS",
    "check_snapshot",
    "dump_snapshot",
    "load_snapshot",
    "snapshot_schema",
    "state_from_dict",
    "state_to_dict",
    "validate_snapshot",
]

FORMAT = "gpufair-snapshot"
SNAPSHOT_VERSION = 1
#: Versions this code can read. A new version gets its own schema and a converter to the
#: current one, so that old saved snapshots keep loading.
SUPPORTED_VERSIONS: tuple[int, ...] = (1,)

_SCHEMA_FILE = "snapshot.schema.json"
_JOB_STATES = frozenset(s.value for s in JobState)
_HOLDING_STATES = frozenset((JobState.RUNNING.value, JobState.SUSPENDED.value))
_SURROGATE = re.compile("[\ud800-\udfff]")
_GPU_ID = re.compile(r"^(?P<node>.+):(?P<index>0|[1-9][0-9]*)$")

PathElem = str | int


# --------------------------------------------------------------------------------------------
# State -> JSON-ready dict


def state_to_dict(state: ClusterState, *,
                  source: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return ``state`` as plain JSON types (dicts, lists, str, numbers, None).

    Every dataclass field is written, defaults included, so a snapshot is self-describing and
    two snapshots diff field by field. Enums become their values, tuples become lists, and a
    :class:`ThroughputProfile` becomes a list of ``{"gpu_type", "gpus", "iterations_per_s"}``
    sorted by type and count (JSON objects cannot have tuple keys; sorting keeps files
    diffable). ``source`` is optional metadata (``adapter``, ``taken_at``) that is not part of
    the state and is ignored on load.
    """
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": SNAPSHOT_VERSION,
        "time_s": state.time_s,
        "gpu_types": [_record_to_dict(t) for t in state.gpu_types],
        "nodes": [_record_to_dict(n) for n in state.nodes],
        "tenants": [_record_to_dict(t) for t in state.tenants],
        "jobs": [_record_to_dict(j) for j in state.jobs],
    }
    if source is not None:
        data["source"] = dict(source)
    return data


def _record_to_dict(record: Any) -> dict[str, Any]:
    # Generic over dataclasses.fields so that a field added to records.py is written without
    # touching this module (the schema, with additionalProperties false, and the round-trip
    # tests then force the reading side to be updated too).
    return {f.name: _value_to_json(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _value_to_json(value: Any) -> Any:
    if isinstance(value, ThroughputProfile):
        return [{"gpu_type": gpu_type, "gpus": count, "iterations_per_s": rate}
                for (gpu_type, count), rate in sorted(value.rates.items())]
    if isinstance(value, (Progress, HostRequest)):
        return _record_to_dict(value)
    if isinstance(value, (JobState, NodeState, Adaptation)):
        return value.value
    if isinstance(value, tuple):
        return [_value_to_json(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# JSON-ready dict -> State


def state_from_dict(data: Any, source: str = "<snapshot>") -> ClusterState:
    """Validate ``data`` (a parsed snapshot) and build the :class:`ClusterState` it describes.

    Validation comes first so that the builder can trust every type and reference; the first
    problem is raised as :class:`InputError` naming ``source`` and the field's JSON path.
    Omitted optional fields take the record's default.
    """
    check_snapshot(data, source)
    return ClusterState(
        time_s=float(data["time_s"]),
        gpu_types=tuple(_build(GpuType, r, _GPU_TYPE_FIELDS) for r in data.get("gpu_types", ())),
        nodes=tuple(_build(Node, r, _NODE_FIELDS) for r in data.get("nodes", ())),
        tenants=tuple(_build(Tenant, r, _TENANT_FIELDS) for r in data.get("tenants", ())),
        jobs=tuple(_build(Job, r, _JOB_FIELDS) for r in data.get("jobs", ())),
    )


def _optional(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else convert(v)


def _progress(data: Mapping[str, Any]) -> Progress:
    return _build(Progress, data, _PROGRESS_FIELDS)


def _throughput(entries: Iterable[Mapping[str, Any]]) -> ThroughputProfile:
    return ThroughputProfile({(e["gpu_type"], int(e["gpus"])): float(e["iterations_per_s"])
                              for e in entries})


def _held(gpus: Iterable[str]) -> tuple[str, ...]:
    return tuple(gpus)


# Numbers are normalised to the annotated type: JSON writes 3.0 as ``3.0`` but a hand-edited
# file may say ``3`` for a float field or ``2.0`` for a count (the schema accepts both), and
# policies should not have to care. Fields not listed are strings (or None) and kept as is.
_GPU_TYPE_FIELDS: dict[str, Callable[[Any], Any]] = {"memory_gb": _optional(float)}
_NODE_FIELDS: dict[str, Callable[[Any], Any]] = {
    "gpus": int, "state": NodeState, "unavailable": lambda xs: tuple(int(x) for x in xs),
    "cpus": _optional(int), "memory_mb": _optional(int), "cpus_unavailable": int,
    "memory_unavailable_mb": int}
_TENANT_FIELDS: dict[str, Callable[[Any], Any]] = {"weight": float}
_PROGRESS_FIELDS: dict[str, Callable[[Any], Any]] = {
    "iterations_done": float, "iterations_total": _optional(float),
    "epochs_done": int, "epochs_total": _optional(int),
}
_HOST_FIELDS: dict[str, Callable[[Any], Any]] = {
    "cpus_per_node": int, "cpus_per_gpu": int, "memory_per_node_mb": int,
    "memory_per_gpu_mb": int, "memory_per_cpu_mb": int}
_JOB_FIELDS: dict[str, Callable[[Any], Any]] = {
    "gpus": int, "min_gpus": _optional(int), "max_gpus": _optional(int),
    "state": JobState, "arrival_s": float, "start_s": _optional(float),
    "finish_s": _optional(float), "progress": _progress, "throughput": _throughput,
    "batch_size": _optional(int), "initial_batch_size": _optional(int),
    "adaptation": Adaptation, "weight": float, "attained_s": float, "restarts": int,
    "owner_uid": _optional(int), "owner_gid": _optional(int), "nodes": _optional(int),
    "allowed_nodes": _optional(tuple), "gpu_types": _optional(tuple),
    "gpus_held": _held, "samples_per_epoch": _optional(int), "max_batch_size": _optional(int),
    "batch_rates": lambda pairs: tuple((int(b), float(r)) for b, r in pairs),
    "host": lambda data: None if data is None else _build(HostRequest, data, _HOST_FIELDS),
    "time_limit_s": _optional(float),
}


def _build(cls: type, data: Mapping[str, Any], convert: Mapping[str, Callable[[Any], Any]]
           ) -> Any:
    return cls(**{k: convert.get(k, _same)(v) for k, v in data.items()})


def _same(value: Any) -> Any:
    return value


# --------------------------------------------------------------------------------------------
# Files


def dump_snapshot(state: ClusterState, path: str | os.PathLike[str], *,
                  adapter: str | None = None) -> None:
    """Write ``state`` to ``path`` as UTF-8 JSON (sorted keys, indent 2, trailing newline).

    The state is *not* validated: saving an inconsistent state from a live adapter is exactly
    when a snapshot is most useful for a bug report, and ``load_snapshot`` will then name the
    problem. Non-finite numbers are refused (strict JSON, so ``jq`` and other tools can read
    the file). The file is replaced atomically so a crash never leaves half a snapshot.
    ``adapter`` records which adapter took the snapshot, with the current UTC time.
    """
    meta = None
    if adapter is not None:
        meta = {"adapter": adapter,
                "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    data = state_to_dict(state, source=meta)
    bad = next(_nonfinite(data, ()), None)
    if bad is not None:
        raise InputError(str(path), "cannot be saved: JSON has no NaN or infinity",
                         field=_format_path(bad[0]), value=bad[1])
    text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_snapshot(path: str | os.PathLike[str]) -> ClusterState:
    """Read and validate a snapshot file.

    Every failure is an :class:`InputError` starting with the file name: unreadable file, not
    UTF-8, invalid JSON (with the line, and the column in the message), duplicate keys in an
    object (JSON parsers silently keep the last one, which hides edit mistakes), or the first
    validation problem. Use :func:`validate_snapshot` to list them all.
    """
    return state_from_dict(read_snapshot_json(path), str(path))


def read_snapshot_json(path: str | os.PathLike[str]) -> Any:
    """The parsed JSON document of a snapshot file, not yet validated."""
    return parse_json(read_text(path, "snapshot", bom=True), str(path))


# --------------------------------------------------------------------------------------------
# Validation


@dataclasses.dataclass(frozen=True, slots=True)
class _Problem:
    path: tuple[PathElem, ...]
    value: Any
    problem: str

    def error(self, source: str) -> InputError:
        return InputError(source, self.problem, field=_format_path(self.path) or None,
                          value=self.value)


def validate_snapshot(data: Any, source: str) -> list[str]:
    """Return every problem in ``data`` as a message (empty if valid), for ``gpufair validate``.

    Reporting all problems at once, rather than the first, saves an admin one edit-and-rerun
    cycle per mistake. Messages are sorted by JSON path.
    """
    return [str(p.error(source)) for p in _problems(data)]


def check_snapshot(data: Any, source: str) -> None:
    """Raise :class:`InputError` for the first problem in ``data``; return if it is valid."""
    problems = _problems(data)
    if problems:
        first = problems[0]
        if len(problems) > 1:
            more = len(problems) - 1
            first = dataclasses.replace(
                first, problem=f"{first.problem} (and {more} more problem{'s' * (more > 1)};"
                               " see 'gpufair validate')")
        raise first.error(source)


@lru_cache(maxsize=1)
def snapshot_schema() -> dict[str, Any]:
    """The JSON Schema of the current snapshot version, as shipped in the package."""
    text = resources.files("gpufair.model").joinpath(_SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    return Draft202012Validator(snapshot_schema())


def _problems(data: Any) -> list[_Problem]:
    if not isinstance(data, dict):
        return [_Problem((), None, f"a snapshot must be a JSON object, not {json_kind(data)}")]
    # Format and version first: a different document (or a future version) would otherwise
    # drown the one useful message in schema errors about fields it does not know.
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        return [_Problem(("format",), fmt, f"not a gpufair snapshot (must be {FORMAT!r})")]
    version = data.get("version")
    if "version" in data and not _supported(version):
        newer = _number(version) is not None and version > max(SUPPORTED_VERSIONS)
        return [_Problem(("version",), version,
                         "unsupported snapshot version; this gpufair reads version"
                         f"{'s' * (len(SUPPORTED_VERSIONS) > 1)} "
                         f"{', '.join(map(str, SUPPORTED_VERSIONS))}"
                         f"{' (a newer gpufair wrote it: upgrade to load it)' * newer}")]
    found = [p for e in _validator().iter_errors(data) for p in _from_schema_error(e)]
    found += _semantic_problems(data)
    unique = {(p.path, p.problem): p for p in found}  # "required" errors can repeat
    return sorted(unique.values(), key=lambda p: _path_key(p.path))


def _supported(version: Any) -> bool:
    return isinstance(version, (int, float)) and not isinstance(version, bool) \
        and version in SUPPORTED_VERSIONS


_TYPE_NAMES = {"integer": "an integer", "number": "a number", "string": "a string",
               "null": "null", "object": "an object", "array": "a list",
               "boolean": "true or false"}


def _from_schema_error(err: ValidationError) -> Iterator[_Problem]:
    """Turn one jsonschema error into problems that name a field and speak admin."""
    path = tuple(err.absolute_path)
    kind, expected, value = err.validator, err.validator_value, err.instance
    if kind == "required":
        missing = [p for p in expected if isinstance(value, dict) and p not in value]
        named = [p for p in missing if err.message.startswith(repr(p))]
        for name in named or missing:
            yield _Problem((*path, name), None, "required field is missing")
    elif kind == "additionalProperties" and isinstance(value, dict):
        allowed = list(err.schema.get("properties", {}))
        for key in value:
            if key in allowed:
                continue
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else \
                f"allowed: {', '.join(sorted(allowed))}"
            yield _Problem((*path, key), value[key], f"unknown field; {hint}")
    elif kind == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        got = f", got {json_kind(value)}" if value is None or isinstance(value, bool) else ""
        yield _Problem(path, value,
                       f"must be {' or '.join(_TYPE_NAMES.get(n, n) for n in names)}{got}")
    elif kind in _COMPARISONS:
        yield _Problem(path, value, f"must be {_COMPARISONS[kind]} {expected}")
    elif kind == "minLength":
        yield _Problem(path, value, "must not be empty" if expected == 1 else
                       f"must have at least {expected} characters")
    elif kind == "enum":
        yield _Problem(path, value, f"must be one of {', '.join(map(repr, expected))}")
    elif kind == "const":
        yield _Problem(path, value, f"must be {expected!r}")
    elif kind == "pattern":
        described = err.schema.get("description")
        yield _Problem(path, value, f"must be {described}" if described else
                       f"must match {expected!r}")
    else:  # keywords this schema does not use today: fall back to jsonschema's wording
        yield _Problem(path, value, err.message)


_COMPARISONS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=",
                "exclusiveMaximum": "<"}


def _semantic_problems(data: Mapping[str, Any]) -> list[_Problem]:
    """Rules a JSON Schema cannot state: uniqueness, references between records, GPUs held.

    These run even when the schema found problems, so one pass reports everything; each check
    skips values of the wrong type (the schema has already reported those).
    """
    out: list[_Problem] = list(
        _Problem(where, value, "must be a finite number") for where, value in _nonfinite(data, ())
    )
    out += [_Problem(where, value, "must be text without lone surrogates (\\ud800-\\udfff "
                                   "escapes that encode no character)")
            for where, value in _broken_text(data, ())]
    for key, name_field, what in (("gpu_types", "name", "GPU type"), ("nodes", "name", "node"),
                                  ("tenants", "name", "tenant"), ("jobs", "id", "job id")):
        out += _duplicates(data, key, name_field, what)

    type_names = _names(data, "gpu_types", "name")
    if type_names:
        for i, node in _records(data, "nodes"):
            gpu_type = node.get("gpu_type")
            if isinstance(gpu_type, str) and gpu_type not in type_names:
                out.append(_Problem(("nodes", i, "gpu_type"), gpu_type,
                                    f"unknown GPU type; gpu_types lists {_listing(type_names)}"))

    tenant_names = _names(data, "tenants", "name")
    if tenant_names:
        for i, job in _records(data, "jobs"):
            tenant = job.get("tenant", "default")
            if isinstance(tenant, str) and tenant not in tenant_names:
                implicit = "" if "tenant" in job else " (the default when 'tenant' is omitted)"
                out.append(_Problem(("jobs", i, "tenant"), tenant,
                                    f"unknown tenant{implicit}; tenants lists "
                                    f"{_listing(tenant_names)}"))

    node_gpus: dict[str, int | None] = {}
    for _, node in _records(data, "nodes"):
        name = node.get("name")
        if isinstance(name, str) and name not in node_gpus:
            count = _int(node.get("gpus"))
            node_gpus[name] = count if count is not None and count >= 0 else None

    holder: dict[str, tuple[str, int]] = {}
    for i, job in _records(data, "jobs"):
        out += _job_problems(i, job, node_gpus, holder)

    src = data.get("source")
    if isinstance(src, dict) and isinstance(src.get("taken_at"), str) \
            and not _is_iso_time(src["taken_at"]):
        out.append(_Problem(("source", "taken_at"), src["taken_at"],
                            "must be an ISO 8601 time such as '2024-05-14T09:30:00+00:00'"))
    return out


def _job_problems(i: int, job: Mapping[str, Any], node_gpus: Mapping[str, int | None],
                  holder: dict[str, tuple[str, int]]) -> list[_Problem]:
    """Checks within one job, plus GPUs shared with earlier jobs (``holder`` accumulates)."""
    out: list[_Problem] = []
    at = ("jobs", i)
    gpus = _count(job.get("gpus", 1))
    lo, hi = _count(job.get("min_gpus")), _count(job.get("max_gpus"))
    if lo is not None and hi is not None and lo > hi:
        out.append(_Problem((*at, "max_gpus"), hi, f"must be >= min_gpus ({lo})"))
    elif gpus is not None and lo is not None and gpus < lo:
        out.append(_Problem((*at, "gpus"), gpus, f"must be >= min_gpus ({lo})"))
    elif gpus is not None and hi is not None and gpus > hi:
        out.append(_Problem((*at, "gpus"), gpus, f"must be <= max_gpus ({hi})"))

    arrival = _number(job.get("arrival_s", 0.0))
    start, finish = _number(job.get("start_s")), _number(job.get("finish_s"))
    if arrival is not None and start is not None and start < arrival:
        out.append(_Problem((*at, "start_s"), start, f"must be >= arrival_s ({arrival})"))
    if finish is not None:
        if arrival is not None and finish < arrival:
            out.append(_Problem((*at, "finish_s"), finish, f"must be >= arrival_s ({arrival})"))
        elif start is not None and finish < start:
            out.append(_Problem((*at, "finish_s"), finish, f"must be >= start_s ({start})"))

    progress = job.get("progress")
    if isinstance(progress, dict):
        for done_key, total_key in (("iterations_done", "iterations_total"),
                                    ("epochs_done", "epochs_total")):
            done, total = _number(progress.get(done_key)), _number(progress.get(total_key))
            if done is not None and total is not None and done > total:
                out.append(_Problem((*at, "progress", done_key), done,
                                    f"must be <= {total_key} ({total})"))

    seen_rates: dict[tuple[str, int], int] = {}
    throughput = job.get("throughput")
    for k, entry in enumerate(throughput if isinstance(throughput, list) else ()):
        if not isinstance(entry, dict):
            continue
        gpu_type, count = entry.get("gpu_type"), _count(entry.get("gpus"))
        if isinstance(gpu_type, str) and count is not None:
            first = seen_rates.setdefault((gpu_type, count), k)
            if first != k:
                out.append(_Problem((*at, "throughput", k), entry,
                                    f"second rate for {count} x {gpu_type} "
                                    f"(first is throughput[{first}])"))

    out += _held_problems(at, job, gpus, lo, hi, node_gpus, holder)
    return out


def _held_problems(at: tuple[PathElem, ...], job: Mapping[str, Any], gpus: int | None,
                   lo: int | None, hi: int | None, node_gpus: Mapping[str, int | None],
                   holder: dict[str, tuple[str, int]]) -> list[_Problem]:
    held = job.get("gpus_held")
    if not isinstance(held, list) or not held:
        return []
    out: list[_Problem] = []
    job_id = job.get("id")
    state = job.get("state", JobState.PENDING.value)
    if state in _JOB_STATES and state not in _HOLDING_STATES:
        out.append(_Problem((*at, "gpus_held"), held,
                            f"only running or suspended jobs hold GPUs; this job is {state!r}"))
    elastic = lo is not None and hi is not None and lo != hi
    if elastic and lo is not None and hi is not None and not lo <= len(held) <= hi:
        out.append(_Problem((*at, "gpus_held"), held,
                            f"holds {len(held)} GPUs; this elastic job must hold between "
                            f"min_gpus and max_gpus ({lo}..{hi})"))
    elif not elastic and gpus is not None and len(held) != gpus:
        out.append(_Problem((*at, "gpus_held"), held,
                            f"holds {len(held)} GPUs but gpus = {gpus}"))

    mine: set[str] = set()
    for k, gpu in enumerate(held):
        match = _GPU_ID.match(gpu) if isinstance(gpu, str) else None
        if match is None:
            continue  # reported by the schema
        where = (*at, "gpus_held", k)
        node, index = match["node"], int(match["index"])
        if node not in node_gpus:
            out.append(_Problem(where, gpu, f"no node named {node!r} in nodes"))
        elif (count := node_gpus[node]) is not None and index >= count:
            indices = f"indices 0..{count - 1}" if count else "no GPU to hold"
            out.append(_Problem(where, gpu, f"node {node!r} has {count} GPUs ({indices})"))
        if gpu in mine:
            out.append(_Problem(where, gpu, "listed twice in this job"))
            continue
        mine.add(gpu)
        if gpu in holder:
            other, other_index = holder[gpu]
            out.append(_Problem(where, gpu, f"also held by job {other!r} "
                                            f"(jobs[{other_index}])"))
        else:
            holder[gpu] = (str(job_id), int(at[1]))
    return out


def _duplicates(data: Mapping[str, Any], key: str, name_field: str, what: str
                ) -> list[_Problem]:
    first: dict[str, int] = {}
    out = []
    for i, record in _records(data, key):
        name = record.get(name_field)
        if not isinstance(name, str):
            continue
        if name in first:
            out.append(_Problem((key, i, name_field), name,
                                f"duplicate {what}; first used by {key}[{first[name]}]"))
        else:
            first[name] = i
    return out


def _records(data: Mapping[str, Any], key: str) -> list[tuple[int, dict[str, Any]]]:
    items = data.get(key)
    if not isinstance(items, list):
        return []
    return [(i, r) for i, r in enumerate(items) if isinstance(r, dict)]


def _names(data: Mapping[str, Any], key: str, name_field: str) -> list[str]:
    names = (r.get(name_field) for _, r in _records(data, key))
    return list(dict.fromkeys(n for n in names if isinstance(n, str)))


def _listing(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(map(repr, names[:limit]))
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _int(value: Any) -> int | None:
    """``value`` as a count if it is one (the schema accepts 2.0), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _count(value: Any) -> int | None:
    """``value`` as a GPU count if it is a valid one (>= 1), else None: a count the schema
    rejected must not also trigger follow-on messages (gpus = 0 vs the GPUs held)."""
    count = _int(value)
    return count if count is not None and count >= 1 else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def _nonfinite(value: Any, path: tuple[PathElem, ...]
               ) -> Iterator[tuple[tuple[PathElem, ...], float]]:
    # jsonschema lets NaN through every "minimum" (all comparisons with NaN are false), and
    # Python's json reads NaN and Infinity, so this is the only place they are caught.
    if isinstance(value, float) and not math.isfinite(value):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _nonfinite(v, (*path, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            yield from _nonfinite(v, (*path, k))


def _broken_text(value: Any, path: tuple[PathElem, ...]
                 ) -> Iterator[tuple[tuple[PathElem, ...], str]]:
    # JSON's \\ud800 escapes decode to lone surrogates, which no UTF-8 output (the dry run's
    # table, the store, the logs) can encode: refused here, named, rather than there.
    if isinstance(value, str) and _SURROGATE.search(value):
        yield path, value.encode("utf-8", "backslashreplace").decode("ascii")
    elif isinstance(value, dict):
        for k, v in value.items():
            if _SURROGATE.search(k):
                yield (*path, k.encode("utf-8", "backslashreplace").decode("ascii")), k
            yield from _broken_text(v, (*path, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            yield from _broken_text(v, (*path, k))


def _is_iso_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return False
    return True


def _format_path(path: Iterable[PathElem]) -> str:
    """``("jobs", 3, "gpus")`` → ``jobs[3].gpus``: the spelling admins see in messages."""
    out = ""
    for elem in path:
        out += f"[{elem}]" if isinstance(elem, int) else (f".{elem}" if out else str(elem))
    return out


def _path_key(path: tuple[PathElem, ...]) -> tuple[tuple[int, int, str], ...]:
    # Indices sort numerically (jobs[10] after jobs[9]); the tag keeps int and str comparable.
    return tuple((0, e, "") if isinstance(e, int) else (1, 0, e) for e in path)

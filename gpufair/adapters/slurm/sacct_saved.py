"""Saved ``sacct --parsable2`` output (with its header, fields in any order) as a job history.

``sacct -X -D --parsable2 -o JobID,User,Account,QOS,Partition,Submit,Start,End,State,
AllocTRES,ReqTRES,NNodes,Timelimit`` is what an admin saves; every field but the first six
named here may be missing, and others (JobName, WorkDir, ...) may be present and are ignored.
``NNodes`` (else ``AllocNodes``, else ``ReqNodes``) and ``Timelimit`` (else ``TimelimitRaw``)
are read by :mod:`~gpufair.adapters.slurm.sacct_limits`. Times are
sacct's ``YYYY-MM-DDTHH:MM:SS`` in the local time of the machine that ran it (only their
differences matter to a replay); ``Unknown``/``None`` mean "not yet". GPUs come from
``gres/gpu=N`` (or the ``gres/gpu:TYPE=N`` entries) of AllocTRES, else of ReqTRES.

The table is read with pandas (about 20 times faster than a Python loop per line on a
million lines); bytes that are not UTF-8 are kept as they are in fields gpufair ignores (a
user's job name), and are an error in a field it reads.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from gpufair.adapters.history.table import History, build_history, checked_lines, iso_times
from gpufair.adapters.slurm.sacct_limits import node_count_column, time_limit_column
from gpufair.errors import InputError

#: sacct field (lower case) → canonical column
FIELDS = {"jobid": "job_id", "user": "user", "account": "account", "qos": "qos",
          "partition": "partition", "submit": "submit", "start": "start", "end": "end",
          "state": "state", "alloctres": "alloc_tres", "reqtres": "req_tres",
          "nnodes": "nodes", "allocnodes": "alloc_nodes", "reqnodes": "req_nodes",
          "timelimit": "time_limit", "timelimitraw": "time_limit_raw"}
REQUIRED = ("jobid", "submit", "start", "end", "state")
#: what sacct prints for a time that has not come
NO_TIME = frozenset({"", "Unknown", "None", "N/A"})
_HIGH = re.compile("[\x80-\xff]")


#: rows converted at a time: the raw text columns of one chunk are all that is held at once
CHUNK_ROWS = 200_000


def read_sacct_text(path: str | Path, *, tenant: str | None = None,
                    now: float | None = None) -> History:
    """The history in a saved ``sacct --parsable2`` file (``now``: local-time epoch seconds
    end times are checked against; default the clock).

    Read in chunks of :data:`CHUNK_ROWS` rows, each turned into numbers and the few text
    columns the rules need before the next is read: a million lines stay well under 1.5 GB.
    """
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(source, f"cannot read the history: {exc.strerror or exc}") from None
    return parse_sacct_text(data, source, tenant=tenant, now=now)


def parse_sacct_text(data: bytes, source: str, *, tenant: str | None = None,
                     now: float | None = None) -> History:
    """The history in ``sacct --parsable2`` output held in memory (what a live ``sacct``
    run returns); ``source`` names it in errors."""
    try:
        data.decode("utf-8")
        encoding = "utf-8-sig"
    except UnicodeDecodeError:   # read byte for byte; fields read are decoded one by one
        encoding = "latin-1"
    head = data[:1 << 16].decode(encoding, errors="replace").removeprefix("\ufeff")
    header_line, header, trailing = _header(head, source)
    names = [FIELDS.get(h.strip().lower(), f"other:{h}") for h in header]
    fields = {canon: h.strip() for canon, h in zip(names, header, strict=True)}
    lines = checked_lines(data, header_line, header, "|", trailing, source)
    wanted = [n for n in names if not n.startswith("other:")]
    try:
        chunks = pd.read_csv(io.BytesIO(data), sep="|", header=None, encoding=encoding,
                             names=[*names, "other:trailing"] if trailing else names,
                             usecols=wanted, skiprows=header_line, dtype=str,
                             keep_default_na=False, na_values=[], quoting=csv.QUOTE_NONE,
                             skip_blank_lines=True, engine="c", chunksize=CHUNK_ROWS)
        tables, steps, done = [], 0, 0
        for raw in chunks:
            raw["line"] = lines[done:done + len(raw)]
            done += len(raw)
            table, skipped = _canonical(raw, fields, source, encoding == "latin-1")
            tables.append(table)
            steps += skipped
    except pd.errors.ParserError as exc:   # (the field counts were checked: not expected)
        raise InputError(source, f"cannot read the table: {exc}") from None
    if not tables:
        raise InputError(source, "the history has no jobs", line=header_line)
    table = pd.concat(tables, ignore_index=True)
    fields["gpus"] = fields["alloc_tres"] if "alloc_tres" in fields else fields["req_tres"]
    notes = [f"{steps} job steps skipped (allocations only: sacct -X)"] if steps else []
    clock = _local_now() if now is None else now
    return build_history(table, source, fields, tenant=tenant, now=clock, notes=tuple(notes))


def _canonical(raw: pd.DataFrame, fields: dict[str, str], source: str, latin1: bool
               ) -> tuple[pd.DataFrame, int]:
    """One chunk's rows as the rules' columns, and how many job steps it skipped."""
    if latin1:
        _decode_fields(raw, fields, source)
    steps = raw["job_id"].str.contains(".", regex=False)
    raw = raw[~steps]
    table = pd.DataFrame({"line": raw["line"].to_numpy(), "job_id": raw["job_id"].to_numpy(),
                          "state": raw["state"].to_numpy()})
    for key in ("user", "account", "qos", "partition"):
        if key in raw.columns:
            table[key] = raw[key].to_numpy()
    for key in ("submit", "start", "end"):
        table[key], table[f"{key}_text"] = iso_times(raw, key, fields, source, NO_TIME)
    if "alloc_tres" in raw.columns:
        # never allocated: 22.05 prints a job cancelled while pending with Start = End (the
        # cancel time) and an empty AllocTRES; it never ran
        unallocated = (raw["alloc_tres"].fillna("").str.strip() == "").to_numpy()
        table.loc[unallocated, "start"] = np.nan
    table["gpus"], table["gpu_type"], table["gpus_text"], _ = _gpus(raw, fields, source)
    nodes = next((k for k in ("nodes", "alloc_nodes", "req_nodes") if k in raw.columns), None)
    if nodes is not None:   # NNodes is what the job had (AllocNodes), else what it asked
        table["nodes"] = node_count_column(raw[nodes], raw["line"], source, fields[nodes])
    if "time_limit" in raw.columns or "time_limit_raw" in raw.columns:
        table["time_limit_s"] = time_limit_column(
            raw.get("time_limit"), raw.get("time_limit_raw"), raw["line"], source,
            fields.get("time_limit", "Timelimit"), fields.get("time_limit_raw", "TimelimitRaw"))
    return table, int(steps.sum())


def _header(text: str, source: str) -> tuple[int, list[str], bool]:
    """The header's line number (1-based), its fields, and whether each line ends with a
    '|' (``--parsable``, not 2); what is wrong if it is not a header."""
    for number, line in enumerate(io.StringIO(text), start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("|")
        trailing = len(fields) > 1 and fields[-1] == ""
        if trailing:
            fields = fields[:-1]
        present = {f.strip().lower() for f in fields}
        missing = [f for f in REQUIRED if f not in present]
        if not missing and ({"alloctres", "reqtres"} & present):
            return number, fields, trailing
        if len(fields) == 1:
            for other in (",", "\t", ";"):
                if other in line:
                    raise InputError(source, f"fields separated by {other!r}, expected "
                                     "sacct --parsable2 output (separated by '|')", line=number)
        if not present & set(FIELDS):
            raise InputError(source, "no header line (the first line is not a list of sacct "
                             "field names: run sacct without --noheader)", line=number)
        needed = [f for f in (*REQUIRED, "alloctres") if f not in present]
        raise InputError(source, "the header lacks the field(s) " + ", ".join(
            _CASE.get(f, f) for f in needed), line=number)
    raise InputError(source, "the history is empty")


_CASE = {"jobid": "JobID", "submit": "Submit", "start": "Start", "end": "End",
         "state": "State", "alloctres": "AllocTRES (or ReqTRES)"}


def _decode_fields(raw: pd.DataFrame, fields: dict[str, str], source: str) -> None:
    """A file that is not all UTF-8 was read as Latin-1, byte for byte: each field the replay
    reads is decoded as UTF-8 again, and bytes that are not UTF-8 there are an error."""
    for canon in fields:
        if canon.startswith("other:") or canon not in raw.columns:
            continue
        column = raw[canon]
        wide = column.fillna("").str.contains(_HIGH)
        for index in raw.index[wide]:
            value = column[index]
            try:
                raw.at[index, canon] = value.encode("latin-1").decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(source, "bytes that are not UTF-8",
                                 line=int(raw.at[index, "line"]), field=fields[canon],
                                 value=value.encode("latin-1")) from None


def _gpus(raw: pd.DataFrame, fields: dict[str, str], source: str
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """GPU count, GPU type ("" untyped) and the TRES text, from AllocTRES (ReqTRES when a job
    was never allocated), and the field name errors should use."""
    alloc = raw["alloc_tres"].fillna("") if "alloc_tres" in raw.columns else None
    req = raw["req_tres"].fillna("") if "req_tres" in raw.columns else None
    if alloc is None:
        tres, name = req, fields["req_tres"]
    else:
        tres = alloc if req is None else alloc.where(alloc != "", req)
        name = fields["alloc_tres"]
    texts = tres.tolist()
    found = [gpu_entries(text) for text in texts]     # one pass of str.find per row: a
    count_text = [f[0] for f in found]                 # regex per row costs 4 times more
    count = pd.to_numeric(pd.Series(count_text, index=tres.index), errors="coerce")
    bad = count.isna() & pd.Series([c is not None for c in count_text], index=tres.index)
    if bad.any():
        row = raw[bad].iloc[0]
        raise InputError(source, "expected gres/gpu=N with a whole number N",
                         line=int(row["line"]), field=name, value=tres[bad].iloc[0])
    return (count.to_numpy(dtype=float, na_value=np.nan),
            np.array([f[1] for f in found], dtype=object), tres.to_numpy(), name)


def gpu_entries(tres: str) -> tuple[str | None, str]:
    """The GPU count's text and the GPU type ("" untyped) of a TRES string such as
    ``billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=8G,node=1``: ``gres/gpu=N`` when it is
    there, else the typed entries' sum; the type when exactly one type is named (a job given
    GPUs of two types, ``gres/gpu:k80=4,gres/gpu:v100=4``, asked for none and may run on
    any); (None, "") without GPUs."""
    at = tres.find("gres/gpu")
    if at < 0:
        return None, ""
    count, types, typed = None, [], 0
    for item in tres[at:].split(","):
        if not item.startswith("gres/gpu"):
            continue
        key, _, value = item.partition("=")
        if key == "gres/gpu":
            count = value
        elif key.startswith("gres/gpu:"):
            types.append(key[9:])
            typed += int(value) if value.isdigit() else 0
    if count is None and types:
        count = str(typed) if typed else value
    return count, types[0] if len(types) == 1 else ""


def _local_now() -> float:
    """The clock as the naive local-time epoch seconds sacct's times are read into."""
    return float(np.datetime64(pd.Timestamp.now().floor("s").isoformat(), "s")
                 .astype(np.int64))

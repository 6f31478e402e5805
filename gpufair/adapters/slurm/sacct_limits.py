"""A job's time limit and node count as sacct writes them, for a replayed history.

Why a module of its own: every sacct shape (live and saved ``--parsable2``, ``--json``) and
the fidelity harness read the same two fields, and ``slurm_backfill`` plans with them; one
parser keeps them from drifting apart.

``Timelimit`` is Slurm's time text: ``[D-]HH:MM:SS`` as sacct prints it, and the other forms
Slurm accepts (``MM``, ``MM:SS``, ``D-HH``, ``D-HH:MM``); ``TimelimitRaw`` and the JSON
``time.limit`` are minutes. None (no limit: the policy's default applies) for ``UNLIMITED``,
``INFINITE``, ``Partition_Limit`` (the partition's, which sacct does not show), an empty
field, 0 and Slurm's NO_VAL/INFINITE minutes (4294967294/5). Anything else is an error.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from gpufair.adapters.slurm.translate import NO_LIMIT_MINUTES  # squeue's rule, the same
from gpufair.errors import InputError

#: texts meaning "no limit of the job's own" (compared lower case)
NO_LIMIT = frozenset({"", "unlimited", "infinite", "partition_limit", "none", "n/a"})
#: the most nodes a job may name: more is no real job (a bad field)
MAX_NODES = 100_000
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def limit_from_minutes(minutes: float) -> float | None:
    """Seconds of a limit given in minutes (NaN: none given); None when it means none."""
    if math.isnan(minutes) or minutes == 0 or minutes in NO_LIMIT_MINUTES:
        return None
    if minutes < 0:
        raise ValueError("a negative time limit")
    return 60.0 * minutes


def parse_time_limit(text: str) -> float | None:
    """Seconds of a Slurm time text, None for no limit; ValueError when it is neither."""
    word = text.strip()
    if word.lower() in NO_LIMIT:
        return None
    found = _TIME.match(word)
    if found is None:
        raise ValueError("expected a time limit like 1-02:00:00, 30:00 or UNLIMITED")
    days, first, second, third = found.groups()
    if days is not None:   # D-HH[:MM[:SS]]
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
    elif third is not None:   # HH:MM:SS
        hours, minutes, seconds = int(first), int(second), int(third)
    else:   # MM[:SS]
        hours, minutes, seconds = 0, int(first), int(second or 0)
    total = 86_400 * int(days or 0) + 3600 * hours + 60 * minutes + seconds
    return float(total) if total else None


def time_limit_column(texts: pd.Series | None, raw_minutes: pd.Series | None, lines: pd.Series,
                      source: str, field: str, raw_field: str) -> np.ndarray:
    """Each row's limit in seconds (NaN: none) from ``Timelimit`` text, else from
    ``TimelimitRaw`` minutes (either may be None: absent); an error naming line and field
    at the first bad value. Parsed once per distinct value: a history has few."""
    out = np.full(len(lines), np.nan)
    for column, name, parse in ((texts, field, parse_time_limit),
                                (raw_minutes, raw_field, _raw_minutes)):
        if column is None:
            continue
        values = column.fillna("").astype(str).to_numpy()
        seconds = {}
        for value in pd.unique(values):
            try:
                seconds[value] = parse(value)
            except ValueError as exc:
                line = int(lines.to_numpy()[np.flatnonzero(values == value)[0]])
                raise InputError(source, str(exc), line=line, field=name,
                                 value=value) from None
        parsed = np.array([np.nan if seconds[v] is None else seconds[v] for v in values],
                          dtype=float)
        out = np.where(np.isnan(out), parsed, out)
        if texts is not None:
            break   # the text is the limit; the raw minutes only stand in where it is absent
    return out


def _raw_minutes(text: str) -> float | None:
    word = text.strip()
    if word.lower() in NO_LIMIT:
        return None
    if not word.isdigit():
        raise ValueError("expected a time limit in whole minutes or UNLIMITED")
    return limit_from_minutes(float(word))


def node_count_column(texts: pd.Series, lines: pd.Series, source: str, field: str
                      ) -> np.ndarray:
    """Each row's node count (NaN: not given; 0, a job never allocated, is not given
    either); an error naming line and field at the first value that is not a whole count."""
    stripped = texts.fillna("").astype(str).str.strip()
    given = (stripped != "").to_numpy()
    numbers = pd.to_numeric(stripped.where(given, "nan"), errors="coerce").to_numpy(float)
    with np.errstate(invalid="ignore"):
        bad = given & (np.isnan(numbers) | (numbers < 0) | (numbers > MAX_NODES)
                       | (numbers != np.floor(numbers)))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InputError(source, f"expected a whole node count from 1 to {MAX_NODES}",
                         line=int(lines.to_numpy()[first]), field=field,
                         value=texts.to_numpy()[first])
    return np.where(numbers == 0, np.nan, numbers)

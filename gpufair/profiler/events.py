"""What a parser extracts from one log line: a ``Sample``, and the counters of what it skipped.

Parsers stay tiny and stateless-ish by emitting these flat records; everything that needs
history (warm-up, restarts, duplicates, regimes) happens once, downstream, for all families.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

TRAIN = "train"
EVAL = "eval"


@dataclass(slots=True)
class Sample:
    """One progress observation.

    ``iter_time_s`` is seconds per iteration when the line states it (``ms/batch``,
    ``Time 0.12``, ``45ms/step``); ``steps_per_s`` / ``samples_per_s`` when it states a rate
    instead. ``cumulative`` marks times or rates averaged since the start of an epoch or run
    (Keras' ``ms/step``, HF's ``train_steps_per_second``) rather than a recent window; the
    summary differences successive cumulative averages to recover windowed ones.
    """

    step: int | None = None
    total_steps: int | None = None
    epoch: float | None = None
    total_epochs: int | None = None
    iter_time_s: float | None = None
    steps_per_s: float | None = None
    samples_per_s: float | None = None
    batch_size: int | None = None
    loss: float | None = None
    phase: str = TRAIN
    cumulative: bool = False
    # for cumulative samples: how many iterations the average covers (Keras: i of i/n in the
    # current epoch); None when it covers the whole run so far
    period_n: int | None = None
    # the job's world size (ranks), on a row of its own where the log states a new one: a
    # new segment begins there (the stream makes these rows, not the parsers)
    world_size: int | None = None

    def seconds_per_iter(self) -> float | None:
        """Seconds per iteration from whatever the line gave (time, step rate, sample rate)."""
        if self.iter_time_s is not None and self.iter_time_s > 0:
            return self.iter_time_s
        if self.steps_per_s is not None and self.steps_per_s > 0:
            return 1.0 / self.steps_per_s
        if self.samples_per_s and self.batch_size:
            return self.batch_size / self.samples_per_s
        return None


_FIELDS = ("lines", "parsed", "ignored", "malformed", "binary", "bytes")
_STATS = operator.attrgetter(*_FIELDS)


@dataclass(slots=True)
class LineStats:
    """How many lines were read, used, and skipped (and why): never an exception."""

    lines: int = 0
    parsed: int = 0
    ignored: int = 0
    malformed: int = 0
    binary: int = 0
    bytes: int = 0

    def add(self, other: LineStats) -> None:
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        # once per job per round: one C-level attrgetter instead of a comprehension
        return dict(zip(_FIELDS, _STATS(self), strict=True))


# the numeric fields of a Sample, in declaration order; NaN marks "not stated"
NUMERIC = ("step", "total_steps", "epoch", "total_epochs", "iter_time_s", "steps_per_s",
           "samples_per_s", "batch_size", "loss", "period_n", "world_size")
INTEGERS = frozenset({"step", "total_steps", "total_epochs", "batch_size", "period_n",
                      "world_size"})


@dataclass(slots=True)
class Samples:
    """Many samples as columns: what parsers produce and the summary folds in.

    A log of 10^6 lines is 10^6 samples; one Python object per sample (and per field)
    would cap parsing far below the disk's speed, so parsers fill numpy columns instead.
    Numbers are float64 with NaN for "the line did not state it" (a logged ``nan`` loss is
    therefore indistinguishable from no loss, which is what the summary wants anyway);
    ``eval`` and ``cumulative`` are boolean columns. Rows are in log order.
    """

    step: np.ndarray
    total_steps: np.ndarray
    epoch: np.ndarray
    total_epochs: np.ndarray
    iter_time_s: np.ndarray
    steps_per_s: np.ndarray
    samples_per_s: np.ndarray
    batch_size: np.ndarray
    loss: np.ndarray
    period_n: np.ndarray
    world_size: np.ndarray
    eval: np.ndarray
    cumulative: np.ndarray
    # each row's line number in its log (1-based, counting lines as ``stream.clean`` splits
    # them; NaN: not known): what ``--explain`` says was left out, as ranges of lines
    line: np.ndarray

    def __len__(self) -> int:
        return len(self.step)

    @classmethod
    def build(cls, n: int, *, eval: Any = False, cumulative: Any = False, line: Any = None,
              **numbers: Any) -> Samples:
        """``n`` rows; each field an array of length ``n``, a scalar for all rows, or None."""
        unknown = set(numbers) - set(NUMERIC)
        if unknown:
            raise TypeError(f"not sample fields: {sorted(unknown)}")
        columns: dict[str, np.ndarray] = {}
        for name in NUMERIC:
            value = numbers.get(name)
            if value is None:
                columns[name] = np.full(n, np.nan)
            else:
                column = np.asarray(value, dtype=np.float64)
                columns[name] = (np.full(n, float(column)) if column.ndim == 0
                                 else column.reshape(n))
        columns["line"] = (np.full(n, np.nan) if line is None
                           else np.asarray(line, dtype=np.float64).reshape(n))
        for name, value in (("eval", eval), ("cumulative", cumulative)):
            flag = np.asarray(value, dtype=bool)
            columns[name] = np.full(n, bool(flag)) if flag.ndim == 0 else flag.reshape(n)
        return cls(**columns)

    @classmethod
    def empty(cls) -> Samples:
        return cls.build(0)

    @classmethod
    def from_rows(cls, rows: Iterable[Sample]) -> Samples:
        rows = list(rows)
        numbers = {name: np.array([_nan(getattr(r, name)) for r in rows], dtype=np.float64)
                   for name in NUMERIC}
        return cls.build(len(rows), eval=np.array([r.phase == EVAL for r in rows], dtype=bool),
                         cumulative=np.array([r.cumulative for r in rows], dtype=bool),
                         **numbers)

    @classmethod
    def concat(cls, parts: Sequence[Samples]) -> Samples:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)))

    def take(self, index: np.ndarray | slice) -> Samples:
        """The rows at ``index`` (an integer array, a boolean mask or a slice)."""
        return Samples(*(getattr(self, f.name)[index] for f in fields(self)))

    def rows(self) -> list[Sample]:
        """Back to one object per row: for tests, and for the small batches (a round's few new
        lines per log) that the summary folds in faster row by row than with numpy."""
        columns = [_none_for_nan(getattr(self, name).tolist(), name in INTEGERS)
                   for name in NUMERIC]
        phases = [EVAL if e else TRAIN for e in self.eval.tolist()]
        # Sample's positional order: the numbers up to loss, phase, cumulative, period_n,
        # world_size
        return list(map(Sample, *columns[:-2], phases, self.cumulative.tolist(),
                        *columns[-2:]))


def _none_for_nan(values: list[float], integer: bool) -> list:
    if integer:
        return [None if v != v else int(v) for v in values]
    return [None if v != v else v for v in values]


def _nan(value: float | None) -> float:
    return np.nan if value is None else value

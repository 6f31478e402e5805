"""What a parser extracts from one log line: a ``Sample``, and the counters of what it skipped.

Parsers stay tiny and stateless-ish by emitting these flat records; everything that needs
history (warm-up, restarts, duplicates, regimes) happens once, downstream, for all families.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

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

    def seconds_per_iter(self) -> float | None:
        """Seconds per iteration from whatever the line gave (time, step rate, sample rate)."""
        if self.iter_time_s is not None and self.iter_time_s > 0:
            return self.iter_time_s
        if self.steps_per_s is not None and self.steps_per_s > 0:
            return 1.0 / self.steps_per_s
        if self.samples_per_s and self.batch_size:
            return self.batch_size / self.samples_per_s
        return None


_FIELDS = ("lines", "parsed", "ignored", "malformed", "binary", "bytes", "skimmed")
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
    skimmed: int = 0  # lines a bounded round passed over (only context lines were read)

    def add(self, other: LineStats) -> None:
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        # once per job per round: one C-level attrgetter instead of a comprehension
        return dict(zip(_FIELDS, _STATS(self), strict=True))


@dataclass(slots=True)
class ParseResult:
    family: str
    samples: list[Sample] = field(default_factory=list)
    stats: LineStats = field(default_factory=LineStats)

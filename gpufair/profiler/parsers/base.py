"""The one small interface every parser family implements, and the chunk driver they share.

A parser scans a chunk of complete lines with one compiled, multi-line regular expression
(``pattern``) and turns each match into a :class:`Sample`. Scanning the whole chunk inside
the regex engine, instead of looping over lines in Python, is what keeps parsing at tens of
MB/s. Lines that carry the family's ``keyword`` but do not match, or fail to convert, are
counted as malformed; nothing a log contains can make ``parse`` raise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar

from gpufair.profiler.events import LineStats, Sample

# what a converter may raise on a line that looked right but holds garbage numbers
CONVERSION_ERRORS = (ValueError, OverflowError, ZeroDivisionError, IndexError, TypeError,
                     KeyError, RecursionError)


class Parser:
    """Base of all line-oriented parser families.

    ``signature`` decides auto-detection: it should match lines only this family prints.
    ``context`` holds the little state a family carries from line to line (the current Keras
    epoch, a batch size printed once in a header); it is a JSON-able dict so that a tailer
    can persist it beside the file offset.
    """

    family: ClassVar[str] = ""
    signature: ClassVar[re.Pattern[str]]
    pattern: ClassVar[re.Pattern[str]]
    keywords: ClassVar[tuple[str, ...]] = ()
    # lines that only set context (a Keras epoch header, a batch-size banner): a bounded
    # round still reads these from the part of a chunk it otherwise passes over
    context_pattern: ClassVar[re.Pattern[str] | None] = None

    # ``pattern`` with its leading ``^`` replaced by a newline (``parse`` prepends one to the
    # text): the regex engine then jumps from line end to line end with a fast character
    # search instead of attempting a match at every position of the chunk
    _scan: ClassVar[re.Pattern[str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        pattern = cls.__dict__.get("pattern")
        if pattern is not None:
            source = pattern.pattern
            cls._scan = (re.compile("\n" + source[1:], pattern.flags)
                         if source.startswith("^") else pattern)

    def __init__(self, context: dict[str, Any] | None = None) -> None:
        self.context: dict[str, Any] = dict(context or {})

    def skip(self, head: str) -> None:
        """Pass over ``head`` (a bounded round's older lines), keeping only its context."""
        if self.context_pattern is None:
            return
        lines = [m.group(0) for m in self.context_pattern.finditer(head)]
        if lines:
            self.parse("\n".join(lines) + "\n", LineStats())

    def convert(self, match: re.Match[str]) -> Sample | None:
        """One match to one sample (or None for a context-only line such as ``Epoch 3/10``)."""
        raise NotImplementedError

    def parse(self, text: str, stats: LineStats) -> list[Sample]:
        samples: list[Sample] = []
        matched = 0
        convert = self.convert
        append = samples.append
        scan = self._scan
        for match in scan.finditer("\n" + text if scan is not self.pattern else text):
            matched += 1
            try:
                sample = convert(match)
            except CONVERSION_ERRORS:
                stats.malformed += 1
                continue
            if sample is not None:
                append(sample)
        stats.parsed += len(samples)
        if self.keywords:
            flagged = sum(text.count(k) for k in self.keywords)
            stats.malformed += max(0, flagged - matched)
        return samples


def num(text: str | None) -> float | None:
    """A float from a captured group; None when the group did not take part."""
    return None if text is None else float(text)


def integer(text: str | None) -> int | None:
    return None if text is None else int(text)


def signature_hits(parser: type[Parser], lines: Iterable[str]) -> int:
    sig = parser.signature
    return sum(1 for line in lines if sig.search(line))

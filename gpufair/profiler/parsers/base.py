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

    # ``pattern`` and ``context_pattern`` with the leading ``^`` replaced by a newline (the
    # scans prepend one to the text, see ``_newline_led``): the regex engine then jumps from
    # line end to line end instead of attempting a match at every position of the chunk
    _scan: ClassVar[re.Pattern[str]]
    _context_scan: ClassVar[re.Pattern[str] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        pattern = cls.__dict__.get("pattern")
        if pattern is not None:
            cls._scan = _newline_led(pattern)
        context = cls.__dict__.get("context_pattern")
        if context is not None:
            cls._context_scan = _newline_led(context)

    def __init__(self, context: dict[str, Any] | None = None) -> None:
        self.context: dict[str, Any] = dict(context or {})

    def skip(self, head: str) -> None:
        """Pass over ``head`` (a bounded round's older lines), keeping only its context."""
        scan = self._context_scan
        if scan is None:
            return
        if scan is self.context_pattern:
            lines = "\n".join([m.group(0) for m in scan.finditer(head)])
        else:  # each match starts with the newline before its line
            lines = "".join([m.group(0) for m in scan.finditer("\n" + head)])[1:]
        if lines:
            self.parse(lines + "\n", LineStats())

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


def _newline_led(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """``^...`` (multi-line) as ``\\n...``, to be run over the text with a newline prepended.

    Equivalent for patterns whose matches never end just after a newline, which holds for
    every family's (a match ends on a field, never on a line end). A leading literal lets
    the regex engine find candidate positions with a fast character search.
    """
    source = pattern.pattern
    if not source.startswith("^"):
        return pattern
    return re.compile("\n" + source[1:], pattern.flags)


def num(text: str | None) -> float | None:
    """A float from a captured group; None when the group did not take part."""
    return None if text is None else float(text)


def integer(text: str | None) -> int | None:
    return None if text is None else int(text)


def signature_hits(parser: type[Parser], lines: Iterable[str]) -> int:
    sig = parser.signature
    return sum(1 for line in lines if sig.search(line))

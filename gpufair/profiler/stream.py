"""Bytes of a log to samples: cleaning, auto-detection, and the chosen parser.

``LogStream`` is fed chunks of *complete* lines (the tailer keeps partial last lines back)
and never raises on content: undecodable or NUL-bearing lines are skipped and counted as
binary, terminal escapes (ANSI colours, backspaces) are removed, and carriage returns —
which tqdm and Keras use to redraw a bar in place — end lines like newlines do.
"""

from __future__ import annotations

import re
from typing import Any

from gpufair.profiler.events import TRAIN, LineStats, Sample
from gpufair.profiler.parsers import DETECT_LINES, Parser, detect, parser_for

PENDING_CHARS = 16384
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def clean(data: bytes, stats: LineStats) -> str:
    """Decode a chunk of complete lines; drop (and count) binary ones."""
    stats.bytes += len(data)
    if b"\x00" in data:
        text = _decode_lines(data, stats)
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = _decode_lines(data, stats)
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\x08" in text:
        text = text.replace("\x08", "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    stats.lines += text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return text


def _split(text: str, lines: int) -> tuple[str, str]:
    """(everything before the last ``lines`` lines, those lines)."""
    cut = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(lines):
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            return "", text
    return text[:cut + 1], text[cut + 1:]


def _decode_lines(data: bytes, stats: LineStats) -> str:
    kept: list[str] = []
    for raw in data.split(b"\n"):
        if b"\x00" in raw:
            stats.binary += 1
            continue
        try:
            kept.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            stats.binary += 1
    return "\n".join(kept)


class LogStream:
    """One job log's parsing state: family (fixed once detected), parser context, counters."""

    def __init__(self, family: str | None = None, context: dict[str, Any] | None = None) -> None:
        self.parser: Parser | None = None
        if family is not None:
            self.parser = parser_for(family)(context)
        self.stats = LineStats()
        # lines read before the family was known: parsed once it is (a header such as
        # DeepSpeed's config dump may come before any line that identifies the family)
        self._pending = ""

    @property
    def family(self) -> str | None:
        return None if self.parser is None else self.parser.family

    def feed(self, data: bytes, max_lines: int | None = None) -> list[Sample]:
        """Samples of a chunk; with ``max_lines``, only of its last lines (see ``bounded``)."""
        text = clean(data, self.stats)
        if max_lines is not None and self.parser is not None:
            return self.bounded(text, max_lines)
        return self.feed_text(text)

    def bounded(self, text: str, max_lines: int) -> list[Sample]:
        """Samples of the last ``max_lines`` lines of ``text``; the rest is read for context.

        A scheduling round needs a job's latest progress and a recent speed, not every line
        of a chatty log: bounding the lines converted per round bounds the round's cost. The
        window doubles until it holds a training step (an evaluation pass may fill the last
        lines). A restart or batch-size change in the passed-over part still shows, as the
        step or batch size of the kept lines differing from the last round's.
        """
        parser = self.parser
        assert parser is not None
        lines = max_lines
        while True:
            head, tail = _split(text, lines)
            stats = LineStats()
            if head:
                parser.skip(head)
            samples = parser.parse(tail, stats)
            if not head or any(s.step is not None and s.phase == TRAIN for s in samples):
                break
            lines *= 2
        self.stats.parsed += stats.parsed
        self.stats.malformed += stats.malformed
        self.stats.skimmed += head.count("\n")
        self.stats.ignored = max(0, self.stats.lines - self.stats.parsed - self.stats.malformed
                                 - self.stats.binary - self.stats.skimmed)
        return samples

    def feed_text(self, text: str) -> list[Sample]:
        if self.parser is None:
            head = [line for line in text.split("\n", DETECT_LINES)[:DETECT_LINES] if line]
            family = detect(head)
            if family is None and len(head) >= DETECT_LINES:
                family = detect(text.split("\n"))
            if family is None:
                self._pending = (self._pending + text)[-PENDING_CHARS:]
                self.stats.ignored = self.stats.lines - self.stats.binary
                return []
            self.parser = family()
            text, self._pending = self._pending + text, ""
        samples = self.parser.parse(text, self.stats)
        self.stats.ignored = max(0, self.stats.lines - self.stats.parsed - self.stats.malformed
                                 - self.stats.binary - self.stats.skimmed)
        return samples

    def state(self) -> dict[str, Any]:
        return {"family": self.family,
                "context": {} if self.parser is None else dict(self.parser.context)}

"""Bytes of a log to samples: cleaning, auto-detection, and the chosen parser.

``LogStream`` is fed chunks of *complete* lines (the tailer keeps partial last lines back,
unless the log is finished: then its last line is complete without a newline)
and never raises on content: undecodable or NUL-bearing lines are skipped and counted as
binary, terminal escapes (ANSI colours, backspaces) are removed, and carriage returns —
which tqdm and Keras use to redraw a bar in place — end lines like newlines do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gpufair.profiler.events import LineStats, Samples
from gpufair.profiler.parsers import Parser, detect_chunk, parser_for
from gpufair.profiler.ranks import RankFilter

PENDING_BYTES = 16384
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def clean(data: bytes, stats: LineStats) -> bytes:
    """A chunk of complete lines as valid UTF-8 with one line per ``\n``; binary lines
    dropped (and counted). Stays bytes: parsing reads bytes (see ``extract.py``)."""
    stats.bytes += len(data)
    if b"\x00" in data:
        data = _drop_binary(data, stats)
    else:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            data = _drop_binary(data, stats)
    if b"\x1b" in data:
        data = _ANSI.sub(b"", data)
    if b"\x08" in data:
        data = data.replace(b"\x08", b"")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    stats.lines += data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    return data


def _drop_binary(data: bytes, stats: LineStats) -> bytes:
    kept: list[bytes] = []
    for raw in data.split(b"\n"):
        if b"\x00" in raw:
            stats.binary += 1
            continue
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            stats.binary += 1
            continue
        kept.append(raw)
    return b"\n".join(kept)


class LogStream:
    """One job log's parsing state: family (fixed once detected), parser context, counters."""

    def __init__(self, family: str | None = None, context: dict[str, Any] | None = None) -> None:
        self.parser: Parser | None = None
        if family is not None:
            self.parser = parser_for(family)(context)
        self.stats = LineStats()
        self.ranks = RankFilter()  # multi-rank logs: one rank's lines (``ranks.py``)
        # lines read before the family was known: parsed once it is (a header such as
        # DeepSpeed's config dump may come before any line that identifies the family)
        self._pending = b""
        self._first_line = 0  # the line number before the first line of the chunk parsed

    @property
    def family(self) -> str | None:
        return None if self.parser is None else self.parser.family

    def feed(self, data: bytes) -> Samples:
        """The samples of a chunk of complete lines."""
        return feed_many([(self, data)])[0]

    def _prepare(self, data: bytes) -> bytes | None:
        """The chunk cleaned and, once the family is known, ready to parse (None before)."""
        cleaned = clean(data, self.stats)
        # counted before the rank filter: it empties another rank's lines, and an emptied
        # unterminated last line would no longer count as one
        lines = _line_count(cleaned)
        data = self.ranks.apply(cleaned)
        if self.parser is None:
            family = detect_chunk(data)
            if family is None:
                self._pending = _tail_lines(self._pending + data, PENDING_BYTES)
                self.stats.ignored = self.stats.lines - self.stats.binary
                return None
            self.parser = family()
            lines += _line_count(self._pending)   # whole lines (``_tail_lines``)
            data, self._pending = self._pending + data, b""
        self._first_line = self.stats.lines - lines
        return data

    def _count_ignored(self) -> None:
        st = self.stats
        st.ignored = max(0, st.lines - st.parsed - st.malformed - st.binary)

    def state(self) -> dict[str, Any]:
        return {"family": self.family,
                "context": {} if self.parser is None else dict(self.parser.context)}


def feed_many(chunks: Sequence[tuple[LogStream, bytes]]) -> list[Samples]:
    """Samples of many logs' new chunks, parsed in one batch per family (see
    ``Parser.parse_many``): what a scheduling round over thousands of logs calls."""
    out = [Samples.empty()] * len(chunks)
    batches: dict[type[Parser], list[tuple[int, LogStream, bytes]]] = {}
    for i, (stream, data) in enumerate(chunks):
        ready = stream._prepare(data)
        if ready is not None and stream.parser is not None:
            batches.setdefault(type(stream.parser), []).append((i, stream, ready))
    for family, batch in batches.items():
        parsed = family.parse_many([s.parser for _, s, _ in batch],  # type: ignore[misc]
                                   [data for _, _, data in batch], [s.stats for _, s, _ in batch])
        for (i, stream, _), samples in zip(batch, parsed, strict=True):
            stream._count_ignored()
            samples.line += stream._first_line + 1
            out[i] = samples
    return out


def _line_count(data: bytes) -> int:
    """Lines in ``data``, an unterminated last one included."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _tail_lines(data: bytes, limit: int) -> bytes:
    """The whole lines within the last ``limit`` bytes (a cut through a multi-byte character
    or a line would leave a fragment the parsers would see as a line)."""
    if len(data) <= limit:
        return data
    cut = data.find(b"\n", len(data) - limit - 1)
    return b"" if cut < 0 else data[cut + 1:]

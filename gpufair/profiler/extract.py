"""A chunk of log lines to the named groups of a family's pattern, as numpy columns.

Training logs repeat a handful of line shapes millions of times: the lines differ only in
their numbers. :func:`gpufair.profiler.scan.scan` (C) splits a chunk into lines, reads every
number, and hashes each line's *skeleton* (the line with its numbers replaced by a marker of
their shape). The family's regular expression then runs once per skeleton — on one
representative line — and yields a *template*: which number of the line each named group
captured, or the fixed text it captured. Applying a template to all lines of its skeleton
is a numpy gather. Python's regex engine thus sees tens of lines per chunk instead of
hundreds of thousands, and the pattern stays the one definition of a format.

Exactness: a character class treats all digits alike, so lines with one skeleton match a
pattern alike — as long as the pattern holds no literal digit or counted repetition, which
no family's does (``tests/test_profiler_extract.py`` checks the template path against
per-line matching on every fixture). A group whose capture is not exactly one number (or
its sign and one number) or fixed text, where the family reads it, sends its template's
lines through the regex one by one; so does a line whose token count disagrees with its
template's (a hash collision).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Final

import numpy as np

from gpufair.profiler.scan import TOKEN, scan

MAX_TEMPLATES = 1 << 16  # per family; a log of ever-new line shapes clears the cache
_PER_LINE: Final = "per-line"
_UNSEEN: Final = object()  # a skeleton with no cache entry yet (None means "no match")


@dataclass(frozen=True, slots=True)
class _Template:
    tokens: int
    present: tuple[str, ...]
    numbers: tuple[tuple[str, int, float], ...]   # (group, token index, sign)
    constants: tuple[tuple[str, str], ...]        # (group, the text it always captures)


class Fields:
    """The matched lines of one or more logs' chunks, in order: per group, presence, numbers
    and text, and the log (``segment``) each row came from.

    ``num`` gives NaN where a group did not take part (or its text is not a number);
    ``bad`` marks rows whose numbers could not be read (counted as malformed). A scheduling
    round parses the new lines of thousands of logs as one batch per family, so the state a
    family carries from line to line (``contexts``, one dict per log) is read and updated
    per segment by ``carry``, ``first`` and ``previous``.
    """

    __slots__ = ("_has", "_num", "_starts", "_text", "bad", "contexts", "line", "n",
                 "segment", "world")

    def __init__(self, n: int, segment: np.ndarray | None = None,
                 contexts: list[dict] | None = None) -> None:
        self.n = n
        self.segment = np.zeros(n, dtype=np.int64) if segment is None else segment
        self.contexts: list[dict] = [{}] if contexts is None else contexts
        self._starts: np.ndarray | None = None
        self._has: dict[str, np.ndarray] = {}
        self._num: dict[str, np.ndarray] = {}
        self._text: dict[str, np.ndarray] = {}
        self.bad = np.zeros(n, dtype=bool)
        # each row's line index within its log's chunk (0-based)
        self.line = np.zeros(n, dtype=np.int64)
        # world sizes stated on lines the family does not read: (log, line index, size)
        self.world: list[tuple[int, int, int]] = []

    def _segment_starts(self) -> np.ndarray:
        """Per row, the index of the first row of its log."""
        if self._starts is None:
            first = np.searchsorted(self.segment, np.arange(len(self.contexts)))
            self._starts = first[self.segment]
        return self._starts

    def _context(self, key: str) -> np.ndarray:
        """Per row, its log's context value for ``key`` (NaN if unset)."""
        per_log = np.array([c.get(key, np.nan) for c in self.contexts], dtype=np.float64)
        return per_log[self.segment]

    def _remember(self, rows: np.ndarray, values: np.ndarray, key: str) -> None:
        """Each log's context[key] := the value at its last row among ``rows``."""
        if not len(rows):
            return
        logs = self.segment[rows]
        last_of_log = np.append(logs[1:] != logs[:-1], True)
        for log, value in zip(logs[last_of_log].tolist(), values[rows[last_of_log]].tolist(),
                              strict=True):
            if value != value:  # NaN: nothing to carry on (a pause, see fairseq)
                self.contexts[log].pop(key, None)
            else:
                self.contexts[log][key] = int(value) if value.is_integer() else value

    def carry(self, values: np.ndarray, key: str) -> np.ndarray:
        """Each row's latest stated (non-NaN) value within its log, the log's context before
        the first: what a header line (``Epoch 3/10``, ``Batch size: 64``) sets for the
        lines after it, including those of later rounds."""
        index = np.where(np.isnan(values), -1, np.arange(self.n))
        np.maximum.accumulate(index, out=index)
        out = np.where(index >= self._segment_starts(), values[np.maximum(index, 0)],
                       self._context(key))
        self._remember(np.flatnonzero(~np.isnan(values)), values, key)
        return out

    def first(self, values: np.ndarray, key: str) -> np.ndarray:
        """Per row, its log's context[key], set on first sight to the log's first stated
        value (the Trainer's training total: later bars with another total are eval)."""
        current = self._context(key)
        fresh = np.isnan(current) & ~np.isnan(values)
        if fresh.any():
            rows = np.flatnonzero(fresh)
            logs = self.segment[rows]
            first_of_log = np.insert(logs[1:] != logs[:-1], 0, True)
            for log, value in zip(logs[first_of_log].tolist(),
                                  values[rows[first_of_log]].tolist(), strict=True):
                self.contexts[log].setdefault(key, int(value))
            current = self._context(key)
        return current

    def previous(self, rows: np.ndarray, values: np.ndarray, key: str) -> np.ndarray:
        """For ``rows`` (in order), the value at the log's previous such row; the log's
        context[key] for its first (or the row's own value when unset). The context then
        holds each log's last value."""
        taken = values[rows]
        if taken.size == 0:
            return taken.astype(float)   # a chunk with no such rows: nothing before nothing
        logs = self.segment[rows]
        before = np.concatenate(([np.nan], taken[:-1]))
        opens = np.insert(logs[1:] != logs[:-1], 0, True)
        context = self._context(key)[rows]
        before[opens] = np.where(np.isnan(context), taken, context)[opens]
        self._remember(rows, values, key)
        return before

    def has(self, name: str) -> np.ndarray:
        found = self._has.get(name)
        return np.zeros(self.n, dtype=bool) if found is None else found

    def num(self, name: str) -> np.ndarray:
        found = self._num.get(name)
        return np.full(self.n, np.nan) if found is None else found

    def text(self, name: str) -> np.ndarray:
        """Object array of the captured strings (None where the group did not take part)."""
        found = self._text.get(name)
        return np.full(self.n, None, dtype=object) if found is None else found

    def _column(self, store: dict[str, np.ndarray], name: str, fill: object,
                dtype: type) -> np.ndarray:
        column = store.get(name)
        if column is None:
            column = store[name] = np.full(self.n, fill, dtype=dtype)
        return column


# a statement of the job's world size (a change starts a new segment): ``world_size=8``,
# ``WORLD_SIZE: 8``, ``--num_gpus 8``, ``nproc_per_node=8``, Megatron's ``world_size .... 8``
WORLD = re.compile(rb"\b(?:world_size|WORLD_SIZE|num_gpus|nproc_per_node)\b[\"']?"
                   rb"\s*(?:[=:]|\.{2,})?\s*(\d+)")


class Extractor:
    """One family's pattern, applied through templates (cached per family, across logs).

    ``numbers`` and ``texts`` name the groups the family reads as numbers and as text; other
    groups are only tested for presence. ``items`` (optional) finds repeated fields, such as
    the entries of a metric dict, inside the group ``items_in`` (or the whole line): each
    match contributes ``@key`` (from its ``key`` and ``value`` groups) or ``@group`` for each
    named group that took part. The first occurrence of a field wins.
    """

    def __init__(self, pattern: re.Pattern[str], numbers: frozenset[str],
                 texts: frozenset[str] = frozenset(), items: re.Pattern[str] | None = None,
                 items_in: str | None = None, lenient: frozenset[str] = frozenset()) -> None:
        self.pattern = pattern
        self.numbers = numbers
        self.texts = texts
        self.items = items
        self.items_in = items_in
        self.lenient = lenient
        self._keyed = items is not None and {"key", "value"} <= set(items.groupindex)
        self._cache: dict[int, _Template | str | None] = {}
        # per skeleton of a line the family does not read: whether it states a world size
        self._world: dict[int, bool] = {}

    def _captures(self, line: str) -> dict[str, tuple[int, int]] | None:
        """Spans of every group (and item field) of ``line`` that took part; None: no match."""
        m = self.pattern.match(line)
        if m is None:
            return None
        spans = {name: m.span(name) for name in self.pattern.groupindex
                 if m.start(name) >= 0}
        if self.items is not None:
            a, b = spans.get(self.items_in, (0, 0)) if self.items_in else (0, len(line))
            for item in self.items.finditer(line[a:b]):
                if self._keyed:
                    name = "@" + item.group("key")
                    if name not in spans:
                        s, e = item.span("value")
                        spans[name] = (a + s, a + e)
                    continue
                for group, (s, e) in zip(self.items.groupindex, map(
                        item.span, self.items.groupindex), strict=True):
                    name = "@" + group
                    if s >= 0 and name not in spans:
                        spans[name] = (a + s, a + e)
        return spans

    def _template(self, line: str, tokens: int) -> _Template | str | None:
        spans = self._captures(line)
        if spans is None:
            return None
        found = [(m.start(), m.end()) for m in TOKEN.finditer(line)]
        starts = [s for s, _ in found]
        numbers, constants = [], []
        for name, (a, b) in spans.items():
            if name not in self.numbers and name not in self.texts:
                continue
            k = bisect_left(starts, a)
            if k > 0 and found[k - 1][1] > a:
                k -= 1  # a token starting before the group reaches into it
            inside = [t for t in found[k:] if t[0] < b]
            if not inside:
                constants.append((name, line[a:b]))
                continue
            if len(inside) == 1 and name in self.numbers:
                s, e = inside[0]
                if e == b and (s == a or (s == a + 1 and line[a] in "+-")):
                    numbers.append((name, starts.index(s), -1.0 if line[a] == "-" else 1.0))
                    continue
            return _PER_LINE  # the capture varies from line to line in a way a gather cannot
        return _Template(tokens, tuple(spans), tuple(numbers), tuple(constants))

    def extract(self, data: bytes, offsets: list[int] | None = None,
                contexts: list[dict] | None = None) -> Fields:
        """``data``: complete, valid UTF-8 lines (see ``stream.clean``) — of several logs
        when ``offsets`` gives where each log's lines begin (``contexts``: one per log)."""
        scanned = scan(data)
        n_lines = len(scanned)
        if n_lines == 0:
            return Fields(0, None, contexts)
        keys, first, inverse, counts = np.unique(
            scanned.skeletons, return_index=True, return_inverse=True, return_counts=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        first_token = scanned.token_offsets
        token_counts = np.diff(first_token)
        starts, ends = scanned.starts, scanned.ends
        cache = self._cache
        matched = np.zeros(n_lines, dtype=bool)
        templated: list[tuple[_Template, np.ndarray]] = []
        one_by_one: list[int] = []
        stating: list[int] = []  # lines that state a world size
        for t, (key, rep) in enumerate(zip(keys.tolist(), first.tolist(), strict=True)):
            template = cache.get(key, _UNSEEN)
            if template is _UNSEEN:
                if len(cache) >= MAX_TEMPLATES:
                    cache.clear()
                line = data[starts[rep]:ends[rep]].decode("utf-8")
                template = cache[key] = self._template(line, int(token_counts[rep]))
            if template is None:
                if self._states_world(key, data, starts[rep], ends[rep]):
                    stating.extend(order[bounds[t]:bounds[t + 1]].tolist())
                continue
            lines = order[bounds[t]:bounds[t + 1]]
            if template == _PER_LINE:
                one_by_one.extend(lines.tolist())
                continue
            assert isinstance(template, _Template)
            fits = token_counts[lines] == template.tokens
            if not fits.all():
                one_by_one.extend(lines[~fits].tolist())
                lines = lines[fits]
            matched[lines] = True
            templated.append((template, lines))
        singles: list[tuple[int, dict[str, str]]] = []
        for i in sorted(one_by_one):
            line = data[starts[i]:ends[i]].decode("utf-8")
            spans = self._captures(line)
            if spans is not None:
                matched[i] = True
                singles.append((i, {name: line[a:b] for name, (a, b) in spans.items()}))
        row_of = np.cumsum(matched) - 1
        segment = None
        line = np.flatnonzero(matched)
        if offsets is not None and len(offsets) > 1:
            line_log = np.searchsorted(np.asarray(offsets), starts, side="right") - 1
            segment = line_log[matched]
            line -= np.searchsorted(starts, np.asarray(offsets))[segment]
        fields = Fields(int(row_of[-1]) + 1, segment, contexts)
        fields.line = line
        for template, lines in templated:
            self._fill_template(fields, template, row_of[lines], first_token[lines],
                                scanned.values)
        for i, captured in singles:
            self._fill_row(fields, int(row_of[i]), captured)
        if stating:
            self._read_world(fields, data, sorted(stating), starts, ends, offsets)
        return fields

    def _states_world(self, key: int, data: bytes, start: int, end: int) -> bool:
        """Whether the lines of a skeleton state a world size (judged once per skeleton on
        its first line, as templates are: a log has a few dozen skeletons, so the words are
        never searched for in the bytes of every line)."""
        hit = self._world.get(key)
        if hit is None:
            if len(self._world) >= MAX_TEMPLATES:
                self._world.clear()
            hit = self._world[key] = WORLD.search(data[start:end]) is not None
        return hit

    @staticmethod
    def _read_world(fields: Fields, data: bytes, lines: list[int], starts: np.ndarray,
                    ends: np.ndarray, offsets: list[int] | None) -> None:
        """The world sizes stated on ``lines`` (indices in ``data``), into ``fields.world``
        as (log, line index in that log's chunk, size)."""
        bounds = np.asarray(offsets if offsets else [0])
        first_line = np.searchsorted(starts, bounds)
        for i in lines:
            m = WORLD.search(data[starts[i]:ends[i]])
            if m is not None:
                log = int(np.searchsorted(bounds, starts[i], side="right")) - 1
                fields.world.append((log, i - int(first_line[log]), int(m.group(1))))

    def _fill_template(self, fields: Fields, template: _Template, rows: np.ndarray,
                       first_token: np.ndarray, values: np.ndarray) -> None:
        for name in template.present:
            fields._column(fields._has, name, False, bool)[rows] = True
        for name, k, sign in template.numbers:
            column = fields._column(fields._num, name, np.nan, np.float64)
            taken = values[first_token + k]
            column[rows] = taken if sign > 0 else -taken
        for name, text in template.constants:
            self._put_text(fields, name, text, rows)

    def _fill_row(self, fields: Fields, row: int, captured: dict[str, str]) -> None:
        for name, text in captured.items():
            fields._column(fields._has, name, False, bool)[row] = True
            self._put_text(fields, name, text, row)

    def _put_text(self, fields: Fields, name: str, text: str, rows: np.ndarray | int) -> None:
        """A captured string into the text and/or number column the family reads it as."""
        if name in self.texts:
            fields._column(fields._text, name, None, object)[rows] = text
        if name in self.numbers:
            value = _number(text)
            if value is None:
                if name not in self.lenient:
                    fields.bad[rows] = True
            else:
                fields._column(fields._num, name, np.nan, np.float64)[rows] = value


def _number(text: str) -> float | None:
    """The number a capture states; NaN for JSON's null; None when it is not a number."""
    try:
        return float(text)
    except ValueError:
        return np.nan if text == "null" else None

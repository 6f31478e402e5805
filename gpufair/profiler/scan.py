"""Line tokenizer: every line's numbers, and a skeleton key that groups lines by template.

Why: a training log is a few templates repeated millions of times (``Epoch: [e][ i/n] Time t
...``) with only the numbers changing. Matching a parser's regex against each line is far too
slow for logs written at tens of MB/s, so the profiler instead groups lines by skeleton (the
line with every number replaced by a shape marker), matches the parser once per distinct
skeleton on a representative line, and then reads the numbers of all lines in the group
positionally from ``values``. One native pass (``_scan.c``) does the splitting, number parsing
and skeleton hashing; :func:`scan_python` is its twin for installs without a compiler and the
reference the tests hold the C code to.

Shared semantics (both implementations):

* lines split on ``b"\\n"``; a final segment counts only if non-empty; ``\\r`` is ordinary text;
* a token is a leftmost maximal match of :data:`TOKEN` within a line, ASCII digits only;
* its value is exactly ``float(token)``;
* skeletons are equal iff the lines are equal after each token becomes ``0xFF <shape>``
  (1 integer, 2 fraction, 3 exponent) and each literal ``0xFF`` byte becomes ``0xFF 0x00``
  (the escape keeps the encoding injective on input that is not UTF-8). Key values differ
  between the two implementations; only the partition they induce is shared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

try:
    from gpufair.profiler import _scan
except ImportError:  # built without a compiler (the extension is optional)
    _scan = None

NATIVE: bool = _scan is not None

# str pattern for decoded lines; [0-9] rather than \d so non-ASCII digits never count
TOKEN = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")

# The twin works on latin-1 text (one char per byte, so offsets and the skeleton encoding carry
# over): str.join is far faster than bytes.join on millions of pieces. One split yields the texts
# between tokens, the tokens, and the two chars that fix each token's shape.
_SPLIT = re.compile(r"([0-9]+(?:(\.)[0-9]+)?(?:([eE])[-+]?[0-9]+)?)")
_MARKS = {
    (None, None): "\xff\x01",
    (".", None): "\xff\x02",
    (None, "e"): "\xff\x03",
    (None, "E"): "\xff\x03",
    (".", "e"): "\xff\x03",
    (".", "E"): "\xff\x03",
}


@dataclass(frozen=True, slots=True)
class Scanned:
    """One buffer's lines as columns. Arrays from the native scanner are read-only views of its
    output (no copy); treat all of them as read-only."""

    starts: np.ndarray  # int64
    ends: np.ndarray  # int64, exclusive, newline not included
    skeletons: np.ndarray  # uint64 (native) or int64 (twin); only equality is meaningful
    token_offsets: np.ndarray  # int64, len(self) + 1
    values: np.ndarray  # float64

    def __len__(self) -> int:
        return len(self.ends)


def _starts(ends: np.ndarray) -> np.ndarray:
    starts = np.empty_like(ends)
    if len(ends):
        starts[0] = 0
        np.add(ends[:-1], 1, out=starts[1:])
    return starts


def scan(data: bytes) -> Scanned:
    """The native scanner when it built, else the identical-behaviour Python twin."""
    if _scan is None:
        return scan_python(data)
    ends_b, skel_b, offs_b, vals_b = _scan.scan(data)
    ends = np.frombuffer(ends_b, np.int64)
    return Scanned(
        starts=_starts(ends),
        ends=ends,
        skeletons=np.frombuffer(skel_b, np.uint64),
        token_offsets=np.frombuffer(offs_b, np.int64),
        values=np.frombuffer(vals_b, np.float64),
    )


def scan_python(data: bytes) -> Scanned:
    if not isinstance(data, bytes):
        if isinstance(data, str):
            raise TypeError("scan_python() needs a bytes-like object, not str")
        data = memoryview(data).tobytes()  # TypeError for anything without the buffer protocol
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10).astype(np.int64)
    if data and data[-1:] != b"\n":
        ends = np.append(ends, np.int64(len(data)))  # the unterminated final line
    n_lines = len(ends)

    parts = _SPLIT.split(data.decode("latin-1").replace("\xff", "\xff\x00"))
    tokens = parts[1::4]
    values = np.fromiter(map(float, tokens), dtype=np.float64, count=len(tokens))
    pieces = [""] * (2 * len(tokens) + 1)
    pieces[0::2] = parts[0::4]
    pieces[1::2] = map(_MARKS.__getitem__, zip(parts[2::4], parts[3::4], strict=True))
    skel_text = "".join(pieces).encode("latin-1")

    # tokens per line: markers 0xFF <1..3> in the skeleton text, located by newline
    sk = np.frombuffer(skel_text, np.uint8)
    ff = np.flatnonzero(sk == 0xFF)
    marks = ff[sk[ff + 1] != 0]
    line_of = np.searchsorted(np.flatnonzero(sk == 10), marks)
    counts = np.bincount(line_of, minlength=n_lines)
    offsets = np.zeros(n_lines + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])

    lines = skel_text.split(b"\n")
    if len(lines) > n_lines:
        lines.pop()  # the empty segment after a final newline
    skeletons = np.fromiter(map(hash, lines), dtype=np.int64, count=n_lines)
    return Scanned(
        starts=_starts(ends),
        ends=ends,
        skeletons=skeletons,
        token_offsets=offsets,
        values=values,
    )

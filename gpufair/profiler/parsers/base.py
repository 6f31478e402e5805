"""The one small interface every parser family implements.

A family is a line pattern (matched at the start of each line) plus a ``convert`` that turns
the captured groups of a whole chunk — numpy columns, in log order — into a
:class:`Samples` batch. The columns come from :class:`Extractor`, which runs the pattern
once per line *shape* rather than once per line (see ``extract.py``); ``convert`` works on
whole columns, so no Python code runs per line. Lines that carry the family's ``keyword``
but do not match, and matched lines whose numbers cannot be read, are counted as
malformed; nothing a log contains can make ``parse`` raise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from gpufair.profiler.events import INTEGERS, LineStats, Samples
from gpufair.profiler.extract import Extractor, Fields

# A number as logs print it (``0.3``, ``-1.5e-04``, ``12``).
NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"

# What loggers put before a line's text, for families whose lines are matched from the
# start: glog/absl (``I0314 12:00:00.123456 140 file.py:12] ``), TensorFlow's Python logger
# (``INFO:tensorflow:``) and the pipe-separated ``INFO|2020-01-01 ...|name|`` form.
LOG_PREFIX = (r"(?:[IWEF]\d+ [\d:.]+ +\d+ [^\]\n\r]*\] ?|INFO:tensorflow:|"
              r"(?:INFO|WARNING)\|[^|\n\r]*\|[^|\n\r]*\|[^|\n\r]*\| ?)?")


def keyed(*keys: str, sep: str = "[:=]") -> re.Pattern[str]:
    """The items pattern of ``key: value`` / ``key=value`` fields (``Parser.items``): each
    of ``keys`` followed by ``sep`` and a number, read as ``@key`` (first occurrence)."""
    names = "|".join(keys)
    return re.compile(rf"\b(?P<key>{names}){sep}\s*(?P<value>{NUM})")


def since_start(average: np.ndarray, done: np.ndarray) -> dict[str, Any]:
    """Sample fields for an average iteration time over the whole run so far, ``done``
    iterations into it (detectron2's ``time``, maskrcnn-benchmark's ``(global avg)``):
    cumulative, so the summary differences successive averages into windows."""
    return {"iter_time_s": average, "period_n": done}


class Parser:
    """Base of all line-oriented parser families.

    ``signature`` decides auto-detection: it should match lines only this family prints.
    Detection runs it once per line shape (``detect_chunk``), which is exact when it treats
    every run of digits alike, as patterns must too (see ``extract.py``); a signature that
    reads a digit itself (a version number) sets ``signature_reads_digits`` and is run on
    every sampled line instead.
    ``numbers`` / ``texts`` name the groups ``convert`` reads as numbers / as text (others
    are only tested for presence); ``items`` and ``items_in`` declare repeated fields (see
    :class:`Extractor`); ``lenient`` groups may fail to read without making a line
    malformed (a loss printed as garbage still leaves a timed step). ``context`` holds the
    little state a family carries from chunk to chunk (the current Keras epoch, a batch
    size printed once in a header); it is a JSON-able dict so that a tailer can persist it
    beside the file offset; ``convert`` reaches it through :class:`Fields`, which holds the
    contexts of every log in a batch.
    """

    family: ClassVar[str] = ""
    signature: ClassVar[re.Pattern[str]]
    signature_reads_digits: ClassVar[bool] = False
    pattern: ClassVar[re.Pattern[str]]
    numbers: ClassVar[frozenset[str]] = frozenset()
    texts: ClassVar[frozenset[str]] = frozenset()
    items: ClassVar[re.Pattern[str] | None] = None
    items_in: ClassVar[str | None] = None
    lenient: ClassVar[frozenset[str]] = frozenset()
    keywords: ClassVar[tuple[str, ...]] = ()
    # what this family's lines say, for telling a user why an unknown log is not this
    # family ("closest families"); defaults to ``keywords``
    hints: ClassVar[tuple[str, ...]] = ()
    extractor: ClassVar[Extractor]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "pattern" in cls.__dict__:
            cls.extractor = Extractor(cls.pattern, cls.numbers, cls.texts, cls.items,
                                      cls.items_in, cls.lenient)

    def __init__(self, context: dict[str, Any] | None = None) -> None:
        self.context: dict[str, Any] = dict(context or {})

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        """All matched rows to samples (one per row) and the mask of rows that are samples
        (a context line such as ``Epoch 3/10`` is not). May mark rows ``f.bad``; reads and
        updates each log's context through ``f``."""
        raise NotImplementedError

    def parse(self, data: bytes, stats: LineStats) -> Samples:
        """Samples of a chunk of complete, clean lines (``stream.clean``)."""
        return self.parse_many([self], [data], [stats])[0]

    @classmethod
    def parse_many(cls, parsers: Sequence[Parser], chunks: Sequence[bytes],
                   stats: Sequence[LineStats]) -> list[Samples]:
        """Chunks of several logs of this family in one batch: one scan, one template
        lookup and one ``convert`` for all, so that a round over thousands of small chunks
        costs what one big chunk does. ``parsers[i]`` holds log i's context."""
        offsets, parts, at = [], [], 0
        for chunk in chunks:
            if chunk and not chunk.endswith(b"\n"):
                chunk += b"\n"  # a line must not run on into the next log's
            offsets.append(at)
            parts.append(chunk)
            at += len(chunk)
        f = cls.extractor.extract(b"".join(parts), offsets, [p.context for p in parsers])
        if f.n == 0:
            samples, keep = Samples.empty(), np.zeros(0, dtype=bool)
        else:
            with np.errstate(all="ignore"):
                samples, keep = cls.convert(f)
            samples.line = f.line.astype(np.float64)  # within the chunk: the stream adds
        for name in INTEGERS:  # a step of 10^400 is no step: garbage digits
            column = getattr(samples, name)
            f.bad |= ~np.isnan(column) & ~(np.abs(column) < 2.0**53)
        logs = len(chunks)
        bad = np.bincount(f.segment[f.bad], minlength=logs).tolist()
        matched = np.bincount(f.segment, minlength=logs).tolist()
        keep &= ~f.bad
        kept = samples.take(keep)
        cuts = np.searchsorted(f.segment[keep], np.arange(logs + 1)).tolist()
        keywords = [k.encode() for k in cls.keywords]
        out = []
        for i, (chunk, st) in enumerate(zip(chunks, stats, strict=True)):
            st.malformed += bad[i]
            if keywords:
                flagged = sum(chunk.count(k) for k in keywords)
                st.malformed += max(0, flagged - matched[i])
            part = kept if logs == 1 else kept.take(slice(cuts[i], cuts[i + 1]))
            st.parsed += len(part)
            out.append(part)
        for log, line, size in f.world:  # (rare: where a log states its world size)
            out[log] = _with_row(out[log], line, world_size=size)
        return out


def _with_row(samples: Samples, line: int, **numbers: float) -> Samples:
    """The samples with one more row at ``line`` (an index in the chunk, as ``line`` is
    there), placed before the rows of later lines."""
    at = int(np.searchsorted(samples.line, line, side="left"))
    row = Samples.build(1, line=float(line), **numbers)
    return Samples.concat([samples.take(slice(0, at)), row, samples.take(slice(at, None))])

"""Multi-rank logs: keep one rank's lines, recognised by the prefix the launcher writes.

Why: every rank of a data-parallel job prints the same progress lines, interleaved in one
file. Told apart by text (the summary's duplicate check: the same step and loss again),
ranks whose lines differ (each rank's own timing, a rank lagging a step behind) read as
restarts or as a job twice as fast. The launcher says which rank wrote each line, so the
profiler keeps one rank's stream: rank 0, or the lowest rank seen.

Prefixes recognised (``PREFIXES``): ``[Rank N]`` (DeepSpeed, Megatron), ``[1,N]<stdout>:``
(mpirun/Horovod ``--tag-output``), ``[N]<stdout>:`` (horovodrun's own launcher, elastic
runs; after the ``time.asctime()`` stamp of ``--prefix-output-with-timestamp``, and after
blanks, as a log quoted in a document or relayed by a tool shows it), ``rankN:``,
``[defaultN]:`` (torchrun ``--tee``) and
``N: `` (torchrun's ``--log-line-prefix``; only when two ranks or more show it, as a bare
number and colon is common text). Lines of other ranks become empty lines (line numbers
stay the file's); unprefixed lines (the launcher's own, a config dump) are kept.
"""

from __future__ import annotations

import re

# form name -> prefix pattern (group 1: the rank), matched at the start of a line
PREFIXES: dict[str, bytes] = {
    "rank_bracket": rb"\[Rank (\d+)\]:? ?",
    "mpirun": rb"\[\d+,(\d+)\]<std(?:out|err)>: ?",
    "horovodrun": rb"[ \t]*(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]{8} \d{4})?"
                  rb"\[(\d+)\]<std(?:out|err)>: ?",
    "rank_colon": rb"rank(\d+): ?",
    "torchrun_tee": rb"\[default(\d+)\]: ?",
    "torchrun": rb"(\d+): ",
}
_COMPILED = {name: re.compile(pattern) for name, pattern in PREFIXES.items()}
# a form is the log's when at least this share of the sampled lines carry it
SHARE = 0.3
SAMPLE_LINES = 4000


class RankFilter:
    """Per log: the prefix form and the rank kept, looked for in the log's first
    SAMPLE_LINES lines (until found, chunks pass unchanged; after them, a log without a
    form costs nothing more), then applied to every chunk."""

    __slots__ = ("form", "looked", "rank")

    def __init__(self) -> None:
        self.form: str | None = None
        self.rank: int | None = None
        self.looked = 0  # lines looked at for a form so far

    def apply(self, data: bytes) -> bytes:
        """The chunk with other ranks' lines emptied and the kept rank's prefix removed."""
        if self.form is None and (self.looked >= SAMPLE_LINES or not self._detect(data)):
            return data
        assert self.form is not None
        match = _COMPILED[self.form].match
        keep = self.rank
        out = []
        for line in data.split(b"\n"):
            m = match(line)
            if m is None:
                out.append(line)
            else:
                out.append(line[m.end():] if int(m.group(1)) == keep else b"")
        return b"\n".join(out)

    def _detect(self, data: bytes) -> bool:
        """Find the form most of the chunk's first lines carry, and the rank to keep."""
        want = SAMPLE_LINES - self.looked
        lines = [line for line in data[:1 << 20].split(b"\n", want)[:want] if line]
        self.looked += len(lines)
        if not lines:
            return False
        best: tuple[int, str, set[int]] | None = None
        for name, pattern in _COMPILED.items():
            ranks = [int(m.group(1)) for line in lines if (m := pattern.match(line))]
            seen = set(ranks)
            if len(ranks) < SHARE * len(lines) or (name == "torchrun" and len(seen) < 2):
                continue
            if best is None or len(ranks) > best[0]:
                best = (len(ranks), name, seen)
        if best is None:
            return False
        _, self.form, seen = best
        self.rank = min(seen)
        return True

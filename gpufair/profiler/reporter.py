"""Optional job-side reporter: exact progress as JSON lines, with no dependency at all.

A training script that wants exact numbers (rather than what the parsers infer) adds::

    from gpufair.profiler.reporter import Reporter
    rep = Reporter()                       # stdout; or Reporter("progress.jsonl")
    for it in range(n):
        ...
        rep.step(it + 1, epoch=e, batch_size=256, total_iterations=n)

and gpufair reads those lines from the job's log like any other format. This file imports
only the standard library and may be copied next to a script as it is.
"""

from __future__ import annotations

import json
import sys
import time
from typing import IO, Any


class Reporter:
    """Writes ``{"gpufair": 1, "iteration": ..., "iter_time_s": ...}`` lines.

    ``iter_time_s`` is measured here, between consecutive ``step`` calls, averaged over the
    iterations in between — so a script that reports every 10 iterations still gives exact
    per-iteration times.
    """

    def __init__(self, target: str | IO[str] | None = None, every: int = 1) -> None:
        self._own = isinstance(target, str)
        self._out: IO[str] = open(target, "a", encoding="utf-8") if isinstance(  # noqa: SIM115
            target, str) else (target or sys.stdout)
        self.every = max(1, every)
        self._last: tuple[int, float] | None = None

    def step(self, iteration: int, *, epoch: float | None = None,
             batch_size: int | None = None, total_iterations: int | None = None,
             loss: float | None = None, samples_per_s: float | None = None,
             phase: str = "train", **extra: Any) -> None:
        if iteration % self.every and phase == "train":
            return
        now = time.perf_counter()
        record: dict[str, Any] = {"gpufair": 1, "iteration": iteration}
        if phase == "train":
            last = self._last
            if last is not None and iteration > last[0]:
                record["iter_time_s"] = (now - last[1]) / (iteration - last[0])
            self._last = (iteration, now)
        for key, value in (("epoch", epoch), ("batch_size", batch_size),
                           ("total_iterations", total_iterations), ("loss", loss),
                           ("samples_per_s", samples_per_s)):
            if value is not None:
                record[key] = value
        if phase != "train":
            record["phase"] = phase
        record.update(extra)
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()

    def close(self) -> None:
        if self._own:
            self._out.close()

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""One profiling round over many job logs: tail, parse, summarise, feed the throughput model.

The arbiter calls :meth:`Profiler.round` once per scheduling round with the logs of the
running jobs (and the GPU type and count each ran on since the last round); it reads only
the new bytes of each, so a round over thousands of logs costs little. :meth:`apply` then
writes what was measured into the job record the policies see.

Logs are opened only if safe for a root daemon (:mod:`gpufair.profiler.files`): regular
files, no symlink as the last component, and — when :attr:`JobLog.owner_uid` is given —
only files the job's owner could read. A refused or missing log yields nothing that round,
its reason is in :attr:`Profiler.problems`, and the other logs are read as usual; no round
raises because of one log's file. Each log is read at most ``max_bytes`` a round with
``pread`` on a regular file, so nothing waits on a writer (a hung NFS mount aside).

Memory does not grow with a log's length: a round holds at most ``max_bytes`` of each log
and what was parsed from it, and what a job keeps between rounds does not grow with its
lines (the last ``regimes.WINDOW`` times of each regime, the last ``summary.RECENT`` steps,
counters; one entry per regime, i.e. per batch-size change or sustained throughput shift).
:meth:`Profiler.drain` reads whole files that way, ``max_bytes`` a round, which is how
``gpufair profile`` reads a log of any size.

A last line without a newline is read only from a log marked :attr:`JobLog.finished` (see
``tail``): the daemon reads the logs of running jobs, whose last line may be half-written,
so it waits for the newline; ``gpufair profile`` reads a file as finished and counts it.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gpufair.errors import InputError
from gpufair.model import Job, Progress
from gpufair.profiler import tensorboard_events
from gpufair.profiler.events import LineStats, Sample, Samples
from gpufair.profiler.store import MemoryOffsetStore, OffsetStore
from gpufair.profiler.stream import LogStream, feed_many
from gpufair.profiler.summary import Accumulator, JobReport
from gpufair.profiler.tail import MAX_BYTES, Position, read_new
from gpufair.profiler.throughput import PACKED, ThroughputModel


@dataclass(frozen=True, slots=True)
class JobLog:
    """A job's log and where the job ran since the last round (None: not known/not running).

    ``owner_uid``: the uid of the job's owner (Slurm's ``user_id``); the log is read only if
    that user could read it (owner, group and other bits of the opened file, checked as the
    kernel would). ``owner_gids``: the user's groups, for the group bits (None: the group
    bits never grant). ``owner_uid=None`` (``gpufair profile`` on one's own files): no
    owner check; regular files only and no final symlink still apply.

    ``finished``: the log will not grow any more (its job ended; a one-shot read), so a
    last line without a newline is a whole line and is read; otherwise it may be half
    written and waits for its newline. (Text logs only: an event file's half-written
    record is never read.)
    """

    job_id: str
    path: str
    gpu_type: str | None = None
    gpus: int | None = None
    placement: str = PACKED
    model: str | None = None
    family: str | None = None
    owner_uid: int | None = None
    owner_gids: tuple[int, ...] | frozenset[int] | None = None
    finished: bool = False


@dataclass(slots=True)
class _Tracked:
    position: Position | None
    stream: LogStream | tensorboard_events.EventFileSource | None
    accumulator: Accumulator
    events: dict[str, int]
    regimes: int = 0
    more: bool = False   # the last read left more of the file than max_bytes let it take


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused: a round over 10^4 logs makes ~10^6 short-lived
    objects without cycles, whose allocations would set off full collections over every
    job's long-lived state (measured: 0.6 s of a 2.1 s round)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


class Profiler:
    def __init__(self, store: OffsetStore | None = None, model: ThroughputModel | None = None,
                 max_bytes: int = MAX_BYTES, exact_reports: bool = True) -> None:
        """``exact_reports=False`` lets a report reuse a window estimate up to half a window
        old instead of re-sorting the window (``Regime.estimate``); ``gpufair profile`` is
        exact, a daemon over thousands of logs may relax it."""
        self.store = store if store is not None else MemoryOffsetStore()
        self.model = model if model is not None else ThroughputModel()
        self.max_bytes = max_bytes
        self.exact_reports = exact_reports
        self._saved = self.store.load()
        self._jobs: dict[str, _Tracked] = {}
        self.reports: dict[str, JobReport] = {}
        # job id -> why its log gave nothing in the last round ("refused: symlink",
        # "refused: not a regular file", "refused: owner mismatch", "missing", "error: ...")
        self.problems: dict[str, str] = {}

    def round(self, logs: Iterable[JobLog]) -> dict[str, JobReport]:
        """Read what each log gained; return the reports of the jobs whose logs changed."""
        with _gc_paused():
            return self._report(self._ingest(logs))

    def drain(self, logs: Iterable[JobLog]) -> dict[str, JobReport]:
        """Read every log to its end, ``max_bytes`` of it at a time, then report: a whole
        file in memory bounded by ``max_bytes``, not by the file's size. The reports of the
        logs that changed.

        One report at the end, not one per read: a report refreshes the regimes' cached
        estimates, which the detection of throughput shifts compares with, so reporting
        after every read would make the result depend on ``max_bytes``; this way it is what
        one read of the whole file gives. The model is fed per read, as in rounds.
        Ends on a file that keeps growing once a read takes all it has (every read moves
        on, see ``Read.more``); ``problems`` are those of the last read."""
        pending = list(logs)
        grown: dict[str, tuple[JobLog, _Tracked]] = {}
        with _gc_paused():
            while pending:
                grown.update((log.job_id, (log, tracked)) for log, tracked in self._ingest(pending))
                pending = [log for log in pending if self._jobs[log.job_id].more]
            return self._report(list(grown.values()))

    def _ingest(self, logs: Iterable[JobLog]) -> list[tuple[JobLog, _Tracked]]:
        """Read, parse and fold in what each log gained (and feed the model); the logs that
        grew."""
        grown: list[tuple[JobLog, _Tracked]] = []
        news: list[Samples | list[Sample] | bytes] = []
        self.problems = {}
        for log in logs:
            tracked = self._tracked(log)
            try:
                new, grew = self._read(log, tracked)
            except Exception as exc:  # one bad log never stops the others
                self._problem(log, tracked, "error", f"{type(exc).__name__}: {exc}")
                continue
            if grew:
                grown.append((log, tracked))
                news.append(new)
        # the new lines of all text logs, parsed in one batch per family
        text = [i for i, new in enumerate(news) if isinstance(new, bytes)]
        parsed = feed_many([(grown[i][1].stream, news[i]) for i in text])  # type: ignore[misc]
        for i, samples in zip(text, parsed, strict=True):
            news[i] = samples
        for (log, tracked), samples in zip(grown, news, strict=True):
            tracked.accumulator.add(samples)  # type: ignore[arg-type]
            if tracked.accumulator.batch_regimes != tracked.regimes:
                # a new batch size: what was measured before describes another job
                self.model.forget(log.job_id)
                tracked.regimes = tracked.accumulator.batch_regimes
            if not (log.gpu_type and log.gpus):
                tracked.accumulator.take_fresh(estimate=False)  # nothing to attribute it to
                continue
            fresh = tracked.accumulator.take_fresh()
            if fresh is not None:
                self.model.observe(log.job_id, log.gpu_type, log.gpus, fresh.value,
                                   placement=log.placement, model=log.model)
        return grown

    def _report(self, grown: list[tuple[JobLog, _Tracked]]) -> dict[str, JobReport]:
        """The reports of the logs that grew, kept in ``reports`` and saved to the store."""
        changed: dict[str, JobReport] = {}
        dirty: dict[str, dict[str, Any]] = {}
        for log, tracked in grown:
            stream = tracked.stream
            report = tracked.accumulator.report(
                None if stream is None else stream.family,
                None if stream is None else stream.stats, self.exact_reports)
            self.reports[log.job_id] = changed[log.job_id] = report
            dirty[log.job_id] = self._entry(tracked, report)
        if dirty:
            self.store.save(dirty)
        return changed

    def _tracked(self, log: JobLog) -> _Tracked:
        tracked = self._jobs.get(log.job_id)
        if tracked is None:
            saved = self._saved.get(log.job_id, {})
            pos = Position.from_dict(saved["position"]) if "position" in saved else None
            acc = Accumulator()
            if saved.get("last_step") is not None:
                acc.seed(int(saved["last_step"]))
            tracked = _Tracked(pos, None, acc, {})
            if saved.get("family") or log.family:
                tracked.stream = self._stream(log, saved.get("family") or log.family,
                                              saved.get("context"))
            self._jobs[log.job_id] = tracked
        return tracked

    def _stream(self, log: JobLog, family: str | None, context: dict | None
                ) -> LogStream | tensorboard_events.EventFileSource | None:
        if family == "tensorboard" or tensorboard_events.is_event_file(log.path):
            if not tensorboard_events.available():
                return None
            return tensorboard_events.EventFileSource(log.path, context, self.max_bytes)
        return LogStream(family, context)

    def _read(self, log: JobLog, tracked: _Tracked) -> tuple[list[Sample] | bytes, bool]:
        """What the log gained: an event file's samples, or a text log's new bytes."""
        tracked.more = False
        if tracked.stream is None:
            tracked.stream = self._stream(log, log.family, None)
            if tracked.stream is None:
                return [], False
        stream = tracked.stream
        if isinstance(stream, tensorboard_events.EventFileSource):
            samples = stream.read(log.owner_uid, log.owner_gids)
            tracked.more = stream.more
            self._problem(log, tracked, stream.event, stream.reason)
            return samples, bool(samples)
        read = read_new(log.path, tracked.position, self.max_bytes, log.owner_uid,
                        log.owner_gids, final=log.finished)
        tracked.more = read.more
        self._problem(log, tracked, read.event, read.reason)
        if read.skipped_bytes:
            stream.stats.malformed += 1
        tracked.position = read.position
        return read.data, bool(read.data or read.skipped_bytes)

    def _problem(self, log: JobLog, tracked: _Tracked, event: str, reason: str) -> None:
        """Count the read's event; note the log's problem for this round, if any."""
        if event:
            tracked.events[event] = tracked.events.get(event, 0) + 1
        if event in ("refused", "missing", "error"):
            self.problems[log.job_id] = f"{event}: {reason}" if reason else event

    @staticmethod
    def _entry(tracked: _Tracked, report: JobReport) -> dict[str, Any]:
        stream = tracked.stream
        entry: dict[str, Any] = {} if stream is None else stream.state()
        if tracked.position is not None:
            entry["position"] = tracked.position.as_dict()
        entry["last_step"] = report.iterations_done
        entry["events"] = dict(tracked.events)
        return entry

    def stats(self) -> LineStats:
        total = LineStats()
        for tracked in self._jobs.values():
            if tracked.stream is not None:
                total.add(tracked.stream.stats)
        return total

    def apply(self, job: Job, gpu_types: Iterable[str] = (), counts: Iterable[int] = ()
              ) -> Job:
        """The job record with measured progress, batch size and throughputs filled in."""
        report = self.reports.get(job.id)
        if report is None:
            return job
        changes: dict[str, Any] = {}
        if report.iterations_done is not None:
            changes["progress"] = Progress(
                iterations_done=float(report.iterations_done),
                iterations_total=(float(report.iterations_total)
                                  if report.iterations_total is not None
                                  else job.progress.iterations_total),
                epochs_done=int(report.epoch) if report.epoch is not None
                else job.progress.epochs_done,
                epochs_total=report.epochs_total or job.progress.epochs_total)
        if report.batch_size is not None:
            changes["batch_size"] = report.batch_size
        types, sizes = tuple(gpu_types), tuple(counts)
        if types and sizes:
            profile = self.model.profile(job.id, types, sizes)
            if profile.rates:
                changes["throughput"] = profile
        return dataclasses.replace(job, **changes) if changes else job


# What ``gpufair profile`` reads of a file at a time. A read's peak memory is a few times its
# size (the bytes, their cleaned copy, the scanner's columns, the samples): measured on the
# ImageNet example's lines, ~5x. 4 MB keeps the peak ~20 MB above the interpreter's while
# parsing as fast as larger reads (bench/bench_profiler_memory.py).
PROFILE_CHUNK = 4 << 20


def profile_file(path: str, family: str | None = None, chunk_bytes: int = PROFILE_CHUNK
                 ) -> JobReport:
    """Everything extracted from one log file read whole (what ``gpufair profile`` prints).

    The file is read ``chunk_bytes`` at a time (:meth:`Profiler.drain`): memory stays
    bounded whatever its size. It is read as finished: a last line without a newline counts.
    No owner check (the caller reads their own files), but a symlink, a FIFO or anything
    else than a regular file is refused: :class:`InputError` with the reason."""
    profiler = Profiler(max_bytes=chunk_bytes)
    log = JobLog(job_id=path, path=path, family=family, finished=True)
    profiler.drain([log])
    problem = profiler.problems.get(path, "")
    if problem.startswith("refused"):
        raise InputError(path, f"{problem} (only regular files are read, and no symlink: "
                               "give the file it points to)")
    report = profiler.reports.get(path)
    if report is None:
        tracked = profiler._jobs[path]
        stream = tracked.stream
        report = tracked.accumulator.report(None if stream is None else stream.family,
                                            None if stream is None else stream.stats)
    return report

"""``gpufair profile LOGFILE...``: print what the profiler extracts from each log."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from gpufair.cli.output import dumps
from gpufair.errors import InputError
from gpufair.profiler.parsers import BY_NAME
from gpufair.profiler.profiler import profile_file


def add_parsers(sub: argparse._SubParsersAction) -> None:
    prof = sub.add_parser("profile", help="extract iteration times, progress and batch-size "
                          "regimes from training logs")
    prof.add_argument("logs", nargs="+", metavar="LOGFILE",
                      help="job logs (any supported format), or TensorBoard event files")
    prof.add_argument("--format", choices=[*BY_NAME, "tensorboard"],
                      help="skip auto-detection")
    prof.add_argument("--json", action="store_true", help="one JSON object per log")
    prof.add_argument("--explain", action="store_true",
                      help="say how each reading was made: the estimator, and which lines "
                           "were left out (warm-up, evaluation, pauses, other segments)")
    prof.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = []
    for path in args.logs:
        if not os.path.isfile(path):
            raise InputError(path, "no such log file")
        report = profile_file(path, args.format)
        if args.json:
            print(dumps({"log": path, **report.as_dict()}, sort_keys=True))
        rows.append((path, report))
    if not args.json:
        print(render(rows))
        for path, report in rows:
            if report.family is None:
                print(unknown(path))
        if getattr(args, "explain", False):
            print(explain(rows))
    return 0


def unknown(path: str) -> str:
    """The "unknown format" answer: the closest families and why they did not match."""
    from gpufair.profiler.parsers import closest, sample_lines
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    hints = closest(sample_lines(head.replace(b"\r", b"\n")))
    why = "; ".join(hints) if hints else "no line mentions what any known trainer prints"
    return (f"{os.path.basename(path)}: unknown log format (closest: {why}); "
            f"give --format if it is one of: {', '.join(BY_NAME)}")


ESTIMATOR = """\
How s/iter is read: the mean cost of an iteration, i.e. iterations / wall time over the
steady state of the current segment -- every iteration counts, the periodically slow ones
too (data-loader waits), because that is what the job costs; a median would under-read
such a job. Left out: the first timed line of each segment and a leading run of slow
values (warm-up), evaluation lines, intervals that span an evaluation, and rare pauses
(values above 4x the median that are at most 5% of the window: checkpoint saves, eval
runs). Averages a trainer prints since the start of an epoch or run are differenced
between lines. A restart, resume, new world size or batch-size change starts a segment;
the reading is the last one's, the others are listed as regimes. A log whose lines carry
rank prefixes is read from one rank's lines (rank 0, or the lowest seen)."""


def explain(rows: Sequence[tuple[str, object]]) -> str:
    """Per log: what the reading covers and what was left out of it."""
    out = [ESTIMATOR]
    for path, r in rows:
        regimes = r.regimes  # type: ignore[attr-defined]
        pauses = regimes[-1].get("pauses_dropped", 0) if regimes else 0
        segments = ", ".join(f"{g['cause']}@{g['start_step']}" for g in regimes) or "-"
        out.append(
            f"{os.path.basename(path)}: basis {r.iter_time_basis or '-'}, "  # type: ignore
            f"{r.timed_samples} timed lines; left out: "  # type: ignore[attr-defined]
            f"{r.warmup_skipped} warm-up, {r.eval_samples} evaluation, "  # type: ignore
            f"{r.duplicates} duplicate (other ranks), {pauses} pause/warm-up in the "  # type: ignore
            f"window; segments: {segments}")
        out.append(f"  lines left out: {left_out(r.dropped, r.dropped_more)}")  # type: ignore
    return "\n".join(out)


def left_out(dropped: Sequence[dict], more: int) -> str:
    """The report's dropped ranges in one line: ``1 (warm-up), 13-15 (evaluation)``."""
    parts = [f"{d['first']}" + (f"-{d['last']}" if d["last"] != d["first"] else "")
             + f" ({d['reason']})" for d in dropped]
    if more:
        parts.append(f"... and {more} more")
    return ", ".join(parts) or "none"


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(rows: Sequence[tuple[str, object]]) -> str:
    header = ("log", "format", "iters", "of", "s/iter", "conf", "batch", "regimes",
              "restarts", "skipped")
    table = [header]
    for path, r in rows:
        lines = r.lines  # type: ignore[attr-defined]
        table.append((
            os.path.basename(path), r.family or "?",  # type: ignore[attr-defined]
            _fmt(r.iterations_done, "d"), _fmt(r.iterations_total, "d"),  # type: ignore
            _fmt(r.iter_time_s, ".4f"), _fmt(r.confidence, ".2f"),  # type: ignore
            _fmt(r.batch_size, "d"), str(len(r.regimes)), str(r.restarts),  # type: ignore
            str(lines.get("malformed", 0) + lines.get("binary", 0))))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                     for row in table)

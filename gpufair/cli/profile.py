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
    return 0


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

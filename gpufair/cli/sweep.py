"""``gpufair sweep``: a grid of simulations (policies × traces × seeds × options ...), run on
this machine's cores or submitted to Slurm as one job array, resumable, collected into one
table. The sweep file's format is in ``gpufair/sweep/grid.py`` and docs/sweeps.md."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from gpufair.cli.output import dumps

#: metrics the table shows per cell (--json gives them all)
SHOWN = ("makespan_s", "avg_jct_s", "p99_jct_s", "worst_rho", "unfair_fraction.1.1",
         "utilization", "partial")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of simulations locally or as a Slurm job "
                       "array; resumable; one table",
                       description=__doc__)
    p.add_argument("file", metavar="SWEEP.toml", help="the sweep file")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="check the sweep file and list its cells; run nothing")
    mode.add_argument("--slurm", action="store_true",
                      help="submit the cells without a result as one job array (sbatch)")
    mode.add_argument("--status", action="store_true",
                      help="cells done, and the array's tasks Slurm still has")
    mode.add_argument("--collect", action="store_true",
                      help="one table of every finished cell's metrics")
    mode.add_argument("--cell", type=int, metavar="I",
                      help="run cell I only (what each array task runs)")
    p.add_argument("--jobs", "-j", type=int, metavar="N",
                   help="local processes (default: the CPU count)")
    p.add_argument("--config", help="gpufair.toml: with --slurm, its [slurm] "
                   "managed_partitions are refused unless the sweep allows them")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpufair.errors import InputError
    from gpufair.sweep.grid import load_sweep

    sweep = load_sweep(args.file)
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs", "must be at least 1", value=args.jobs)
    if args.dry_run:
        return _list_cells(sweep, args.json)
    from gpufair.sweep import run as runner
    runner.claim_out(sweep)
    if args.cell is not None:
        outcome = runner.run_cell(sweep, args.cell, command=sys.argv)
        print(f"cell {args.cell}: {'done' if outcome.ran else 'already complete'} "
              f"({runner.cell_dir(sweep, sweep.cells[args.cell])})")
        return 0
    if args.slurm:
        return _submit(sweep, args.config)
    if args.status:
        return _status(sweep, args.json)
    if not args.collect:
        failed = _run_local(sweep, args.jobs, not args.quiet and not args.json)
        if failed:
            return 1
    return _collect(sweep, args.json)


def _list_cells(sweep: Any, as_json: bool) -> int:
    from gpufair.sweep.run import cell_dir, is_done
    rows = [{"cell": c.index, "done": is_done(sweep, c), "dir": str(cell_dir(sweep, c)),
             **c.label()} for c in sweep.cells]
    if as_json:
        print(dumps({"sweep": sweep.name, "out": str(sweep.out), "cells": rows}, indent=1))
        return 0
    done = sum(r["done"] for r in rows)
    print(f"sweep {sweep.name!r}: {len(rows)} cells ({done} done), results in {sweep.out}")
    print(_table([{k: v for k, v in r.items() if k != "dir"} for r in rows]))
    return 0


def _run_local(sweep: Any, jobs: int | None, bar: bool) -> int:
    from tqdm import tqdm

    from gpufair.sweep.run import pending, run_local
    todo = len(pending(sweep))
    progress = tqdm(total=todo, desc=f"sweep {sweep.name}", unit="cell", file=sys.stderr,
                    disable=not bar or not sys.stderr.isatty())
    with progress:
        outcomes = run_local(sweep, jobs=jobs, progress=progress.update)
    failed = [o for o in outcomes if o.error]
    for o in failed:
        print(f"gpufair sweep: cell {o.index} failed: {o.error}", file=sys.stderr)
    return len(failed)


def _submit(sweep: Any, config_path: str | None) -> int:
    from gpufair.adapters.base import Unavailable
    from gpufair.core.config import load_config
    from gpufair.sweep.slurm_array import submit
    managed = load_config(config_path).slurm.managed_partitions if config_path else ()
    try:
        submitted = submit(sweep, managed=managed)
    except Unavailable as exc:
        print(f"gpufair sweep: Slurm unavailable: {exc}", file=sys.stderr)
        return 1
    if submitted is None:
        print(f"sweep {sweep.name!r}: all {len(sweep.cells)} cells have results; "
              "nothing to submit")
    else:
        print(f"sweep {sweep.name!r}: submitted job array {submitted.job_id} "
              f"({len(submitted.cells)} of {len(sweep.cells)} cells)")
    return 0


def _status(sweep: Any, as_json: bool) -> int:
    from gpufair.adapters.base import Unavailable
    from gpufair.sweep.run import is_done
    from gpufair.sweep.slurm_array import array_states
    try:
        states = array_states(sweep)
    except Unavailable as exc:
        print(f"gpufair sweep: Slurm unavailable: {exc}", file=sys.stderr)
        return 1
    done = [c.index for c in sweep.cells if is_done(sweep, c)]
    counts: dict[str, int] = {}
    for index, state in states.items():
        if int(index) not in done:
            counts[state] = counts.get(state, 0) + 1
    missing = len(sweep.cells) - len(done) - sum(counts.values())
    summary = {"cells": len(sweep.cells), "done": len(done), **counts,
               "no result, not queued": missing}
    print(dumps(summary) if as_json else
          ", ".join(f"{k} {v}" for k, v in summary.items()))
    return 0


def _collect(sweep: Any, as_json: bool) -> int:
    from gpufair.errors import InputError
    from gpufair.results.reader import read_results
    from gpufair.sweep.run import cell_dir
    rows: list[dict[str, Any]] = []
    for cell in sweep.cells:
        try:   # the reader's own checks (meta.json, every file's sha256): read once
            metrics = read_results(cell_dir(sweep, cell)).metrics.iloc[0].to_dict()
        except InputError:
            continue   # no result yet, or a broken one a run replaces: counted as missing
        rows.append({"cell": cell.index, **cell.label(), **metrics})
    missing = len(sweep.cells) - len(rows)
    if as_json:
        print(dumps({"sweep": sweep.name, "cells": len(sweep.cells), "missing": missing,
                     "rows": rows}, indent=1))
    else:
        keys = ["cell", *dict.fromkeys(k for c in sweep.cells for k in c.label())]
        varying = [k for k in keys if k == "cell" or len({repr(r.get(k)) for r in rows}) > 1]
        print(_table([{**{k: r.get(k) for k in varying},
                       **{k: r.get(k) for k in SHOWN if k in r}} for r in rows]))
    if missing:
        print(f"gpufair sweep: {missing} of {len(sweep.cells)} cells have no result yet",
              file=sys.stderr)
    return 0


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no cells)"
    columns = list(dict.fromkeys(k for r in rows for k in r))
    text = [[_fmt(r.get(c)) for c in columns] for r in rows]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in text]
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)

"""Running a sweep's cells: one results directory per cell under ``OUT/cells/``, written
atomically, so a cell is either complete or absent, whoever ran it (the local pool, a job
array task, a requeued incarnation of one) and however it ended.

``OUT/sweep.json`` names the sweep a directory belongs to (its cells' keys). A directory of
another sweep is refused, not mixed: its cells would sit beside this sweep's in one table
with nothing to tell them apart.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufair.core.simulation import simulate
from gpufair.errors import InputError, parse_json, read_text
from gpufair.results.reader import read_meta
from gpufair.results.simulation import write_simulations
from gpufair.sweep.grid import Cell, Sweep

MANIFEST = "sweep.json"
FORMAT = "gpufair-sweep"
VERSION = 1


def cell_dir(sweep: Sweep, cell: Cell) -> Path:
    return sweep.out / "cells" / cell.name


def is_done(sweep: Sweep, cell: Cell) -> bool:
    """The cell's results directory is complete and intact (the reader's own checks)."""
    path = cell_dir(sweep, cell)
    if not (path / "meta.json").is_file():
        return False
    try:
        read_meta(path)
    except InputError:
        return False   # truncated or edited: run again (the writer replaces it whole)
    return True


def pending(sweep: Sweep) -> list[Cell]:
    return [c for c in sweep.cells if not is_done(sweep, c)]


def claim_out(sweep: Sweep) -> None:
    """Make ``OUT`` this sweep's, or check that it is: a new or empty directory gets the
    manifest; one holding another sweep's (or anything else) is refused, naming it."""
    out = sweep.out
    manifest = out / MANIFEST
    if manifest.is_file():
        data = parse_json(read_text(manifest, "sweep manifest"), str(manifest))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(str(manifest), f"not a gpufair sweep manifest (format must be "
                             f"{FORMAT!r})", field="format")
        if data.get("key") != sweep.key:
            raise InputError(str(out), f"holds the results of another sweep "
                             f"({data.get('name')!r}, {len(data.get('cells') or [])} cells, "
                             f"from {data.get('source')}); a sweep whose cells differ needs "
                             "its own results directory (change `out` or remove it)")
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(str(out), "exists and is not this sweep's results directory; not "
                         "writing into it (change `out` in the sweep file, or remove it)")
    out.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "version": VERSION, "name": sweep.name, "key": sweep.key,
            "source": sweep.source,
            "cells": [{"index": c.index, "dir": f"cells/{c.name}", "key": c.key,
                       "params": c.label()} for c in sweep.cells]}
    fd, tmp = tempfile.mkstemp(prefix=".sweep.", suffix=".tmp", dir=out)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
    os.replace(tmp, manifest)


@dataclass(frozen=True)
class CellOutcome:
    index: int
    ran: bool           # False: it was complete already
    wall_s: float
    error: str | None = None


def run_cell(sweep: Sweep, index: int, *, command: Sequence[str] = ()) -> CellOutcome:
    """Run one cell unless it is complete, and write its results directory."""
    if not 0 <= index < len(sweep.cells):
        raise InputError(sweep.source, f"no cell {index}: the sweep has cells 0 to "
                         f"{len(sweep.cells) - 1}", field="--cell")
    cell = sweep.cells[index]
    started = time.perf_counter()
    if is_done(sweep, cell):
        return CellOutcome(index, ran=False, wall_s=0.0)
    spec = cell.spec()
    report = simulate(spec, progress=False, time_limit_s=sweep.time_limit_s, capture=True)
    try:
        write_simulations(cell_dir(sweep, cell), spec, [report], kind="sweep-cell",
                          command=list(command) or ["gpufair", "sweep", sweep.source,
                                                    "--cell", str(index)])
    except OSError:
        # another incarnation of this task (a requeue racing its predecessor) put the same
        # cell in place first: its result is this one's, and there must be only one
        if not is_done(sweep, cell):
            raise
    return CellOutcome(index, ran=True, wall_s=time.perf_counter() - started)


def _worker(sweep: Sweep, index: int) -> CellOutcome:
    try:
        return run_cell(sweep, index)
    except Exception as exc:   # one cell's failure must not lose the others' results
        return CellOutcome(index, ran=True, wall_s=0.0, error=f"{type(exc).__name__}: {exc}")


def run_local(sweep: Sweep, *, jobs: int | None = None,
              progress: Callable[[int], Any] | None = None) -> list[CellOutcome]:
    """Every pending cell on a pool of ``jobs`` processes (default: the CPU count)."""
    todo = pending(sweep)
    workers = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    if workers == 1:
        return [_report(_worker(sweep, c.index), progress) for c in todo]
    # fork: the children start with gpufair, numpy and the solvers imported (spawn would
    # import them again per process, ~1 s each)
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(_worker, sweep, c.index) for c in todo]
        return sorted((_report(f.result(), progress) for f in as_completed(futures)),
                      key=lambda o: o.index)


def _report(outcome: CellOutcome, progress: Callable[[int], Any] | None) -> CellOutcome:
    if progress is not None:
        progress(1)
    return outcome

"""A sweep as one Slurm job array: task I runs cell I (``gpufair sweep FILE --cell I``).

Why an array: it is how a cluster's users already run many small jobs — one submission, one
job id to watch or cancel, ``%N`` to stay a good neighbour — and each task is an ordinary job
that Slurm's accounting, limits and fair share see. Tasks are submitted ``--requeue``: a task
preempted or requeued runs its cell again, and the cell's atomic write leaves exactly one
result whichever incarnation finishes. Only cells without a complete result are submitted,
so submitting again after a failure resumes.

Every value reaches sbatch as its own argument, never through a shell; the task script
quotes the two paths it names.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufair.adapters.base import Unavailable
from gpufair.adapters.slurm.transport import decode
from gpufair.errors import InputError
from gpufair.sweep.grid import Sweep
from gpufair.sweep.run import pending

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Submitted:
    job_id: str
    cells: tuple[int, ...]


def index_ranges(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` → ``0-2,5,7-8`` (sbatch --array's syntax)."""
    parts: list[str] = []
    ordered = sorted(set(indices))
    start = prev = ordered[0]
    for i in [*ordered[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(parts)


def _run(argv: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise Unavailable(f"{argv[0]} not found: is this a Slurm submit host?") from None
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{argv[0]} gave no answer in {TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        raise Unavailable(f"{argv[0]} failed (exit {done.returncode}): "
                          f"{decode(done.stderr).strip()[:500]}")
    return decode(done.stdout)


def default_partition() -> str:
    """The partition a job without ``-p`` goes to (``sinfo`` marks it with ``*``)."""
    for name in _run(["sinfo", "-h", "-o", "%P"]).split():
        if name.endswith("*"):
            return name[:-1]
    return ""


def check_not_managed(sweep: Sweep, managed: Sequence[str]) -> None:
    """The sweep's tasks would be held and run by gpufair's own daemon in a managed
    partition; that is allowed only when the sweep file says so."""
    if sweep.slurm.gpufair_managed or not managed:
        return
    partition = sweep.slurm.partition or default_partition()
    if any(p in managed for p in partition.split(",")):
        raise InputError(sweep.source, f"partition {partition!r} is managed by gpufair's "
                         "daemon ([slurm] managed_partitions): its tasks would be held and "
                         "scheduled by it. Name another partition, or set gpufair_managed = "
                         "true to mean it", field="slurm.partition")


def task_script(sweep: Sweep, python: str) -> str:
    return "\n".join([
        "#!/bin/bash",
        f"# gpufair sweep {sweep.name!r}: array task I runs cell I (written by gpufair sweep "
        "--slurm)",
        f"exec {shlex.quote(python)} -m gpufair sweep {shlex.quote(sweep.source)} "
        '--cell "$SLURM_ARRAY_TASK_ID"',
        ""])


def sbatch_argv(sweep: Sweep, cells: Sequence[int], script: Path) -> list[str]:
    opts = sweep.slurm
    array = index_ranges(cells) + (f"%{opts.max_parallel}" if opts.max_parallel else "")
    logs = sweep.out / "slurm" / "task-%A_%a.out"
    argv = ["sbatch", "--parsable", f"--array={array}", f"--job-name={job_name(sweep)}",
            "--requeue", "--open-mode=append", f"--output={logs}",
            f"--chdir={Path(sweep.source).resolve().parent}", f"--time={opts.time}",
            f"--cpus-per-task={opts.cpus_per_task}", f"--mem={opts.mem}", "--ntasks=1"]
    for flag, value in (("--partition", opts.partition), ("--account", opts.account),
                        ("--qos", opts.qos)):
        if value:
            argv.append(f"{flag}={value}")
    return [*argv, str(script)]


def submit(sweep: Sweep, *, managed: Sequence[str] = (), python: str | None = None
           ) -> Submitted | None:
    """Submit the cells without a complete result as one array; None when there are none."""
    cells = [c.index for c in pending(sweep)]
    if not cells:
        return None
    check_not_managed(sweep, managed)
    folder = sweep.out / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "task.sh"
    script.write_text(task_script(sweep, python or sys.executable), encoding="utf-8")
    script.chmod(0o755)
    out = _run(sbatch_argv(sweep, cells, script)).strip()
    job_id = out.split(";")[0]   # --parsable: "jobid" or "jobid;cluster"
    if not job_id.isdigit():
        raise Unavailable(f"sbatch answered {out!r}, not a job id")
    submitted = Submitted(job_id, tuple(cells))
    log = folder / "submitted.json"
    history = json.loads(log.read_text(encoding="utf-8")) if log.is_file() else []
    history.append({"job_id": job_id, "cells": list(cells), "at": time.time()})
    log.write_text(json.dumps(history, indent=1) + "\n", encoding="utf-8")
    return submitted


def array_states(sweep: Sweep) -> dict[str, str]:
    """State of each task of the sweep's arrays Slurm still knows (``"3": "RUNNING"``)."""
    log = sweep.out / "slurm" / "submitted.json"
    if not log.is_file():
        return {}
    ids = {str(entry["job_id"]) for entry in json.loads(log.read_text(encoding="utf-8"))}
    # by name, not -j: squeue refuses an id it has forgotten (an array long finished)
    text = _run(["squeue", "-h", "-r", "-n", job_name(sweep), "-o", "%F %K %T"])
    states: dict[str, str] = {}
    for line in text.splitlines():
        array, task, state = [*line.split(), "", "", ""][:3]
        if array in ids and task.isdigit():
            states[task] = state
    return states


def job_name(sweep: Sweep) -> str:
    return f"gpufair-sweep-{sweep.name}"[:128]

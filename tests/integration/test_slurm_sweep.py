"""A sweep run as a Slurm job array on the loopback Slurm (issue 34's acceptance): 24 cells,
one task cancelled and one requeued while they run, a second submission for what is
missing, and then exactly 24 results, each identical to the same cell run locally."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
from slurm_cluster import Cluster

from gpufair.results.reader import read_results
from gpufair.sweep.grid import load_sweep
from gpufair.sweep.run import cell_dir, claim_out, run_local

#: fields of a run's metrics that time this machine rather than describe the schedule
TIMINGS = {"wall_s", "policy_s", "solver_s"}

GRID = """\
name = "array"
out = "{out}"
[grid]
policy = ["fifo", "las", "srtf"]
seed = [0, 1]
round = [120, 240, 360, 480]
[slurm]
partition = "{partition}"
mem = "500M"
time = "10:00"
max_parallel = 4
"""


def gpufair(cluster: Cluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpufair", *argv], env=cluster.env,
                          capture_output=True, text=True, timeout=120, check=False)


def tasks(cluster: Cluster, job_id: str) -> dict[str, str]:
    """State of each task of array ``job_id`` Slurm still lists (``"3": "RUNNING"``)."""
    out = cluster.run("squeue", "-h", "-r", "-j", job_id, "-o", "%K %T", check=False).stdout
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def running_task(cluster: Cluster, job_id: str, but: set[str]) -> str:
    found: list[str] = []

    def one_runs() -> bool:
        found[:] = [t for t, s in tasks(cluster, job_id).items() if s == "RUNNING"
                    and t not in but]
        return bool(found)
    cluster.wait_for(f"a running task of array {job_id}", one_runs, 90)
    return found[0]


def test_a_sweep_as_a_job_array_survives_a_kill_and_a_requeue(cluster: Cluster,
                                                              tmp_path: Path):
    local = load_sweep(_write(tmp_path / "local.toml", "local", "urgent"))
    claim_out(local)
    assert not any(o.error for o in run_local(local, jobs=2))

    path = _write(tmp_path / "array.toml", "array", "urgent")
    sweep = load_sweep(path)
    assert len(sweep.cells) == 24 and sweep.key == local.key
    first = gpufair(cluster, "sweep", str(path), "--slurm")
    assert first.returncode == 0, first.stderr
    job_id = first.stdout.split("job array ")[1].split()[0]
    assert "(24 of 24 cells)" in first.stdout

    killed = running_task(cluster, job_id, set())
    cluster.run("scancel", f"{job_id}_{killed}")
    requeued = running_task(cluster, job_id, {killed})
    cluster.run("scontrol", "requeue", f"{job_id}_{requeued}")
    # a requeued job waits out a begin time Slurm sets; let it go now
    cluster.wait_for("the requeued task back in the queue", lambda: tasks(
        cluster, job_id).get(requeued) in ("PENDING", "REQUEUED", "RUNNING"), 30)
    cluster.run("scontrol", "update", f"JobId={job_id}_{requeued}", "StartTime=now",
                check=False)
    cluster.wait_for(f"array {job_id} to finish", lambda: not tasks(cluster, job_id), 240)

    missing = [c.index for c in sweep.cells if not (cell_dir(sweep, c) / "meta.json").exists()]
    assert set(missing) <= {int(killed)}
    status = gpufair(cluster, "sweep", str(path), "--status", "--json")
    assert json.loads(status.stdout)["done"] == 24 - len(missing), status.stderr
    again = gpufair(cluster, "sweep", str(path), "--slurm")
    assert again.returncode == 0, again.stderr
    if missing:   # only the cell the kill left without a result goes again
        assert f"({len(missing)} of 24 cells)" in again.stdout, again.stdout
        second = again.stdout.split("job array ")[1].split()[0]
        cluster.wait_for(f"array {second} to finish", lambda: not tasks(cluster, second), 120)
    else:
        assert "nothing to submit" in again.stdout

    collected = gpufair(cluster, "sweep", str(path), "--collect", "--json")
    assert collected.returncode == 0, collected.stderr
    assert [r["cell"] for r in json.loads(collected.stdout)["rows"]] == list(range(24))
    assert sorted(p.name for p in (sweep.out / "cells").iterdir()) == \
        sorted(c.name for c in sweep.cells)   # one result each, nothing half-written beside
    for cell in sweep.cells:
        ours, theirs = read_results(cell_dir(sweep, cell)), read_results(cell_dir(local, cell))
        keep = [c for c in ours.metrics.columns if c not in TIMINGS]
        pd.testing.assert_frame_equal(ours.metrics[keep], theirs.metrics[keep])
        pd.testing.assert_frame_equal(ours.jobs, theirs.jobs)
        pd.testing.assert_frame_equal(ours.allocations, theirs.allocations)


def test_a_sweep_into_a_partition_gpufair_manages_is_refused_before_submitting(
        cluster: Cluster, tmp_path: Path):
    config = tmp_path / "gpufair.toml"
    config.write_text('[slurm]\nmanaged_partitions = ["gpu"]\n')
    path = _write(tmp_path / "s.toml", "s", "")   # no partition: the default, gpu
    before = set(cluster.jobs())
    refused = gpufair(cluster, "sweep", str(path), "--slurm", "--config", str(config))
    assert refused.returncode == 2
    assert "partition 'gpu' is managed by gpufair" in refused.stderr
    assert set(cluster.jobs()) == before


def _write(path: Path, out: str, partition: str) -> Path:
    path.write_text(GRID.format(out=out, partition=partition), encoding="utf-8")
    return path

"""A job that turns its own Slurm output path into a FIFO cannot freeze the profiler.

``gpufair snapshot --slurm`` runs the daemon's profiler round over the running jobs' logs
(Slurm's StdOut). One job replaces its log with a FIFO that nobody writes to (its stdout
still goes to the deleted file): opening that path for reading would block forever. The
snapshot must finish, and still carry what the other job's log measured.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

from slurm_cluster import Cluster, write_config


def _start(cluster: Cluster, job_id: str, node: str) -> None:
    cluster.run("scontrol", "update", f"JobId={job_id}", f"NodeList={node}", "NumNodes=1")
    cluster.run("scontrol", "release", job_id)


def test_snapshot_finishes_when_a_job_log_is_a_fifo(cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "evil.log"
    trap = f"rm -f {log} && mkfifo {log} && sleep 600"
    evil = cluster.run("sbatch", "--parsable", "-J", "evil", "-o", str(log), "-N", "1",
                       "--gres=gpu:4", "--wrap", trap).stdout.strip().split(";")[0]
    good = cluster.sbatch("good", tmp_path, steps=200, step_s=0.3)
    _start(cluster, evil, "gpu-v100-1")
    _start(cluster, good, "gpu-k80-1")
    cluster.wait_for("both jobs running", lambda: all(
        cluster.jobs()[j]["job_state"] == "RUNNING" for j in (evil, good)), 30)
    cluster.wait_for("the log turned into a FIFO",
                     lambda: log.exists() and stat.S_ISFIFO(log.lstat().st_mode), 30)
    time.sleep(1.5)   # a few training steps in the good job's log
    config = write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db", policy="fifo")
    started = time.monotonic()
    snap = subprocess.run([sys.executable, "-m", "gpufair.cli.main", "snapshot", "--slurm",
                           "--config", str(config)], env=cluster.env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert snap.returncode == 0, snap.stderr
    assert time.monotonic() - started < 30
    jobs = {j["id"]: j for j in json.loads(snap.stdout)["jobs"]}
    assert jobs[good]["progress"]["iterations_done"] >= 1
    assert jobs[evil]["progress"].get("iterations_done") in (None, 0, 0.0)

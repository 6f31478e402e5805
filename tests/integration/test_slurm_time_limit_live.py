"""The live daemon's ``Job.time_limit_s`` read from the real Slurm 22.05 (issue 31: it was left
unfilled, so ``slurm_backfill`` planned live jobs with its one-day default), seen through
``gpufair snapshot``: a ``--time=5`` job has 300 s, one without ``--time`` in a partition
without DefaultTime and with MaxTime=UNLIMITED has none, one submitted while the partition's
DefaultTime was 30 minutes has 1,800 s."""

from __future__ import annotations

import json
import sys

from slurm_cluster import Cluster, write_config

CLI = [sys.executable, "-m", "gpufair.cli.main"]


def test_snapshot_carries_each_job_s_time_limit(cluster: Cluster, tmp_path):
    def submit(*args: str) -> str:
        return cluster.run("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1", "-o",
                           "/dev/null", *args, "--wrap", "sleep 600").stdout.strip()

    five, unlimited, hours = submit("--time=5"), submit(), submit("--time=1-02:00:00")
    cluster.run("scontrol", "update", "PartitionName=gpu", "DefaultTime=30")
    try:   # the partition's default, filled in by slurmctld at submission
        default = submit()
    finally:
        # (scontrol takes no NONE: UNLIMITED gives jobs what NONE with MaxTime=UNLIMITED does)
        cluster.run("scontrol", "update", "PartitionName=gpu", "DefaultTime=UNLIMITED")
    config = write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db")
    snap = json.loads(cluster.run(*CLI, "snapshot", "--slurm", "--config",
                                  str(config)).stdout)
    limits = {j["id"]: j.get("time_limit_s") for j in snap["jobs"]}
    assert limits[five] == 300.0
    assert limits[unlimited] is None
    assert limits[hours] == 26 * 3600.0
    assert limits[default] == 30 * 60.0

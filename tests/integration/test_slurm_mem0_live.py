"""``--mem=0`` on the real Slurm 22.05 (issue 29): the job needs all of a node's memory. On the
accounting cluster (gpu-v100-2 has 256,000 MB, the others 128,000) with 1,000 MB held on every
node by jobs Slurm runs alone, the old code pinned a ``--mem=0`` job onto gpu-v100-2 (its TRES
request shows the smallest node's 125G, which fits there) and Slurm left it waiting on
Resources with the GPU booked. Now it stays held until a node's memory is all free, then runs
there."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import ACCOUNTING_MANAGED
from slurm_cluster import Cluster, write_config

CLI = [sys.executable, "-m", "gpufair.cli.main"]
NODES = ("gpu-v100-1", "gpu-v100-2", "gpu-k80-1", "gpu-k80-2")


def test_a_mem_0_job_waits_for_a_node_whose_memory_is_all_free(slurm_accounting: Cluster,
                                                                   tmp_path: Path):
    cluster = slurm_accounting
    config = write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db", policy="fifo")
    config.write_text(config.read_text().replace(
        'managed_partitions = ["gpu"]', f'managed_partitions = ["{ACCOUNTING_MANAGED}"]'))
    others = {node: cluster.run("sbatch", "--parsable", "-p", "gpu", "-w", node, "--mem=1000",
                                "--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 600"
                                ).stdout.strip() for node in NODES}
    job = ""
    try:
        cluster.wait_for("Slurm's own jobs running", lambda: all(
            cluster.jobs()[j]["job_state"] == "RUNNING" for j in others.values()), 30)
        job = cluster.run("sbatch", "--parsable", "-p", ACCOUNTING_MANAGED, "--mem=0",
                          "--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 600"
                          ).stdout.strip()
        cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
        record = cluster.jobs()[job]
        assert (record["job_state"], record["state_reason"]) == ("PENDING", "JobHeldUser")
        assert not record.get("required_nodes")

        cluster.run("scancel", others["gpu-v100-2"])
        cluster.wait_for("gpu-v100-2's memory free", lambda: cluster.jobs()[
            others["gpu-v100-2"]]["job_state"] not in ("RUNNING", "COMPLETING"), 30)
        cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
        cluster.wait_for("the --mem=0 job running",
                         lambda: cluster.jobs()[job]["job_state"] == "RUNNING", 30)
        assert cluster.jobs()[job]["nodes"] == "gpu-v100-2"
    finally:
        cluster.run("scancel", *others.values(), *([job] if job else []), check=False)

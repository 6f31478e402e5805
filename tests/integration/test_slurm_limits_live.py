"""Association limits read ahead on the real Slurm 22.05 with slurmdbd (issue 29): an account
with ``GrpTRES=gres/gpu=2`` and three 1-GPU jobs. gpufair released all three before (the
third then waited on AssocGrpGRES, pinned onto a GPU booked for it, until Slurm's refusal was
seen a round later); now it starts two, leaves the third held with no GPU booked, and starts
it in the round after one of the two ended."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import ACCOUNTING_MANAGED
from slurm_cluster import Cluster, write_config

CLI = [sys.executable, "-m", "gpufair.cli.main"]
ACCOUNT = "limited"


def _config(cluster: Cluster, tmp_path: Path) -> Path:
    config = write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db", policy="fifo")
    config.write_text(config.read_text().replace(
        'managed_partitions = ["gpu"]', f'managed_partitions = ["{ACCOUNTING_MANAGED}"]'))
    return config


def test_a_full_gpu_limit_books_no_gpu_for_the_job_slurm_would_not_run(
        slurm_accounting: Cluster, tmp_path: Path):
    cluster = slurm_accounting
    # (slurmdbd may be coming back from test_slurm_accounting's stop: tried until it answers)
    cluster.wait_for("slurmdbd", lambda: cluster.run(
        "sacctmgr", "-i", "add", "account", ACCOUNT, "Cluster=loopback", check=False
    ).returncode == 0 or ACCOUNT in cluster.run("sacctmgr", "-n", "-P", "show", "account",
                                                ACCOUNT, check=False).stdout, 60)
    cluster.run("sacctmgr", "-i", "add", "user", "root", f"Account={ACCOUNT}")
    cluster.run("sacctmgr", "-i", "modify", "account", ACCOUNT, "set", "GrpTRES=gres/gpu=2")
    cluster.wait_for("the limit in slurmctld", lambda: "gres/gpu=2(" in cluster.run(
        "scontrol", "show", "assoc_mgr", f"accounts={ACCOUNT}", "flags=assoc").stdout, 30)
    ids = [cluster.run("sbatch", "--parsable", "-p", ACCOUNTING_MANAGED, "-A", ACCOUNT,
                       "--gres=gpu:1", "-o", "/dev/null", "--wrap", f"sleep {s}"
                       ).stdout.strip() for s in (600, 600, 600)]
    config = _config(cluster, tmp_path)
    try:
        cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
        cluster.wait_for("two jobs running", lambda: sum(
            cluster.jobs()[j]["job_state"] == "RUNNING" for j in ids) == 2, 30)
        third = cluster.jobs()[ids[2]]
        # still held by gpufair (never released, never pinned): no GPU booked for it
        assert third["job_state"] == "PENDING"
        assert third["state_reason"] == "JobHeldUser", third["state_reason"]
        assert not third.get("required_nodes")
        # nor in the snapshot a dry run would plan from
        snap = json.loads(cluster.run(*CLI, "snapshot", "--slurm", "--config",
                                      str(config)).stdout)
        assert ids[2] not in {j["id"] for j in snap["jobs"]}
        assert {ids[0], ids[1]} <= {j["id"] for j in snap["jobs"]}

        cluster.run("scancel", ids[0])
        cluster.wait_for("the first job gone", lambda: cluster.jobs()[ids[0]]["job_state"]
                         not in ("RUNNING", "COMPLETING"), 30)
        cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
        cluster.wait_for("the third job running",
                         lambda: cluster.jobs()[ids[2]]["job_state"] == "RUNNING", 30)
    finally:
        cluster.run("scancel", *ids, check=False)
        cluster.run("sacctmgr", "-i", "modify", "account", ACCOUNT, "set", "GrpTRES=gres/gpu=-1",
                    check=False)

"""Reservations in the model, on the real loopback Slurm 22.05 in hard mode (issue 29): a job
that did not ask for a reservation is not pinned onto a reserved node for a run that would
overlap the window (Slurm would refuse it, ReqNodeNotAvail, on GPUs booked for it)."""

from __future__ import annotations

import sys

from slurm_cluster import Cluster, write_config

CLI = [sys.executable, "-m", "gpufair.cli.main"]
RESERVED = "gpu-k80-1,gpu-k80-2,gpu-v100-1"


def test_a_job_is_placed_off_the_nodes_of_a_reservation_its_run_would_overlap(
        cluster: Cluster, tmp_path):
    cluster.run("scontrol", "create", "reservation", "ReservationName=gpf_maint",
                f"Nodes={RESERVED}", "StartTime=now+120", "Duration=60", "Users=root")
    try:
        job = cluster.run("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:4", "--time=10",
                          "-o", "/dev/null", "--wrap", "sleep 600").stdout.strip()
        config = write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db", policy="fifo")
        cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
        assert cluster.jobs()[job]["state_reason"] != "JobHeldUser", "not released"
        cluster.wait_for("the job running",
                         lambda: cluster.jobs()[job]["job_state"] == "RUNNING", 30)
        assert cluster.jobs()[job]["nodes"] == "gpu-v100-2"
    finally:
        cluster.run("scontrol", "delete", "ReservationName=gpf_maint", check=False)

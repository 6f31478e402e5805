"""Issue 29, item 5, on the real loopback Slurm in hard mode: dependencies that can never be
met, and a malformed ``gpufair:gpus=`` comment warned about once."""

from __future__ import annotations

import json
from pathlib import Path

from slurm_cluster import Cluster, start_daemon, stop_daemon, store_rounds, write_config
from test_slurm_safety import adapter

from gpufair.adapters.slurm import SlurmAdapter
from gpufair.adapters.slurm.adapter import SlurmSettings
from gpufair.adapters.slurm.transport import CliTransport


def _submit(cluster: Cluster, *args: str, script: str = "sleep 600") -> str:
    out = cluster.run("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1", "-o", "/dev/null",
                      *args, "--wrap", script).stdout
    return out.strip().split(";")[0]


def test_a_held_job_whose_dependency_can_never_be_met(cluster: Cluster):
    """Slurm re-checks no held job's dependencies, and gpufair holds every managed job: a
    job after a parent that failed waited forever, ``--kill-on-invalid-dep=yes`` ignored.
    Now gpufair cancels the jobs that ask for it (their own flag, or ``kill_invalid_depend``
    and not ``=no``) and lists the others as waiting for a dependency never met."""
    parent = _submit(cluster, script="exit 3")
    kill = _submit(cluster, f"--dependency=afterok:{parent}", "--kill-on-invalid-dep=yes")
    plain = _submit(cluster, f"--dependency=afterok:{parent}")
    keep = _submit(cluster, f"--dependency=afterok:{parent}", "--kill-on-invalid-dep=no")
    ok = _submit(cluster, f"--dependency=afternotok:{parent}")
    slurm = adapter(cluster)
    slurm.reconcile()
    assert all(cluster.jobs()[j]["job_state"] == "PENDING" for j in (kill, plain, keep, ok))
    cluster.run("scontrol", "update", f"JobId={parent}", "NodeList=gpu-v100-1", "NumNodes=1")
    cluster.run("scontrol", "release", parent)
    cluster.wait_for("the parent failed",
                     lambda: cluster.jobs()[parent]["job_state"] == "FAILED", 30)

    slurm.reconcile()
    jobs = cluster.jobs()
    assert [jobs[j]["job_state"] for j in (kill, plain, keep)] == \
        ["CANCELLED", "PENDING", "PENDING"]
    view = slurm.view()
    waiting = {j.id: why for j, why in view.waiting}
    assert waiting[plain] == waiting[keep] == \
        f"its dependency can never be met ('afterok:{parent}')"
    assert ok in {j.id for j in view.state.jobs}     # afternotok of a failed job: met

    strict = SlurmAdapter(CliTransport(env=cluster.env),
                          SlurmSettings(kill_invalid_depend=True), mode="hard")
    strict.reconcile()
    jobs = cluster.jobs()
    assert [jobs[j]["job_state"] for j in (plain, keep)] == ["CANCELLED", "PENDING"]


def test_a_malformed_elastic_comment_is_warned_about_once(cluster: Cluster, tmp_path: Path):
    """It was warned about at every read: twice per round and at every poll."""
    job = _submit(cluster, "--comment", "gpufair:gpus=4-2")
    store_path = tmp_path / "state.db"
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="fifo", poll_s=1)
    log = tmp_path / "daemon.log"
    daemon = start_daemon(cluster, config, log)
    try:
        cluster.wait_for("the job RUNNING",
                         lambda: cluster.jobs()[job]["job_state"] == "RUNNING", 60)
        seen = store_rounds(store_path)
        cluster.wait_for("three more rounds", lambda: store_rounds(store_path) >= seen + 3, 60)
    finally:
        stop_daemon(daemon)
    warned = [json.loads(line) for line in log.read_text().splitlines()
              if "gpufair:gpus=4-2" in line]
    assert len(warned) == 1, warned
    assert f"job {job}" in warned[0]["msg"] and warned[0]["level"] == "warning"

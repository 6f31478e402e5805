"""An ordinary user of a shared cluster against gpufair on the real loopback Slurm: no bypass
of the hold, and no job lost, failed or re-run by a preemption (issue 12, items 3-5, 8)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import TRAIN_JOB, Cluster

from gpufair.adapters.slurm import CliTransport, SlurmAdapter, SlurmSettings
from gpufair.model import Migrate, Preempt, Start

USER = "gpufair-it-user"


@pytest.fixture(scope="module")
def user() -> pwd.struct_passwd:
    """An unprivileged account (created when missing: the tests run as root, like CI)."""
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        if os.geteuid() != 0:
            pytest.skip("needs root to create an unprivileged test user")
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER],
                       check=True, capture_output=True)
        return pwd.getpwnam(USER)


def as_user(cluster: Cluster, who: pwd.struct_passwd, *argv: str
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), env=cluster.env, capture_output=True, text=True,
                          timeout=30, check=False, user=who.pw_uid, group=who.pw_gid,
                          cwd="/tmp")


@pytest.fixture()
def home(user: pwd.struct_passwd) -> Iterator[Path]:
    """A directory the user owns and can reach (pytest's tmp_path sits under a 0700 root
    directory, where the user's job could not write its output); removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="gpufair-user-", dir="/tmp"))
    path.chmod(0o755)
    os.chown(path, user.pw_uid, user.pw_gid)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_by_hand(cluster: Cluster, job_id: str, node: str) -> None:
    """What gpufair's Start does, by hand: pin to one node, release, wait until it runs."""
    cluster.run("scontrol", "update", f"JobId={job_id}", f"NodeList={node}", "NumNodes=1")
    cluster.run("scontrol", "release", job_id)
    cluster.wait_for("running", lambda: cluster.jobs()[job_id]["job_state"] == "RUNNING", 30)


def adapter(cluster: Cluster) -> SlurmAdapter:
    return SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")


def test_a_user_cannot_release_a_job_gpufair_holds(cluster: Cluster, user, home):
    sub = as_user(cluster, user, "sbatch", "--parsable", "-o", str(home / "o.%j"), "--wrap",
                  "sleep 600")
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip().split(";")[0]
    # (the owner's own hold of a waiting job is theirs: tests/integration/test_slurm_userhold.py)
    for attempt in (["scontrol", "release", job_id],
                    ["scontrol", "update", f"JobId={job_id}", "Priority=100"]):
        refused = as_user(cluster, user, *attempt)
        assert refused.returncode != 0, attempt
        assert "permission denied" in refused.stderr.lower(), refused.stderr
    time.sleep(2)   # a scheduling pass: nothing moved
    job = cluster.jobs()[job_id]
    assert (job["job_state"], job["priority"]) == ("PENDING", 0)
    # the user can still withdraw their job, and gpufair (root) can still release it
    assert as_user(cluster, user, "scontrol", "update", f"JobId={job_id}",
                   "Comment=still mine").returncode == 0
    cluster.run("scontrol", "release", job_id)
    assert cluster.jobs()[job_id]["priority"] > 0


def test_preemption_cycles_never_fail_or_lose_an_unprepared_job(cluster: Cluster, user, home):
    """A job that does not handle any checkpoint signal (plain `sleep`), started and
    preempted by the adapter again and again: it never ends FAILED or COMPLETED, and each
    cycle is one more restart, never zero or two."""
    job_id = as_user(cluster, user, "sbatch", "--parsable", "-N1", "--gres=gpu:2", "-o",
                     str(home / "o.%j"), "--wrap", "sleep 600").stdout.strip()
    slurm = adapter(cluster)
    for cycle in range(4):
        slurm.snapshot()
        node = ("gpu-v100-1", "gpu-k80-1")[cycle % 2]
        started = slurm.apply_one(Start(job_id, (f"{node}:0", f"{node}:1")))
        assert started.ok, started.detail
        cluster.wait_for("running", lambda: cluster.jobs()[job_id]["job_state"] == "RUNNING",
                         60)
        slurm.snapshot()
        victim = [Preempt(job_id, grace_s=1.0)]      # [daemon] grace_s = 1
        slurm.sleep(slurm.warn_preemptions(victim))
        stopped = slurm.apply_one(victim[0])
        assert stopped.ok, stopped.detail
        cluster.wait_for("requeued and held", lambda: (
            cluster.jobs()[job_id]["job_state"] == "PENDING"), 60)
        job = cluster.jobs()[job_id]
        assert job["restart_cnt"] == cycle + 1 and job["priority"] == 0, job
    assert cluster.jobs()[job_id]["job_state"] == "PENDING"


def test_an_opted_in_job_gets_the_checkpoint_signal_before_it_stops(cluster: Cluster,
                                                                   tmp_path):
    job_id = cluster.run("sbatch", "--parsable", "-J", "ckpt", "-o", str(tmp_path / "ckpt.log"),
                         "--open-mode=append", "--comment=gpufair:checkpoint", "-N1",
                         "--gres=gpu:1", str(TRAIN_JOB), str(tmp_path), "400", "0.5"
                         ).stdout.strip()
    start_by_hand(cluster, job_id, "gpu-k80-2")
    time.sleep(1.5)
    slurm = adapter(cluster)
    slurm.snapshot()
    victim = Preempt(job_id, grace_s=1.0)
    assert slurm.warn_preemptions([victim]) == 1.0
    time.sleep(1.0)
    assert slurm.apply_one(victim).ok
    cluster.wait_for("the trap's line", lambda: "caught USR1" in (tmp_path / "ckpt.log")
                     .read_text(), 10)
    cluster.wait_for("requeued", lambda: cluster.jobs()[job_id]["job_state"] == "PENDING", 60)
    assert cluster.jobs()[job_id]["restart_cnt"] == 1


def test_a_job_that_finished_after_the_snapshot_is_not_run_again(cluster: Cluster, tmp_path):
    job_id = cluster.sbatch("short", tmp_path, nodes=1, gpus_per_node=1, steps=2, step_s=0.5)
    start_by_hand(cluster, job_id, "gpu-v100-1")
    slurm = adapter(cluster)
    slurm.snapshot()                                    # the plan is made on this
    cluster.wait_for("completed", lambda: cluster.jobs()[job_id]["job_state"] == "COMPLETED",
                     30)
    result = slurm.apply_one(Preempt(job_id))           # the round acts after it finished
    assert not result.ok and "COMPLETED, not RUNNING" in result.detail
    time.sleep(2)
    job = cluster.jobs()[job_id]
    assert (job["job_state"], job["restart_cnt"]) == ("COMPLETED", 0)
    log = (tmp_path / "short.log").read_text()
    assert log.count("run start") == 1 and "run done" in log


def test_a_migration_restarts_the_job_on_the_planned_nodes(cluster: Cluster, tmp_path):
    job_id = cluster.sbatch("mover", tmp_path, nodes=1, gpus_per_node=2, steps=400)
    start_by_hand(cluster, job_id, "gpu-v100-1")
    time.sleep(1.5)
    slurm = adapter(cluster)
    slurm.snapshot()
    result = slurm.apply_one(Migrate(job_id, ("gpu-v100-2:0", "gpu-v100-2:1")))
    assert result.ok, result.detail
    cluster.wait_for("running on gpu-v100-2", lambda: (
        cluster.jobs()[job_id]["job_state"] == "RUNNING"
        and cluster.jobs()[job_id]["nodes"] == "gpu-v100-2"), 60)
    log = tmp_path / "mover.log"
    cluster.wait_for("the restarted run's first line", lambda: "restart=1" in log.read_text(),
                     30)
    restarted = log.read_text().split("restart=1")[1].split("\n")[0]
    assert "node=gpu-v100-2" in restarted and "from_step=0 " not in restarted


def test_a_job_its_owner_requeues_is_held_again_not_run_outside_the_plan(cluster: Cluster,
                                                                        user, home):
    """`scontrol requeue` of one's own running job is allowed by Slurm; the job would wait its
    begin time, then start wherever Slurm likes. The daemon's next round holds it again, and
    it starts only where a plan puts it."""
    job_id = as_user(cluster, user, "sbatch", "--parsable", "-N1", "--gres=gpu:1", "-o",
                     str(home / "o.%j"), "--wrap", "sleep 600").stdout.strip()
    slurm = adapter(cluster)
    slurm.snapshot()
    assert slurm.apply_one(Start(job_id, ("gpu-v100-1:0",))).ok
    cluster.wait_for("running", lambda: cluster.jobs()[job_id]["job_state"] == "RUNNING", 60)
    assert as_user(cluster, user, "scontrol", "requeue", job_id).returncode == 0
    cluster.wait_for("requeued", lambda: cluster.jobs()[job_id]["job_state"] == "PENDING", 60)
    job = cluster.jobs()[job_id]
    assert job["priority"] > 0 and job["state_reason"] == "BeginTime"   # Slurm would run it
    assert slurm.reconcile() == [job_id]
    job = cluster.jobs()[job_id]
    assert job["priority"] == 0 and job["job_state"] == "PENDING"
    assert as_user(cluster, user, "scontrol", "release", job_id).returncode != 0
    assert slurm.reconcile() == []      # nothing more to re-assert

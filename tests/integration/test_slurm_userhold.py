"""A job's owner holds it (``sbatch --hold``, ``scontrol hold``) on the real loopback Slurm in
hard mode: gpufair starts it only after the owner's own ``scontrol release``, which never lets
Slurm start it on its own; nobody else can release it."""

from __future__ import annotations

import time
from pathlib import Path

from slurm_cluster import Cluster, start_daemon, stop_daemon, store_rounds, write_config
from test_slurm_safety import as_user, home, user  # noqa: F401  (fixtures)

from gpufair.plugin.store import Store

MARK = "gpufair:userhold"



def test_gpufair_starts_an_owner_held_job_only_after_its_owner_releases_it(
        cluster: Cluster, user, home, tmp_path: Path):  # noqa: F811
    def submit(*args: str) -> str:
        out = as_user(cluster, user, "sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1",
                      "-o", str(home / "o.%j"), *args, "--wrap", "sleep 600")
        assert out.returncode == 0, out.stderr
        return out.stdout.strip().split(";")[0]

    held = submit("--hold", "--comment", "waits for data")
    later = submit()                       # held by its owner once it waits, below
    free = submit()
    assert as_user(cluster, user, "scontrol", "hold", later).returncode == 0
    # the owner's new comment keeps the hold (only their release takes it out)
    assert as_user(cluster, user, "scontrol", "update", f"JobId={later}",
                   "Comment=new words").returncode == 0
    jobs = cluster.jobs()
    assert jobs[held]["comment"] == f"waits for data {MARK}"
    assert jobs[later]["comment"] == f"new words {MARK}" and MARK not in jobs[free]["comment"]
    # somebody else cannot lift the owner's hold
    refused = cluster.run("runuser", "-u", "nobody", "--", "scontrol", "release", held,
                          check=False)
    assert refused.returncode != 0 and MARK in cluster.jobs()[held]["comment"]

    store_path = tmp_path / "state.db"
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="fifo")
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("the free job RUNNING",
                         lambda: cluster.jobs()[free]["job_state"] == "RUNNING", 60)
        seen = store_rounds(store_path)
        cluster.wait_for("three more rounds", lambda: store_rounds(store_path) >= seen + 3, 60)
        jobs = cluster.jobs()
        assert [(jobs[j]["job_state"], jobs[j]["priority"]) for j in (held, later)] == \
            [("PENDING", 0), ("PENDING", 0)]
    finally:
        stop_daemon(daemon)

    # the owner releases one job while no daemon runs: it stays held, for gpufair to start
    released = as_user(cluster, user, "scontrol", "release", held)
    assert released.returncode == 0, released.stderr
    time.sleep(3)   # Slurm's scheduler passes: it must not start the job by itself
    job = cluster.jobs()[held]
    assert (job["job_state"], job["priority"], job["comment"]) == \
        ("PENDING", 0, "waits for data"), job
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("the released job RUNNING",
                         lambda: cluster.jobs()[held]["job_state"] == "RUNNING", 60)
        seen = store_rounds(store_path)
        cluster.wait_for("two more rounds", lambda: store_rounds(store_path) >= seen + 2, 60)
        assert cluster.jobs()[later]["job_state"] == "PENDING"   # still its owner's
    finally:
        stop_daemon(daemon)
    starts = {e.action.job_id: e.status for e in Store(store_path).journal()
              if type(e.action).__name__ == "Start"}
    assert starts == {free: "done", held: "done"}


def test_a_job_its_owner_requeueholds_stays_held_until_they_release_it(
        cluster: Cluster, user, home, tmp_path: Path):  # noqa: F811
    """`scontrol requeuehold` of one's own running job passes no job_submit.lua hook and
    leaves the job as a gpufair preemption would: only gpufair's journal tells them apart.
    The daemon leaves it held for its owner (their hold mark), until their release."""
    out = as_user(cluster, user, "sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1", "-o",
                  str(home / "o.%j"), "--comment", "my run", "--wrap", "sleep 600")
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip().split(";")[0]
    store_path = tmp_path / "state.db"
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="fifo")
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("the job RUNNING",
                         lambda: cluster.jobs()[job_id]["job_state"] == "RUNNING", 60)
        held = as_user(cluster, user, "scontrol", "requeuehold", job_id)
        assert held.returncode == 0, held.stderr
        cluster.wait_for("the owner's hold mark", lambda: MARK in str(
            cluster.jobs()[job_id]["comment"]).split(), 60)
        seen = store_rounds(store_path)
        cluster.wait_for("three more rounds", lambda: store_rounds(store_path) >= seen + 3, 60)
        job = cluster.jobs()[job_id]
        assert (job["job_state"], job["priority"], job["restart_cnt"], job["comment"]) == \
            ("PENDING", 0, 1, f"my run {MARK}"), job
    finally:
        stop_daemon(daemon)
    log = (tmp_path / "daemon.log").read_text()
    assert "requeued held by its owner" in log, log[-3000:]
    starts = [e for e in Store(store_path).journal() if e.action.job_id == job_id]
    assert [(type(e.action).__name__, e.status) for e in starts] == [("Start", "done")]

    # the owner's release: held still, now gpufair's to start again
    released = as_user(cluster, user, "scontrol", "release", job_id)
    assert released.returncode == 0, released.stderr
    job = cluster.jobs()[job_id]
    assert (job["job_state"], job["priority"], job["comment"]) == ("PENDING", 0, "my run"), job
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("the job RUNNING again",
                         lambda: cluster.jobs()[job_id]["job_state"] == "RUNNING", 60)
    finally:
        stop_daemon(daemon)
    assert cluster.jobs()[job_id]["restart_cnt"] == 1


def test_an_owner_hold_with_a_comment_that_leaves_no_room_for_the_mark(
        cluster: Cluster, user, home):  # noqa: F811
    """Issue 29: ``sbatch --hold`` with a 1,008-1,024-byte comment was refused ("Pathname or
    file name too long": the lua's " gpufair:userhold" went past Slurm's 1,024 bytes). The
    mark now goes to the admin comment (users cannot forge it there), the comment stays the
    user's; their release asks them to shorten it first, and then works as before. The
    daemon's own mark of an owner's requeuehold goes there too."""
    from test_slurm_safety import adapter, start_by_hand

    def submit(comment: str, *args: str):
        return as_user(cluster, user, "sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1",
                       "-o", str(home / "o.%j"), "--comment", comment, *args, "--wrap",
                       "sleep 600")

    texts = {n: ("w" * 9 + " ") * (n // 10) + "x" * (n % 10) for n in (1008, 1024)}
    held = {}
    for n, text in texts.items():
        out = submit(text, "--hold")
        assert out.returncode == 0, (n, out.stderr)
        held[n] = out.stdout.strip().split(";")[0]
        job = cluster.jobs()[held[n]]
        assert (job["comment"], job["priority"]) == (text, 0), n
        assert MARK in job["admin_comment"].split()
    free = submit(texts[1024]).stdout.strip().split(";")[0]   # not held: the comment as is
    view = adapter(cluster).view()
    assert {j.id: why for j, why in view.waiting} == {
        held[1008]: "held by its owner until they release it",
        held[1024]: "held by its owner until they release it"}
    assert free in {j.id for j in view.state.jobs}

    job_id = held[1008]
    for attempt in (["scontrol", "release", job_id],
                    ["scontrol", "update", f"JobId={job_id}", "AdminComment=gpufair:managed"]):
        refused = as_user(cluster, user, *attempt)
        assert refused.returncode != 0, attempt
    # (22.05's scontrol release shows no job_submit.lua message: "permission denied")
    assert cluster.jobs()[job_id]["comment"] == texts[1008]
    shorter = texts[1008][:499]    # (ends with a word: the lua trims the ends)
    assert as_user(cluster, user, "scontrol", "update", f"JobId={job_id}",
                   f"Comment={shorter}").returncode == 0
    assert cluster.jobs()[job_id]["comment"] == f"{shorter} {MARK}"
    assert job_id in {j.id for j, _ in adapter(cluster).view().waiting}
    released = as_user(cluster, user, "scontrol", "release", job_id)
    assert released.returncode == 0, released.stderr
    job = cluster.jobs()[job_id]
    assert (job["comment"], job["priority"], job["job_state"]) == (shorter, 0, "PENDING")
    assert job_id in {j.id for j in adapter(cluster).view().state.jobs}   # gpufair's now

    # the owner's requeuehold of a running job: gpufair leaves it held for them
    cluster.run("scancel", held[1024], free)
    running = submit(texts[1024]).stdout.strip().split(";")[0]
    start_by_hand(cluster, running, "gpu-v100-1")
    assert as_user(cluster, user, "scontrol", "requeuehold", running).returncode == 0
    cluster.wait_for("requeued held", lambda: cluster.jobs()[running]["job_state"] ==
                     "PENDING", 60)
    adapter(cluster).reconcile(lambda job, run, at: False)   # not in gpufair's journal
    job = cluster.jobs()[running]
    assert job["comment"] == texts[1024] and MARK in job["admin_comment"].split()
    assert running in {j.id for j, _ in adapter(cluster).view().waiting}

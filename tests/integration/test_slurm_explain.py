"""Issue 33 on the real loopback Slurm: a user's waiting job shows gpufair's reason in its
AdminComment, the same decision ``gpufair explain`` gives them; another unprivileged user
cannot read it; slurmctld is asked to change the comment once per change of the decision."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slurm_cluster import Cluster, start_daemon, stop_daemon, store_rounds, write_config
from test_slurm_safety import as_user, home, user  # noqa: F401  (fixtures)

from gpufair.cli.main import main

NOBODY = 65534


def explain_as(uid: int, gid: int, sock: Path, job: str) -> dict:
    """The explain socket asked from a process of that user (the system python: another
    user cannot run this checkout's venv, as on a real cluster they run the installed one)."""
    code = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
            "s.sendall(sys.argv[2].encode() + b'\\n'); print(s.makefile().readline())")
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    proc = subprocess.run([python, "-c", code, str(sock), json.dumps({"job": job})],
                          user=uid, group=gid, capture_output=True, text=True, timeout=20,
                          check=False, cwd="/tmp")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def comment_updates(cluster: Cluster, job: str, since: int) -> list[str]:
    """slurmctld's own log of the updates of ``job`` since byte ``since`` of its log."""
    with (cluster.base / "log" / "slurmctld.log").open("rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return [line for line in text.splitlines()
            if re.search(rf"_slurm_rpc_update_job: complete JobId={job} ", line)]


def test_the_reason_in_squeue_matches_explain_and_is_the_owners_only(
        cluster: Cluster, user, home, tmp_path: Path):  # noqa: F811
    reachable = Path(tempfile.mkdtemp(prefix="gpufair-explain-", dir="/tmp"))
    reachable.chmod(0o755)
    sock = reachable / "explain.sock"
    store_path = tmp_path / "state.db"
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="fifo",
                          explain_socket=str(sock))
    # no rate limit: only "once per change" keeps the updates down
    config.write_text(config.read_text().replace(
        "[slurm]\n", "[slurm]\nreason_comment_min_interval_s = 0\n"))
    busy = [cluster.sbatch(f"busy{i}", tmp_path, steps=2000) for i in range(4)]   # 16 GPUs
    out = as_user(cluster, user, "sbatch", "--parsable", "-p", "gpu", "--gres=gpu:4",
                  "-o", str(home / "o.%j"), "--wrap", "sleep 600")
    assert out.returncode == 0, out.stderr
    waiting = out.stdout.strip().split(";")[0]
    log_from = (cluster.base / "log" / "slurmctld.log").stat().st_size
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("the four busy jobs RUNNING", lambda: all(
            cluster.jobs()[j]["job_state"] == "RUNNING" for j in busy), 60)
        cluster.wait_for("the waiting job's reason", lambda: " | gpufair " in
                         cluster.jobs()[waiting]["admin_comment"], 30)
        seen = store_rounds(store_path)
        cluster.wait_for("five more rounds", lambda: store_rounds(store_path) >= seen + 5, 60)
        # where the owner looks: scontrol show job, squeue --json (Slurm 22.05's squeue -O
        # AdminComment prints nothing, even to root: it does not ask slurmctld for details)
        shown = as_user(cluster, user, "scontrol", "show", "job", waiting)
        assert shown.returncode == 0, shown.stderr
        listed = as_user(cluster, user, "squeue", "--json")   # 22.05: --json ignores -j
        assert listed.returncode == 0, listed.stderr
        mine = explain_as(user.pw_uid, user.pw_gid, sock, waiting)
        theirs = explain_as(NOBODY, NOBODY, sock, waiting)
        assert main(["explain", waiting, "--socket", str(sock)]) == 0   # root: an admin
        status = cluster.jobs()[waiting]
    finally:
        stop_daemon(daemon)
        shutil.rmtree(reachable, ignore_errors=True)

    [line] = [w for w in shown.stdout.splitlines() if w.strip().startswith("AdminComment=")]
    comment = line.strip().removeprefix("AdminComment=").strip()
    [job] = [j for j in json.loads(listed.stdout)["jobs"] if str(j["job_id"]) == waiting]
    assert job["admin_comment"] == comment == status["admin_comment"]
    marks, reason = comment.split(" | ", 1)
    assert marks == "gpufair:managed"                     # job_submit.lua's mark kept
    assert (status["job_state"], status["priority"]) == ("PENDING", 0)
    # what squeue shows is the decision explain tells the owner: waiting, fifo's position
    [row] = mine["decisions"]
    assert row["outcome"] == "wait" and row["code"] == "fifo.position"
    assert row["figures"]["position"] == 5 and row["figures"]["of"] == 5
    made = re.fullmatch(r"gpufair (\d\d:\d\d): (.*)", reason)
    assert made, reason
    assert made.group(1) == time.strftime("%H:%M", time.localtime(row["from_s"]))
    assert made.group(2).startswith("waiting — fifo.position: position 5, of 5, waited s ")
    assert row["text"].startswith("waiting — fifo.position: position 5, of 5, waited s ")
    assert mine["next_round_at"] is not None
    # another unprivileged user learns nothing, not even that the job exists
    assert theirs == {"error": "unknown", "job": waiting}
    # slurmctld saw one update of the job over six rounds and more: its one decision
    assert len(comment_updates(cluster, waiting, log_from)) == 1

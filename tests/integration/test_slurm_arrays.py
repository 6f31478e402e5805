"""A hostile user's job array (``sbatch --array``) in a managed partition, on the real loopback
Slurm in hard mode: no task runs without gpufair's decision, each planned one runs where it was
planned, the rest stay held, and the owner cannot release them.

Slurm keeps the tasks not started yet in one job record (``array_task_string`` "0-9"); a
release of that record releases every task in it, and Slurm would start as many as fit on the
pinned nodes at once, then more whenever GPUs free up. gpufair starts such a record one task
at a time (``A_T``: the update splits the task out into a job record of its own).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from slurm_cluster import ENDED, Cluster, start_daemon, stop_daemon, store_rounds, write_config
from test_slurm_safety import adapter, as_user, home, user  # noqa: F401  (fixtures)

from gpufair.model import JobState, Preempt, Start, node_of
from gpufair.plugin.store import Store

MARK = "gpufair:userhold"


def _tasks(cluster: Cluster, array: str) -> dict[str, dict]:
    return {k: j for k, j in cluster.jobs().items() if str(j["array_job_id"]) == array}


def _running(cluster: Cluster, array: str) -> dict[str, dict]:
    return {k: j for k, j in _tasks(cluster, array).items() if j["job_state"] == "RUNNING"}


def _starts(store_path: Path) -> list:
    store = Store(store_path)
    try:
        return [e for e in store.journal() if type(e.action).__name__ == "Start"]
    finally:
        store.close()


def _waiting(cluster: Cluster, array: str) -> set[tuple]:
    """(state, priority, task id, task list) of the array's records that wait."""
    return {(j["job_state"], j["priority"], j["array_task_id"], j["array_task_string"])
            for j in _tasks(cluster, array).values()
            if j["job_state"] != "RUNNING" and j["job_state"] not in ENDED}


def _task_of(cluster: Cluster, job_id: str) -> int:
    """The task a Start was for: ``A_T``, or a task its owner's refused release split out
    of the array record (Slurm splits it before job_submit.lua refuses the release)."""
    task = job_id.partition("_")[2]
    return int(task) if task else cluster.jobs()[job_id]["array_task_id"]


def _owner_cannot_release(cluster: Cluster, who, array: str, task: int) -> None:
    for attempt in (["scontrol", "release", array], ["scontrol", "release", f"{array}_{task}"],
                    ["scontrol", "update", f"JobId={array}", "Priority=100"]):
        refused = as_user(cluster, who, *attempt)
        assert refused.returncode != 0, (attempt, refused.stdout)
        assert "permission denied" in refused.stderr.lower(), (attempt, refused.stderr)


def test_an_array_runs_only_the_tasks_gpufair_starts(cluster: Cluster, user, home,  # noqa: F811
                                                     tmp_path: Path):
    """Ten 2-GPU tasks on 16 GPUs: eight run, each started by one Start of gpufair on the
    nodes it planned; two stay held. A task that ends frees GPUs Slurm must not fill by
    itself: only the daemon starts the next task."""
    out = as_user(cluster, user, "sbatch", "--parsable", "-p", "gpu", "--array=0-9",
                  "--gres=gpu:2", "-o", str(home / "o.%A_%a"), "--wrap", "sleep 600")
    assert out.returncode == 0, out.stderr
    array = out.stdout.strip().split(";")[0]
    record = cluster.jobs()[array]
    assert (record["job_state"], record["priority"], record["array_task_string"]) == \
        ("PENDING", 0, "0-9"), record
    _owner_cannot_release(cluster, user, array, 3)
    time.sleep(2.5)   # Slurm's scheduler passes (sched_interval=2): nothing starts
    assert not _running(cluster, array)

    store_path = tmp_path / "state.db"
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="fifo")
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("eight tasks running", lambda: len(_running(cluster, array)) >= 8, 90)
        seen = store_rounds(store_path)
        cluster.wait_for("two more rounds", lambda: store_rounds(store_path) >= seen + 2, 60)
    finally:
        stop_daemon(daemon)
    tasks = _tasks(cluster, array)
    running = _running(cluster, array)
    starts = _starts(store_path)
    # one Start per running task, each of a task of this array, and nothing else started
    assert len(running) == 8, {k: (j["job_state"], j["array_task_id"]) for k, j in tasks.items()}
    assert sorted(j["array_task_id"] for j in running.values()) == list(range(8))
    assert [e.status for e in starts] == ["done"] * 8, [(e.action, e.detail) for e in starts]
    assert sorted(_task_of(cluster, e.action.job_id) for e in starts) == list(range(8))
    # each where its Start put it
    assert Counter(j["nodes"] for j in running.values()) == \
        Counter(",".join(dict.fromkeys(node_of(g) for g in e.action.gpu_ids)) for e in starts)
    assert _waiting(cluster, array) == {("PENDING", 0, None, "8-9")}
    _owner_cannot_release(cluster, user, array, 9)
    # (the refused release of 9 split it out: the array record is task 8 alone now)
    assert _waiting(cluster, array) == {("PENDING", 0, 8, ""), ("PENDING", 0, 9, "")}

    # a task ends while no daemon runs: its GPUs stay free
    ended = min(running, key=lambda k: running[k]["array_task_id"])
    # (22.05's scancel finds an array task only as A_T: "scancel <its job id>" says
    # "Invalid job id specified" and exits 0)
    cluster.run("scancel", f"{array}_{running[ended]['array_task_id']}")
    cluster.wait_for("the task ended", lambda: cluster.jobs()[ended]["job_state"] in
                     ("CANCELLED", "COMPLETED"), 60)
    time.sleep(4)     # two scheduler passes
    assert set(_running(cluster, array)) == set(running) - {ended}
    assert _waiting(cluster, array) == {("PENDING", 0, 8, ""), ("PENDING", 0, 9, "")}
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("task 8 running", lambda: any(
            j["array_task_id"] == 8 for j in _running(cluster, array).values()), 60)
        seen = store_rounds(store_path)
        cluster.wait_for("two more rounds", lambda: store_rounds(store_path) >= seen + 2, 60)
    finally:
        stop_daemon(daemon)
    assert len(_running(cluster, array)) == 8
    assert [(_task_of(cluster, e.action.job_id), e.status)
            for e in _starts(store_path)][8:] == [(8, "done")]
    assert _waiting(cluster, array) == {("PENDING", 0, 9, "")}


def test_a_started_task_is_a_job_of_its_own_to_account_and_preempt(
        cluster: Cluster, user, home):  # noqa: F811
    """The task gpufair started is split out (its own job id, its array task id): it is
    accounted to its owner, preempted by requeue-hold like any job, cannot be released by
    its owner, and starts again by its own id. The other tasks stay held throughout."""
    out = as_user(cluster, user, "sbatch", "--parsable", "-p", "gpu", "--array=0-3%2",
                  "--gres=gpu:1", "-o", str(home / "o.%A_%a"), "--wrap", "sleep 600")
    assert out.returncode == 0, out.stderr
    array = out.stdout.strip().split(";")[0]
    slurm = adapter(cluster)
    state = slurm.snapshot()
    job = next(j for j in state.jobs if j.app == array)
    assert (job.id, job.gpus, job.state, job.tenant) == \
        (f"{array}_0", 1, JobState.PENDING, user.pw_name)
    started = slurm.apply_one(Start(job.id, ("gpu-k80-1:0",)))
    assert started.ok, started.detail
    cluster.wait_for("task 0 running", lambda: len(_running(cluster, array)) == 1, 30)
    (task_id, task), = _running(cluster, array).items()
    assert task_id != array and task["array_task_id"] == 0 and task["nodes"] == "gpu-k80-1"
    time.sleep(1.5)
    state = slurm.snapshot()
    jobs = {j.id: j for j in state.jobs if j.app == array}
    assert set(jobs) == {task_id, f"{array}_1"}
    assert jobs[task_id].state is JobState.RUNNING and jobs[task_id].attained_s >= 1.0
    assert jobs[task_id].tenant == user.pw_name and jobs[task_id].gpus_held
    assert cluster.jobs()[array]["priority"] == 0

    victim = slurm.apply_one(Preempt(task_id))
    assert victim.ok, victim.detail
    cluster.wait_for("requeued", lambda: cluster.jobs()[task_id]["job_state"] == "PENDING", 60)
    again = cluster.jobs()[task_id]
    assert (again["priority"], again["restart_cnt"], again["array_task_id"]) == (0, 1, 0)
    for attempt in (["scontrol", "release", task_id], ["scontrol", "release", f"{array}_0"]):
        assert as_user(cluster, user, *attempt).returncode != 0, attempt
    time.sleep(2.5)
    assert not _running(cluster, array)
    slurm.snapshot()
    assert slurm.apply_one(Start(task_id, ("gpu-k80-2:0",))).ok
    cluster.wait_for("task 0 running again", lambda: (
        cluster.jobs()[task_id]["job_state"] == "RUNNING"), 30)
    assert cluster.jobs()[task_id]["nodes"] == "gpu-k80-2"
    assert cluster.jobs()[array]["priority"] == 0 and len(_running(cluster, array)) == 1


def test_an_array_its_owner_holds_waits_until_they_release_a_task(
        cluster: Cluster, user, home):  # noqa: F811
    """``sbatch --hold --array``: the owner's hold mark is on the array record; their
    release of one task splits that task out without the mark, still held, for gpufair to
    start; the other tasks keep their owner's hold."""
    out = as_user(cluster, user, "sbatch", "--parsable", "-p", "gpu", "--hold",
                  "--array=0-2", "--gres=gpu:1", "-o", str(home / "o.%A_%a"), "--wrap",
                  "sleep 600")
    assert out.returncode == 0, out.stderr
    array = out.stdout.strip().split(";")[0]
    slurm = adapter(cluster)
    view = slurm.view()
    assert [(j.id, why) for j, why in view.waiting if j.app == array] == \
        [(f"{array}_0", "held by its owner until they release it")]
    assert not [j for j in view.state.jobs if j.app == array]
    released = as_user(cluster, user, "scontrol", "release", f"{array}_1")
    assert released.returncode == 0, released.stderr
    task = next(k for k, j in _tasks(cluster, array).items() if j["array_task_id"] == 1)
    assert _waiting(cluster, array) == {("PENDING", 0, None, "0,2"), ("PENDING", 0, 1, "")}
    assert MARK not in cluster.jobs()[task]["comment"].split()
    assert MARK in cluster.jobs()[array]["comment"].split()
    time.sleep(2.5)   # Slurm's scheduler passes: the owner's release started nothing
    assert not _running(cluster, array)
    state = slurm.snapshot()
    assert [j.id for j in state.jobs if j.app == array] == [task]
    started = slurm.apply_one(Start(task, ("gpu-v100-1:0",)))
    assert started.ok, started.detail
    cluster.wait_for("task 1 running", lambda: set(_running(cluster, array)) == {task}, 30)
    assert _waiting(cluster, array) == {("PENDING", 0, None, "0,2")}


def test_all_the_tasks_that_fit_start_in_the_first_round(
        cluster: Cluster, user, home, tmp_path: Path):  # noqa: F811
    """Issue 29: a 12-task array on the idle 16-GPU cluster started one task per round (the
    record was one job to the model; tasks began 1-32 s after submission). Now every task
    is a job ``A_T`` of its own: the daemon's first round starts all twelve, each by one
    Start, and Slurm runs each where it was placed."""
    out = as_user(cluster, user, "sbatch", "--parsable", "-p", "gpu", "--array=0-11",
                  "--gres=gpu:1", "-o", str(home / "o.%A_%a"), "--wrap", "sleep 600")
    assert out.returncode == 0, out.stderr
    array = out.stdout.strip().split(";")[0]
    store_path = tmp_path / "state.db"
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="fifo",
                          round_s=30, poll_s=0)
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("twelve tasks running", lambda: len(_running(cluster, array)) == 12,
                         60)
    finally:
        stop_daemon(daemon)
    starts = _starts(store_path)
    assert [e.status for e in starts] == ["done"] * 12, [(e.action, e.detail) for e in starts]
    assert {e.round_id for e in starts} == {1}, [(e.round_id, e.action) for e in starts]
    assert sorted(_task_of(cluster, e.action.job_id) for e in starts) == list(range(12))
    running = _running(cluster, array)
    assert Counter(j["nodes"] for j in running.values()) == \
        Counter(node_of(e.action.gpu_ids[0]) for e in starts)
    assert not _waiting(cluster, array)

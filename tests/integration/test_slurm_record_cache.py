"""The adapter's cache of unchanged job records on a real Slurm 22.05 (issue 30): a record
read again unchanged is not translated again, and each change Slurm makes to it is seen at
the very next read."""

from __future__ import annotations

import time

from slurm_cluster import Cluster

from gpufair.adapters.slurm import CliTransport, SlurmAdapter, SlurmSettings
from gpufair.model import JobState


def test_each_change_to_a_job_record_is_seen_at_the_next_read(cluster: Cluster, tmp_path):
    job = cluster.sbatch("cached", tmp_path, gpus_per_node=1, steps=400)
    adapter = SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")
    number = int(job)

    def read() -> tuple:
        """The job and its Slurm details at a fresh read, and whether it was translated
        afresh (not taken from the last read's cache)."""
        view = adapter.view()
        found = next(j for j in view.state.jobs if j.id == job)
        return found, view.jobs[job], number in adapter.records.missed

    first, info, fresh = read()
    assert fresh and info.held and first.state is JobState.PENDING
    # unchanged: taken as it was (Slurm's scheduler may touch a new record once or twice
    # in its first seconds: a read with no change is waited for, not assumed)
    cluster.wait_for("an unchanged record", lambda: not read()[2], 15)

    def update(**fields: str) -> tuple:
        cluster.run("scontrol", "update", f"JobId={job}", *(f"{k}={v}" for k, v in
                                                           fields.items()))
        seen = read()
        assert seen[2], f"{fields}: the changed record was not translated again"
        return seen

    _, info, _ = update(Nice="7")
    assert info.nice == 7
    found, _, _ = update(Comment="gpufair:gpus=1-2")
    assert (found.min_gpus, found.max_gpus) == (1, 2)
    _, info, _ = update(AdminComment=f"{info.admin_comment} gpufair:refused=Licenses@1")
    assert info.admin_comment.endswith("gpufair:refused=Licenses@1")
    update(TimeLimit="30")   # not in the model, but a change of the record all the same

    cluster.run("scontrol", "release", job)   # its state, priority, then its nodes change
    cluster.wait_for("the released job running",
                     lambda: cluster.jobs()[job]["job_state"] == "RUNNING", 30)
    running, info, fresh = read()
    assert fresh and running.state is JobState.RUNNING and not info.held
    assert info.nodes and len(running.gpus_held) == 1
    cluster.wait_for("an unchanged record", lambda: not read()[2], 15)
    again, _, fresh = read()
    assert again.gpus_held == running.gpus_held
    assert again.attained_s >= running.attained_s   # brought up to the read's "now"
    cluster.run("scancel", job)


def test_the_cli_poll_finds_a_quiet_cluster_quiet_and_a_change_changed(cluster: Cluster,
                                                                         tmp_path):
    """On real Slurm, squeue prints the same bytes while nothing changes (so the CLI poll
    needs no decoding), and an update of one job is a change at the next poll. A quiet
    moment is waited for (an earlier test's job may still be ending), not assumed."""
    job = cluster.sbatch("polled", tmp_path, gpus_per_node=1, steps=400)
    adapter = SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")
    for _ in range(10):
        adapter.view()
        time.sleep(1.0)
        if not adapter.changed():
            break
    else:
        raise AssertionError("squeue and sinfo never printed the same twice in 10 tries")
    cluster.run("scontrol", "update", f"JobId={job}", "Nice=3")
    assert adapter.changed()
    cluster.run("scancel", job)

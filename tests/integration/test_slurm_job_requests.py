"""What a Slurm job asks for, honoured (issue 29, items 1 and 2): what makes a job not yet
eligible keeps it out of gpufair's plan (a --begin ahead, an administrator's hold, a dependency
not met, a reservation), and its CPUs and memory decide where it may go (a released job whose
node cannot hold them is placed again). On the real loopback Slurm, over the daemon's own
rounds (reconcile, snapshot, plan, apply)."""

from __future__ import annotations

from slurm_cluster import Cluster, write_config
from test_slurm_constraints import submit

from gpufair.adapters.slurm import CliTransport, SlurmAdapter, SlurmSettings
from gpufair.core.config import load_config
from gpufair.plugin.service import live_round


def daemon_round(cluster: Cluster, tmp_path) -> list[str]:
    """One of the daemon's rounds (fifo): the ids of the jobs it acted on, every action ok."""
    config = load_config(write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db",
                                      policy="fifo"))
    adapter = SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")
    adapter.reconcile()
    result = live_round(config).run(adapter.snapshot(), history={})
    outcomes = [adapter.apply_one(a) for a in result.actions]
    assert all(o.ok for o in outcomes), [o.detail for o in outcomes]
    return [a.job_id for a in result.actions]


def test_jobs_slurm_would_not_start_yet_are_not_started(cluster: Cluster, tmp_path):
    later = submit(cluster, tmp_path, "later", "--begin=now+600", "--gres=gpu:1")
    held = submit(cluster, tmp_path, "held", "--gres=gpu:1")
    assert cluster.run("scontrol", "hold", held).returncode == 0        # root: an admin
    parent = submit(cluster, tmp_path, "parent", "--gres=gpu:1")
    child = submit(cluster, tmp_path, "child", "--gres=gpu:1", f"--dependency=afterok:{parent}")
    before = cluster.jobs()[later]
    acted = [daemon_round(cluster, tmp_path) for _ in range(2)]
    assert acted[0] == [parent] and acted[1] == [], acted     # an idle 16-GPU cluster
    cluster.wait_for("the parent running", lambda: (
        cluster.jobs()[parent]["job_state"] == "RUNNING"), 30)
    jobs = cluster.jobs()
    assert jobs[later]["job_state"] == "PENDING"
    assert (jobs[later]["start_time"], jobs[later]["eligible_time"]) == \
        (before["start_time"], before["eligible_time"])          # not moved back to now
    assert jobs[held]["job_state"] == "PENDING" and jobs[held]["state_reason"] == "JobHeldAdmin"
    assert jobs[child]["job_state"] == "PENDING" and jobs[child]["priority"] == 0


def test_jobs_whose_memory_fills_most_of_a_node_run_on_different_nodes(cluster: Cluster,
                                                                       tmp_path):
    """Four 1-GPU jobs of 70,000 MB each on the idle cluster (4 nodes x 128,000 MB): one
    round places one on each node, and all four run at once (issue 29, item 2)."""
    ids = [submit(cluster, tmp_path, f"mem{i}", "--gres=gpu:1", "--mem=70000")
           for i in range(4)]
    assert sorted(daemon_round(cluster, tmp_path)) == sorted(ids)
    cluster.wait_for("all four running", lambda: all(
        cluster.jobs()[j]["job_state"] == "RUNNING" for j in ids), 30)
    assert len({cluster.jobs()[j]["nodes"] for j in ids}) == 4


def test_a_pinned_start_whose_memory_was_taken_is_placed_again(cluster: Cluster, tmp_path):
    """A job Slurm keeps (not gpufair's) takes 70,000 MB of the node a round planned a
    70,000 MB job on, between the plan and the release: Slurm leaves the released job waiting
    (Reason=Resources) though a GPU is free there. The next round sees it cannot start
    there, holds it again and places it elsewhere; it never goes on holding those GPUs."""
    config = load_config(write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db",
                                      policy="fifo"))
    big = submit(cluster, tmp_path, "big", "--gres=gpu:1", "--mem=70000")
    adapter = SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")
    [start] = live_round(config).run(adapter.snapshot(), history={}).actions
    node = start.gpu_ids[0].rpartition(":")[0]
    other = submit(cluster, tmp_path, "urgent", "-p", "urgent", "-w", node, "--gres=gpu:1",
                   "--mem=70000")
    cluster.wait_for("the unmanaged job running", lambda: (
        cluster.jobs()[other]["job_state"] == "RUNNING"), 30)
    assert adapter.apply_one(start).ok
    cluster.wait_for("Slurm's word on the released job", lambda: (
        cluster.jobs()[big]["state_reason"] == "Resources"), 30)
    assert cluster.jobs()[big]["priority"] > 0               # released, waiting on node
    acted = daemon_round(cluster, tmp_path)                  # reconcile, then the round
    assert acted == [big]
    cluster.wait_for("the job running elsewhere", lambda: (
        cluster.jobs()[big]["job_state"] == "RUNNING"), 30)
    assert cluster.jobs()[big]["nodes"] != node


def test_a_job_in_a_reservation_is_left_to_slurm(cluster: Cluster, tmp_path):
    """A reservation's nodes and window are Slurm's to honour: job_submit.lua leaves a job
    submitted into one unheld, Slurm runs it there, and gpufair places nothing on the node
    of the active reservation."""
    node = "gpu-k80-2"
    cluster.run("scontrol", "create", "reservation", "ReservationName=gf_it", "StartTime=now",
                "Duration=10", f"Nodes={node}", "Users=root")
    try:
        inside = submit(cluster, tmp_path, "inside", "--reservation=gf_it", "--gres=gpu:1")
        cluster.wait_for("the reservation's job running", lambda: (
            cluster.jobs()[inside]["job_state"] == "RUNNING"), 30)
        job = cluster.jobs()[inside]
        assert job["nodes"] == node and "gpufair:managed" not in (job["admin_comment"] or "")
        mine = [submit(cluster, tmp_path, f"four{i}", "--gres=gpu:4") for i in range(4)]
        acted = daemon_round(cluster, tmp_path)
        assert sorted(acted) == sorted(mine[:3]), acted       # three free nodes, not four
        jobs = cluster.jobs()
        assert all(node not in (jobs[j]["required_nodes"] or "") for j in mine)
    finally:
        cluster.clear()
        cluster.run("scontrol", "delete", "ReservationName=gf_it", check=False)

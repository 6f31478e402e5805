"""Every constraint Slurm would honour, the plan honours (issue 12, items 6, 7, 9): typed GRES,
--nodes with GPUs per node, --exclude, --nodelist, --constraint, partitions, dependencies,
and GPUs held by jobs gpufair does not manage."""

from __future__ import annotations

import time

from slurm_cluster import TRAIN_JOB, Cluster, write_config

from gpufair.adapters.slurm import CliTransport, SlurmAdapter, SlurmSettings
from gpufair.core.config import load_config
from gpufair.plugin.service import live_round


def submit(cluster: Cluster, tmp_path, name: str, *options: str) -> str:
    return cluster.run("sbatch", "--parsable", "-J", name, "-o", str(tmp_path / f"{name}.log"),
                       *options, str(TRAIN_JOB), str(tmp_path), "600", "0.5").stdout.strip()


def one_round(cluster: Cluster, tmp_path) -> tuple:
    """The daemon's round (fifo, no cap) on the live state, applied."""
    config = load_config(write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db",
                                      policy="fifo"))
    adapter = SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")
    result = live_round(config).run(adapter.snapshot(), history={})
    outcomes = [adapter.apply_one(a) for a in result.actions]
    return adapter, result, outcomes


def test_the_plan_honours_what_each_job_asked(cluster: Cluster, tmp_path):
    typed = submit(cluster, tmp_path, "typed", "--gres=gpu:k80:2")
    single = submit(cluster, tmp_path, "single", "-N1", "--gres=gpu:4")
    excluded = submit(cluster, tmp_path, "excl", "--gres=gpu:1", "--exclude=gpu-v100-1,gpu-v100-2,"
                      "gpu-k80-1")
    listed = submit(cluster, tmp_path, "listed", "--gres=gpu:1", "--nodelist=gpu-v100-2")
    featured = submit(cluster, tmp_path, "feat", "--gres=gpu:1", "--constraint=v100")
    waiting = submit(cluster, tmp_path, "after", "--gres=gpu:1",
                     f"--dependency=afterok:{typed}")
    # on the node `listed` must share: a plan that offered its GPU would put `listed` there
    fancy = submit(cluster, tmp_path, "fancy", "--gres=gpu:1", "--constraint=v100|k80",
                   "--nodelist=gpu-v100-2")
    # Slurm starts the job it keeps (not gpufair's) whenever its scheduler runs: usually at
    # submission, under load at a later pass, after the snapshot. Where it then lands (on
    # the node planned for `single`, say) is Slurm's choice, and a job planned there would
    # wait: the daemon's reconcile plans it again next round (see
    # test_a_job_whose_node_was_taken_is_placed_again); this test runs a single round.
    cluster.wait_for("the unmanaged job running", lambda: (
        cluster.jobs()[fancy]["job_state"] == "RUNNING"), 30)
    fancy_node = cluster.jobs()[fancy]["nodes"]
    assert fancy_node == "gpu-v100-2"
    adapter, result, outcomes = one_round(cluster, tmp_path)
    assert all(o.ok for o in outcomes), [o.detail for o in outcomes]
    placed = {a.job_id: a.gpu_ids for a in result.actions}
    nodes = {j: {g.rpartition(":")[0] for g in gpus} for j, gpus in placed.items()}
    assert nodes[typed] <= {"gpu-k80-1", "gpu-k80-2"} and len(placed[typed]) == 2
    assert len(nodes[single]) == 1 and len(placed[single]) == 4
    assert nodes[excluded] == {"gpu-k80-2"}
    assert nodes[listed] == {"gpu-v100-2"}
    assert nodes[featured] <= {"gpu-v100-1", "gpu-v100-2"}
    assert waiting not in placed and fancy not in placed
    # the GPU Slurm gave it is offered to nobody
    [detail] = cluster.jobs()[fancy]["gres_detail"]     # "gpu:k80:1(IDX:2)": one GPU
    taken = {detail.partition("IDX:")[2].rstrip(")")}
    assert not any(g.rpartition(":")[0] == fancy_node and g.rpartition(":")[2] in taken
                   for gpus in placed.values() for g in gpus), (fancy_node, taken, placed)
    problems = adapter.last_view.problems
    assert not any(f"job {waiting}:" in p for p in problems)   # waits quietly
    # the |-constraint was left to Slurm at submission: not held, not gpufair's
    fancy_job = cluster.jobs()[fancy]
    assert fancy_job["priority"] > 0 and "gpufair:managed" not in (fancy_job["admin_comment"]
                                                                  or "")
    for job_id in (typed, single, excluded, listed, featured):
        cluster.wait_for(f"job {job_id} running where planned", lambda j=job_id: (
            cluster.jobs()[j]["job_state"] == "RUNNING"), 60)
        ran_on = set(cluster.jobs()[job_id]["nodes"].split(","))
        assert ran_on == nodes[job_id] or (
            len(ran_on) == 1 and ran_on <= nodes[job_id]), (job_id, ran_on, nodes[job_id])


def test_gpus_of_jobs_gpufair_does_not_manage_are_not_offered(cluster: Cluster, tmp_path):
    """A job of the unmanaged `urgent` partition holds 3 GPUs of gpu-v100-1: the policy sees
    that node with one GPU, and a 4-GPU one-node job is placed elsewhere, not on top."""
    other = submit(cluster, tmp_path, "urgent", "-p", "urgent", "-w", "gpu-v100-1",
                   "--gres=gpu:3")
    cluster.wait_for("the unmanaged job running", lambda: (
        cluster.jobs()[other]["job_state"] == "RUNNING"), 30)
    mine = [submit(cluster, tmp_path, f"big{i}", "-N1", "--gres=gpu:4") for i in range(3)]
    adapter, result, outcomes = one_round(cluster, tmp_path)
    state = adapter.snapshot()
    node = {n.name: n for n in state.nodes}["gpu-v100-1"]
    assert len(node.gpu_ids()) == 1
    used = {g for a in result.actions for g in a.gpu_ids}
    assert not used & {f"gpu-v100-1:{i}" for i in range(4)}
    assert len(result.actions) == 3 and all(o.ok for o in outcomes)
    time.sleep(3)
    jobs = cluster.jobs()
    assert jobs[other]["job_state"] == "RUNNING"
    assert all(jobs[j]["job_state"] in ("RUNNING", "CONFIGURING") for j in mine), \
        [(j, jobs[j]["job_state"], jobs[j]["state_reason"]) for j in mine]


def test_a_dependent_job_is_placed_once_its_dependency_is_met(cluster: Cluster, tmp_path):
    """Slurm does not re-evaluate a held job's dependency (its string stays "unfulfilled"),
    so gpufair reads it: the job waits while its parent runs and is placed once it is done."""
    parent = cluster.run("sbatch", "--parsable", "-J", "parent", "-o", str(tmp_path / "p.log"),
                         "--gres=gpu:1", str(TRAIN_JOB), str(tmp_path), "2", "0.3"
                         ).stdout.strip()
    child = submit(cluster, tmp_path, "child", "--gres=gpu:1", f"--dependency=afterok:{parent}")
    _, first, _ = one_round(cluster, tmp_path)
    assert [a.job_id for a in first.actions] == [parent]
    cluster.wait_for("the parent done", lambda: (
        cluster.jobs()[parent]["job_state"] == "COMPLETED"), 60)
    assert "unfulfilled" in cluster.jobs()[child]["dependency"]
    _, second, outcomes = one_round(cluster, tmp_path)
    assert [a.job_id for a in second.actions] == [child] and outcomes[0].ok


def test_a_job_whose_node_was_taken_is_placed_again(cluster: Cluster, tmp_path):
    """A job Slurm keeps (not gpufair's) takes a GPU of the node a round planned a 4-GPU job
    on, between the plan and the release: the released job cannot start there. The next
    round's reconcile holds it again and the round places it elsewhere."""
    config = load_config(write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db",
                                      policy="fifo"))
    big = submit(cluster, tmp_path, "big", "-N1", "--gres=gpu:4")
    adapter = SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")
    plan = live_round(config).run(adapter.snapshot(), history={})
    [start] = plan.actions
    node = start.gpu_ids[0].rpartition(":")[0]
    other = submit(cluster, tmp_path, "urgent", "-p", "urgent", "-w", node, "--gres=gpu:1")
    cluster.wait_for("the unmanaged job running", lambda: (
        cluster.jobs()[other]["job_state"] == "RUNNING"), 30)
    assert adapter.apply_one(start).ok
    time.sleep(5)   # two passes of Slurm's scheduler (sched_interval=2): it cannot start there
    job = cluster.jobs()[big]
    assert job["job_state"] == "PENDING" and job["priority"] > 0, job["state_reason"]
    adapter.reconcile()
    assert cluster.jobs()[big]["priority"] == 0           # held again, for the plan
    _, second, outcomes = one_round(cluster, tmp_path)
    assert [a.job_id for a in second.actions] == [big] and outcomes[0].ok
    moved = {g.rpartition(":")[0] for g in second.actions[0].gpu_ids}
    assert len(moved) == 1 and node not in moved
    cluster.wait_for("the job running elsewhere", lambda: (
        cluster.jobs()[big]["job_state"] == "RUNNING"), 60)
    assert cluster.jobs()[big]["nodes"] in moved

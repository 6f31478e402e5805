"""On a real Slurm: a job gpufair released onto the GPUs of a job it just requeued is shown
running there while that requeue settles (COMPLETING), and is not held again; a job released
onto a node an admin drained is held again and placed elsewhere.

The requeued job ignores SIGTERM, so it stays COMPLETING until Slurm kills it after
``KillWait`` (5 s in the loopback slurm.conf): long enough to read the state a round sees.
The unit tests are ``tests/test_slurm_settling.py``.
"""

from __future__ import annotations

from slurm_cluster import Cluster, write_config

from gpufair.adapters.slurm import CliTransport, SlurmAdapter, SlurmSettings
from gpufair.core.config import load_config
from gpufair.model import JobState, NodeState, Preempt, PreemptMode, Start
from gpufair.model.records import node_of
from gpufair.plugin.service import live_round

NODE = "gpu-v100-1"
GPUS = tuple(f"{NODE}:{i}" for i in range(4))


def _submit(cluster: Cluster, tmp_path, name: str, script: str) -> str:
    path = tmp_path / f"{name}.sh"
    path.write_text(f"#!/bin/bash\n{script}\n")
    return cluster.run("sbatch", "--parsable", "-J", name, "-o", str(tmp_path / f"{name}.log"),
                       "-N1", "--gres=gpu:4", str(path)).stdout.strip()


def _adapter(cluster: Cluster) -> SlurmAdapter:
    return SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")


def test_a_job_released_onto_a_settling_node_is_running_there_for_the_round(
        cluster: Cluster, tmp_path):
    stubborn = _submit(cluster, tmp_path, "stubborn", "trap '' TERM\nsleep 600")
    adapter = _adapter(cluster)
    adapter.snapshot()
    assert adapter.apply_one(Start(stubborn, GPUS)).ok
    cluster.wait_for("the first job running", lambda: (
        cluster.jobs()[stubborn]["job_state"] == "RUNNING"), 30)
    after = _submit(cluster, tmp_path, "after", "sleep 600")
    adapter.snapshot()
    # what a round does to make room: requeue the one, start the other on its GPUs
    outcomes = adapter.apply([Preempt(stubborn, PreemptMode.REQUEUE), Start(after, GPUS)])
    assert all(o.ok for o in outcomes), [o.detail for o in outcomes]
    assert cluster.jobs()[stubborn]["job_state"] == "COMPLETING", \
        "the requeued job settled before the round read it: nothing was tested"
    adapter.reconcile()
    state = adapter.snapshot()
    assert cluster.jobs()[stubborn]["job_state"] == "COMPLETING"   # still, after that read
    job = {j.id: j for j in state.jobs}.get(after)
    assert job is not None and (job.state, job.gpus_held) == (JobState.RUNNING, GPUS)
    view = adapter.last_view
    assert view is not None and NODE in view.settling_nodes
    assert {n.name: n.state for n in state.nodes}[NODE] is NodeState.DRAIN
    assert cluster.jobs()[after]["priority"] > 0                     # not held again
    config = load_config(write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db",
                                      policy="fifo"))
    result = live_round(config).run(state, history={})
    assert all(a.job_id != after and all(node_of(g) != NODE for g in getattr(a, "gpu_ids", ()))
               for a in result.actions), result.actions
    cluster.wait_for("the released job running where it was pinned", lambda: (
        cluster.jobs()[after]["job_state"] == "RUNNING"), 60)
    assert cluster.jobs()[after]["nodes"] == NODE


def test_a_job_released_onto_a_drained_node_is_held_and_placed_elsewhere(
        cluster: Cluster, tmp_path):
    job_id = _submit(cluster, tmp_path, "drained", "sleep 600")
    adapter = _adapter(cluster)
    adapter.snapshot()                     # planned on v100-1 while it was up
    cluster.run("scontrol", "update", f"NodeName={NODE}", "State=DRAIN",
                "Reason=gpufair-test")
    try:
        assert adapter.apply_one(Start(job_id, GPUS)).ok
        job = cluster.jobs()[job_id]
        assert job["job_state"] == "PENDING" and job["priority"] > 0, job["state_reason"]
        adapter.reconcile()
        assert cluster.jobs()[job_id]["priority"] == 0       # held again, for the plan
        config = load_config(write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db",
                                          policy="fifo"))
        state = adapter.snapshot()
        assert {j.id: j.state for j in state.jobs}[job_id] is JobState.PENDING
        result = live_round(config).run(state, history={})
        [start] = [a for a in result.actions if a.job_id == job_id]
        assert NODE not in {node_of(g) for g in start.gpu_ids}
        assert adapter.apply_one(start).ok
        cluster.wait_for("the job running elsewhere", lambda: (
            cluster.jobs()[job_id]["job_state"] == "RUNNING"), 60)
        assert cluster.jobs()[job_id]["nodes"] != NODE
    finally:
        cluster.run("scontrol", "update", f"NodeName={NODE}", "State=RESUME", check=False)

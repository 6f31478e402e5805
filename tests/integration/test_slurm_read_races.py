"""squeue and sinfo are read at two moments (issue 29, item 4): a job that starts or ends
between the two reads, on the real loopback Slurm.

Before, a job started between them was pending to squeue and held GPUs to sinfo: the
daemon logged its GPUs "used by jobs gpufair does not schedule", took the jobs released
there for stranded and held them again, then released them again. The adapter now reads
both again while they disagree on who holds which GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slurm_cluster import ENDED, Cluster
from test_slurm_safety import start_by_hand

from gpufair.adapters.slurm import SlurmAdapter
from gpufair.adapters.slurm.adapter import SlurmSettings
from gpufair.adapters.slurm.transport import CliTransport
from gpufair.model import JobState

NODE = "gpu-v100-1"


class Between(CliTransport):
    """The real CLI, with ``act`` run once between its first squeue and its first sinfo."""

    def __init__(self, cluster: Cluster, act: Callable[[], None] | None) -> None:
        super().__init__(env=cluster.env)
        self.act = act
        self.reads: list[str] = []

    def read_jobs(self) -> dict[str, Any]:
        self.reads.append("squeue")
        return super().read_jobs()

    def read_nodes(self) -> dict[str, Any]:
        if self.act is not None:
            act, self.act = self.act, None
            act()
        self.reads.append("sinfo")
        return super().read_nodes()


def _submit(cluster: Cluster) -> str:
    out = cluster.run("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:2", "-o", "/dev/null",
                      "--wrap", "sleep 600").stdout
    return out.strip().split(";")[0]


def _foreign(problems: tuple[str, ...]) -> list[str]:
    return [p for p in problems if "does not schedule" in p]


def test_a_job_that_starts_between_squeue_and_sinfo(cluster: Cluster):
    job_id = _submit(cluster)
    transport = Between(cluster, lambda: start_by_hand(cluster, job_id, NODE))
    view = SlurmAdapter(transport, SlurmSettings(), mode="hard").view()
    assert transport.reads == ["squeue", "sinfo", "squeue", "sinfo"]
    assert _foreign(view.problems) == [], view.problems
    job = next(j for j in view.state.jobs if j.id == job_id)
    assert job.state is JobState.RUNNING and {g.rpartition(":")[0] for g in job.gpus_held} \
        == {NODE}
    node = next(n for n in view.state.nodes if n.name == NODE)
    assert node.unavailable == ()


def test_a_job_that_ends_between_squeue_and_sinfo(cluster: Cluster):
    job_id = _submit(cluster)
    start_by_hand(cluster, job_id, NODE)

    def end() -> None:
        cluster.run("scancel", job_id)
        cluster.wait_for("the job ended", lambda: cluster.jobs()[job_id]["job_state"] in
                         ENDED, 60)

    transport = Between(cluster, end)
    view = SlurmAdapter(transport, SlurmSettings(), mode="hard").view()
    assert transport.reads == ["squeue", "sinfo", "squeue", "sinfo"]
    assert not [j for j in view.state.jobs if j.id == job_id and j.state.active]
    node = next(n for n in view.state.nodes if n.name == NODE)
    assert node.unavailable == () and _foreign(view.problems) == []


def test_reads_that_agree_are_read_once(cluster: Cluster):
    """The real squeue and sinfo agree on who holds which GPU: no read is wasted."""
    start_by_hand(cluster, _submit(cluster), NODE)
    transport = Between(cluster, None)
    view = SlurmAdapter(transport, SlurmSettings(), mode="hard").view()
    assert transport.reads == ["squeue", "sinfo"]
    assert _foreign(view.problems) == []


def test_a_job_a_fill_started_moments_ago_keeps_its_gpus_by_default(cluster: Cluster,
                                                                     tmp_path):
    """Issue 29: jobs a fill-only round started were preempted at 0.6 s of run time by the
    next timer round ([daemon] min_runtime_s defaulted to 0). With the defaults of a config
    that does not set it, the next round's preemption of that job, and the start that
    needed its GPUs, wait."""
    from fixed_policy import FixedPlan
    from slurm_cluster import write_config

    from gpufair.core.config import load_config
    from gpufair.core.round import Round
    from gpufair.model import Assignment, Plan, Preempt

    path = write_config(tmp_path / "g.toml", cluster, tmp_path / "s.db", policy="fifo")
    path.write_text("\n".join(line for line in path.read_text().splitlines()
                              if not line.startswith("min_runtime_s")) + "\n")
    rules = load_config(path).daemon.rules()
    slurm = SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")
    first = cluster.run("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:4", "-N", "1", "-o",
                        "/dev/null", "--wrap", "sleep 600").stdout.strip()
    filled = Round(FixedPlan(Plan()), rules).run(slurm.snapshot())   # a fill-only round
    (start,) = filled.actions
    assert start.job_id == first and slurm.apply_one(start).ok
    cluster.wait_for("the filled job running",
                     lambda: cluster.jobs()[first]["job_state"] == "RUNNING", 30)
    second = cluster.run("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:4", "-N", "1", "-o",
                         "/dev/null", "--wrap", "sleep 600").stdout.strip()
    plan = Plan(assignments=(Assignment(second, start.gpu_ids),))   # the policy's wish
    result = Round(FixedPlan(plan), rules).run(slurm.snapshot())
    assert not [a for a in result.actions if isinstance(a, Preempt)], result.actions
    held = {(type(d.action).__name__, d.action.job_id): d.reason for d in result.deferred}
    assert held[("Preempt", first)] == "started less than 30 s ago", held
    assert ("Start", second) in held

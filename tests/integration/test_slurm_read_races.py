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

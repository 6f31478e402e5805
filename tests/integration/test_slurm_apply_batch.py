"""Issue 30 item 4 on the real loopback Slurm: many starts applied together (one read per
check, one ``scontrol release`` of all their ids), and one id that fails in the batch loses
none of the others (Slurm's per-id error lines are read)."""

from __future__ import annotations

from collections.abc import Sequence

from slurm_cluster import Cluster

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.transport import CliTransport, CommandResult
from gpufair.model import Start, gpu_id


class Watched(CliTransport):
    """The real CLI, counting what it is asked; ``cancel_first`` is scancelled right before
    the batched release, as its owner might between gpufair's pin and its release."""

    def __init__(self, cluster: Cluster, cancel_first: str | None = None) -> None:
        super().__init__(env=cluster.env)
        self.cluster, self.cancel_first = cluster, cancel_first
        self.reads = 0
        self.many: list[tuple[str, tuple[str, ...]]] = []
        self.single: list[tuple[str, str]] = []

    def read_jobs(self) -> dict:
        self.reads += 1
        return super().read_jobs()

    def control(self, verb: str, job_id: str, fields=None) -> CommandResult:
        self.single.append((verb, job_id))
        return super().control(verb, job_id, fields)

    def control_many(self, verb: str, job_ids: Sequence[str]) -> dict[str, CommandResult]:
        self.many.append((verb, tuple(job_ids)))
        if self.cancel_first:
            self.cluster.run("scancel", self.cancel_first)
            self.cluster.wait_for("the cancel", lambda: self.cluster.jobs()[
                self.cancel_first]["job_state"] != "PENDING", 10)
        return super().control_many(verb, job_ids)


def _held(cluster: Cluster, count: int) -> list[str]:
    return [cluster.run("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1", "-o", "/dev/null",
                        "--wrap", "sleep 600").stdout.strip() for _ in range(count)]


def test_starts_share_reads_and_one_release_and_a_failing_id_loses_no_other(cluster: Cluster):
    first, gone, third = _held(cluster, 3)
    transport = Watched(cluster, cancel_first=gone)
    slurm = SlurmAdapter(transport, SlurmSettings(), mode="hard")
    slurm.snapshot()
    places = {first: "gpu-v100-1", gone: "gpu-v100-2", third: "gpu-k80-1"}
    reads = transport.reads
    results = slurm.apply_many([Start(job, (gpu_id(node, 0),)) for job, node in places.items()])

    assert transport.many == [("release", (first, gone, third))]
    assert [verb for verb, _ in transport.single] == ["update"] * 3   # each its own pin
    assert transport.reads - reads == 3    # before, the pins' check, the releases' check
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].detail.startswith("release failed: Job has already finished"), \
        results[1].detail
    assert results[0].detail == "update, verify-pinned, release, verify-released"
    cluster.wait_for("both others running", lambda: all(
        cluster.jobs()[j]["job_state"] == "RUNNING" for j in (first, third)), 30)
    jobs = cluster.jobs()
    assert {j: jobs[j]["nodes"] for j in (first, third)} == \
        {first: "gpu-v100-1", third: "gpu-k80-1"}


def test_the_release_of_several_ids_reads_each_ids_answer(cluster: Cluster):
    """22.05's own words for a batch: exit 1 and one line per failing id; the others are
    released all the same."""
    held, ended, other = _held(cluster, 3)
    cluster.run("scancel", ended)
    cluster.wait_for("the cancel",
                     lambda: cluster.jobs()[ended]["job_state"] == "CANCELLED", 10)
    cluster.run("scontrol", "update", "PartitionName=gpu", "State=DOWN")   # nothing runs
    try:
        outcomes = CliTransport(env=cluster.env).control_many("release",
                                                              [held, ended, other, "999999"])
        jobs = cluster.jobs()
    finally:
        cluster.run("scontrol", "update", "PartitionName=gpu", "State=UP")
    assert {j: o.ok for j, o in outcomes.items()} == \
        {held: True, ended: False, other: True, "999999": False}
    assert outcomes[ended].detail == "Job has already finished"
    assert outcomes["999999"].detail == "Invalid job id specified"
    assert [jobs[j]["priority"] > 0 for j in (held, other)] == [True, True]

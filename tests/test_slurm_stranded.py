"""A job gpufair released onto nodes whose GPUs something else took is held again.

Slurm starts jobs gpufair does not manage whenever it likes: one can take GPUs of a node
between the snapshot a round planned on and the release of a job pinned there. Without this
the released job waits (reason Resources) as long as the other job runs, and every round
takes it for started there rather than planning it again. The loopback run is
``tests/integration/test_slurm_constraints.py::test_a_job_whose_node_was_taken_is_placed_again``.
"""

from __future__ import annotations

from slurm_fake import FakeSlurm

from gpufair.adapters.slurm.adapter import SlurmAdapter, SlurmSettings, stranded
from gpufair.core.enrich import with_default_profiles
from gpufair.core.round import Round, RoundRules
from gpufair.model import Start
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

NODES = {"gpu-k80-1": ("k80", 4), "gpu-k80-2": ("k80", 4)}


class Site(FakeSlurm):
    """FakeSlurm whose sinfo shows GPUs in use (``gres_used``) and node state flags."""

    def __init__(self) -> None:
        super().__init__(NODES)
        self.used: dict[str, str] = {}
        self.flags: dict[str, list[str]] = {}

    def read_nodes(self) -> dict:
        doc = super().read_nodes()
        for node in doc["nodes"]:
            node["gres_used"] = self.used.get(node["name"], "")
            node["state_flags"] = self.flags.get(node["name"], [])
        return doc

    def released(self, job_id: str, per_node: int, nodes: list[str], *,
                 per_job: bool = False) -> None:
        """A managed job as gpufair's Start leaves it: pinned, released, not started yet."""
        self.submit(job_id, per_node, len(nodes), held=False)
        job = self.jobs[job_id]
        job.update(state_reason="Resources", required_nodes=",".join(nodes))
        if per_job:
            job.update(tres_per_node="", tres_per_job=f"gres:gpu:{per_node * len(nodes)}")


def _reconcile(site: Site) -> list[str]:
    adapter = SlurmAdapter(site, SlurmSettings(), mode="hard")
    adapter.reconcile()
    return [job for (verb, job), n in site.verbs.items() if verb == "uhold" for _ in range(n)]


def test_a_released_job_whose_node_was_taken_is_held_again():
    site = Site()
    site.released("10", 4, ["gpu-k80-1"])
    site.used["gpu-k80-1"] = "gpu:k80:1(IDX:2)"       # an unmanaged job took one GPU
    assert _reconcile(site) == ["10"]
    # held again, it is the policy's to place in this very round's snapshot
    site.jobs["10"].update(priority=0, state_reason="JobHeldUser")
    adapter = SlurmAdapter(site, SlurmSettings(), mode="hard")
    state = adapter.snapshot()
    assert "10" in {j.id for j in state.jobs}
    assert {n.name: n.state.name for n in state.nodes}["gpu-k80-1"] == "UP"


def test_a_dry_run_without_reconcile_plans_what_the_daemon_does_after_it():
    """``gpufair snapshot`` reads Slurm without reconcile; the daemon holds the stranded job
    again first. Both rounds see it waiting and start it on the free node."""
    def site() -> Site:
        s = Site()
        s.released("10", 4, ["gpu-k80-1"])
        s.used["gpu-k80-1"] = "gpu:k80:1(IDX:2)"       # an unmanaged job took one GPU
        return s

    def round_on(state):
        return Round(create_policy("fifo", PolicyConfig()),
                     RoundRules(mode="hard", fill_idle=True),
                     enrichers=[with_default_profiles]).run(state).actions

    dry = round_on(SlurmAdapter(site(), SlurmSettings(), mode="hard").snapshot())
    live = site()
    assert _reconcile(live) == ["10"]
    live.jobs["10"].update(priority=0, state_reason="JobHeldUser")   # the hold's effect
    daemon = round_on(SlurmAdapter(live, SlurmSettings(), mode="hard").snapshot())
    assert dry == daemon == [Start("10", tuple(f"gpu-k80-2:{i}" for i in range(4)))]


def test_a_released_job_that_still_fits_is_left_to_start():
    site = Site()
    site.released("10", 3, ["gpu-k80-1"])
    site.used["gpu-k80-1"] = "gpu:k80:1(IDX:2)"       # 3 of 4 left: it fits
    assert _reconcile(site) == []
    site = Site()
    site.released("11", 4, ["gpu-k80-1"])             # nothing else there: Slurm's turn
    assert _reconcile(site) == []


def test_gpus_of_a_running_managed_job_count_as_taken():
    site = Site()
    site.submit("1", 3)
    site.run_now("1", ["gpu-k80-1"])                    # holds IDX 0-2
    site.used["gpu-k80-1"] = "gpu:k80:3(IDX:0-2)"
    site.released("10", 1, ["gpu-k80-1"])
    site.released("11", 2, ["gpu-k80-2"])
    assert _reconcile(site) == []                       # 1 left, 1 asked; k80-2 free
    site.released("12", 2, ["gpu-k80-1"])
    assert _reconcile(site) == ["12"]


def test_per_node_and_per_job_requests_are_counted_their_own_way():
    """2 GPUs on each of two nodes cannot start when one node has 1 left (TresPerNode); 4
    GPUs for the job over the same two nodes can (TresPerJob: 1 + 3)."""
    site = Site()
    site.released("20", 2, ["gpu-k80-1", "gpu-k80-2"])
    site.used["gpu-k80-1"] = "gpu:k80:3(IDX:0-2)"
    assert _reconcile(site) == ["20"]
    site = Site()
    site.released("21", 2, ["gpu-k80-1", "gpu-k80-2"], per_job=True)
    site.used["gpu-k80-1"] = "gpu:k80:3(IDX:0-2)"
    assert _reconcile(site) == []
    site.used["gpu-k80-1"] = "gpu:k80:4(IDX:0-3)"     # none left there: cannot start
    assert _reconcile(site) == ["21"]


def test_held_jobs_and_jobs_on_a_settling_node_are_not_judged():
    site = Site()
    site.submit("30", 4)                                # held: the policy's anyway
    site.jobs["30"]["required_nodes"] = "gpu-k80-1"
    site.submit("1", 1)
    site.run_now("1", ["gpu-k80-2"])
    site.jobs["1"]["job_state"] = "COMPLETING"         # a requeue settling there
    site.released("31", 4, ["gpu-k80-2"])               # it starts once that is over
    site.used = {"gpu-k80-1": "gpu:k80:1(IDX:0)", "gpu-k80-2": "gpu:k80:1(IDX:0)"}
    assert _reconcile(site) == []
    # (a node Slurm shows down or drained is judged: tests/test_slurm_settling.py)
    adapter = SlurmAdapter(site, SlurmSettings(), mode="hard")
    assert stranded(adapter.view()) == []


def test_soft_mode_never_holds():
    site = Site()
    site.released("10", 4, ["gpu-k80-1"])
    site.used["gpu-k80-1"] = "gpu:k80:1(IDX:2)"
    SlurmAdapter(site, SlurmSettings(), mode="soft").reconcile()
    assert not site.verbs

"""A released job whose pinned node is not up: kept while a requeue settles there, placed anew
when Slurm itself shows the node down or drained.

Hard mode starts a job by pinning it to nodes and releasing it; until Slurm starts it, the
snapshot shows it running where it is pinned. gpufair typically released it onto the GPUs of
a job it had just requeued, which Slurm shows COMPLETING for a few seconds; the node is then
not usable for that round. The job used to vanish from that round's snapshot, and the
stateful policies forgot it (AFS its attained run time, Shockwave its contention and regime
tables). A node an admin drained, or that went down, is another matter: Slurm starts nothing
there until it is back, so the job is held again and planned elsewhere rather than waiting
hidden. The oracles are hand-written: the GPUs the settling job frees, and run times summed
from the rounds' clock.
"""

from __future__ import annotations

import pytest
from slurm_fake import FakeSlurm

from gpufair.adapters.slurm.adapter import SlurmAdapter, SlurmSettings, stranded
from gpufair.core.enrich import with_default_profiles
from gpufair.core.round import Round, RoundRules
from gpufair.model import JobState, NodeState
from gpufair.model.records import node_of
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

NODES = {"v1": ("v100", 4), "v2": ("v100", 4)}


class Site(FakeSlurm):
    """FakeSlurm whose sinfo shows node states and flags and the GPUs in use (``gres_used``:
    as slurmctld counts them, a settling job's GPUs too)."""

    def __init__(self) -> None:
        super().__init__(NODES)
        self.base: dict[str, str] = {}
        self.flags: dict[str, list[str]] = {}

    def read_nodes(self) -> dict:
        doc = super().read_nodes()
        for node in doc["nodes"]:
            name = node["name"]
            node["state"] = self.base.get(name, "mixed")
            node["state_flags"] = self.flags.get(name, [])
            used = sorted(i for job in self.jobs.values()
                          if job["job_state"] in ("RUNNING", "COMPLETING")
                          and job["nodes"] == name
                          for i in _indices(job["gres_detail"][0]))
            node["gres_used"] = f"gpu:v100:{len(used)}(IDX:{','.join(map(str, used))})" \
                if used else "gpu:v100:0(IDX:N/A)"
        return doc

    def running(self, job_id: str, node: str, first: int, gpus: int, *,
                state: str = "RUNNING") -> None:
        """A managed job holding GPUs ``first``.. of ``node`` (COMPLETING: requeued by gpufair,
        its processes still being killed)."""
        self.submit(job_id, gpus)
        self.jobs[job_id].update(
            job_state=state, state_reason="None", priority=1 if state == "RUNNING" else 0,
            nodes=node, start_time=self.clock - 500, restart_cnt=0 if state == "RUNNING" else 1,
            gres_detail=[f"gpu:v100:{gpus}(IDX:{first}-{first + gpus - 1})"])

    def released(self, job_id: str, gpus: int, nodes: list[str]) -> None:
        """A managed job as gpufair's Start leaves it: pinned, released, not started yet."""
        self.submit(job_id, gpus, len(nodes), held=False)
        self.jobs[job_id].update(state_reason="Resources", required_nodes=",".join(nodes))

    def requeued(self, job_id: str) -> None:
        """gpufair requeued (held) a running job: COMPLETING on its GPUs for a while."""
        job = self.jobs[job_id]
        job.update(job_state="COMPLETING", priority=0, restart_cnt=job["restart_cnt"] + 1)

    def moved(self, job_id: str, nodes: list[str]) -> None:
        """gpufair moved a running job: requeued, settled, pinned to ``nodes``, released."""
        job = self.jobs[job_id]
        job.update(job_state="PENDING", nodes="", gres_detail=[], priority=1,
                   state_reason="Resources", required_nodes=",".join(nodes),
                   restart_cnt=job["restart_cnt"] + 1)

    def settle(self, job_id: str) -> None:
        """The requeue is over: the job is pending, held."""
        self.jobs[job_id].update(job_state="PENDING", nodes="", gres_detail=[],
                                 state_reason="job requeued in held state")


def _indices(detail: str) -> range:
    lo, _, hi = detail.partition("IDX:")[2].rstrip(")").partition("-")
    return range(int(lo), int(hi or lo) + 1)


def _adapter(site: Site) -> SlurmAdapter:
    return SlurmAdapter(site, SlurmSettings(), mode="hard", sleep=lambda s: None,
                        clock=lambda: site.clock)


def _holds(site: Site) -> list[str]:
    return sorted(job for (verb, job), n in site.verbs.items() if verb == "uhold" for _ in range(n))


def _settling_site() -> Site:
    """v1: K runs on GPUs 0-1, R (requeued by gpufair to make room) settles on 2-3, and J is
    released onto v1 (2 GPUs): it will start on R's GPUs."""
    site = Site()
    site.running("1", "v1", 0, 2)                         # K
    site.running("2", "v1", 2, 2, state="COMPLETING")     # R
    site.released("3", 2, ["v1"])                         # J
    return site


# ---- a requeue settling on the pinned node --------------------------------------------------

def test_a_job_released_onto_a_settling_node_is_shown_running_on_the_gpus_it_frees():
    site = _settling_site()
    adapter = _adapter(site)
    assert adapter.reconcile() == [] and _holds(site) == []    # nothing to hold again
    view = adapter.view()
    assert view.settling_nodes == frozenset({"v1"}) and stranded(view) == []
    state = adapter.snapshot()
    jobs = {j.id: j for j in state.jobs}
    assert (jobs["3"].state, jobs["3"].gpus_held) == (JobState.RUNNING, ("v1:2", "v1:3"))
    assert jobs["3"].start_s == site.clock
    assert "2" not in jobs and jobs["1"].gpus_held == ("v1:0", "v1:1")
    nodes = {n.name: n.state for n in state.nodes}
    assert nodes == {"v1": NodeState.DRAIN, "v2": NodeState.UP}   # v1 not usable this round


def test_a_job_released_over_a_settling_and_an_idle_node_is_running_on_both():
    site = Site()
    site.running("1", "v1", 0, 1, state="COMPLETING")
    site.running("2", "v2", 0, 3)
    site.released("3", 1, ["v1", "v2"])                   # 1 GPU per node, two nodes
    state = _adapter(site).snapshot()
    job = {j.id: j for j in state.jobs}["3"]
    assert (job.state, job.gpus_held) == (JobState.RUNNING, ("v1:0", "v2:3"))


def test_a_job_that_will_not_fit_even_once_the_requeue_settled_is_held_again():
    """K keeps 2 of v1's 4 GPUs: J asks 4 there, and R's 2 are all that is freed."""
    site = Site()
    site.running("1", "v1", 0, 2)
    site.running("2", "v1", 2, 2, state="COMPLETING")
    site.released("3", 4, ["v1"])
    assert stranded(_adapter(site).view()) == ["3"]
    _adapter(site).reconcile()
    assert _holds(site) == ["3"]


@pytest.mark.parametrize("policy", ["afs", "max_min", "fifo"])
def test_the_guards_leave_a_job_starting_on_a_settling_node_and_its_gpus_alone(policy):
    """Two more jobs wait; v2 (4 GPUs) is the only usable node. Whatever the policy plans,
    no action touches J, K or any GPU of v1 (J's among them), and v2 does not idle."""
    site = _settling_site()
    site.submit("4", 2)
    site.submit("5", 4)
    adapter = _adapter(site)
    adapter.reconcile()
    state = adapter.snapshot()
    result = Round(create_policy(policy, PolicyConfig()),
                   RoundRules(mode="hard", fill_idle=True),          # as the daemon runs
                   enrichers=[with_default_profiles]).run(state)
    j = {x.id: x for x in result.state.jobs}["3"]
    assert (j.state, j.gpus_held) == (JobState.RUNNING, ("v1:2", "v1:3"))
    assert all(a.job_id not in ("1", "3") for a in result.actions), result.actions
    assert all(node_of(g) == "v2" for a in result.actions for g in getattr(a, "gpu_ids", ()))
    # each of these policies planned J (and K) onto v2, seeing no usable GPU of theirs: the
    # guard held that back, as it does for any job on a node not usable this round
    assert {d.action.job_id: d.reason for d in result.deferred}["3"] == \
        "its GPUs are on a drained or settling node"
    # ... and v2, which those held-back moves would have taken, goes to a waiting job
    assert [(type(a).__name__, a.job_id in ("4", "5")) for a in result.actions] == \
        [("Start", True)]
    outcomes = adapter.apply(result.actions)
    assert all(o.ok for o in outcomes), [o.detail for o in outcomes]
    assert site.jobs["3"]["priority"] == 1 and site.jobs["3"]["required_nodes"] == "v1"
    assert [v for (v, job) in site.verbs if job == "3"] == []


def _rounds(site: Site, policy: str, step_s: float) -> list[dict]:
    """Three rounds ``step_s`` apart: J runs on v2 (round 1); gpufair moved it to v1, where
    the job it requeued to make room is settling (round 2); that requeue is over, J not yet
    started (round 3). The policy's state after each round; its actions are not carried out
    (the rounds are scripted)."""
    rnd = Round(create_policy(policy, PolicyConfig()), RoundRules(mode="hard"),
                enrichers=[with_default_profiles])
    adapter = _adapter(site)
    site.running("1", "v1", 0, 2)                         # R
    site.running("3", "v2", 0, 2)                         # J
    site.submit("5", 2)                                   # another job waits
    seen = []
    for step in range(3):
        if step == 1:
            site.requeued("1")
            site.moved("3", ["v1"])
        if step == 2:
            site.settle("1")
        adapter.reconcile()
        rnd.run(adapter.snapshot())
        seen.append(rnd.policy.state_dict())
        site.clock += step_s
    return seen


def test_afs_keeps_the_run_time_of_a_job_released_onto_a_settling_node():
    """J held GPUs at every round: 2 steps of run time by round 3 (a round it could not see
    made AFS forget it: it restarted from 0, ahead of the jobs it had run longer than)."""
    seen = _rounds(Site(), "afs", 40.0)
    assert [s["run_s"].get("3") for s in seen] == [0.0, 40.0, 80.0]


def test_shockwave_keeps_its_tables_for_a_job_released_onto_a_settling_node():
    """Contention is counted over the time J was seen: 2 steps by round 3; its regime and
    batch size are remembered throughout."""
    seen = _rounds(Site(), "shockwave", 40.0)
    assert [s["contention"].get("3", [None, None])[1] for s in seen[1:]] == [40.0, 80.0]
    assert [("3" in s["regimes"], "3" in s["batch_seen"]) for s in seen] == [(True, True)] * 3


# ---- a pinned node Slurm itself shows down or drained ---------------------------------------

@pytest.mark.parametrize(("base", "flags"), [
    ("idle", ["DRAIN"]),                 # scontrol update state=drain, nothing running there
    ("mixed", ["DRAIN"]),                # draining: the running jobs finish, nothing starts
    ("down", []),
    ("idle", ["NOT_RESPONDING"]),
    ("idle", ["MAINTENANCE"]),           # a maintenance reservation
])
def test_a_job_released_onto_a_node_down_or_drained_in_slurm_is_held_again(base, flags):
    site = Site()
    site.released("3", 2, ["v1"])
    site.base["v1"], site.flags["v1"] = base, flags
    adapter = _adapter(site)
    assert stranded(adapter.view()) == ["3"]
    adapter.reconcile()
    assert _holds(site) == ["3"]
    # held again, this round's snapshot (read afresh) has it waiting, for the policy to place
    site.jobs["3"].update(priority=0, state_reason="JobHeldUser")
    state = adapter.snapshot()
    assert {j.id: j.state for j in state.jobs} == {"3": JobState.PENDING}
    assert {n.name: n.state for n in state.nodes}["v2"] is NodeState.UP


def test_an_admin_drain_wins_over_a_requeue_settling_on_the_same_node():
    site = _settling_site()
    site.flags["v1"] = ["DRAIN"]
    assert stranded(_adapter(site).view()) == ["3"]
    site = _settling_site()
    site.released("4", 2, ["v1", "v2"])
    site.base["v2"] = "down"                              # settling on one, down on the other
    assert stranded(_adapter(site).view()) == ["4"]


# ---- what cannot be told stays hidden for the round -----------------------------------------

def _hidden(site: Site, job_id: str) -> None:
    adapter = _adapter(site)
    adapter.reconcile()
    assert _holds(site) == []
    state = adapter.snapshot()
    assert job_id not in {j.id for j in state.jobs}
    pinned = site.jobs[job_id]["required_nodes"].split(",")
    assert all(n.state is not NodeState.UP for n in state.nodes if n.name in pinned)


def test_a_job_pinned_to_an_unknown_node_stays_hidden():
    site = Site()
    site.released("3", 2, ["v9"])
    _hidden(site, "3")
    site = Site()
    site.released("3", 2, ["v1", "v9"])                  # one known and up, one not
    _hidden(site, "3")


def test_a_job_pinned_to_a_node_whose_record_cannot_be_read_stays_hidden():
    site = Site()
    site.released("3", 2, ["v1"])
    read_nodes = site.read_nodes

    def broken() -> dict:
        doc = read_nodes()
        doc["nodes"][0]["gres"] = "gpu:v100:lots"
        return doc

    site.read_nodes = broken   # type: ignore[method-assign]
    _hidden(site, "3")


def test_a_job_pinned_where_a_job_record_cannot_be_read_stays_hidden():
    """A requeue settles on v1, but another job record there is unreadable: what it holds
    cannot be told, so neither can whether J fits."""
    site = _settling_site()
    site.running("6", "v1", 0, 1)
    site.jobs["6"]["gres_detail"] = ["gpu:v100:one(IDX:0)"]
    view = _adapter(site).view()
    assert "v1" in view.held_back and "v1" not in view.settling_nodes
    _hidden(site, "3")

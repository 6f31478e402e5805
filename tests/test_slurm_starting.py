"""A job gpufair released that Slurm has not started yet stays in the state, running.

Hard mode releases a job pinned to its planned nodes; Slurm starts it at its next scheduling
pass (after a recovery, or on a busy controller, rounds later). The policy must see it as
what the plan made it, a job holding GPUs there: a job that vanished for a round made
Gandiva_fair drop its home and stride pass (it came back at the minimum pass, as a newcomer)
and every stateful policy forget it. The oracle: the same rounds on a Slurm that starts each
released job at once, where the question never arises.
"""

from __future__ import annotations

from collections import Counter

import pytest
from slurm_fake import FakeSlurm

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.transport import CommandResult
from gpufair.core.enrich import with_default_profiles
from gpufair.core.history import merge_history
from gpufair.core.round import Round, RoundRules
from gpufair.model import JobState, NodeState, Preempt, PreemptMode
from gpufair.model.records import node_of
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

NODES = {"v1": ("v100", 4), "v2": ("v100", 4)}


class Slurm(FakeSlurm):
    """FakeSlurm that places by count on the lowest free GPU indices (as slurmctld does on
    an idle node) and, when ``slow``, starts a released job only when told."""

    def __init__(self, *, slow: bool) -> None:
        super().__init__(NODES)
        self.slow = slow
        self.released: list[str] = []
        self.ages: dict[str, int] = {}
        self.flags: dict[str, list[str]] = {}

    def read_nodes(self) -> dict:
        doc = super().read_nodes()
        for node in doc["nodes"]:
            node["state_flags"] = self.flags.get(node["name"], [])
        return doc

    def _free(self, node: str) -> list[int]:
        used = set()
        for job in self.jobs.values():
            if job["job_state"] in ("RUNNING", "SUSPENDED") and node in job["nodes"].split(","):
                for detail in job["gres_detail"]:
                    lo, _, hi = detail.partition("IDX:")[2].rstrip(")").partition("-")
                    used.update(range(int(lo), int(hi or lo) + 1))
        return [i for i in range(self.node_gres[node][1]) if i not in used]

    def run_now(self, job_id: str, nodes: list[str]) -> None:
        job = self.jobs[job_id]
        per = int(job["tres_per_node"].rsplit(":", 1)[1])
        [node] = nodes
        free = self._free(node)[:per]
        assert len(free) == per and free == list(range(free[0], free[0] + per)), free
        job.update(job_state="RUNNING", state_reason="None", priority=1, nodes=node,
                   node_count=1, start_time=self.clock,
                   gres_detail=[f"gpu:v100:{per}(IDX:{free[0]}-{free[-1]})"])

    def control(self, verb: str, job_id: str, fields: dict | None = None) -> CommandResult:
        job = self.jobs.get(job_id)
        if job is None or verb not in ("uhold", "release") or (verb == "release"
                                                                and not self.slow):
            return super().control(verb, job_id, fields)
        self.verbs[(verb, job_id)] += 1
        if job["job_state"] != "PENDING":
            return CommandResult(False, "Job is no longer pending execution")
        if verb == "release":
            job.update(priority=1, state_reason="Priority")
            self.released.append(job_id)
            self.ages[job_id] = 0
        else:
            job.update(priority=0, state_reason="JobHeldUser")
            self.released = [j for j in self.released if j != job_id]
            self.ages.pop(job_id, None)
        return CommandResult(True, verb)

    def start_released(self, *, lag: int) -> None:
        """Slurm's pass: start the jobs released ``lag`` or more calls ago."""
        self.ages = {j: self.ages.get(j, 0) + 1 for j in self.released}
        for job_id in [j for j in self.released if self.ages[j] > lag]:
            job = self.jobs[job_id]
            if job["job_state"] == "PENDING" and job["priority"] > 0:
                self.run_now(job_id, job["pinned"])
            self.released.remove(job_id)


def _jobs(slurm: Slurm) -> None:
    """Two tenants, six 2-GPU jobs on two 4-GPU servers: Gandiva_fair time-slices them."""
    for i, tenant in enumerate("aabbab"):
        slurm.submit(str(i + 1), 2)
        slurm.jobs[str(i + 1)]["account"] = tenant


def _tables(policy) -> dict:
    """The policy's tables; its selection by server: gpufair pins a job's nodes and GPU
    count, and Slurm picks the GPU indices on the node when it starts the job (a job
    started late may find other indices free than one started at once), so only the
    servers are the policy's to compare."""
    data = policy.state_dict()
    tables = {k: data[k] for k in ("home", "local_pass", "central_pass", "agg_pass", "seq")}
    tables["selection"] = {job: sorted(Counter(node_of(g) for g in gpus).items())
                           for job, gpus in data["selection"].items()}
    return tables


def _run(slurm: Slurm, policy: str, rounds: int, step_s: float, lag: int = 0) -> list[dict]:
    adapter = SlurmAdapter(slurm, SlurmSettings(), mode="hard", sleep=lambda s: None,
                           clock=lambda: slurm.clock)
    rnd = Round(create_policy(policy, PolicyConfig()), RoundRules(mode="hard"),
                enrichers=[with_default_profiles])
    history: dict = {}
    seen = []
    for _ in range(rounds):
        adapter.reconcile()
        state = adapter.snapshot()
        # no job vanishes from a policy's view while Slurm has yet to start it (AFS, Themis'
        # finish-time tracker and Shockwave forget an absent job as Gandiva_fair did)
        assert {j.id for j in state.jobs} == set(slurm.jobs)
        result = rnd.run(state, history=history)
        history.update({r["job_id"]: r for r in result.history})
        outcomes = adapter.apply(result.actions)
        assert all(o.ok for o in outcomes), [o.detail for o in outcomes]
        seen.append(_tables(rnd.policy))
        slurm.clock += step_s
        slurm.start_released(lag=lag)   # the slow Slurm's pass: what was released rounds ago
    return seen


@pytest.mark.parametrize(("step_s", "lag"), [(20.0, 1), (60.0, 1), (60.0, 2)])
def test_gandiva_fair_remembers_a_job_slurm_starts_late(step_s, lag):
    """Quanta of 60 s, rounds every ``step_s``, each released job started ``lag`` rounds
    late (at 60 s some are preempted or moved before they started: held, re-pinned):
    homes, passes and the selection are those of the same rounds when Slurm starts at once."""
    fast = _run(_with(Slurm(slow=False)), "gandiva_fair", 10, step_s)
    late = _with(Slurm(slow=True))
    slow = _run(late, "gandiva_fair", 10, step_s, lag)
    for i, (f, s) in enumerate(zip(fast, slow, strict=True)):
        assert f == s, i
    # not a vacuous comparison: jobs were swapped at quanta, passes moved
    assert len({tuple(sorted(t["selection"])) for t in fast}) > 1
    assert max(fast[-1]["local_pass"].values()) > 0
    if step_s == 60.0:      # some were taken back before they started
        assert any(verb == "uhold" for verb, _ in late.verbs)


def _with(slurm: Slurm) -> Slurm:
    _jobs(slurm)
    return slurm


def test_a_released_job_is_shown_running_where_it_will_start():
    slurm = Slurm(slow=True)
    _jobs(slurm)
    slurm.run_now("1", ["v1"])                          # holds v1:0-1
    for job_id, node in (("2", "v1"), ("3", "v2")):
        slurm.jobs[job_id].update(priority=1, state_reason="Priority", required_nodes=node,
                                  pinned=[node])
    slurm.clock = 5000.0
    adapter = SlurmAdapter(slurm, SlurmSettings(), mode="hard", clock=lambda: slurm.clock)
    state = adapter.snapshot()
    jobs = {j.id: j for j in state.jobs}
    assert (jobs["2"].state, jobs["2"].gpus_held) == (JobState.RUNNING, ("v1:2", "v1:3"))
    assert (jobs["3"].state, jobs["3"].gpus_held) == (JobState.RUNNING, ("v2:0", "v2:1"))
    assert jobs["2"].start_s == 5000.0 and jobs["4"].state is JobState.PENDING
    assert all(n.state is NodeState.UP for n in state.nodes)   # nothing blocked
    # no service is counted for the time it waits to start
    merged, _ = merge_history(state, {"2": {
        "job_id": "2", "arrival_s": 1002.0, "first_seen": 1002.0, "attained_s": 7.0,
        "waiting_s": 0.0, "last_seen": 4990.0, "finished_at": None}})
    assert {j.id: j for j in merged.jobs}["2"].attained_s == pytest.approx(7.0)


def test_a_released_job_on_a_drained_node_is_shown_waiting_to_be_placed_anew():
    """Slurm starts nothing on a drained node: reconcile holds the job again before the
    daemon's snapshot; a snapshot taken without it (for a dry run) shows the job waiting all
    the same, so the dry run plans what the daemon does."""
    slurm = Slurm(slow=True)
    _jobs(slurm)
    slurm.jobs["2"].update(priority=1, state_reason="Priority", required_nodes="v1")
    slurm.flags["v1"] = ["DRAIN"]
    state = SlurmAdapter(slurm, SlurmSettings(), mode="hard").snapshot()
    job = {j.id: j for j in state.jobs}["2"]
    assert (job.state, job.gpus_held) == (JobState.PENDING, ())
    assert {n.name: n.state for n in state.nodes}["v1"] is NodeState.DRAIN


@pytest.mark.parametrize("mode", [PreemptMode.REQUEUE, PreemptMode.SUSPEND])
def test_preempting_a_job_that_has_not_started_holds_it(mode):
    slurm = Slurm(slow=True)
    _jobs(slurm)
    slurm.jobs["2"].update(priority=1, state_reason="Priority", required_nodes="v1",
                           pinned=["v1"])
    adapter = SlurmAdapter(slurm, SlurmSettings(), mode="hard", sleep=lambda s: None)
    adapter.snapshot()
    [outcome] = adapter.apply([Preempt("2", mode)])
    assert outcome.ok, outcome.detail
    assert slurm.jobs["2"]["priority"] == 0 and slurm.jobs["2"]["job_state"] == "PENDING"
    assert [v for (v, j) in slurm.verbs if j == "2"] == ["uhold"]
    assert adapter.effect_visible(Preempt("2", mode), adapter.view())
    # started meanwhile: not held behind Slurm's back, the next round preempts it properly
    slurm.jobs["3"].update(priority=1, state_reason="Priority", required_nodes="v2",
                           pinned=["v2"])
    adapter.snapshot()
    slurm.run_now("3", ["v2"])
    [outcome] = adapter.apply([Preempt("3", mode)])
    assert not outcome.ok and outcome.stale and slurm.jobs["3"]["job_state"] == "RUNNING"

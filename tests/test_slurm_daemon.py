"""The daemon's rounds, preemption cap, soft mode and crash recovery (in-memory Slurm)."""

from __future__ import annotations

from collections import Counter

import pytest
from slurm_fake import Crash, FakeSlurm

from gpufair.adapters.recording import RecordingAdapter
from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.core.enrich import with_default_profiles
from gpufair.core.guards import preemption_cap, unusable_nodes
from gpufair.core.history import merge_history
from gpufair.core.round import Round, RoundRules
from gpufair.model import ClusterState, Job, JobState, Node, Preempt, Start
from gpufair.plugin import daemon as daemon_module
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import DONE, Store, action_from_dict, action_to_dict
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

NODES = {"v1": ("v100", 4), "v2": ("v100", 4)}


def _daemon(slurm: FakeSlurm, store: Store, *, policy: str = "fifo", share: float = 1.0,
            mode: str = "hard") -> Daemon:
    adapter = SlurmAdapter(slurm, SlurmSettings(), mode=mode, sleep=lambda s: None,
                           clock=lambda: slurm.clock)
    rounds = Round(create_policy(policy, PolicyConfig()),
                   RoundRules(max_preempt_share=share, mode=mode),
                   enrichers=[with_default_profiles])
    return Daemon(adapter, rounds, store, ServiceSettings(), sleep=lambda s: None)


def _fifo_reclaim(slurm: FakeSlurm) -> None:
    """Jobs 1, 2 (earlier) wait held while 3, 4 (later) run: fifo must swap them."""
    for job in ("1", "2", "3", "4"):
        slurm.submit(job, 4)
    slurm.run_now("3", ["v1"])
    slurm.run_now("4", ["v2"])


def test_round_swaps_jobs_as_the_plan_says(tmp_path):
    slurm = FakeSlurm(NODES)
    _fifo_reclaim(slurm)
    store = Store(tmp_path / "s.db")
    round_id = _daemon(slurm, store).run_round()
    kinds = [(type(e.action).__name__, e.action.job_id, e.status) for e in store.journal(round_id)]
    assert kinds == [("Preempt", "3", DONE), ("Preempt", "4", DONE), ("Start", "1", DONE),
                     ("Start", "2", DONE)]
    assert {j: slurm.jobs[j]["job_state"] for j in "1234"} == \
        {"1": "RUNNING", "2": "RUNNING", "3": "PENDING", "4": "PENDING"}
    # the next round has nothing to do: the cluster matches the plan
    assert store.journal(_daemon(slurm, store).run_round()) == []


@pytest.mark.parametrize("batch", [1, 3, daemon_module.JOURNAL_BATCH])
@pytest.mark.parametrize("crash_at", [("requeuehold", "3"), ("requeuehold", "4"),
                                      ("release", "1"), ("release", "2"), ("update", "2")])
def test_killed_mid_round_restart_neither_repeats_nor_loses(tmp_path, crash_at, batch,
                                                            monkeypatch):
    """Killed anywhere, with the journal written an action at a time, in batches that end
    mid-round (3 of 4 actions) or the whole round in one batch."""
    monkeypatch.setattr(daemon_module, "JOURNAL_BATCH", batch)
    slurm = FakeSlurm(NODES)
    _fifo_reclaim(slurm)
    store = Store(tmp_path / "s.db")
    slurm.crash_after = crash_at
    with pytest.raises(Crash):
        _daemon(slurm, store).run_round()
    store.close()
    store = Store(tmp_path / "s.db")          # a new process: only the file survives
    assert store.unfinished_rounds() == [1]
    _daemon(slurm, store).recover()
    assert store.unfinished_rounds() == []
    assert all(e.status == DONE for e in store.journal(1))
    counts = Counter({k: v for k, v in slurm.verbs.items() if k[0] != "update"})
    assert counts == Counter({("requeuehold", "3"): 1, ("requeuehold", "4"): 1,
                              ("release", "1"): 1, ("release", "2"): 1})
    assert [slurm.jobs[j]["restart_cnt"] for j in "34"] == [1, 1]
    assert {j: slurm.jobs[j]["job_state"] for j in "12"} == {"1": "RUNNING", "2": "RUNNING"}


@pytest.mark.parametrize(("batch", "commits"), [(3, 3), (256, 2)])
def test_a_round_journals_its_actions_a_batch_per_commit(tmp_path, monkeypatch, batch,
                                                         commits):
    """Four actions: with batches of 3, one commit marks the first three applying, one
    records their outcomes with the fourth applying, one its outcome (the old journal took
    two commits per action: 8); the whole round in one batch takes two."""
    monkeypatch.setattr(daemon_module, "JOURNAL_BATCH", batch)
    slurm = FakeSlurm(NODES)
    _fifo_reclaim(slurm)
    store = Store(tmp_path / "s.db")
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    round_id = _daemon(slurm, store).run_round()
    transactions = " ".join(statements).split("COMMIT")
    marking = [t for t in transactions if "UPDATE actions SET status" in t]
    assert len(marking) == commits
    assert [e.status for e in store.journal(round_id)] == [DONE] * 4
    assert all(count == 1 for (verb, _), count in slurm.verbs.items() if verb != "update")


def test_preemption_cap_defers_victims_and_their_starts(tmp_path):
    slurm = FakeSlurm(NODES)
    _fifo_reclaim(slurm)
    store = Store(tmp_path / "s.db")
    daemon = _daemon(slurm, store, share=0.5)
    round_id = daemon.run_round()
    kinds = [(type(e.action).__name__, e.action.job_id) for e in store.journal(round_id)]
    assert kinds == [("Preempt", "3"), ("Start", "1")]
    assert daemon.metrics.capped_preemptions == 1
    assert "gpufair_preemptions_capped_total 1" in daemon.metrics.render()


def test_cap_function_counts_gpus():
    state = ClusterState(0.0, nodes=(Node("a", "v100", 4),), jobs=(
        Job("x", gpus=2, state=JobState.RUNNING, gpus_held=("a:0", "a:1")),
        Job("y", gpus=2, state=JobState.RUNNING, gpus_held=("a:2", "a:3"))))
    actions = [Preempt("x"), Preempt("y"), Start("z", ("a:2",)), Start("w", ("a:0",))]
    kept, held = preemption_cap(0.5)(state, actions)
    dropped = [d.action for d in held]
    assert kept == [Preempt("x"), Start("w", ("a:0",))]
    assert dropped == [Preempt("y"), Start("z", ("a:2",))]
    assert preemption_cap(0.0)(state, actions)[0] == []


def test_dry_run_journals_but_sends_nothing(tmp_path):
    slurm = FakeSlurm(NODES)
    _fifo_reclaim(slurm)
    store = Store(tmp_path / "s.db")
    daemon = _daemon(slurm, store)
    daemon.adapter = recorder = RecordingAdapter(daemon.adapter)
    daemon.settings = ServiceSettings(dry_run=True)
    round_id = daemon.run_round()
    assert {(e.status, e.detail) for e in store.journal(round_id)} == \
        {("done", "recorded (dry run)")}
    assert [type(a).__name__ for a in recorder.recorded] == ["Preempt", "Preempt", "Start",
                                                             "Start"]
    assert not slurm.verbs
    assert store.rounds()[-1]["status"] == "dry-run"
    # a dry run's "done" never makes a real round skip the same action as already done
    real = _daemon(slurm, store).run_round()
    assert [e.status for e in store.journal(real)] == ["done"] * 4


def test_soft_mode_only_sets_priorities(tmp_path):
    slurm = FakeSlurm(NODES)
    for job in ("1", "2", "3"):
        slurm.submit(job, 4, held=False)
    slurm.run_now("3", ["v1"])
    store = Store(tmp_path / "s.db")
    round_id = _daemon(slurm, store, mode="soft").run_round()
    entries = store.journal(round_id)
    assert {type(e.action).__name__ for e in entries} == {"SetPriority"}
    assert [e.action.job_id for e in entries] == ["1", "2"]
    assert [slurm.verbs[("update", j)] for j in "12"] == [1, 1]


def test_attained_service_survives_requeue_and_restart():
    job = Job("1", gpus=4, state=JobState.RUNNING, start_s=100.0, attained_s=10.0,
              gpus_held=("a:0",))
    state = ClusterState(110.0, jobs=(job,))
    merged, rows = merge_history(state, {})
    assert merged.jobs[0].attained_s == 10.0
    history = {"1": rows[0]}
    # Slurm resets submit_time on requeue: the first one is kept (FIFO/LAS order)
    requeued = ClusterState(130.0, jobs=(Job("1", gpus=4, state=JobState.PENDING,
                                             arrival_s=125.0),))
    merged, rows = merge_history(requeued, history)
    assert merged.jobs[0].attained_s == 10.0 and rows[0]["waiting_s"] == 20.0
    assert merged.jobs[0].arrival_s == 0.0
    again = ClusterState(150.0, jobs=(Job("1", gpus=4, state=JobState.RUNNING, start_s=140.0,
                                          attained_s=10.0, gpus_held=("a:0",)),))
    merged, _ = merge_history(again, {"1": rows[0]})
    assert merged.jobs[0].attained_s == 20.0


def test_action_payloads_round_trip():
    for action in (Start("1", ("a:0",)), Preempt("2", grace_s=3.0)):
        assert action_from_dict(action_to_dict(action)) == action


def test_hook_events_are_ingested_once(tmp_path):
    from gpufair.plugin.hooks import run
    env = {"GPUFAIR_HOOK_DIR": str(tmp_path), "SLURM_JOB_ID": "9", "SLURMD_NODENAME": "v1",
           "SLURM_JOB_GPUS": "0,1"}
    assert run("prolog", env) == 0
    assert run("epilog", {**env, "SLURM_JOB_EXIT_CODE": "0"}) == 0
    (tmp_path / "spool" / "junk.json").write_text("{not json")
    store = Store(tmp_path / "s.db")
    daemon = _daemon(FakeSlurm(NODES), store)
    daemon.settings = type(daemon.settings)(hook_dir=str(tmp_path))
    assert daemon.ingest_spool() == 2
    assert daemon.ingest_spool() == 0
    events = store.events("9")
    assert [e["kind"] for e in events] == ["prolog", "epilog"]
    assert events[0]["gpus"] == "0,1" and events[0]["node"] == "v1"
    assert (tmp_path / "bad" / "junk.json").exists()


def test_round_without_actions_is_closed_at_once(tmp_path):
    store = Store(tmp_path / "s.db")
    round_id = store.begin_round("fifo", {"reason": "nothing to do"}, [])
    assert store.rounds()[0]["id"] == round_id and store.rounds()[0]["status"] == "done"
    assert store.unfinished_rounds() == []


def test_profiles_fill_unmeasured_types_without_assuming_a_speedup():
    from gpufair.core.enrich import STAY_MARGIN, with_default_profiles
    from gpufair.model import ThroughputProfile
    nodes = (Node("v1", "v100", 4), Node("k1", "k80", 4))
    measured = Job("m", gpus=4, throughput=ThroughputProfile({("v100", 4): 3.0}))
    running = Job("r", gpus=4, state=JobState.RUNNING, gpus_held=("k1:0", "k1:1", "k1:2",
                                                                   "k1:3"))
    fresh = Job("f", gpus=2)
    state = with_default_profiles(ClusterState(0.0, nodes=nodes, jobs=(measured, running,
                                                                         fresh)))
    jobs = {j.id: j for j in state.jobs}
    assert jobs["m"].throughput.rates == {("v100", 4): 3.0, ("k80", 4): 3.0}
    assert jobs["r"].rate("k80") == 1.0 and jobs["r"].rate("v100") == 1.0 - STAY_MARGIN
    assert jobs["f"].rate("k80") == jobs["f"].rate("v100") == 1.0


def test_jobs_on_drained_nodes_are_left_alone():
    from gpufair.model import NodeState
    state = ClusterState(0.0, nodes=(Node("a", "v100", 2, state=NodeState.DRAIN),
                                     Node("b", "v100", 2)), jobs=(
        Job("x", gpus=2, state=JobState.RUNNING, gpus_held=("a:0", "b:0")),
        Job("y", gpus=1, state=JobState.RUNNING, gpus_held=("b:1",))))
    actions = [Preempt("x"), Preempt("y"), Start("z", ("b:0",)), Start("w", ("b:1",))]
    kept, deferred = unusable_nodes(state, actions)
    assert kept == [Preempt("y"), Start("w", ("b:1",))]
    assert [d.action for d in deferred] == [Preempt("x"), Start("z", ("b:0",))]


def test_policy_state_survives_a_restart(tmp_path):
    class Remembering:
        name = "remembering"

        def __init__(self) -> None:
            self.seen = 0

        def schedule(self, state, now):
            from gpufair.model import Plan
            self.seen += 1
            return Plan(reason=f"round {self.seen}")

        def state_dict(self) -> dict:
            return {"seen": self.seen}

        def load_state_dict(self, data) -> None:
            self.seen = data["seen"]

    slurm = FakeSlurm(NODES)
    store = Store(tmp_path / "s.db")
    first = _daemon(slurm, store)
    first.rounds.policy = Remembering()
    first.run_round()
    first.run_round()
    second = _daemon(slurm, Store(tmp_path / "s.db"))
    second.rounds.policy = Remembering()
    second.recover()
    assert second.policy.seen == 2


class AskableSlurm(FakeSlurm):
    """The in-memory Slurm, also answering slurmrestd's ``update_time`` question (did any job
    or node change at or after this time?), and counting full reads of the jobs."""

    def __init__(self) -> None:
        super().__init__(NODES)
        self.last_change = 0.0
        self.asked: list[float] = []
        self.reads = 0

    def changed_since(self, since: float) -> bool:
        self.asked.append(since)
        return self.last_change >= since

    def read_jobs(self) -> dict:
        self.reads += 1
        return super().read_jobs()


def test_a_quiet_poll_asks_slurm_instead_of_reading_everything(tmp_path):
    """Once a round has read the cluster, a poll with nothing changed since (slurmrestd's
    304) reads no documents; a change since that read (within the clock margin too) makes
    the poll read in full; after a round that could not read Slurm it reads in full."""
    import time

    from gpufair.adapters.slurm.adapter import CHANGE_MARGIN_S
    slurm = AskableSlurm()
    _fifo_reclaim(slurm)
    daemon = _daemon(slurm, Store(tmp_path / "s.db"))
    daemon.run_round()
    reads = slurm.reads
    assert daemon._changed() is False and slurm.reads == reads
    assert slurm.asked and time.time() - CHANGE_MARGIN_S - 5 < slurm.asked[-1] <= \
        time.time() - CHANGE_MARGIN_S
    slurm.last_change = slurm.asked[-1] + CHANGE_MARGIN_S / 2   # just before the read
    daemon._changed()
    assert slurm.reads > reads   # (a read is repeated while squeue and sinfo disagree)
    reads = slurm.reads
    slurm.last_change = 0.0
    daemon.seen = None   # the last round found Slurm away
    daemon._changed()
    assert slurm.reads > reads

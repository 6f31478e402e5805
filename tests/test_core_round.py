"""The one round: guards, soft mode, idempotency keys, and the daemon around it."""

from __future__ import annotations

import math

from fixed_policy import FixedPlan
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.adapters.base import Adapter, ResourceManager
from gpufair.adapters.recording import RecordingAdapter
from gpufair.adapters.slurm import SlurmAdapter
from gpufair.core.enrich import with_default_profiles
from gpufair.core.guards import min_runtime, preemption_cap
from gpufair.core.round import Round, RoundRules, action_key
from gpufair.model import (
    ActionResult,
    Assignment,
    ClusterState,
    Job,
    JobState,
    Migrate,
    Node,
    Plan,
    Preempt,
    Resize,
    SetPriority,
    Start,
)
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import DONE, SKIPPED, Store

NODES = tuple(Node(f"n{i}", "v100", 4) for i in range(4))   # 16 GPUs


def running(job_id: str, node: int, gpus: int = 4, start: float = 0.0) -> Job:
    return Job(job_id, gpus=gpus, state=JobState.RUNNING, start_s=start,
               gpus_held=tuple(f"n{node}:{g}" for g in range(gpus)))


def test_adapters_implement_the_protocols():
    assert isinstance(SlurmAdapter(), ResourceManager)
    state = ClusterState(0.0, nodes=NODES)
    assert isinstance(RecordingAdapter(state), ResourceManager)
    assert isinstance(RecordingAdapter(state), Adapter)


def test_cap_counts_migrations_and_resizes_as_preemptions():
    state = ClusterState(100.0, nodes=NODES, jobs=tuple(running(j, i) for i, j in
                                                        enumerate("abc")))
    actions = [Migrate("a", ("n3:0", "n3:1", "n3:2", "n3:3")), Resize("b", ("n0:0", "n0:1")),
               Preempt("c"), Start("e", ("n2:2", "n2:3"))]
    kept, held = preemption_cap(0.5)(state, actions)
    # a's migration and b's resize restart 8 GPUs' worth of jobs: the cap of 8 is reached,
    # so c keeps its GPUs (n2) and e, which needed two of them, waits too
    assert kept == actions[:2]
    assert [d.action for d in held] == actions[2:]
    assert all("preemption cap (50% of the GPUs)" in d.reason for d in held)


def test_a_held_back_move_keeps_its_job_and_so_blocks_what_needed_its_gpus():
    """b's resize needs c's GPUs; c is over the cap, so b stays on n1, so a (moving onto n1)
    stays too: the cascade, not just the first victim."""
    state = ClusterState(100.0, nodes=NODES, jobs=(running("a", 0), running("b", 1),
                                                   running("c", 2, start=90.0)))
    actions = [Migrate("a", ("n1:0", "n1:1", "n1:2", "n1:3")), Resize("b", ("n2:0", "n2:1")),
               Preempt("c"), Start("z", ("n3:0",))]
    kept, held = min_runtime(60)(state, actions)
    assert kept == [Start("z", ("n3:0",))]
    assert [d.action.job_id for d in held] == ["a", "b", "c"]


def test_cap_keeps_starts_on_gpus_nobody_loses():
    state = ClusterState(100.0, nodes=NODES, jobs=(running("a", 0), running("b", 1)))
    actions = [Preempt("a"), Preempt("b"), Start("x", ("n0:0",)), Start("y", ("n1:0",)),
               Start("z", ("n3:0",))]
    kept, held = preemption_cap(0.25)(state, actions)
    assert kept == [Preempt("a"), Start("x", ("n0:0",)), Start("z", ("n3:0",))]
    assert [d.action for d in held] == [Preempt("b"), Start("y", ("n1:0",))]


@st.composite
def _scenario(draw):
    jobs = []
    for i in range(draw(st.integers(0, 4))):
        size = draw(st.sampled_from([1, 2, 4]))
        jobs.append(running(f"r{i}", i, size, start=float(draw(st.integers(0, 100)))))
    actions = []
    for job in jobs:
        kind = draw(st.sampled_from(["none", "preempt", "migrate", "resize"]))
        if kind == "preempt":
            actions.append(Preempt(job.id))
        elif kind != "none":
            target = tuple(f"n{draw(st.integers(0, 3))}:{g}" for g in range(job.gpus))
            actions.append((Migrate if kind == "migrate" else Resize)(job.id, target))
    for i in range(draw(st.integers(0, 4))):
        node, gpu = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        actions.append(Start(f"p{i}", (f"n{node}:{gpu}",)))
    return ClusterState(120.0, nodes=NODES, jobs=tuple(jobs)), actions, draw(
        st.sampled_from([0.0, 0.25, 0.5, 1.0]))


@settings(max_examples=300, deadline=None)
@given(_scenario())
def test_cap_invariants(scenario):
    """Independent of how the guard works: nothing is lost or reordered, the GPUs taken from
    running jobs stay within the cap, and no kept action uses a GPU of a job that keeps it."""
    state, actions, share = scenario
    kept, held = preemption_cap(share)(state, actions)
    assert sorted(map(repr, kept + [d.action for d in held])) == sorted(map(repr, actions))
    assert [a for a in actions if a in kept] == kept
    held_by = {j.id: set(j.gpus_held) for j in state.jobs}
    taken = [a for a in kept if isinstance(a, (Preempt, Migrate, Resize))]
    assert sum(len(held_by[a.job_id]) for a in taken) <= math.floor(share * 16 + 1e-9)
    staying = set().union(*(held_by[d.action.job_id] for d in held
                            if d.action.job_id in held_by)) if held else set()
    for action in kept:
        assert not staying.intersection(getattr(action, "gpu_ids", ())), (action, staying)
    if share >= 1.0:
        assert held == []


def test_min_runtime_protects_young_jobs_and_the_gpus_they_hold():
    state = ClusterState(1000.0, nodes=NODES, jobs=(running("old", 0, start=0.0),
                                                    running("young", 1, start=950.0)))
    actions = [Preempt("old"), Preempt("young"), Start("x", ("n1:0",)), Start("y", ("n0:0",))]
    kept, held = min_runtime(60)(state, actions)
    assert kept == [Preempt("old"), Start("y", ("n0:0",))]
    assert [d.action for d in held] == [Preempt("young"), Start("x", ("n1:0",))]
    assert held[0].reason == "started less than 60 s ago"
    assert min_runtime(0)(state, actions) == (actions, [])
    assert min_runtime(40)(state, actions)[1] == []


def test_soft_mode_ranks_pending_jobs_only():
    state = ClusterState(0.0, nodes=NODES, jobs=(Job("3"), Job("10"), running("r", 0)))
    plan = Plan(assignments=(Assignment("10", ("n1:0",)),),
                priorities={"3": 1.0, "10": 2.0, "r": 5.0})
    result = Round(FixedPlan(plan), RoundRules(mode="soft")).run(state)
    assert result.actions == [SetPriority("10", 1_000_000.0), SetPriority("3", 999_999.0)]


def test_keys_follow_the_jobs_incarnation():
    job = running("7", 0, start=50.0)
    again = Job("7", gpus=4, state=JobState.RUNNING, start_s=900.0, restarts=1,
                gpus_held=job.gpus_held)
    assert action_key(Preempt("7"), job) == action_key(Preempt("7"), job)
    assert action_key(Preempt("7"), job) != action_key(Preempt("7"), again)
    assert action_key(Start("7", ("n0:0",)), Job("7")) != action_key(Start("7", ("n1:0",)),
                                                                     Job("7"))


class _Scripted(RecordingAdapter):
    """A resource manager whose answers to apply_one are scripted, in order."""

    def __init__(self, state: ClusterState, answers: list[str]) -> None:
        super().__init__(state)
        self.answers = answers

    def apply_one(self, action):
        answer = self.answers.pop(0) if self.answers else "ok"
        self.recorded.append(action)
        if answer == "ok":
            return ActionResult(action, True, "ok")
        return ActionResult(action, False, answer, retry=answer == "timeout")


def _swap_state() -> tuple[ClusterState, Plan]:
    state = ClusterState(500.0, nodes=NODES, jobs=(
        running("a", 0, start=0.0), running("b", 1, start=0.0), Job("x", gpus=4),
        Job("y", gpus=4)))
    plan = Plan(assignments=(Assignment("x", tuple(f"n0:{g}" for g in range(4))),
                             Assignment("y", tuple(f"n1:{g}" for g in range(4)))))
    return state, plan


def test_an_unreachable_resource_manager_drops_the_rest_of_the_round(tmp_path):
    state, plan = _swap_state()
    adapter = _Scripted(state, ["ok", "timeout"])
    store = Store(tmp_path / "s.db")
    daemon = Daemon(adapter, Round(FixedPlan(plan), enrichers=[with_default_profiles]), store,
                    ServiceSettings(), sleep=lambda s: None)
    round_id = daemon.run_round()
    entries = store.journal(round_id)
    assert [e.status for e in entries] == [DONE, SKIPPED, SKIPPED, SKIPPED]
    assert all("unavailable" in e.detail for e in entries[1:])
    assert len(adapter.recorded) == 2            # nothing sent after the timeout
    assert store.unfinished_rounds() == []


def test_a_refused_action_fails_alone(tmp_path):
    state, plan = _swap_state()
    adapter = _Scripted(state, ["Invalid job id"])
    store = Store(tmp_path / "s.db")
    daemon = Daemon(adapter, Round(FixedPlan(plan)), store, ServiceSettings(),
                    sleep=lambda s: None)
    entries = store.journal(daemon.run_round())
    assert [e.status for e in entries] == ["failed", DONE, DONE, DONE]


def test_an_action_done_for_this_incarnation_is_not_repeated(tmp_path):
    """The resource manager lags: round 2 sees job a still running on the same incarnation and
    the policy asks again. The key says it was done: it is skipped, not sent twice."""
    state, plan = _swap_state()
    adapter = _Scripted(state, [])
    store = Store(tmp_path / "s.db")
    daemon = Daemon(adapter, Round(FixedPlan(plan)), store, ServiceSettings(),
                    sleep=lambda s: None)
    daemon.run_round()
    sent = len(adapter.recorded)
    second = store.journal(daemon.run_round())
    assert [e.status for e in second] == [SKIPPED] * 4
    assert all("same incarnation" in e.detail for e in second)
    assert len(adapter.recorded) == sent
    # a new incarnation (requeued and restarted) is a new decision
    a2 = Job("a", gpus=4, state=JobState.RUNNING, start_s=400.0, restarts=1,
             gpus_held=state.jobs[0].gpus_held)
    adapter.source = state.with_jobs((a2, *state.jobs[1:]))
    third = store.journal(daemon.run_round())
    first = third[0]
    assert (type(first.action).__name__, first.action.job_id, first.status) == \
        ("Preempt", "a", DONE)


def test_a_moved_job_gets_the_same_checkpoint_warning_as_a_preempted_one():
    state = ClusterState(100.0, nodes=NODES, jobs=(running("a", 0), running("b", 1)))
    plan = Plan(assignments=(Assignment("a", tuple(f"n2:{g}" for g in range(4))),
                             Assignment("b", ("n1:0", "n1:1"))))
    rules = RoundRules(grace_s=30.0)
    actions = Round(FixedPlan(plan), rules).run(state).actions
    assert actions == [Migrate("a", tuple(f"n2:{g}" for g in range(4)), 30.0),
                       Resize("b", ("n1:0", "n1:1"), 30.0)]
    recorder = RecordingAdapter(state)
    recorder.warn_preemptions(actions)
    assert recorder.warned == ["a", "b"]


def test_journal_keeps_the_grace_of_moves():
    from gpufair.plugin.store import action_from_dict, action_to_dict
    for action in (Migrate("a", ("n0:0",), 12.5), Resize("b", ("n1:0", "n1:1"), 3.0),
                   Preempt("c", grace_s=7.0), Start("d", ("n2:0",))):
        assert action_from_dict(action_to_dict(action)) == action


def test_the_daemons_default_rules_keep_a_job_started_moments_ago_whoever_started_it():
    """Issue 29: jobs a fill-only round started were preempted or moved at 0.4-0.8 s of run
    time by the next timer round (min_runtime_s defaulted to 0). The daemon's defaults now
    hold back a preemption, a migration and a resize of such jobs, and the starts that
    needed their GPUs; the simulator's RoundRules still guard nothing."""
    from gpufair.core.config import DEFAULT_MIN_RUNTIME_S, DaemonOptions

    now = 1000.0
    jobs = (running("filled", 0, start=now - 0.6), running("moved", 1, start=now - 0.8),
            running("resized", 2, start=now - DEFAULT_MIN_RUNTIME_S + 1),
            running("old", 3, start=now - DEFAULT_MIN_RUNTIME_S))
    state = ClusterState(now, nodes=NODES, jobs=jobs)
    actions = [Preempt("filled"), Migrate("moved", ("n3:0", "n3:1", "n3:2", "n3:3")),
               Resize("resized", ("n2:0", "n2:1")), Preempt("old"),
               Start("w", ("n0:0", "n0:1", "n0:2", "n0:3"))]
    rules = DaemonOptions().rules()
    assert rules.min_runtime_s == DEFAULT_MIN_RUNTIME_S > 0
    kept, held = actions, []
    for guard in rules.guards():
        kept, more = guard(state, kept)
        held += more
    # "old" was preempted only to make room for "moved", which stays: held back with it
    assert kept == []
    assert [d.action for d in held] == actions
    assert "only made room" in held[3].reason
    assert RoundRules().min_runtime_s == 0.0

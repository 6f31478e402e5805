"""Work conservation between rounds (issue 12, item 18): GPUs the round leaves idle go to
waiting jobs that fit, within their constraints; the daemon's poll notices a submission.

The property test's oracle is written here from the job's constraints alone (which nodes,
how many, which type), not from gpufair's placement code, so a wrong layout or a missed
filler in :mod:`gpufair.core.fill` shows up as a disagreement.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fixed_policy import FixedPlan
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.adapters.recording import RecordingAdapter
from gpufair.core.fill import may_fill
from gpufair.core.round import Round, RoundRules
from gpufair.model import (
    Assignment,
    ClusterState,
    Job,
    JobState,
    Node,
    NodeState,
    Plan,
    Start,
)
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import Store

FILL = RoundRules(fill_idle=True)
NODES = (Node("a", "v100", 4), Node("b", "v100", 4), Node("c", "k80", 4))


def running(job_id: str, gpus: tuple[str, ...]) -> Job:
    return Job(job_id, gpus=len(gpus), state=JobState.RUNNING, start_s=0.0, gpus_held=gpus)


def starts(actions) -> dict[str, tuple[str, ...]]:
    return {a.job_id: a.gpu_ids for a in actions if isinstance(a, Start)}


def test_a_job_the_plan_put_on_busy_gpus_starts_on_idle_ones_between_rounds():
    # the plan wants "new" on a:0-1, still held by "old" (to be evicted at the next timer
    # round); b is idle: without filling, b idles until then
    state = ClusterState(0.0, nodes=NODES[:2], jobs=(
        running("old", ("a:0", "a:1", "a:2", "a:3")), Job("new", gpus=2)))
    plan = Plan((Assignment("new", ("a:0", "a:1")),))
    plain = Round(FixedPlan(plan)).run(state, preemptive=False)
    assert plain.actions == []
    filled = Round(FixedPlan(plan), FILL).run(state, preemptive=False)
    assert list(starts(filled.actions)) == ["new"]
    assert {g.split(":")[0] for g in starts(filled.actions)["new"]} == {"b"}


def test_the_plans_wishes_go_first_then_its_priorities_then_submission_order():
    state = ClusterState(0.0, nodes=(Node("a", "v100", 2),), jobs=(
        Job("first", gpus=1), Job("urgent", gpus=1), Job("wished", gpus=1),
        running("r", ("a:1",))))
    # the plan wished "wished" onto r's GPU; "urgent" has the higher priority; one GPU free
    plan = Plan((Assignment("r", ("a:1",)),), priorities={"urgent": 5.0, "first": 1.0})
    wished = Plan((Assignment("wished", ("a:1",)),), priorities={"urgent": 5.0})
    assert list(starts(Round(FixedPlan(wished), FILL).run(state, preemptive=False).actions)) \
        == ["wished"]
    assert list(starts(Round(FixedPlan(plan), FILL).run(state).actions)) == ["urgent"]
    assert list(starts(Round(FixedPlan(Plan((Assignment("r", ("a:1",)),))), FILL)
                       .run(state).actions)) == ["first"]


def test_a_preempted_jobs_gpus_are_not_given_away_and_the_simulator_never_fills():
    state = ClusterState(0.0, nodes=(Node("a", "v100", 4),), jobs=(
        running("r", ("a:0", "a:1")), Job("w", gpus=2)))
    # the plan evicts r and leaves everything idle: w may fill a:2-3, never r's a:0-1
    result = Round(FixedPlan(Plan()), FILL).run(state)
    assert starts(result.actions) == {"w": ("a:2", "a:3")}
    assert starts(Round(FixedPlan(Plan())).run(state).actions) == {}


def test_gpus_a_held_back_move_would_have_taken_are_filled():
    """r runs on a, which is settling (a requeue there is COMPLETING: drained this round). The
    plan moves r to b; the guard holds that back (r is left where it is for the round), so
    b is idle all the same, and w, waiting, starts there. Filling before the guards left b to
    nobody: the held-back move had taken it."""
    state = ClusterState(0.0, nodes=(Node("a", "v100", 4, state=NodeState.DRAIN),
                                     Node("b", "v100", 4)), jobs=(
        running("r", ("a:0", "a:1")), Job("w", gpus=4)))
    plan = Plan((Assignment("r", ("b:0", "b:1")),))
    result = Round(FixedPlan(plan), FILL).run(state)
    assert [(type(d.action).__name__, d.action.job_id) for d in result.deferred] == \
        [("Migrate", "r")]
    assert result.actions == [Start("w", ("b:0", "b:1", "b:2", "b:3"))]
    assert Round(FixedPlan(plan)).run(state).actions == []     # no filling: b idles


def test_a_job_the_plan_starts_is_not_started_twice():
    state = ClusterState(0.0, nodes=(Node("a", "v100", 4),), jobs=(Job("w", gpus=1),))
    result = Round(FixedPlan(Plan((Assignment("w", ("a:0",)),))), FILL).run(state)
    assert result.actions == [Start("w", ("a:0",))]


def test_the_poll_wakes_only_for_a_job_that_may_fit():
    one_free = ClusterState(0.0, nodes=(Node("a", "v100", 2),),
                            jobs=(running("r", ("a:0",)), Job("big", gpus=2)))
    assert not may_fill(one_free)
    assert may_fill(one_free.with_jobs((*one_free.jobs, Job("small", gpus=1))))
    assert not may_fill(one_free.with_jobs((running("r", ("a:0", "a:1")), Job("s", gpus=1))))


def test_fillers_honour_type_node_count_and_allowed_nodes():
    state = ClusterState(0.0, nodes=NODES, jobs=(
        running("r", ("a:0", "a:1", "b:0", "b:1")),
        Job("k80only", gpus=2, gpu_types=("k80",)),
        Job("two_nodes", gpus=4, nodes=2),
        Job("on_b", gpus=2, allowed_nodes=("b",)),
        Job("too_big", gpus=8)))
    got = starts(Round(FixedPlan(Plan()), FILL).run(state, preemptive=False).actions)
    assert {g.split(":")[0] for g in got["k80only"]} == {"c"}
    hosts = [g.split(":")[0] for g in got["two_nodes"]]
    assert sorted(hosts) == ["a", "a", "b", "b"]
    assert "on_b" not in got and "too_big" not in got      # b is full; 8 never fit


# ---- property: a valid, maximal fill, checked by an oracle that knows only the rules ----
def _fits(job: Job, free: dict[str, set[str]], kind: dict[str, str]) -> bool:
    names = [n for n in free if (job.allowed_nodes is None or n in job.allowed_nodes)]
    for gpu_type in set(kind.values()):
        if job.gpu_types is not None and gpu_type not in job.gpu_types:
            continue
        of_type = [n for n in names if kind[n] == gpu_type]
        if job.nodes is None:
            if sum(len(free[n]) for n in of_type) >= job.gpus:
                return True
        elif job.gpus % job.nodes == 0 and \
                sum(len(free[n]) >= job.gpus // job.nodes for n in of_type) >= job.nodes:
            return True
    return False


def _valid(job: Job, gpus: tuple[str, ...], kind: dict[str, str]) -> bool:
    hosts = [g.split(":")[0] for g in gpus]
    if len(gpus) != job.gpus or len(set(gpus)) != len(gpus):
        return False
    if job.allowed_nodes is not None and not set(hosts) <= set(job.allowed_nodes):
        return False
    if job.gpu_types is not None and {kind[h] for h in hosts} - set(job.gpu_types):
        return False
    if job.nodes is not None:
        counts = [hosts.count(h) for h in set(hosts)]
        return len(counts) == job.nodes and len(set(counts)) == 1
    return True


@st.composite
def clusters(draw):
    node_list = [Node(f"n{i}", draw(st.sampled_from(["v100", "k80"])), draw(
        st.integers(1, 4))) for i in range(draw(st.integers(1, 4)))]
    gpus = [g for n in node_list for g in n.gpu_ids()]
    held = draw(st.lists(st.sampled_from(gpus), unique=True, max_size=len(gpus))) if gpus \
        else []
    jobs: list[Job] = []
    for i in range(0, len(held), 2):
        jobs.append(running(f"r{i}", tuple(held[i:i + 2])))
    names = [n.name for n in node_list]
    for i in range(draw(st.integers(0, 6))):
        jobs.append(Job(
            f"w{i}", gpus=draw(st.integers(1, 6)),
            nodes=draw(st.one_of(st.none(), st.integers(1, 3))),
            gpu_types=draw(st.one_of(st.none(), st.just(("v100",)), st.just(("k80",)))),
            allowed_nodes=draw(st.one_of(st.none(), st.lists(
                st.sampled_from(names), min_size=1, unique=True).map(tuple)))))
    return ClusterState(0.0, nodes=tuple(node_list), jobs=tuple(jobs))


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_fill_is_valid_and_leaves_no_waiting_job_that_fits(state):
    result = Round(FixedPlan(Plan()), FILL).run(state, preemptive=False)
    kind = {n.name: n.gpu_type for n in state.nodes}
    free = {n.name: set(n.gpu_ids()) for n in state.nodes}
    for job in state.jobs:
        for g in job.gpus_held:
            free[g.split(":")[0]].discard(g)
    jobs = {j.id: j for j in state.jobs}
    for job_id, gpus in starts(result.actions).items():
        assert _valid(jobs[job_id], gpus, kind), (job_id, gpus)
        for g in gpus:
            assert g in free[g.split(":")[0]], f"{g} given twice or busy"
            free[g.split(":")[0]].discard(g)
    started = starts(result.actions)
    for job in state.jobs:
        if job.state is JobState.PENDING and job.id not in started:
            assert not _fits(job, free, kind), f"{job.id} fits on {free} but waits"


# ---- the daemon notices a submission without any hook event -----------------------------
class Switchable(RecordingAdapter):
    """A snapshot the test changes under the daemon, as users' submissions do."""


@contextmanager
def _serving(daemon: Daemon) -> Iterator[float]:
    """The daemon serving in a thread, past its first round; yields a deadline 10 s on."""
    thread = threading.Thread(target=daemon.serve, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while daemon.last is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        yield deadline
    finally:
        daemon.stopping = True
        thread.join(5)


def test_the_poll_runs_a_fill_only_round_when_a_job_arrives(tmp_path: Path):
    idle = ClusterState(0.0, nodes=(Node("a", "v100", 4),))
    adapter = Switchable(idle)
    daemon = Daemon(adapter, Round(FixedPlan(Plan()), FILL), Store(tmp_path / "s.db"),
                    ServiceSettings(round_s=3600, hook_dir=str(tmp_path / "hooks"),
                                    poll_s=0.2, event_min_interval_s=0.0))
    rounds: list[bool] = []
    run_round = daemon.run_round

    def counted(*, preemptive: bool = True) -> int | None:
        rounds.append(preemptive)
        return run_round(preemptive=preemptive)

    daemon.run_round = counted  # type: ignore[method-assign]
    with _serving(daemon) as deadline:
        time.sleep(0.5)                                  # polls see nothing new: no round
        assert adapter.recorded == []
        assert rounds == [True]
        adapter.source = ClusterState(1.0, nodes=idle.nodes, jobs=(Job("new", gpus=2),))
        while not adapter.recorded:
            assert time.monotonic() < deadline, "the submission waited for the timer round"
            time.sleep(0.02)
        assert [(type(a), a.job_id) for a in adapter.recorded] == [(Start, "new")]
        assert daemon.last is not None and daemon.last.preemptive is False
        time.sleep(0.6)     # the snapshot does not change (recording): no round per poll
        assert rounds == [True, False]


@pytest.mark.parametrize("sign", ["stamp", "wake"])
def test_a_submission_or_hook_event_brings_the_poll_and_its_round_forward(tmp_path: Path,
                                                                          sign: str):
    """job_submit.lua truncates <hook_dir>/submitted at each managed submission; a hook
    wakes the daemon's socket. Either brings the poll forward (poll_s is an hour here), and
    a poll that finds room for a new job runs its fill-only round at once, not after the
    30 s coalescing interval (the poll itself decides: no change, no round)."""
    idle = ClusterState(0.0, nodes=(Node("a", "v100", 4),))
    adapter = Switchable(idle)
    hooks = tmp_path / "hooks"
    daemon = Daemon(adapter, Round(FixedPlan(Plan()), FILL), Store(tmp_path / "s.db"),
                    ServiceSettings(round_s=3600, hook_dir=str(hooks), poll_s=3600,
                                    event_min_interval_s=30.0))
    with _serving(daemon) as deadline:
        adapter.source = ClusterState(1.0, nodes=idle.nodes, jobs=(Job("new", gpus=2),))
        time.sleep(1.2)                   # no stamp moved: no poll, no round
        assert adapter.recorded == []
        if sign == "stamp":
            (hooks / "submitted").open("w").close()     # what job_submit.lua does
        else:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as hook:
                hook.sendto(b"x", str(hooks / "wake.sock"))
        while not adapter.recorded:
            assert time.monotonic() < deadline, "the submission waited for the poll"
            time.sleep(0.02)
        assert [(type(a), a.job_id) for a in adapter.recorded] == [(Start, "new")]

"""The plan → actions diff, one pinned rule per test (issue 21's mutants of core/actions.py).

Each cluster is small enough to write the expected action list by hand: what a preemptive
round does, what an event between rounds (non-preemptive: fill idle GPUs only) may do, and the
mode and grace every preemption, move and resize carries.
"""

from __future__ import annotations

from gpufair.core.actions import plan_actions
from gpufair.model import (
    Assignment,
    ClusterState,
    Job,
    JobState,
    Migrate,
    Node,
    Plan,
    Preempt,
    PreemptMode,
    Resize,
    Resume,
    Start,
)

NODES = tuple(Node(f"n{i}", "v100", 4) for i in range(4))


def gpus(node: int, count: int = 4) -> tuple[str, ...]:
    return tuple(f"n{node}:{g}" for g in range(count))


def running(job_id: str, node: int, count: int = 4) -> Job:
    return Job(job_id, gpus=count, state=JobState.RUNNING, start_s=0.0,
               gpus_held=gpus(node, count))


def plan(*pairs: tuple[str, tuple[str, ...]]) -> Plan:
    return Plan(assignments=tuple(Assignment(j, g) for j, g in pairs))


def test_preemptions_moves_and_resizes_carry_the_mode_and_the_grace():
    state = ClusterState(0.0, nodes=NODES, jobs=(running("a", 0), running("b", 1),
                                                 running("c", 2)))
    wanted = plan(("b", gpus(3)), ("c", gpus(2, 2)))
    assert plan_actions(state, wanted, preempt_mode=PreemptMode.SUSPEND, grace_s=30.0) == [
        Preempt("a", PreemptMode.SUSPEND, 30.0), Migrate("b", gpus(3), 30.0),
        Resize("c", gpus(2, 2), 30.0)]


def test_the_defaults_are_requeue_without_grace():
    state = ClusterState(0.0, nodes=NODES, jobs=(running("a", 0),))
    assert plan_actions(state, Plan()) == [Preempt("a", PreemptMode.REQUEUE, 0.0)]


def test_between_rounds_only_idle_gpus_are_filled():
    """Non-preemptive: a running job left out of the plan keeps running, a running job
    planned elsewhere stays where it is, a start onto busy GPUs waits, a start onto idle
    GPUs and a resume onto idle GPUs go ahead."""
    suspended = Job("s", gpus=4, state=JobState.SUSPENDED, start_s=0.0, gpus_held=gpus(3))
    state = ClusterState(0.0, nodes=NODES, jobs=(
        running("a", 0), running("b", 1), suspended, Job("p", gpus=4), Job("q", gpus=2)))
    wanted = plan(("b", gpus(2)), ("p", gpus(0)), ("q", gpus(2, 2)), ("s", gpus(3)))
    # a suspended job's GPUs count as busy, its own included: it waits for a round
    assert plan_actions(state, wanted, preemptive=False) == [Start("q", gpus(2, 2))]


def test_a_resume_between_rounds_needs_idle_gpus():
    suspended = Job("s", gpus=4, state=JobState.SUSPENDED, start_s=0.0, gpus_held=gpus(3))
    state = ClusterState(0.0, nodes=NODES, jobs=(running("a", 0), suspended))
    assert plan_actions(state, plan(("s", gpus(1))), preemptive=False) == \
        [Resume("s", gpus(1))]
    assert plan_actions(state, plan(("s", gpus(0))), preemptive=False) == []


def test_jobs_that_are_not_active_are_ignored():
    done = Job("d", gpus=4, state=JobState.COMPLETED)
    state = ClusterState(0.0, nodes=NODES, jobs=(done, Job("p", gpus=4)))
    assert plan_actions(state, plan(("d", gpus(0)), ("p", gpus(1)))) == [Start("p", gpus(1))]


def test_a_running_job_without_gpus_is_started_not_moved():
    """A running record that holds no GPUs (the resource manager lost track): it is placed
    with a start; a planned running job on exactly its GPUs gets nothing."""
    ghost = Job("g", gpus=4, state=JobState.RUNNING, start_s=0.0)
    state = ClusterState(0.0, nodes=NODES, jobs=(ghost, running("a", 0)))
    assert plan_actions(state, plan(("g", gpus(1)), ("a", gpus(0)))) == [Start("g", gpus(1))]


def test_preemptions_follow_the_jobs_order_and_starts_the_plans():
    state = ClusterState(0.0, nodes=NODES, jobs=(running("b", 1), running("a", 0),
                                                 Job("y", gpus=4), Job("x", gpus=4)))
    assert plan_actions(state, plan(("y", gpus(0)), ("x", gpus(1)))) == [
        Preempt("b"), Preempt("a"), Start("y", gpus(0)), Start("x", gpus(1))]

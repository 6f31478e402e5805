"""The round's guards, one pinned rule per test (issue 21's surviving mutants).

Every case is small enough to check by hand: which actions a guard keeps, which it holds back,
and the reason it gives (the dry run shows it to admins). Expected values are written out, never
computed by the guards' own helpers.
"""

from __future__ import annotations

import pytest
from test_core_mutants import NODES, gpus  # 4 × 4 V100, and a node's GPU ids

from gpufair.core.guards import (
    job_constraints,
    min_runtime,
    preemption_cap,
    rank_priorities,
    unusable_nodes,
)
from gpufair.model import (
    ClusterState,
    Job,
    JobState,
    Migrate,
    Node,
    NodeState,
    Preempt,
    SetPriority,
    Start,
)


def running(job_id: str, held: tuple[str, ...], start: float = 0.0, **kw) -> Job:
    return Job(job_id, gpus=len(held), state=JobState.RUNNING, start_s=start, gpus_held=held,
               **kw)


def held_actions(result) -> list:
    return [d.action for d in result[1]]


# ---- the preemption cap ----------------------------------------------------------------------
def test_the_cap_rounds_a_fractional_share_down():
    """0.3 of 16 GPUs is 4.8: at most 4 GPUs freed, so a 5-GPU victim is over the cap (a
    ceiling would allow 5) and a 4-GPU one is not."""
    five = running("five", (*gpus(0), "n1:0"))
    state = ClusterState(0.0, nodes=NODES, jobs=(five, running("four", gpus(2))))
    kept, held = preemption_cap(0.3)(state, [Preempt("five"), Preempt("four")])
    assert kept == [Preempt("four")]
    assert [d.action for d in held] == [Preempt("five")]
    assert held[0].reason == "over the preemption cap (30% of the GPUs)"


def test_a_zero_cap_preempts_nobody_and_holds_the_starts_that_needed_the_gpus():
    state = ClusterState(0.0, nodes=NODES, jobs=(running("a", gpus(0)),))
    actions = [Preempt("a"), Start("b", gpus(0)), Start("c", gpus(1))]
    kept, held = preemption_cap(0.0)(state, actions)
    assert kept == [Start("c", gpus(1))]
    assert [d.action for d in held] == actions[:2]


def test_the_cap_counts_only_actions_that_take_gpus():
    """A new priority for a running job frees nothing: it neither uses the budget nor is held
    back by it."""
    state = ClusterState(0.0, nodes=NODES, jobs=(running("a", gpus(0)), running("b", gpus(1))))
    actions = [SetPriority("a", 5.0), Preempt("b")]
    assert preemption_cap(0.25)(state, actions) == (actions, [])


# ---- hold_back's cascade ------------------------------------------------------------------
def test_a_move_of_a_job_the_state_does_not_know_is_held_with_the_gpus_it_needed():
    """A young job stays; a move of an unknown job onto its GPUs stays too (it holds nothing
    that could block anyone further)."""
    state = ClusterState(100.0, nodes=NODES, jobs=(running("young", gpus(0), start=90.0),))
    actions = [Preempt("young"), Migrate("ghost", gpus(0)), Start("z", gpus(1))]
    kept, held = min_runtime(60)(state, actions)
    assert kept == [Start("z", gpus(1))]
    assert [d.action for d in held] == actions[:2]
    assert {d.reason for d in held} == {"started less than 60 s ago"}


def test_min_runtime_below_a_second_still_guards():
    """0.5 s is a real bound: a job started 0.2 s ago keeps its GPUs."""
    state = ClusterState(100.2, nodes=NODES, jobs=(running("a", gpus(0), start=100.0),))
    assert held_actions(min_runtime(0.5)(state, [Preempt("a")])) == [Preempt("a")]
    later = ClusterState(100.6, nodes=NODES, jobs=(running("a", gpus(0), start=100.0),))
    assert min_runtime(0.5)(later, [Preempt("a")]) == ([Preempt("a")], [])


# ---- nodes that cannot be used ------------------------------------------------------------
def test_jobs_on_a_drained_node_are_left_alone_with_a_reason():
    nodes = (*NODES[:3], Node("n3", "v100", 4, state=NodeState.DRAIN))
    state = ClusterState(0.0, nodes=nodes, jobs=(running("a", gpus(3)), running("b", gpus(0))))
    actions = [Preempt("a"), Preempt("b"), Start("c", gpus(3)[:1])]
    kept, held = unusable_nodes(state, actions)
    assert kept == [Preempt("b")]
    assert [d.action for d in held] == [Preempt("a"), Start("c", ("n3:0",))]
    assert {d.reason for d in held} == {"its GPUs are on a drained or settling node"}


# ---- what the job asked of the resource manager -------------------------------------------
NODES_MIXED = (*NODES[:3], Node("k0", "k80", 4))


def test_a_start_outside_the_jobs_allowed_nodes_waits():
    pending = Job("p", gpus=4, allowed_nodes=("n1",))
    state = ClusterState(0.0, nodes=NODES, jobs=(pending,))
    kept, held = job_constraints(state, [Start("p", gpus(0))])
    assert kept == [] and [d.action for d in held] == [Start("p", gpus(0))]
    assert held[0].reason == ("the planned placement breaks what the job asked of the "
                              "resource manager")
    assert job_constraints(state, [Start("p", gpus(1))]) == ([Start("p", gpus(1))], [])


def test_a_start_on_another_gpu_type_than_asked_waits():
    pending = Job("p", gpus=2, gpu_types=("k80",))
    state = ClusterState(0.0, nodes=NODES_MIXED, jobs=(pending,))
    assert held_actions(job_constraints(state, [Start("p", ("n0:0", "n0:1"))])) == \
        [Start("p", ("n0:0", "n0:1"))]
    assert job_constraints(state, [Start("p", ("k0:0", "k0:1"))]) == \
        ([Start("p", ("k0:0", "k0:1"))], [])


def test_a_move_that_breaks_the_node_count_keeps_the_job_and_blocks_its_gpus():
    """r asked for 1 node; moving it across two would split it, so it stays on n0, and the
    start that wanted n0 waits too. Actions without GPUs and unknown jobs pass."""
    r = running("r", gpus(0), nodes=1)
    state = ClusterState(0.0, nodes=NODES, jobs=(r,))
    split = ("n1:0", "n1:1", "n2:0", "n2:1")
    actions = [Migrate("r", split), Start("z", gpus(0)), SetPriority("r", 2.0),
               Start("ghost", gpus(3))]
    kept, held = job_constraints(state, actions)
    assert kept == [Start("ghost", gpus(3))]
    assert [d.action for d in held] == actions[:3]
    assert job_constraints(state, [Migrate("r", gpus(1))]) == ([Migrate("r", gpus(1))], [])


# ---- priorities ---------------------------------------------------------------------------
def test_rank_ties_between_words_go_to_the_alphabetically_first():
    assert rank_priorities({"b": 1.0, "a": 1.0, "c": 3.0}) == {
        "c": 1_000_000, "a": 999_999, "b": 999_998}


@pytest.mark.parametrize("share", [0.26, 0.49])
def test_cap_shares_between_whole_gpus(share):
    """0.26·16 = 4.16 and 0.49·16 = 7.84: 4 and 7 GPUs. Two 4-GPU victims: one fits at 0.26,
    and still only one at 0.49 (8 > 7)."""
    state = ClusterState(0.0, nodes=NODES, jobs=(running("a", gpus(0)), running("b", gpus(1))))
    kept, held = preemption_cap(share)(state, [Preempt("a"), Preempt("b")])
    assert kept == [Preempt("a")] and held_actions((kept, held)) == [Preempt("b")]

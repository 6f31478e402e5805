"""``hold_back``'s cascade against the fixed point it replaced (issue 30).

The oracle is the loop as it stood: rebuild the set of blocked GPUs, rescan every action,
repeat until nothing changes (one pass per link of a chain of moves). The new code walks the
GPUs once; on random clusters, with chains of moves and preemptions onto each other's GPUs,
moves of jobs the state does not know, starts and priorities, both must keep and hold back the
same actions in the same order.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.core.guards import Deferred, hold_back, takes_gpus
from gpufair.model import ClusterState, Job, JobState, Migrate, Node, Preempt, SetPriority, Start

NODES = tuple(Node(f"n{i}", "v100", 4) for i in range(3))
GPUS = [g for n in NODES for g in n.gpu_ids()]


def old_hold_back(state, actions, jobs, reason):
    if not jobs:
        return list(actions), []
    held = {j.id: frozenset(j.gpus_held) for j in state.jobs}
    staying = dict(jobs)
    changed = True
    while changed:
        changed = False
        busy = frozenset().union(*staying.values()) if staying else frozenset()
        for action in actions:
            if (action.job_id not in staying and takes_gpus(action)
                    and busy.intersection(getattr(action, "gpu_ids", ()))):
                staying[action.job_id] = held.get(action.job_id, frozenset())
                changed = True
    busy = frozenset().union(*staying.values()) if staying else frozenset()
    kept, deferred = [], []
    for action in actions:
        if action.job_id in staying or busy.intersection(getattr(action, "gpu_ids", ())):
            deferred.append(Deferred(action, reason))
        else:
            kept.append(action)
    # then (the guard gap CI found): a kept preemption of a known job whose GPUs only
    # held-back actions wanted is held back too
    wanted_back = {g for d in deferred for g in getattr(d.action, "gpu_ids", ())}
    wanted_kept = {g for a in kept for g in getattr(a, "gpu_ids", ())}
    pointless = [a for a in kept if isinstance(a, Preempt) and held.get(a.job_id)
                 and held[a.job_id] & wanted_back and not held[a.job_id] & wanted_kept]
    if pointless:
        kept = [a for a in kept if not any(a is p for p in pointless)]
        order = {id(a): n for n, a in enumerate(actions)}
        why = f"it only made room for actions held back ({reason})"
        deferred = sorted([*deferred, *(Deferred(a, why) for a in pointless)],
                          key=lambda d: order[id(d.action)])
    return kept, deferred


@st.composite
def rounds(draw):
    gpu_sets = st.lists(st.sampled_from(GPUS), min_size=1, max_size=4, unique=True)
    jobs = [Job(f"r{k}", gpus=len(gs), state=JobState.RUNNING, gpus_held=tuple(gs),
                start_s=0.0)
            for k, gs in enumerate(draw(st.lists(gpu_sets, max_size=8)))]
    ids = [j.id for j in jobs] + ["ghost", "p0", "p1"]
    kinds = st.sampled_from(["preempt", "migrate", "start", "priority"])
    actions = []
    for kind, job_id, gs in draw(st.lists(st.tuples(kinds, st.sampled_from(ids), gpu_sets),
                                          max_size=14)):
        actions.append(Preempt(job_id) if kind == "preempt" else
                       Migrate(job_id, tuple(gs)) if kind == "migrate" else
                       Start(job_id, tuple(gs)) if kind == "start" else
                       SetPriority(job_id, 1.0))
    held = draw(st.lists(st.sampled_from(ids), unique=True, max_size=3))
    by_id = {j.id: j for j in jobs}
    staying = {i: frozenset(by_id[i].gpus_held) if i in by_id else frozenset() for i in held}
    return ClusterState(0.0, nodes=NODES, jobs=tuple(jobs)), actions, staying


@settings(max_examples=400, deadline=None)
@given(rounds())
def test_the_walk_holds_back_what_the_fixed_point_held_back(case):
    state, actions, staying = case
    assert hold_back(state, actions, staying, "why") == \
        old_hold_back(state, actions, staying, "why")


def test_a_chain_of_moves_is_held_back_link_by_link():
    """a stays (young); b moves onto a's GPUs, c onto b's, d onto c's: all stay, in order;
    a start on free GPUs goes ahead."""
    g = [n.gpu_ids() for n in NODES]
    jobs = tuple(Job(name, gpus=2, state=JobState.RUNNING, gpus_held=gpus, start_s=0.0)
                 for name, gpus in (("a", g[0][:2]), ("b", g[0][2:]), ("c", g[1][:2]),
                                    ("d", g[1][2:])))
    state = ClusterState(0.0, nodes=NODES, jobs=jobs)
    actions = [Migrate("d", g[1][:2]), Migrate("c", g[0][2:]), Migrate("b", g[0][:2]),
               Start("z", g[2][:2])]
    kept, deferred = hold_back(state, actions, {"a": frozenset(g[0][:2])}, "young")
    assert kept == [Start("z", g[2][:2])]
    assert [d.action.job_id for d in deferred] == ["d", "c", "b"]


def test_a_preemption_that_only_made_room_for_a_held_back_move_is_held_back_too():
    """The guard gap CI found under load: a round moved w1 (released onto a settling node)
    onto w2's GPUs and preempted w2 to make room; the guard held w1's move back but not w2's
    preemption, so w2 stopped for nothing (restarted by the next round). A preemption for
    the plan's own sake (nobody wants its GPUs), or one whose GPUs a kept start wants,
    goes ahead."""
    g = [n.gpu_ids() for n in NODES]
    jobs = (Job("w1", gpus=2, state=JobState.RUNNING, gpus_held=g[0][:2], start_s=0.0),
            Job("w2", gpus=2, state=JobState.RUNNING, gpus_held=g[1][:2], start_s=0.0),
            Job("x", gpus=2, state=JobState.RUNNING, gpus_held=g[2][:2], start_s=0.0),
            Job("y", gpus=2, state=JobState.RUNNING, gpus_held=g[2][2:], start_s=0.0))
    state = ClusterState(0.0, nodes=NODES, jobs=jobs)
    actions = [Preempt("w2"), Migrate("w1", g[1][:2]), Preempt("x"), Preempt("y"),
               Start("z", g[2][2:])]
    kept, deferred = hold_back(state, actions, {"w1": frozenset(g[0][:2])}, "settling")
    assert kept == [Preempt("x"), Preempt("y"), Start("z", g[2][2:])]
    assert [(d.action.job_id, d.reason) for d in deferred] == [
        ("w2", "it only made room for actions held back (settling)"), ("w1", "settling")]

"""``place`` against a slow, plain restatement of its rules, on random clusters and picks.

The rules, as the module docstring and the artifacts state them: largest gangs first (stable),
a job keeps the GPUs it holds when it holds exactly its gang, all on usable nodes of the type
it was picked for and none taken already; every other job then gets, on its type, one node
with room for its whole gang (the first in node order) or else free GPUs node by node in
order, or nothing when the type lacks room. The answer lists the placed jobs in pick order.
The oracle below shares no code with ``gpufair.policy.placement``: it lists free GPUs from
scratch for every decision, which the implementation avoids (a cursor per type, a taken set,
a stream of free GPUs for 1-GPU gangs).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.model import ClusterState, Job, JobState, Node, Progress, ThroughputProfile
from gpufair.model.records import NodeState
from gpufair.policy.placement import place


def oracle(nodes: list[Node], picks: list[tuple[Job, str]]) -> dict[str, tuple[str, ...]]:
    usable = [n for n in nodes if n.state is NodeState.UP]
    node_of = {g: n for n in usable for g in n.gpu_ids()}
    taken: list[str] = []
    chosen: dict[str, tuple[str, ...]] = {}
    order = sorted(picks, key=lambda p: -p[0].gpus)
    later = []
    for job, gpu_type in order:
        held = job.gpus_held
        fine = len(held) == job.gpus and all(
            g in node_of and node_of[g].gpu_type == gpu_type and g not in taken
            and held.count(g) == 1 for g in held)
        if fine:
            taken.extend(held)
            chosen[job.id] = held
        else:
            later.append((job, gpu_type))
    for job, gpu_type in later:
        typed = [n for n in usable if n.gpu_type == gpu_type]
        free = {n.name: [g for g in n.gpu_ids() if g not in taken] for n in typed}
        whole = [n.name for n in typed if len(free[n.name]) >= job.gpus]
        if whole:
            gpus = free[whole[0]][: job.gpus]
        else:
            gpus = [g for n in typed for g in free[n.name]][: job.gpus]
        if len(gpus) == job.gpus:
            taken.extend(gpus)
            chosen[job.id] = tuple(gpus)
    return {job.id: chosen[job.id] for job, _ in picks if job.id in chosen}


@st.composite
def scenarios(draw):
    nodes = []
    for t in draw(st.lists(st.sampled_from(["v100", "k80"]), min_size=1, max_size=2,
                           unique=True)):
        for i in range(draw(st.integers(1, 5))):
            nodes.append(Node(f"{t}-{i}", t, draw(st.integers(1, 4)),
                              state=draw(st.sampled_from([NodeState.UP] * 4
                                                         + [NodeState.DOWN]))))
    all_gpus = [g for n in nodes for g in n.gpu_ids()] + ["gone-0:0"]
    types = sorted({n.gpu_type for n in nodes})
    picks = []
    for k in range(draw(st.integers(0, 12))):
        gang = draw(st.integers(1, 5))
        held = tuple(draw(st.lists(st.sampled_from(all_gpus), max_size=gang + 1)))
        job = Job(id=f"j{k}", gpus=gang, progress=Progress(0.0, 100.0),
                  throughput=ThroughputProfile({(t, gang): 1.0 for t in types}),
                  state=JobState.RUNNING if held else JobState.PENDING, gpus_held=held)
        picks.append((job, draw(st.sampled_from(types))))
    return nodes, picks


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_place_follows_its_rules(scenario):
    nodes, picks = scenario
    state = ClusterState(time_s=0.0, nodes=tuple(nodes), jobs=tuple(j for j, _ in picks))
    got = {a.job_id: a.gpu_ids for a in place(state, picks)}
    assert got == oracle(nodes, picks)
    assert list(got) == [j.id for j, _ in picks if j.id in got]


def test_one_gpu_gangs_fill_free_gpus_in_node_order():
    """After the larger gangs, 1-GPU jobs take the remaining GPUs node by node."""
    nodes = [Node("v100-0", "v100", 2), Node("v100-1", "v100", 3)]
    pair = Job(id="pair", gpus=2, throughput=ThroughputProfile({("v100", 2): 1.0}))
    held = Job(id="held", gpus=1, state=JobState.RUNNING, gpus_held=("v100-0:1",),
               throughput=ThroughputProfile({("v100", 1): 1.0}))
    singles = [Job(id=f"s{k}", gpus=1, throughput=ThroughputProfile({("v100", 1): 1.0}))
               for k in range(3)]
    picks = [(j, "v100") for j in [*singles, held, pair]]
    state = ClusterState(time_s=0.0, nodes=tuple(nodes), jobs=tuple(j for j, _ in picks))
    got = {a.job_id: a.gpu_ids for a in place(state, picks)}
    assert got == {"s0": ("v100-0:0",), "s1": ("v100-1:2",), "held": ("v100-0:1",),
                   "pair": ("v100-1:0", "v100-1:1")}


def test_a_constrained_job_sees_what_one_gpu_gangs_took():
    """A job pinned to a node is placed after 1-GPU jobs before it in the walk: it must not
    be given a GPU one of them already has."""
    nodes = [Node("v100-0", "v100", 2), Node("v100-1", "v100", 1)]
    rate = ThroughputProfile({("v100", 1): 1.0})
    single = Job(id="single", gpus=1, throughput=rate)
    pinned = Job(id="pinned", gpus=1, throughput=rate, allowed_nodes=("v100-0",))
    picks = [(single, "v100"), (pinned, "v100")]
    state = ClusterState(time_s=0.0, nodes=tuple(nodes), jobs=(single, pinned))
    got = {a.job_id: a.gpu_ids for a in place(state, picks)}
    assert got == {"single": ("v100-0:0",), "pinned": ("v100-0:1",)}


def test_a_held_gang_is_judged_on_each_states_nodes_not_the_first_seen():
    """``place`` remembers a held tuple's nodes per node layout (the same tuple recurs at
    every decision). Between rounds a node goes down, then one of its GPUs is taken by what
    gpufair does not schedule (its node stays usable), then all is back: the same held
    tuple is kept, moved, moved, kept, never judged on a layout it was seen on before."""
    rate = ThroughputProfile({("v100", 2): 1.0})
    gang = Job(id="gang", gpus=2, state=JobState.RUNNING, gpus_held=("v100-1:0", "v100-1:1"),
               throughput=rate)
    up = (Node("v100-0", "v100", 2), Node("v100-1", "v100", 2))
    down = (up[0], Node("v100-1", "v100", 2, state=NodeState.DOWN))
    one_taken = (up[0], Node("v100-1", "v100", 2, unavailable=(1,)))
    kept = [{a.job_id: a.gpu_ids for a in place(ClusterState(
        time_s=t, nodes=nodes, jobs=(gang,)), [(gang, "v100")])}["gang"]
        for t, nodes in ((0.0, up), (1.0, down), (2.0, one_taken), (3.0, tuple(up)))]
    moved = ("v100-0:0", "v100-0:1")
    assert kept == [gang.gpus_held, moved, moved, gang.gpus_held]

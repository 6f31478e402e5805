"""CPUs and memory beside GPUs (issue 29, item 2): what Slurm shows a job asks and a node has
free, and a placement that puts no job where the rest of it cannot fit.

The Slurm documents are the real loopback samples described in tests/test_slurm_eligibility.py
(4 nodes x 32 CPUs x 128,000 MB, CR_Core_Memory, DefMemPerCPU=4000).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from gpufair.adapters.slurm.adapter import stranded
from gpufair.adapters.slurm.translate import translate
from gpufair.core.fill import fill_idle
from gpufair.model import (
    ClusterState,
    GpuType,
    HostRequest,
    Job,
    JobState,
    Node,
    NodeState,
    Plan,
    Start,
    Tenant,
    ThroughputProfile,
    node_of,
)
from gpufair.model.host_room import HostRoom
from gpufair.model.snapshot import state_from_dict, state_to_dict
from gpufair.policy.placement import constrained_layout, place
from gpufair.policy.registry import create_policy

DATA = Path(__file__).parent / "data" / "slurm"
READ = 1795855721.0
MB = 128_000


def _docs() -> tuple[dict, dict]:
    return (json.loads((DATA / "squeue_eligibility.json").read_text()),
            json.loads((DATA / "sinfo_eligibility.json").read_text()))


# ---- translation ------------------------------------------------------------------------------

def test_each_job_s_request_is_what_slurm_itself_allocates():
    """The request read from a job's fields and resolved on its GPUs is the CPUs and memory
    Slurm allocated to it (``tres_alloc_str``): ``squeue_allocated.json`` is the same loopback
    cluster after jobs 14, 15, 16 and 19 were released (and job 18 started once job 12 ended).
    That covers --cpus-per-gpu with --mem-per-gpu, DefMemPerCPU, -n with --mem-per-cpu,
    --ntasks-per-node with -c, --mem, and --exclusive (the whole node)."""
    jobs = json.loads((DATA / "squeue_allocated.json").read_text())
    nodes = json.loads((DATA / "sinfo_allocated.json").read_text())
    view = translate(jobs, nodes, now=READ + 400)
    raw = {str(j["job_id"]): j for j in jobs["jobs"]}
    known = {n.name: n for n in view.state.nodes}
    running = [j for j in view.state.jobs if j.state is JobState.RUNNING]
    assert sorted(j.id for j in running) == ["14", "15", "16", "18", "19"]
    for job in running:
        units = {"M": 1, "G": 1024}
        alloc = {k: int(v) * units.get(u, 1) for k, v, u in
                 re.findall(r"(cpu|mem)=(\d+)([MG]?)", raw[job.id]["tres_alloc_str"])}
        node = known[node_of(job.gpus_held[0])]
        assert job.host is not None
        assert job.host.on_node(len(job.gpus_held), node) == (alloc["cpu"], alloc["mem"]), job.id
    assert known["gpu-v100-2"].cpus == 32 and known["gpu-v100-2"].memory_mb == MB
    # every allocation is a job of the state's: nothing is held by others
    assert all((n.cpus_unavailable, n.memory_unavailable_mb) == (0, 0) for n in known.values())
    jobs, nodes = _docs()
    asks = {j.id: j.host for j in translate(jobs, nodes, now=READ).state.jobs}
    assert asks["14"] == HostRequest(cpus_per_node=1, cpus_per_gpu=3, memory_per_gpu_mb=5000,
                                     memory_per_cpu_mb=4000)
    assert asks["12"].memory_per_node_mb == 70000 and asks["12"].cpus_per_node == 4
    assert asks["15"].exclusive


def test_what_others_hold_is_unavailable_and_what_the_state_s_jobs_hold_is_not():
    jobs, nodes = _docs()
    v100 = {n.name: n for n in translate(jobs, nodes, now=READ).state.nodes}["gpu-v100-1"]
    assert (v100.cpus_unavailable, v100.memory_unavailable_mb) == (0, 0)   # job 12 is ours
    others = copy.deepcopy(jobs)
    others["jobs"] = [j for j in others["jobs"] if j["job_id"] != 12]    # not in the state
    v100 = {n.name: n for n in translate(others, nodes, now=READ).state.nodes}["gpu-v100-1"]
    assert (v100.cpus_unavailable, v100.memory_unavailable_mb) == (4, 70000)


@pytest.mark.parametrize(("field", "value"), [("cpus_per_tres", "gres:gpu:lots"),
                                              ("memory_per_node", -5), ("memory_per_cpu", "x")])
def test_an_odd_request_field_is_a_malformed_record(field, value):
    jobs, nodes = _docs()
    next(j for j in jobs["jobs"] if j["job_id"] == 14)[field] = value
    view = translate(jobs, nodes, now=READ)
    assert any("job 14" in p and field in p for p in view.problems)
    assert "14" not in {j.id for j in view.state.jobs}


def test_a_released_job_whose_memory_does_not_fit_where_it_is_pinned_is_stranded():
    """Job 18 (--mem=70000) was released pinned to gpu-v100-1, where job 12 holds 70,000 of
    its 128,000 MB: Slurm leaves it waiting (Reason=Resources) though a GPU is free there."""
    jobs, nodes = _docs()
    assert next(j for j in jobs["jobs"] if j["job_id"] == 18)["state_reason"] == "Resources"
    assert stranded(translate(jobs, nodes, now=READ)) == ["18"]


# ---- placement ----------------------------------------------------------------------------------

def _node(name: str, memory: int = MB, cpus: int = 32, **extra) -> Node:
    return Node(name, "v100", 4, cpus=cpus, memory_mb=memory, **extra)


#: the same rate on every type and count: the policy's choices are placement's alone
RATES = ThroughputProfile({(t, n): 1.0 for t in ("v100", "k80") for n in range(1, 9)})


def _job(job_id: str, memory: int, gpus: int = 1, cpus: int = 1, **extra) -> Job:
    return Job(job_id, gpus=gpus, arrival_s=float(job_id.lstrip("j")), throughput=RATES,
               host=HostRequest(cpus_per_node=cpus, memory_per_node_mb=memory), **extra)


def _state(nodes, jobs) -> ClusterState:
    types = sorted({n.gpu_type for n in nodes})
    return ClusterState(0.0, tuple(nodes), tuple(jobs), (Tenant("default"),),
                        tuple(GpuType(t) for t in types))


def _nodes_of(plan_or_assignments) -> dict[str, set[str]]:
    return {a.job_id: {node_of(g) for g in a.gpu_ids} for a in plan_or_assignments}


def test_four_jobs_that_each_need_more_than_half_a_node_s_memory_go_to_four_nodes():
    state = _state([_node(f"n{i}") for i in range(4)], [_job(f"j{i}", 70000) for i in range(4)])
    plan = create_policy("fifo").schedule(state, 0.0)
    placed = _nodes_of(plan.assignments)
    assert len(placed) == 4 and len(set().union(*placed.values())) == 4, placed


def test_an_exact_fit_of_memory_and_cpus_is_placed_one_unit_more_is_not():
    node = _node("n0", memory=58000, cpus=8)
    for memory, cpus, fits in ((58000, 8, True), (58001, 8, False), (58000, 9, False)):
        job = _job("j1", memory, cpus=cpus)
        assert bool(place(_state([node], [job]), [(job, "v100")])) is fits, (memory, cpus)


def test_a_node_with_no_free_memory_is_passed_over_whatever_its_gpus():
    full = _node("n0", memory_unavailable_mb=MB)             # another partition's job
    state = _state([full, _node("n1")], [_job("j1", 1000, gpus=2)])
    assert _nodes_of(place(state, [(state.jobs[0], "v100")])) == {"j1": {"n1"}}
    # not even one GPU there: a gang spread over nodes skips it too
    spread = replace(state.jobs[0], gpus=6)
    state = _state([full, _node("n1"), _node("n2")], [spread])
    assert _nodes_of(place(state, [(spread, "v100")])) == {"j1": {"n1", "n2"}}


def test_a_running_job_keeps_its_room_and_a_newcomer_goes_elsewhere():
    running = _job("j1", 70000, state=JobState.RUNNING, gpus_held=("n0:0",))
    waiting = _job("j2", 70000)
    state = _state([_node("n0"), _node("n1")], [running, waiting])
    placed = _nodes_of(place(state, [(running, "v100"), (waiting, "v100")]))
    assert placed == {"j1": {"n0"}, "j2": {"n1"}}
    # once the running one is preempted (not picked), its room is the newcomer's
    assert _nodes_of(place(state, [(waiting, "v100")])) == {"j2": {"n0"}}


def test_a_change_of_node_memory_between_rounds_is_seen_at_the_next_round():
    policy = create_policy("fifo")
    jobs = [_job("j1", 70000)]
    first = policy.schedule(_state([_node("n0"), _node("n1")], jobs), 0.0)
    assert _nodes_of(first.assignments) == {"j1": {"n0"}}
    smaller = policy.schedule(_state([_node("n0", memory=60000), _node("n1")], jobs), 6.0)
    assert _nodes_of(smaller.assignments) == {"j1": {"n1"}}


def test_a_gpu_type_with_no_gpus_and_an_exclusive_job():
    drained = Node("k0", "k80", 4, state=NodeState.DRAIN, cpus=32, memory_mb=MB)
    small = _job("j1", 4000)
    exclusive = Job("j2", arrival_s=2.0, throughput=RATES,
                    host=HostRequest(cpus_per_node=1, exclusive=True))
    state = _state([drained, _node("n0"), _node("n1")], [small, exclusive])
    plan = create_policy("fifo").schedule(state, 0.0)
    placed = _nodes_of(plan.assignments)
    assert placed["j1"] != placed["j2"], placed       # the exclusive one has a node to itself
    assert all(n.startswith("n") for p in placed.values() for n in p)


def test_without_node_cpus_or_memory_placement_is_exactly_as_before():
    """A simulated cluster tells no CPUs or memory: requests are not even looked at."""
    nodes = [Node(f"n{i}", "v100", 4) for i in range(2)]
    jobs = [_job(f"j{i}", 10 ** 9, gpus=3) for i in range(2)]
    assert HostRoom.of(_state(nodes, jobs)) is None
    bare = [replace(j, host=None) for j in jobs]
    assert place(_state(nodes, jobs), [(j, "v100") for j in jobs]) == \
        place(_state(nodes, bare), [(j, "v100") for j in bare])


def test_a_multi_node_gang_needs_room_on_each_of_its_nodes():
    job = _job("j1", 70000, gpus=4, nodes=2)
    names = ["n0", "n1", "n2"]
    free = {n: [f"{n}:{i}" for i in range(4)] for n in names}
    room = HostRoom([_node("n0"), _node("n1", memory=50000), _node("n2")])
    assert {node_of(g) for g in constrained_layout(job, names, free, room)} == {"n0", "n2"}
    room.take(job, ("n0:0", "n0:1"))
    assert constrained_layout(job, names, free, room) == ()


def test_fill_puts_no_job_where_its_memory_does_not_fit():
    running = _job("j1", 70000, state=JobState.RUNNING, gpus_held=("n0:0",))
    state = _state([_node("n0"), _node("n1", memory=10000)], [running, _job("j2", 70000)])
    assert fill_idle(state, Plan(()), []) == []
    roomy = _state([_node("n0"), _node("n1")], [running, _job("j2", 70000)])
    [start] = fill_idle(roomy, Plan(()), [])
    assert isinstance(start, Start) and {node_of(g) for g in start.gpu_ids} == {"n1"}


def test_snapshots_keep_requests_and_node_room():
    state = _state([_node("n0", cpus_unavailable=3, memory_unavailable_mb=500)],
                   [_job("j1", 7000, cpus=2), Job("j2")])
    assert state_from_dict(state_to_dict(state)) == state
    old = state_to_dict(_state([Node("n0", "v100", 4)], [Job("j1")]))
    for record in old["nodes"]:     # a snapshot saved before these fields still loads
        for key in ("cpus", "memory_mb", "cpus_unavailable", "memory_unavailable_mb"):
            record.pop(key)
    old["jobs"][0].pop("host")
    assert state_from_dict(old).nodes[0].cpus is None


def test_the_round_sends_no_start_where_cpus_or_memory_do_not_fit():
    """Whatever a policy's own placement does (this one pins both jobs to one node), the
    round holds back the start that node cannot hold beside the other, and says why."""
    from fixed_policy import FixedPlan

    from gpufair.core.round import Round, RoundRules
    from gpufair.model import Assignment
    state = _state([_node("n0"), _node("n1")], [_job("j1", 70000), _job("j2", 70000)])
    plan = Plan((Assignment("j1", ("n0:0",)), Assignment("j2", ("n0:1",))))
    result = Round(FixedPlan(plan), RoundRules()).run(state)
    assert [(a.job_id, a.gpu_ids) for a in result.actions] == [("j1", ("n0:0",))]
    assert [(d.action.job_id, d.reason) for d in result.deferred] == [
        ("j2", "too few free CPUs or too little memory beside the planned GPUs")]
    # a job preempted in the same round frees its room for the start
    running = _job("j3", 70000, state=JobState.RUNNING, gpus_held=("n0:2",))
    state = _state([_node("n0")], [running, _job("j1", 70000)])
    result = Round(FixedPlan(Plan((Assignment("j1", ("n0:0",)),))), RoundRules()).run(state)
    assert {type(a).__name__ for a in result.actions} == {"Preempt", "Start"}


@pytest.mark.parametrize(("tres", "memory"), [("cpu=1,mem=125G,node=1,billing=1", 128000),
                                              ("cpu=2,mem=4000M,node=1", 4000),
                                              ("cpu=2,node=1", 0)])
def test_without_any_memory_field_the_tres_request_counts(tres, memory):
    """A site without DefMemPerCPU: a job that gave no memory shows no memory field, and
    Slurm counts what its TRES request says (with CR_*_Memory and no default, the node's)."""
    jobs, nodes = _docs()
    record = next(j for j in jobs["jobs"] if j["job_id"] == 9)
    record.update(memory_per_cpu=None, memory_per_node=None, tres_req_str=tres, eligible_time=0)
    [job] = [j for j in translate(jobs, nodes, now=READ).state.jobs if j.id == "9"]
    assert job.host is not None and job.host.memory_per_node_mb == memory

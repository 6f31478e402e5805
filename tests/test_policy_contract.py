"""The contract every policy keeps, checked for every installed policy (future ones included).

Each policy from :func:`available_policies` is run on small hand-built snapshots (no nodes,
no jobs, mixed GPU types with partial throughput tables, multi-node gangs next to running and
suspended jobs, a job larger than the cluster, weighted tenants) and its plan is checked
independently of gpufair's own placement code: GPU ids exist on usable nodes and are used
once, a gang gets exactly its size on one GPU type it has a positive rate for at that size,
only active jobs run, and the plan fits the cluster. Plans must be deterministic for a seed,
and options must be validated (unknown keys and wrong types raise an InputError naming the
key).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import replace

import pytest

from gpufair.errors import InputError
from gpufair.model import (
    Adaptation,
    Assignment,
    ClusterState,
    GpuType,
    Job,
    JobState,
    Node,
    NodeState,
    Plan,
    Progress,
    Reason,
    Tenant,
    ThroughputProfile,
)
from gpufair.policy.base import Policy, PolicyConfig
from gpufair.policy.registry import available_policies, create_policy

POLICIES = available_policies()
ROUND_S = 120.0
SAMPLES_PER_EPOCH = 6400
ACTIVE = frozenset({JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED})


# -- builders ---------------------------------------------------------------------------------
def make_job(jid: str, gpus: int = 1, rates: Mapping[str, float] | None = None, *,
             other_sizes: Mapping[tuple[str, int], float] | None = None,
             tenant: str = "default", weight: float = 1.0, app: str | None = None,
             model: str = "resnet18", arrival: float = 0.0, attained: float = 0.0,
             held: tuple[str, ...] = (), state: JobState | None = None,
             epochs_total: int = 10, epochs_done: int = 0, batch: int = 64,
             max_batch: int | None = None, adaptation: Adaptation = Adaptation.STATIC,
             min_gpus: int | None = None, max_gpus: int | None = None) -> Job:
    """A job with everything every policy reads: progress in iterations and epochs, whole-job
    rates for its gang size per GPU type, batch sizes and their rates (Shockwave's regimes).

    ``rates`` maps GPU type → iterations/s at ``gpus`` GPUs; ``other_sizes`` adds rates keyed
    (type, count) for other gang sizes.
    """
    per_epoch = SAMPLES_PER_EPOCH // batch
    table = {(t, gpus): r for t, r in (rates or {}).items()}
    table.update(other_sizes or {})
    best = max(table.values(), default=1.0) or 1.0
    ladder = [batch]
    while max_batch is not None and ladder[-1] * 2 <= max_batch:
        ladder.append(ladder[-1] * 2)
    batch_rates = tuple((b, best * batch / b * 1.5 if b != batch else best) for b in ladder)
    if state is None:
        state = JobState.RUNNING if held else JobState.PENDING
    return Job(id=jid, tenant=tenant, app=app, gpus=gpus, min_gpus=min_gpus, max_gpus=max_gpus,
               state=state, arrival_s=arrival,
               start_s=arrival if held or attained else None,
               finish_s=arrival + attained if state in (JobState.COMPLETED, JobState.FAILED,
                                                         JobState.CANCELLED) else None,
               progress=Progress(float(epochs_done * per_epoch), float(epochs_total * per_epoch),
                                 epochs_done, epochs_total),
               throughput=ThroughputProfile(table), model=model, batch_size=batch,
               initial_batch_size=batch, adaptation=adaptation,
               samples_per_epoch=SAMPLES_PER_EPOCH, max_batch_size=max_batch,
               batch_rates=batch_rates, weight=weight, attained_s=attained,
               gpus_held=tuple(held))


def mixed_nodes() -> tuple[Node, ...]:
    """Two 4-GPU V100 servers in rack r0, two 4-GPU K80 servers in rack r1: 16 GPUs."""
    return (Node("v100-0", "v100", 4, rack="r0"), Node("v100-1", "v100", 4, rack="r0"),
            Node("k80-0", "k80", 4, rack="r1"), Node("k80-1", "k80", 4, rack="r1"))


GPU_TYPES = (GpuType("v100", 32.0), GpuType("k80", 12.0))


def snap_empty_cluster() -> ClusterState:
    jobs = (make_job("a", 1, {"v100": 4.0}), make_job("b", 2, {"k80": 1.5}, arrival=10.0),
            make_job("c", 4, {"v100": 12.0, "k80": 5.0}, arrival=20.0))
    return ClusterState(time_s=0.0, nodes=(), jobs=jobs)


def snap_empty_queue() -> ClusterState:
    return ClusterState(time_s=0.0, nodes=mixed_nodes(), jobs=(), gpu_types=GPU_TYPES)


def snap_mixed_types() -> ClusterState:
    """Jobs that can use only some GPU types, plus a drained and a down server (unusable)."""
    nodes = (*mixed_nodes(), Node("v100-d", "v100", 4, rack="r0", state=NodeState.DRAIN),
             Node("k80-x", "k80", 2, rack="r1", state=NodeState.DOWN))
    jobs = (
        make_job("v1", 1, {"v100": 4.0}, arrival=0.0),
        make_job("v2", 2, {"v100": 7.0}, arrival=5.0),
        make_job("k1", 1, {"k80": 1.5}, arrival=10.0),
        make_job("both4", 4, {"v100": 12.0, "k80": 5.0}, arrival=15.0),
        make_job("zero_k80", 2, {"v100": 6.0, "k80": 0.0}, arrival=20.0),
        make_job("p100_only", 1, {"p100": 3.0}, arrival=25.0),  # a type the cluster lacks
        # rates known for one GPU only, but it asks for two: nothing is known at its size
        make_job("wrong_size", 2, other_sizes={("v100", 1): 4.0, ("k80", 1): 1.0}, arrival=30.0),
        # running on a server that has been drained since: it must move or stop
        make_job("stranded", 1, {"v100": 4.0, "k80": 1.2}, held=("v100-d:0",), attained=240.0,
                 arrival=35.0),
        make_job("k2_run", 2, {"k80": 2.5}, held=("k80-0:0", "k80-0:1"), attained=120.0,
                 arrival=40.0),
        make_job("accordion", 1, {"v100": 5.0, "k80": 2.0}, batch=32, max_batch=128,
                 adaptation=Adaptation.ACCORDION, arrival=45.0, epochs_done=3),
        make_job("gns", 2, {"v100": 8.0}, batch=32, max_batch=128, adaptation=Adaptation.GNS,
                 arrival=50.0, epochs_done=1),
    )
    return ClusterState(time_s=600.0, nodes=nodes, jobs=jobs, gpu_types=GPU_TYPES)


def snap_gangs() -> ClusterState:
    """2-, 4- and 8-GPU gangs (8 > any server: span servers or wait), some running."""
    jobs = (
        make_job("g8_v100", 8, {"v100": 20.0}, arrival=0.0),
        make_job("g8_any", 8, {"v100": 18.0, "k80": 7.0}, arrival=50.0, attained=240.0,
                 epochs_done=2),
        make_job("g4_run", 4, {"v100": 11.0, "k80": 4.0},
                 held=("v100-0:0", "v100-0:1", "v100-0:2", "v100-0:3"), attained=600.0,
                 arrival=100.0, epochs_done=4),
        make_job("g4_k80", 4, {"k80": 4.5}, arrival=200.0, attained=300.0, epochs_done=1),
        make_job("g2_run_k80", 2, {"k80": 2.5}, held=("k80-1:0", "k80-1:1"), attained=400.0,
                 arrival=150.0, epochs_done=5),
        make_job("g2_run_v100", 2, {"v100": 7.0, "k80": 3.0}, held=("v100-1:0", "v100-1:1"),
                 attained=120.0, arrival=300.0),
        make_job("g2_susp", 2, {"v100": 7.0, "k80": 3.0}, state=JobState.SUSPENDED,
                 attained=900.0, arrival=20.0, epochs_done=7),
        make_job("g1", 1, {"v100": 4.0, "k80": 1.5}, arrival=400.0),
        make_job("done", 2, {"v100": 7.0}, state=JobState.COMPLETED, attained=500.0,
                 arrival=0.0, epochs_done=10),
        make_job("failed", 1, {"v100": 4.0}, state=JobState.FAILED, attained=60.0),
        make_job("cancelled", 1, {"k80": 1.5}, state=JobState.CANCELLED),
    )
    return ClusterState(time_s=1000.0, nodes=mixed_nodes(), jobs=jobs, gpu_types=GPU_TYPES)


def snap_too_big() -> ClusterState:
    """32 GPUs asked on a 16-GPU cluster; 16 asked but only 8 of its one usable type."""
    jobs = (make_job("huge32", 32, {"v100": 50.0, "k80": 20.0}, arrival=0.0),
            make_job("huge16_v100", 16, {"v100": 30.0}, arrival=1.0),
            make_job("small", 1, {"v100": 4.0, "k80": 1.5}, arrival=2.0))
    return ClusterState(time_s=0.0, nodes=mixed_nodes(), jobs=jobs, gpu_types=GPU_TYPES)


def snap_tenants() -> ClusterState:
    """Weighted tenants; tenant a runs a three-job sweep (one app); one elastic job."""
    tenants = (Tenant("a", 3.0), Tenant("b", 1.0), Tenant("c", 0.5))
    jobs = (
        make_job("a1", 1, {"v100": 4.0, "k80": 1.5}, tenant="a", weight=3.0, app="a-sweep",
                 arrival=0.0, attained=360.0, held=("v100-0:0",), epochs_done=3),
        make_job("a2", 1, {"v100": 4.0, "k80": 1.5}, tenant="a", weight=3.0, app="a-sweep",
                 arrival=0.0),
        make_job("a3", 2, {"v100": 7.0, "k80": 2.8}, tenant="a", weight=3.0, app="a-sweep",
                 arrival=0.0, model="vgg16"),
        make_job("b1", 2, {"v100": 6.0}, tenant="b", arrival=30.0, attained=120.0,
                 held=("v100-1:0", "v100-1:1"), model="transformer"),
        make_job("b2", 4, {"v100": 10.0, "k80": 4.0}, tenant="b", arrival=60.0),
        make_job("c1", 1, {"k80": 1.5}, tenant="c", weight=0.5, arrival=90.0),
        make_job("c_elastic", 2, {"v100": 7.0, "k80": 2.8}, tenant="c", weight=0.5,
                 other_sizes={("v100", 1): 4.0, ("k80", 1): 1.5, ("v100", 4): 12.0,
                              ("k80", 4): 5.0},
                 min_gpus=1, max_gpus=4, arrival=120.0),
        make_job("c4", 4, {"k80": 4.5}, tenant="c", weight=0.5, arrival=150.0,
                 attained=60.0, epochs_done=1),
    )
    return ClusterState(time_s=300.0, nodes=mixed_nodes(), jobs=jobs, tenants=tenants,
                        gpu_types=GPU_TYPES)


def snap_started_elsewhere() -> ClusterState:
    """Jobs Slurm (or an older profile) started where the policy may not keep them: a V100-only
    job on a K80, a gang mixing types. Every policy must move or stop them."""
    jobs = (
        make_job("v_on_k80", 1, {"v100": 4.0}, held=("k80-0:0",), attained=300.0),
        make_job("mixed_gang", 2, {"v100": 7.0, "k80": 3.0}, held=("v100-0:0", "k80-1:0"),
                 attained=200.0, arrival=10.0),
        make_job("fine", 2, {"v100": 7.0}, held=("v100-1:0", "v100-1:1"), attained=100.0,
                 arrival=20.0),
        make_job("waiting", 1, {"k80": 1.5}, arrival=30.0),
    )
    return ClusterState(time_s=400.0, nodes=mixed_nodes(), jobs=jobs, gpu_types=GPU_TYPES)


def snap_constrained() -> ClusterState:
    """What Slurm jobs ask of a placement: allowed nodes (partition, --nodelist, --exclude,
    --constraint), a node count with equal GPUs per node, a GPU type; and GPUs in use by
    jobs gpufair does not manage (k80-0 has only GPU 3 left)."""
    nodes = (Node("v100-0", "v100", 4, rack="r0"), Node("v100-1", "v100", 4, rack="r0"),
             Node("k80-0", "k80", 4, rack="r1", unavailable=(0, 1, 2)),
             Node("k80-1", "k80", 4, rack="r1"))
    both = {"v100": 4.0, "k80": 1.5}
    jobs = (
        replace(make_job("one_node4", 4, {"v100": 12.0, "k80": 5.0}), nodes=1),
        replace(make_job("two_nodes4", 4, {"v100": 12.0, "k80": 5.0}, arrival=1.0), nodes=2),
        replace(make_job("only_v100_1", 1, both, arrival=2.0), allowed_nodes=("v100-1",)),
        replace(make_job("typed_k80", 1, both, arrival=3.0), gpu_types=("k80",)),
        replace(make_job("nowhere", 1, both, arrival=4.0), allowed_nodes=()),
        make_job("k80_2", 2, {"k80": 2.5}, arrival=5.0),
        make_job("k80_3", 3, {"k80": 3.5}, arrival=6.0),
    )
    return ClusterState(time_s=100.0, nodes=nodes, jobs=jobs, gpu_types=GPU_TYPES)


def snap_split_types() -> ClusterState:
    """No single type holds the 6-GPU gang (4 V100, 5 usable K80: three of k80-1's are in use
    outside gpufair), a 2-GPU job running on both types (started so by Slurm), a 1-GPU job
    with no K80 rate: only a policy told it may span types runs the gang, across both at the
    K80's rate; none puts the 1-GPU job on a K80."""
    nodes = (Node("v100-0", "v100", 4, rack="r0"), Node("k80-0", "k80", 4, rack="r1"),
             Node("k80-1", "k80", 4, rack="r1", unavailable=(1, 2, 3)))
    jobs = (
        make_job("six", 6, {"v100": 20.0, "k80": 8.0}, arrival=10.0),
        make_job("across", 2, {"v100": 7.0, "k80": 3.0}, held=("v100-0:0", "k80-1:0"),
                 attained=60.0, arrival=20.0),
        make_job("v100_only", 1, {"v100": 4.0}, arrival=30.0),
    )
    return ClusterState(time_s=300.0, nodes=nodes, jobs=jobs, gpu_types=GPU_TYPES)


SNAPSHOTS: dict[str, Callable[[], ClusterState]] = {
    "empty_cluster": snap_empty_cluster,
    "empty_queue": snap_empty_queue,
    "mixed_types": snap_mixed_types,
    "gangs": snap_gangs,
    "too_big": snap_too_big,
    "tenants": snap_tenants,
    "started_elsewhere": snap_started_elsewhere,
    "constrained": snap_constrained,
    "split_types": snap_split_types,
}
# snapshots whose plans change from round to round: the multi-round determinism check
SEQUENCE_SNAPSHOTS = ("mixed_types", "gangs", "tenants", "started_elsewhere", "split_types")


# -- the independent checks -------------------------------------------------------------------
def usable_gpu_types(state: ClusterState) -> dict[str, str]:
    """GPU id ("node:index") → type, for GPUs of servers that are up; built by hand."""
    out = {}
    for node in state.nodes:
        if node.state is NodeState.UP:
            for index in range(node.gpus):
                out[f"{node.name}:{index}"] = node.gpu_type
    return out


def contract_violations(state: ClusterState, plan: object, spanning: bool = False
                        ) -> list[str]:
    """Everything wrong with ``plan`` for ``state``; empty when the contract holds.

    ``spanning``: the policy was told it may run a gang across GPU types (off by default);
    such a gang still needs a positive rate at its size on every type it uses."""
    if not isinstance(plan, Plan):
        return [f"schedule returned {type(plan).__name__}, not a Plan"]
    problems: list[str] = []
    type_of = usable_gpu_types(state)
    all_gpus = {f"{n.name}:{i}" for n in state.nodes for i in range(n.gpus)}
    jobs = {j.id: j for j in state.jobs}
    owner: dict[str, str] = {}
    placed: set[str] = set()
    total = 0
    for a in plan.assignments:
        gpus = tuple(a.gpu_ids)
        total += len(gpus)
        job = jobs.get(a.job_id)
        if job is None:
            problems.append(f"{a.job_id}: not a job of the snapshot")
            continue
        if a.job_id in placed:
            problems.append(f"{a.job_id}: assigned twice")
        placed.add(a.job_id)
        if job.state not in ACTIVE:
            problems.append(f"{a.job_id}: placed but {job.state.value}")
        size = len(gpus)
        if len(set(gpus)) != size:
            problems.append(f"{a.job_id}: a GPU listed twice in {gpus}")
        elastic = job.min_gpus is not None and job.max_gpus is not None \
            and job.min_gpus != job.max_gpus
        if elastic:
            if not job.min_gpus <= size <= job.max_gpus:
                problems.append(f"{a.job_id}: {size} GPUs outside [{job.min_gpus}, "
                                f"{job.max_gpus}]")
        elif size != job.gpus:
            problems.append(f"{a.job_id}: {size} GPUs, asked for {job.gpus}")
        for g in gpus:
            if g not in all_gpus:
                problems.append(f"{a.job_id}: GPU {g!r} does not exist")
            elif g not in type_of:
                problems.append(f"{a.job_id}: GPU {g!r} is on a server that is not up")
            if g in owner and owner[g] != a.job_id:
                problems.append(f"{a.job_id}: GPU {g!r} also given to {owner[g]}")
            owner.setdefault(g, a.job_id)
        hosts: dict[str, int] = {}
        for g in gpus:
            hosts[g.rpartition(":")[0]] = hosts.get(g.rpartition(":")[0], 0) + 1
        if job.allowed_nodes is not None and not set(hosts) <= set(job.allowed_nodes):
            problems.append(f"{a.job_id}: on {sorted(hosts)}, allowed {job.allowed_nodes}")
        if job.nodes is not None and (len(hosts) != job.nodes
                                      or len(set(hosts.values())) != 1):
            problems.append(f"{a.job_id}: split {hosts}, asked {job.nodes} equal node(s)")
        unavailable = {f"{n.name}:{i}" for n in state.nodes for i in n.unavailable}
        if unavailable & set(gpus):
            problems.append(f"{a.job_id}: on GPUs in use outside gpufair "
                            f"{sorted(unavailable & set(gpus))}")
        kinds = {type_of[g] for g in gpus if g in type_of}
        if job.gpu_types is not None and not kinds <= set(job.gpu_types):
            problems.append(f"{a.job_id}: on {sorted(kinds)}, asked {job.gpu_types}")
        if len(kinds) > 1 and not spanning:
            problems.append(f"{a.job_id}: gang mixes GPU types {sorted(kinds)}")
        for kind in kinds:
            rate = job.throughput.rates.get((kind, size))
            if rate is None or not rate > 0:
                problems.append(f"{a.job_id}: placed on {size} x {kind}, where its rate is "
                                f"{rate!r}")
    if total > len(type_of):
        problems.append(f"plan uses {total} GPUs, the cluster has {len(type_of)} usable")
    return problems


def assert_contract(state: ClusterState, plan: object, where: str,
                    spanning: bool = False) -> None:
    problems = contract_violations(state, plan, spanning)
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)


def reason_violations(state: ClusterState, plan: Plan, policy: str) -> list[str]:
    """Every job the policy placed, preempted or left waiting (every active job) has a
    reason: a code of the policy's own (``policy.what``) and figures that are numbers or
    short names; no reason for a job that is not there."""
    reasons = plan.reasons()
    active = {j.id for j in state.jobs if j.state in ACTIVE}
    problems = [f"{j}: no reason" for j in sorted(active - set(reasons))]
    problems += [f"{j}: a reason for a job that is not active" for j in set(reasons) - active]
    for job_id, reason in reasons.items():
        if not re.fullmatch(rf"{re.escape(policy)}\.[a-z_]+", reason.code):
            problems.append(f"{job_id}: code {reason.code!r} is not {policy}.<what>")
        for key, value in reason.figures.items():
            if not re.fullmatch(r"[a-z][a-z0-9_\-]*", key) or isinstance(value, bool) or \
                    not isinstance(value, (int, float, str)) or \
                    (isinstance(value, str) and len(value) > 200):
                problems.append(f"{job_id}: figure {key}={value!r}")
        if not reason.text().startswith(reason.code):
            problems.append(f"{job_id}: text {reason.text()!r}")
    return problems


def plan_key(plan: Plan) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(sorted((a.job_id, tuple(a.gpu_ids)) for a in plan.assignments))


def advance(state: ClusterState, plan: Plan, dt: float = ROUND_S) -> ClusterState:
    """The next snapshot if the plan ran for ``dt``: progress, attained service, completions
    and preemptions, and GNS jobs that ran double their batch size (a regime change)."""
    chosen = {a.job_id: tuple(a.gpu_ids) for a in plan.assignments}
    type_of = usable_gpu_types(state)
    jobs = []
    for job in state.jobs:
        if job.state not in ACTIVE:
            continue  # ended before this round: gone from the next snapshot
        gpus = chosen.get(job.id)
        if gpus is None:
            jobs.append(replace(job, gpus_held=(), state=JobState.SUSPENDED
                                if job.state is JobState.RUNNING else job.state))
            continue
        # a gang across types trains at its slowest type's pace (written out here, not
        # gpufair's ThroughputProfile.gang_rate: the contract's model is its own)
        rate = min(job.throughput.rates.get((type_of[g], len(gpus)), 0.0) for g in gpus)
        total = job.progress.iterations_total or 0.0
        done = min(total, job.progress.iterations_done + rate * dt)
        per_epoch = SAMPLES_PER_EPOCH // (job.batch_size or 1)
        finished = done >= total
        batch = job.batch_size
        if job.adaptation is Adaptation.GNS and job.max_batch_size and batch:
            batch = min(job.max_batch_size, batch * 2)
        jobs.append(replace(
            job, state=JobState.COMPLETED if finished else JobState.RUNNING,
            gpus_held=() if finished else gpus, attained_s=job.attained_s + dt,
            start_s=job.start_s if job.start_s is not None else state.time_s,
            finish_s=state.time_s + dt if finished else None, batch_size=batch,
            progress=replace(job.progress, iterations_done=done,
                             epochs_done=min(job.progress.epochs_total or 0,
                                             int(done // per_epoch)))))
    return replace(state, time_s=state.time_s + dt, jobs=tuple(jobs))


def run_rounds(policy: Policy, state: ClusterState, rounds: int, spanning: bool = False
               ) -> list[Plan]:
    plans = []
    for _ in range(rounds):
        plan = policy.schedule(state, state.time_s)
        assert_contract(state, plan, f"{policy.name} at t={state.time_s}", spanning)
        plans.append(plan)
        state = advance(state, plan)
    return plans


def config(**options: object) -> PolicyConfig:
    return PolicyConfig(round_s=ROUND_S, seed=7, options=options)


# -- the contract -----------------------------------------------------------------------------
def test_every_builtin_policy_is_available() -> None:
    assert {"fifo", "srtf", "las", "max_min", "max_sum_throughput", "min_total_duration",
            "themis", "shockwave"} <= set(POLICIES)


@pytest.mark.parametrize("name", POLICIES)
def test_implements_the_protocol(name: str) -> None:
    policy = create_policy(name, config())
    assert isinstance(policy, Policy)
    assert isinstance(policy.name, str) and policy.name


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
@pytest.mark.parametrize("name", POLICIES)
def test_plan_keeps_the_contract(name: str, snapshot: str) -> None:
    state = SNAPSHOTS[snapshot]()
    plan = create_policy(name, config()).schedule(state, state.time_s)
    assert_contract(state, plan, f"{name} on {snapshot}")
    if snapshot in ("empty_cluster", "empty_queue"):
        assert not plan.assignments, f"{name} placed jobs on {snapshot}"
    if snapshot == "too_big":
        assert {"huge32", "huge16_v100"}.isdisjoint(a.job_id for a in plan.assignments), \
            f"{name} placed a job larger than the cluster or its GPU type"


def test_the_checks_catch_broken_plans() -> None:
    """The oracle itself: plans that break each rule are reported (no policy involved)."""
    state = snap_mixed_types()
    bad = {
        "overlap": (Assignment("v1", ("v100-0:0",)), Assignment("k1", ("v100-0:0",))),
        "oversized": (Assignment("v1", ("v100-0:0", "v100-0:1")),),
        "drained": (Assignment("v1", ("v100-d:0",)),),
        "no_such_gpu": (Assignment("v1", ("v100-7:0",)),),
        "mixed_types": (Assignment("both4", ("v100-0:0", "v100-0:1", "k80-1:0", "k80-1:1")),),
        "zero_rate": (Assignment("zero_k80", ("k80-1:0", "k80-1:1")),),
        "unknown_size": (Assignment("wrong_size", ("v100-0:0", "v100-0:1")),),
        "unknown_job": (Assignment("nobody", ("v100-0:0",)),),
    }
    for what, assignments in bad.items():
        assert contract_violations(state, Plan(assignments)), what
    done = snap_gangs()
    assert contract_violations(done, Plan((Assignment("done", ("v100-0:0", "v100-0:1")),)))
    huge = snap_too_big()
    assert contract_violations(huge, Plan((Assignment("huge32", tuple(
        usable_gpu_types(huge)) * 2),)))
    assert not contract_violations(state, Plan((Assignment("v2", ("v100-1:2", "v100-0:3")),)))


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
@pytest.mark.parametrize("name", POLICIES)
def test_same_seed_same_plan(name: str, snapshot: str) -> None:
    state = SNAPSHOTS[snapshot]()
    first = create_policy(name, config()).schedule(state, state.time_s)
    second = create_policy(name, config()).schedule(state, state.time_s)
    assert plan_key(first) == plan_key(second)


@pytest.mark.parametrize("snapshot", SEQUENCE_SNAPSHOTS)
@pytest.mark.parametrize("name", POLICIES)
def test_same_seed_same_plans_over_rounds(name: str, snapshot: str) -> None:
    """Three rounds, each snapshot following from the plan before: stateful policies
    (leases, received shares, re-plans) must replay identically from the same seed."""
    state = SNAPSHOTS[snapshot]()
    first = run_rounds(create_policy(name, config()), state, 3)
    second = run_rounds(create_policy(name, config()), state, 3)
    assert [plan_key(p) for p in first] == [plan_key(p) for p in second]


#: the papers' own baselines, as options of existing policies (issue 36): each keeps the
#: contract on every snapshot and over rounds, like the defaults
PAPER_BASELINES: dict[str, tuple[str, dict[str, object]]] = {
    "themis lengths=attained": ("themis", {"lengths": "attained"}),
    "max_min level=tenant stages=1": ("max_min", {"level": "tenant"}),
    "max_min level=tenant stages=2": ("max_min", {"level": "tenant", "stages": 2}),
    "max_min stages=2": ("max_min", {"stages": 2}),
    "oef span_types": ("oef", {"span_types": True}),
    "oef non_cooperative span_types": ("oef", {"mode": "non_cooperative", "span_types": True}),
    "max_min objective=finish_time": ("max_min", {"objective": "finish_time"}),
    "max_min objective=finish_time stages=2": ("max_min", {"objective": "finish_time",
                                                           "stages": 2}),
}


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
@pytest.mark.parametrize("variant", PAPER_BASELINES)
def test_paper_baseline_keeps_the_contract(variant: str, snapshot: str) -> None:
    name, options = PAPER_BASELINES[variant]
    spanning = bool(options.get("span_types"))
    state = SNAPSHOTS[snapshot]()
    plan = create_policy(name, config(**options)).schedule(state, state.time_s)
    assert_contract(state, plan, f"{variant} on {snapshot}", spanning)
    if snapshot in SEQUENCE_SNAPSHOTS:
        run_rounds(create_policy(name, config(**options)), state, 3, spanning)


@pytest.mark.parametrize("variant", [v for v, (_, o) in PAPER_BASELINES.items()
                                     if o.get("span_types")])
def test_spanning_variants_do_span(variant: str) -> None:
    """The contract above covers spans only if spans happen: on split_types the 6-GPU gang
    runs across both types (and nothing runs on a type where its rate is 0)."""
    name, options = PAPER_BASELINES[variant]
    state = snap_split_types()
    plan = create_policy(name, config(**options)).schedule(state, state.time_s)
    type_of = usable_gpu_types(state)
    six = plan.by_job().get("six")
    assert six is not None and {type_of[g] for g in six.gpu_ids} == {"v100", "k80"}, plan
    assert all(type_of[g] == "v100" for a in plan.assignments if a.job_id == "v100_only"
               for g in a.gpu_ids)
@pytest.mark.parametrize("snapshot", SNAPSHOTS)
@pytest.mark.parametrize("name", POLICIES)
def test_every_job_gets_a_reason(name: str, snapshot: str) -> None:
    state = SNAPSHOTS[snapshot]()
    plan = create_policy(name, config()).schedule(state, state.time_s)
    problems = reason_violations(state, plan, name)
    assert not problems, f"{name} on {snapshot}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("snapshot", SEQUENCE_SNAPSHOTS)
@pytest.mark.parametrize("name", POLICIES)
def test_reasons_over_rounds_change_no_decision(name: str, snapshot: str) -> None:
    """Over rounds whose state changes (jobs start, finish, age), every round explains
    every job, and asking for the reasons changes no later plan (a reason only reads)."""
    state = SNAPSHOTS[snapshot]()
    quiet = run_rounds(create_policy(name, config()), state, 3)
    policy = create_policy(name, config())
    explained = []
    for _ in range(3):
        plan = policy.schedule(state, state.time_s)
        problems = reason_violations(state, plan, name)
        assert not problems, f"{name} on {snapshot} at {state.time_s}:\n  " + \
            "\n  ".join(problems)
        explained.append(plan)
        state = advance(state, plan)
    assert [plan_key(p) for p in explained] == [plan_key(p) for p in quiet]


def test_the_reason_checks_catch_missing_and_foreign_reasons() -> None:
    state = snap_mixed_types()
    some = next(j.id for j in state.jobs if j.state in ACTIVE)
    assert reason_violations(state, Plan(), "fifo")             # no reasons at all
    everyone = {j.id: Reason("fifo.position", {"position": 1})
                for j in state.jobs if j.state in ACTIVE}
    assert not reason_violations(state, Plan(explain=lambda: everyone), "fifo")
    assert reason_violations(state, Plan(explain=lambda: everyone), "las")   # not its code
    bad = {**everyone, some: Reason("fifo.position", {"x": ["list"]})}  # type: ignore[dict-item]
    assert reason_violations(state, Plan(explain=lambda: bad), "fifo")
    extra = {**everyone, "nobody": Reason("fifo.position")}
    assert reason_violations(state, Plan(explain=lambda: extra), "fifo")


# -- options ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", POLICIES)
def test_unknown_option_is_rejected(name: str) -> None:
    with pytest.raises(InputError) as caught:
        create_policy(name, config(no_such_option_xyz=1))
    assert "no_such_option_xyz" in str(caught.value)


_SETTINGS_ATTRS = ("Options", "Settings", "options_class", "settings_class", "SETTINGS",
                   "settings", "options")


def settings_class(name: str) -> type | None:
    """The dataclass declaring a policy's options, if the policy exposes one: a class
    attribute (``Options``, ``Settings``, ...) or the ``options``/``settings`` of an
    instance."""
    policy = create_policy(name, config())
    for attr in _SETTINGS_ATTRS:
        found = getattr(type(policy), attr, None)
        if isinstance(found, type) and dataclasses.is_dataclass(found):
            return found
    for attr in ("options", "settings"):
        found = getattr(policy, attr, None)
        if found is not None and dataclasses.is_dataclass(found) and \
                not isinstance(found, type):
            return type(found)
    return None


_WRONG = object()


def wrong_value(hint: object) -> object:
    """A value of the wrong type for an option annotated ``hint`` (``_WRONG`` if unsure)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return wrong_value(inner[0]) if len(inner) == 1 else _WRONG
    if hint is bool:
        return "not-a-bool"
    if hint in (int, float):
        return "not-a-number"
    if hint is str:
        return 12345
    if origin in (tuple, list, dict, Mapping) or hint in (tuple, list, dict):
        return 12345
    return _WRONG


@pytest.mark.parametrize("name", POLICIES)
def test_wrong_option_type_is_rejected(name: str) -> None:
    """Each of the policy's typed options, given a value of the wrong type (a string for a
    number, a number for a string or a list), raises an InputError that names the option."""
    cls = settings_class(name)
    assert cls is not None, f"{name} exposes no settings dataclass to read its options from"
    hints = typing.get_type_hints(cls)
    options = {f.name: wrong_value(hints.get(f.name)) for f in dataclasses.fields(cls)
               if not f.name.startswith("_")}
    if not options:
        # a policy without options: every option another policy takes is refused by name
        # here (a [policies.fifo] section holding themis' f is a mistake, never ignored)
        taken = {f.name for other in POLICIES if (c := settings_class(other)) is not None
                 for f in dataclasses.fields(c) if not f.name.startswith("_")}
        assert taken, "no policy declares any option: nothing to check against"
        for key in sorted(taken):
            with pytest.raises(InputError, match=re.escape(f"'policies.{name}.{key}'")):
                create_policy(name, config(**{key: 1}))
        return
    options = {k: v for k, v in options.items() if v is not _WRONG}
    assert options, f"{name}: {cls.__name__} declares no option of a checkable type"
    failures = []
    for key, value in options.items():
        try:
            create_policy(name, config(**{key: value}))
        except InputError as exc:
            if key not in str(exc):
                failures.append(f"{key}={value!r}: InputError does not name the key: {exc}")
        except Exception as exc:  # reported below, not swallowed
            failures.append(f"{key}={value!r}: {type(exc).__name__}, not InputError: {exc}")
        else:
            failures.append(f"{key}={value!r}: accepted")
    assert not failures, f"{name} ({cls.__name__}):\n  " + "\n  ".join(failures)


#: reason codes that say "this job runs", for the policies whose reason decides it
RUNS = {"themis": {"themis.lease", "themis.won_auction", "themis.leftover"},
        "gandiva_fair": {"gandiva_fair.stride_selected"},
        "oef": {"oef.in_share", "oef.backfilled"}}


@pytest.mark.parametrize("snapshot", SEQUENCE_SNAPSHOTS)
@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_reason_that_says_the_job_runs_agrees_with_the_plan(name: str, snapshot: str) -> None:
    """The reason is the policy's own account of its plan, round after round: a job it says
    won, kept its lease, was selected or is in its share is exactly a job the plan places."""
    state = SNAPSHOTS[snapshot]()
    policy = create_policy(name, config())
    for _ in range(3):
        plan = policy.schedule(state, state.time_s)
        placed = set(plan.by_job())
        said = {j for j, r in plan.reasons().items() if r.code in RUNS[name]}
        assert said == placed, f"{name} on {snapshot} at {state.time_s}"
        state = advance(state, plan)


@pytest.mark.parametrize("snapshot", SEQUENCE_SNAPSHOTS)
def test_reason_figures_keep_their_own_bounds(snapshot: str) -> None:
    """Figures mean what they say: an LP share is a time fraction (≤ 1 over the types), a
    job planned for more rounds than the window has left would be a lie, a LAS queue is the
    one its attained service falls in, tickets are the tenant's weight."""
    state = SNAPSHOTS[snapshot]()
    weights = {t.name: t.weight for t in state.tenants}
    for name in ("max_min", "max_sum_throughput", "min_total_duration"):
        for reason in create_policy(name, config()).schedule(state, state.time_s) \
                .reasons().values():
            shares = [v for k, v in reason.figures.items() if k.startswith("share_")]
            assert sum(shares) <= 1 + 1e-6, (name, reason)
    for reason in create_policy("shockwave", config()).schedule(state, state.time_s) \
            .reasons().values():
        if reason.code != "shockwave.unplannable":
            assert 0 <= reason.figures["planned_rounds_left"] <= \
                reason.figures["window_rounds_left"], reason
    las = create_policy("las", config(queue_thresholds_gpu_s=[100.0, 1000.0]))
    jobs = {j.id: j for j in state.jobs}
    for job_id, reason in las.schedule(state, state.time_s).reasons().items():
        attained = jobs[job_id].attained_s * jobs[job_id].gpus
        assert reason.figures["queue"] == sum(attained >= t for t in (100.0, 1000.0))
    gandiva = create_policy("gandiva_fair", config())
    for job_id, reason in gandiva.schedule(state, state.time_s).reasons().items():
        if "tickets" in reason.figures:
            assert reason.figures["tickets"] == weights.get(jobs[job_id].tenant, 1.0)

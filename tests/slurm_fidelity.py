"""How closely ``slurm_backfill`` reproduces what a real Slurm did, on a recorded sacct history.

The histories are tests/data/sacct/one_node_*/, fifo_backfill/ and mixed_types/: bursts of
jobs on the loopback Slurm 22.05 (4 nodes of 4 GPUs, of one type or 2 K80 + 2 V100 nodes,
FIFO by job id, ``sched/backfill`` every 2 s), recorded by scripts/slurm/record_history.py
--burst-only. Each allocation that ran on GPUs is a job: eligible at its ``Eligible``, run
time End - Start, its ``Timelimit`` (parsed by the product's reader,
:func:`~gpufair.adapters.slurm.sacct_limits.parse_time_limit`), its GPU count and node count.
It keeps its own reading of the rest, which the product's conversion does not give: Eligible
(the product's arrival is Submit), NodeList (the state replay puts running jobs on their
nodes), Flags (the timing model), slurmctld's milliseconds, a clock aligned to a whole minute
and run times to the millisecond (the product's are whole seconds). Two measures, both "within one
round" (Slurm's scheduling interval):

- **state replay** (:func:`state_replay`): for each job, the cluster as Slurm had it (jobs
  running on the nodes sacct names, jobs waiting) at the times around its real start; the
  policy must start it at its real start or within one round after, and not at any earlier
  time (one round of slack). Each decision is judged on Slurm's own state, so one
  disagreement does not shift every later job;
- **open loop** (:func:`open_loop`): the whole history through the simulator with the
  policy; each simulated start against the real one (a disagreement early on moves every
  later job, so this is the harder measure).

A third measure reads slurmctld's own plans (``DebugFlags=Backfill``, one_node_b/backfill.log):
**planned starts** (:func:`plan_agreement`), each start the backfill scheduler planned for a
waiting job at one of its cycles against the start the policy reserves for it on the same state.
It tests the reservations themselves, which start times show only through their effect.
"""

from __future__ import annotations

import math
import random
import re
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import semantics_named
from gpufair.adapters.simulator.throughputs import Throughputs
from gpufair.adapters.simulator.trace import TraceJob
from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.sacct_limits import parse_time_limit
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.model import ClusterState, Job, JobState, Node, ThroughputProfile
from gpufair.policy.base import Policy, PolicyConfig
from gpufair.policy.registry import create_policy

DATA = Path(__file__).parent / "data" / "sacct"
#: the cluster of the one-type histories, in Slurm's node order (22.05 orders nodes by name)
NODES = tuple(Node(f"gpu-{i}", "v100", 4) for i in range(1, 5))
GPU_TYPE = "v100"
#: GPUs per node of every loopback cluster recorded (scripts/slurm/up.sh's nodes)
GPUS_PER_NODE = 4
#: Slurm's scheduling interval on the loopback cluster (bf_interval=2, sched_interval=2)
ROUND_S = 2.0
NOT_STARTED = frozenset({"Unknown", "None", ""})


@dataclass(frozen=True)
class Allocation:
    id: str
    rank: int           # Slurm's priority order: equal priorities, older job id first
    gpus: int
    nodes: int
    node_list: tuple[str, ...]
    eligible: float
    start: float
    end: float
    limit_s: float | None   # None: no limit of its own (UNLIMITED, Partition_Limit)
    types: tuple[str, ...] = ()   # the GPU types AllocTRES names (gres/gpu:TYPE=N)
    scheduler: str = ""   # which of Slurm's schedulers started it (sacct Flags): Main, Backfill


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def allocations(path: Path) -> list[Allocation]:
    """The allocations of a saved ``sacct --parsable2`` history that ran on GPUs."""
    header, *lines = path.read_bytes().decode("latin-1").splitlines()
    names = header.split("|")
    rows = []
    for line in lines:
        row = dict(zip(names, line.split("|"), strict=True))
        gpus = re.search(r"(?:^|,)gres/gpu=(\d+)", row["AllocTRES"])
        if row["Start"] in NOT_STARTED or not gpus:
            continue
        eligible = row["Eligible"] if row["Eligible"] not in NOT_STARTED else row["Submit"]
        rows.append((epoch(eligible), int(row["JobIDRaw"]), row, int(gpus.group(1))))
    rows.sort(key=lambda r: r[:2])
    return [Allocation(id=row["JobIDRaw"], rank=rank, gpus=gpus, nodes=int(row["NNodes"]),
                       node_list=tuple(expand_hostlist(row["NodeList"])), eligible=eligible,
                       start=epoch(row["Start"]), end=epoch(row["End"]),
                       limit_s=parse_time_limit(row["Timelimit"]),
                       types=tuple(re.findall(r"gres/gpu:(\w+)=", row["AllocTRES"])),
                       scheduler=_scheduler(row.get("Flags", "")))
            for rank, (eligible, _id, row, gpus) in enumerate(rows)]


def _scheduler(flags: str) -> str:
    """``Main`` or ``Backfill`` from sacct's Flags (``SchedMain``, ``SchedBackfill``,
    ``SchedSubmit``: the scheduler that started the job), else ""."""
    return next((f[len("Sched"):] for f in flags.split(",") if f.startswith("Sched")), "")


def cluster(allocs: list[Allocation]) -> tuple[Node, ...]:
    """The history's nodes in Slurm's order (by name), each of the type its one-node jobs
    ran on (AllocTRES names it); :data:`NODES` for the one-type histories."""
    type_of = {a.node_list[0]: a.types[0] for a in allocs if a.nodes == 1 and len(a.types) == 1}
    if len(set(type_of.values())) < 2:
        return NODES
    return tuple(Node(name, type_of[name], GPUS_PER_NODE) for name in sorted(type_of))


def _job(a: Allocation, types: tuple[str, ...] = (GPU_TYPE,), **fields: Any) -> Job:
    """The allocation as a job that may run on any of ``types`` (the bursts ask untyped)."""
    return Job(id=a.id, gpus=a.gpus, arrival_s=a.eligible, time_limit_s=a.limit_s,
               nodes=a.nodes, throughput=ThroughputProfile({(t, a.gpus): 1.0 for t in types}),
               **fields)


def state_at(allocs: list[Allocation], t: float, waiting: Allocation | None = None
             ) -> ClusterState:
    """The cluster as Slurm had it at ``t``, with ``waiting`` not started yet.

    Running: started before ``t`` (or at ``t`` ahead of ``waiting`` in priority: the same
    scheduling pass; every job started at ``t`` without ``waiting``) and not ended by ``t``,
    on the nodes sacct names (GPU indices in the order jobs started there). Waiting:
    eligible by ``t`` and not running.
    """
    nodes = cluster(allocs)
    types = tuple(dict.fromkeys(n.gpu_type for n in nodes))
    used = {n.name: 0 for n in nodes}
    jobs = []
    for a in sorted(allocs, key=lambda a: (a.start, a.rank)):
        before = a.start < t or (a.start == t and (waiting is None or a.rank < waiting.rank))
        if a is waiting or not before or a.end <= t:
            continue
        per = a.gpus // len(a.node_list)
        held = []
        for node in a.node_list:
            held += [f"{node}:{used[node] + i}" for i in range(per)]
            used[node] += per
        jobs.append(_job(a, types, state=JobState.RUNNING, start_s=a.start,
                         gpus_held=tuple(held)))
    running = {j.id for j in jobs}
    jobs += [_job(a, types) for a in allocs
             if a.id not in running and a.eligible <= t and (a is waiting or a.start >= t)]
    jobs.sort(key=lambda j: (j.arrival_s, int(j.id)))
    return ClusterState(time_s=t, nodes=nodes, jobs=tuple(jobs))


def state_replay(allocs: list[Allocation], policy: Policy, round_s: float = ROUND_S
                 ) -> list[tuple[str, str]]:
    """The jobs the policy does not start within one round of Slurm, each with why."""
    misses = []
    for a in allocs:
        def starts(t: float, a: Allocation = a) -> bool:
            plan = policy.schedule(state_at(allocs, t, a), t)
            return any(x.job_id == a.id for x in plan.assignments)
        on_time = any(starts(a.start + k) for k in range(int(round_s) + 1))
        # earlier, the state changes only when a job becomes eligible, starts or ends (and
        # a later clock only shortens what a backfilled job may run before a reservation)
        changes = {t for b in allocs for t in (b.eligible, b.start, b.end)
                   if a.eligible <= t < a.start - round_s}
        if a.eligible < a.start - round_s:
            changes.add(a.eligible)
        early = next((t for t in sorted(changes) if starts(t)), None)
        if not on_time:
            misses.append((a.id, "late"))
        elif early is not None:
            misses.append((a.id, f"{a.start - early:g} s early"))
    return misses


#: a line of slurmctld's backfill log giving a waiting job's planned start
PLANNED = re.compile(r"\[([0-9T:-]+)[.0-9]*\] sched/backfill: _dump_job_sched: JobId=(\d+) "
                     r"to start at ([0-9T:-]+),")


def backfill_plans(log: Path) -> dict[float, dict[str, float]]:
    """Each backfill cycle of a ``DebugFlags=Backfill`` slurmctld log (at its second) → the
    start it planned for each waiting job it tested."""
    cycles: dict[float, dict[str, float]] = {}
    for line in log.read_text(encoding="latin-1").splitlines():
        found = PLANNED.match(line)
        if found:
            cycles.setdefault(epoch(found[1]), {})[found[2]] = epoch(found[3])
    return cycles


#: slurmctld's own log lines (``SlurmctldDebug=info``) that time a job to the millisecond:
#: its submission, its start by either scheduler, its end
LOGGED = re.compile(r"\[([0-9T:.-]+)\] (?:_slurm_rpc_submit_batch_job: JobId=(\d+) "
                    r"|sched: Allocate JobId=(\d+) |sched/backfill: _start_job: Started "
                    r"JobId=(\d+) |_job_complete: JobId=(\d+) done)")


#: how long after it sets a job's start time slurmctld may log it: a pass takes its clock
#: once, at its beginning (one_node_c: sacct's Start 15:33:40, "Allocate" at 41.002)
LOG_LAG_S = 0.1


def logged_times(log: Path) -> dict[str, dict[str, float]]:
    """Job id → ``submit``, ``start`` and ``end`` as slurmctld logged them (milliseconds;
    sacct truncates the same times to whole seconds). The last of each kind counts."""
    times: dict[str, dict[str, float]] = {}
    for line in log.read_text(encoding="latin-1").splitlines():
        found = LOGGED.match(line)
        if found:
            kind = next(k for k, g in zip(("submit", "start", "start", "end"), found.groups()[1:],
                                          strict=True) if g)
            job_id = next(g for g in found.groups()[1:] if g)
            times.setdefault(job_id, {})[kind] = epoch(found[1])
    return times


def to_the_millisecond(allocs: list[Allocation], log: Path) -> list[Allocation]:
    """The allocations with slurmctld's logged times in place of sacct's whole seconds (each
    must fall within sacct's second, give or take :data:`LOG_LAG_S`: the same run, or an
    error)."""
    times = logged_times(log)
    out = []
    for a in allocs:
        t = times[a.id]
        for kind, whole in (("submit", a.eligible), ("start", a.start), ("end", a.end)):
            if not whole <= t[kind] < whole + 1 + LOG_LAG_S:
                raise ValueError(f"{log}: job {a.id} {kind} {t[kind]} is not sacct's {whole}")
        out.append(replace(a, eligible=t["submit"], start=t["start"], end=t["end"]))
    return out


def plan_agreement(allocs: list[Allocation], cycles: Mapping[float, Mapping[str, float]],
                   policy: Policy, tolerance_s: float = 1.0) -> tuple[int, int]:
    """(Slurm's planned starts the policy reserves within ``tolerance_s``, all of them): the
    policy decides on each cycle's state (:func:`state_at`) and its reasons give each
    reserved job's start. One second of tolerance: sacct's times are whole seconds."""
    agree = total = 0
    for t, planned in sorted(cycles.items()):
        reasons = policy.schedule(state_at(allocs, t), t).reasons()
        for job_id, start in planned.items():
            total += 1
            mine = reasons[job_id].figures.get("start_s") if job_id in reasons else None
            agree += mine is not None and abs(float(mine) - start) <= tolerance_s
    return agree, total


#: how long after a job's end (sacct's End) its nodes take a new job: the epilog (gpufair's
#: Python hook on the loopback cluster) until slurmd reports it complete, the report that also
#: runs the main scheduler. From the histories: of the 51 jobs the main scheduler started on
#: GPUs a job's end freed, 35 started in the second of that end and 16 one or two seconds
#: later (:func:`start_latency`); with ends spread evenly within their second that is 0.3 s
EPILOG_S = 0.3
#: where within its second slurmctld's backfill pass runs: one_node_b/backfill.log's starts
#: are logged .246 to .455 s past an even second
PASS_OFFSET_S = 0.3
#: simulated steps per second of run time: a run time is kept to the millisecond
STEPS_PER_S = 1000.0


@dataclass(frozen=True)
class SlurmTiming:
    """When Slurm 22.05 starts jobs, as a stated model: its backfill thread passes every
    ``bf_interval`` (:data:`ROUND_S`) at ``phase_s`` on the clock (modulo the interval) and
    may start any job; between passes its main scheduler runs at each submission and at each
    job's end once the epilog is done (``epilog_s``), and starts jobs in priority order up to
    the first that cannot start. In the simulator: ``round_phase_s`` puts the round
    boundaries on the passes, ``slurm_backfill``'s ``backfill_at_boundaries`` keeps the
    other decisions to the main scheduler's, and each job holds its GPUs ``epilog_s`` longer
    than sacct's End - Start."""

    phase_s: float
    epilog_s: float = EPILOG_S


def slurm_timing(allocs: list[Allocation]) -> SlurmTiming:
    """The timing model of a recorded history: the backfill passes fall on the second that
    most starts credited to backfill (sacct ``SchedBackfill``) fall on, modulo the interval
    (all but one of 101 on the four histories), :data:`PASS_OFFSET_S` into it."""
    seconds = Counter(int(a.start) % int(ROUND_S) for a in allocs if a.scheduler == "Backfill")
    return SlurmTiming(phase_s=seconds.most_common(1)[0][0] + PASS_OFFSET_S)


def on_pass_grid(allocs: list[Allocation], timing: SlurmTiming) -> tuple[int, int]:
    """(starts credited to backfill that fall in the second of one of the model's passes,
    all starts credited to backfill): checks that the backfill thread alone starts those."""
    passes = [a for a in allocs if a.scheduler == "Backfill"]
    on = sum(int(a.start) % int(ROUND_S) == int(timing.phase_s) % int(ROUND_S) for a in passes)
    return on, len(passes)


def measured_timing(allocs: list[Allocation]) -> SlurmTiming:
    """The timing model read from a history to the millisecond (:func:`to_the_millisecond`):
    the passes' phase is the median of the backfill starts' times within the interval, the
    epilog the median time from the end that freed a main-scheduler start's node to it."""
    phases = [a.start % ROUND_S for a in allocs if a.scheduler == "Backfill"]
    latencies = []
    for a in allocs:
        freed = [b.end for b in allocs if b is not a and set(b.node_list) & set(a.node_list)
                 and a.eligible < b.end <= a.start]
        if a.scheduler == "Main" and freed:
            latencies.append(a.start - max(freed))
    return SlurmTiming(phase_s=statistics.median(phases),
                       epilog_s=statistics.median(latencies))


def open_loop(allocs: list[Allocation], options: Mapping[str, Any], round_s: float = ROUND_S,
              timing: SlurmTiming | None = None, run_s: list[float] | None = None,
              exact: bool = False) -> list[tuple[str, float]]:
    """The jobs the simulator, running ``slurm_backfill``, starts more than one round away
    from Slurm's start, with the difference (s): the simulated start as sacct would print it
    (whole seconds, truncated) against sacct's. ``timing``: Slurm's passes and epilog as
    modelled (:class:`SlurmTiming`); None: every decision may backfill, GPUs free at End.
    ``run_s``: each job's run time instead of End - Start (to measure what sacct's whole
    seconds leave unknown, :func:`truncation_spread`). ``exact``: the history's times are
    slurmctld's milliseconds (:func:`to_the_millisecond`), compared as they are."""
    # the clock's zero on a whole minute, as Slurm's backfill map is aligned (bf_resolution)
    t0 = math.floor(allocs[0].eligible / 60.0) * 60.0
    runs = run_s if run_s is not None else [a.end - a.start for a in allocs]
    held = timing.epilog_s if timing is not None else 0.0
    trace = [TraceJob(index=i, job_type="history",
                      total_steps=max(1, round(STEPS_PER_S * (run + held))),
                      scale_factor=a.gpus, arrival_s=a.eligible - t0, time_limit_s=a.limit_s,
                      nodes=a.nodes) for i, (a, run) in enumerate(zip(allocs, runs, strict=True))]
    nodes = cluster(allocs)
    rates = {n.gpu_type: {("history", a.gpus): STEPS_PER_S for a in allocs} for n in nodes}
    # a Slurm job starts at once: no restart overhead
    semantics = replace(semantics_named("clean"), restart_overhead_s=0.0)
    phase = None if timing is None else (timing.phase_s - t0) % round_s
    sim = TraceSimulator(trace, Throughputs(rates, {}, "(neutral model)"), nodes, semantics,
                         round_s, round_phase_s=phase)
    if timing is not None:
        options = {**options, "backfill_at_boundaries": True}
    policy = create_policy("slurm_backfill", PolicyConfig(round_s=round_s, options=options))
    run_to_end(sim, Round(policy))
    start = {job.trace.index: job.start_s for job in sim.jobs}
    printed = {i: None if t is None else t0 + t if exact else math.floor(t0 + t + 1e-6)
               for i, t in start.items()}
    return [(a.id, math.inf if printed[i] is None else printed[i] - a.start)
            for i, a in enumerate(allocs)
            if printed[i] is None or abs(printed[i] - a.start) > round_s]


def truncation_spread(allocs: list[Allocation], options: Mapping[str, Any],
                      timing: SlurmTiming | None, seeds: int = 8) -> list[int]:
    """The open loop's agreement (jobs within a round of Slurm) with run times Slurm could
    have had: sacct truncates Start and End to whole seconds, so a job's run time is End -
    Start plus the difference of two fractions of a second, each anywhere in [0, 1); one
    draw per seed. How much the measure moves with what the history cannot tell."""
    out = []
    for seed in range(seeds):
        rng = random.Random(seed)
        runs = [max(0.001, a.end - a.start + rng.random() - rng.random()) for a in allocs]
        out.append(len(allocs) - len(open_loop(allocs, options, timing=timing, run_s=runs)))
    return out


#: why a job's open-loop start differs from Slurm's, most direct first
CAUSES = ("decides otherwise on Slurm's state (a 2-node job Slurm gave two GPU types)",
          "decides otherwise on Slurm's state (a 2-node job)",
          "decides otherwise on Slurm's state (a one-node job)",
          "inherited: decides as Slurm on Slurm's state, moved by an earlier difference")


def miss_causes(allocs: list[Allocation], policy: Policy, options: Mapping[str, Any],
                timing: SlurmTiming | None = None, own: set[str] | None = None
                ) -> Counter[str]:
    """The open-loop misses by cause: a job the policy also starts otherwise on Slurm's own
    state (its own decision differs: :func:`state_replay`), or one it starts as Slurm did
    there, so that only an earlier difference (another job's decision, or Slurm's start
    latency: :func:`start_latency`) moved it in the simulation. ``own``: the ids
    :func:`state_replay` misses, when the caller has them already."""
    if own is None:
        own = {job_id for job_id, _ in state_replay(allocs, policy)}
    by_id = {a.id: a for a in allocs}

    def cause(job_id: str) -> str:
        a = by_id[job_id]
        if job_id not in own:
            return CAUSES[3]
        if len(set(a.types)) > 1:
            return CAUSES[0]   # a gpufair gang is of one type: it never runs as Slurm ran it
        return CAUSES[1] if a.nodes > 1 else CAUSES[2]

    return Counter(cause(job_id) for job_id, _ in open_loop(allocs, options, timing=timing))


def start_latency(allocs: list[Allocation], scheduler: str | None = None) -> Counter[int]:
    """How long after the GPUs came free Slurm started each job that had to wait for them
    (whole seconds, as sacct gives; the last end on its nodes before its start): a pass
    starts a job when it next runs and the node's epilog is done, where the simulator starts
    it the moment they are free. Each such second moves every later job of a chain.
    ``scheduler``: only the jobs that one started (``Main``, ``Backfill``)."""
    out: Counter[int] = Counter()
    for a in allocs:
        if scheduler is not None and a.scheduler != scheduler:
            continue
        freed = [b.end for b in allocs if b is not a and set(b.node_list) & set(a.node_list)
                 and a.eligible < b.end <= a.start]
        if freed and a.start - a.eligible > ROUND_S:
            out[int(a.start - max(freed))] += 1
    return out

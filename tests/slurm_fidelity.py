"""How closely ``slurm_backfill`` reproduces what a real Slurm did, on a recorded sacct history.

The histories are tests/data/sacct/one_node_*/ and fifo_backfill/: bursts of jobs on the
loopback Slurm 22.05 (4 nodes of 4 GPUs of one type, FIFO by job id, ``sched/backfill`` every
2 s), recorded by scripts/slurm/record_history.py --burst-only. Each allocation that ran
on GPUs is a job: eligible at its ``Eligible``, run time End - Start, its ``Timelimit``, its
GPU count and node count. (The smallest conversion the comparison needs; the replay branch
owns the full one.) Two measures, both "within one round" (Slurm's scheduling interval):

- **state replay** (:func:`state_replay`): for each job, the cluster as Slurm had it (jobs
  running on the nodes sacct names, jobs waiting) at the times around its real start; the
  policy must start it at its real start or within one round after, and not at any earlier
  time (one round of slack). Each decision is judged on Slurm's own state, so one
  disagreement does not shift every later job;
- **open loop** (:func:`open_loop`): the whole history through the simulator with the
  policy; each simulated start against the real one (a disagreement early on moves every
  later job, so this is the harder measure).
"""

from __future__ import annotations

import math
import re
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
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.model import ClusterState, Job, JobState, Node, ThroughputProfile
from gpufair.policy.base import Policy, PolicyConfig
from gpufair.policy.registry import create_policy

DATA = Path(__file__).parent / "data" / "sacct"
#: the cluster of those histories, in Slurm's node order (22.05 orders nodes by name)
NODES = tuple(Node(f"gpu-{i}", "v100", 4) for i in range(1, 5))
GPU_TYPE = "v100"
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
    limit_s: float


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
                       limit_s=60.0 * int(row["TimelimitRaw"]))
            for rank, (eligible, _id, row, gpus) in enumerate(rows)]


def _job(a: Allocation, **fields: Any) -> Job:
    return Job(id=a.id, gpus=a.gpus, arrival_s=a.eligible, time_limit_s=a.limit_s,
               nodes=a.nodes, throughput=ThroughputProfile({(GPU_TYPE, a.gpus): 1.0}),
               **fields)


def state_at(allocs: list[Allocation], t: float, waiting: Allocation) -> ClusterState:
    """The cluster as Slurm had it at ``t``, with ``waiting`` not started yet.

    Running: started before ``t`` (or at ``t`` ahead of ``waiting`` in priority: the same
    scheduling pass) and not ended by ``t``, on the nodes sacct names (GPU indices in the
    order jobs started there). Waiting: eligible by ``t`` and not running.
    """
    used = {n.name: 0 for n in NODES}
    jobs = []
    for a in sorted(allocs, key=lambda a: (a.start, a.rank)):
        before = a.start < t or (a.start == t and a.rank < waiting.rank)
        if a is waiting or not before or a.end <= t:
            continue
        per = a.gpus // len(a.node_list)
        held = []
        for node in a.node_list:
            held += [f"{node}:{used[node] + i}" for i in range(per)]
            used[node] += per
        jobs.append(_job(a, state=JobState.RUNNING, start_s=a.start, gpus_held=tuple(held)))
    running = {j.id for j in jobs}
    jobs += [_job(a) for a in allocs
             if a.id not in running and a.eligible <= t and (a is waiting or a.start >= t)]
    jobs.sort(key=lambda j: (j.arrival_s, int(j.id)))
    return ClusterState(time_s=t, nodes=NODES, jobs=tuple(jobs))


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


def open_loop(allocs: list[Allocation], options: Mapping[str, Any], round_s: float = ROUND_S
              ) -> list[tuple[str, float]]:
    """The jobs the simulator, running ``slurm_backfill``, starts more than one round away
    from Slurm's start, with the difference (s)."""
    # the clock's zero on a whole minute, as Slurm's backfill map is aligned (bf_resolution)
    t0 = math.floor(allocs[0].eligible / 60.0) * 60.0
    trace = [TraceJob(index=i, job_type="history", total_steps=max(1, math.ceil(a.end - a.start)),
                      scale_factor=a.gpus, arrival_s=a.eligible - t0, time_limit_s=a.limit_s,
                      nodes=a.nodes) for i, a in enumerate(allocs)]
    rates = {GPU_TYPE: {("history", a.gpus): 1.0 for a in allocs}}
    # a Slurm job starts at once: no restart overhead
    semantics = replace(semantics_named("clean"), restart_overhead_s=0.0)
    sim = TraceSimulator(trace, Throughputs(rates, {}, "(neutral model)"), NODES, semantics,
                         round_s)
    policy = create_policy("slurm_backfill", PolicyConfig(round_s=round_s, options=options))
    run_to_end(sim, Round(policy))
    start = {job.trace.index: job.start_s for job in sim.jobs}
    return [(a.id, t0 + start[i] - a.start) for i, a in enumerate(allocs)
            if start[i] is None or abs(t0 + start[i] - a.start) > round_s]

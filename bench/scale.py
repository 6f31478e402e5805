"""Scale: simulation wall time and per-decision p50/p99 for every policy, at growing sizes.

    python bench/scale.py [--time-limit 60] [--sizes 120/32,220/64,...] [--policies a,b]
                          [--repeat N] [--skip-round]

Traces are generated from the canonical 120-job mix with fixed seeds (120/32 is the canonical
trace itself), on V100 clusters, clean semantics. Each cell runs in this process with
``--time-limit`` wall seconds (the simulator's own budget, ``simulate --time-limit``), so the
bench always finishes: a cell that ran out is marked ``partial`` with the jobs it finished.
Each policy runs once on the canonical trace first (imports and solver start-up out of its
cells); ``--repeat N`` shows each cell's run with the least CPU of N (a shared machine only
ever slows a run down). The header gives the range of a fixed Python loop's CPU time, measured
before every run: how much the machine's own speed drifted while the bench ran.
Then one round at 1,000 active jobs on 2,048 GPUs of three types (v100/p100/k80) per policy.
Prints markdown tables.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from gpufair import data
from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.generate import format_trace, generate_trace
from gpufair.adapters.simulator.semantics import CLEAN
from gpufair.adapters.simulator.throughputs import load_throughputs
from gpufair.adapters.simulator.trace import load_trace
from gpufair.core.simulation import SimulationReport, SimulationSpec, simulate
from gpufair.model import ClusterState
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import available_policies, create_policy

CANONICAL = "shockwave_120jobs_32gpus.trace"
THROUGHPUTS = "tacc_throughputs.json"
SIZES = "120/32,220/64,460/128,900/256,2000/512"
ROUND_S = 120.0


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows[1:])])


def trace_for(jobs: int, gpus: int, folder: Path, seed: int = 0) -> Path:
    """The canonical trace at 120/32, else one generated from its job mix (fixed seed)."""
    if (jobs, gpus) == (120, 32):
        return data.path(CANONICAL)
    path = folder / f"gen_{jobs}_{gpus}_s{seed}.trace"
    source = load_trace(data.path(CANONICAL))
    path.write_text(format_trace(generate_trace(source, jobs, num_gpus=gpus, seed=seed)))
    return path


def cell(trace: Path, gpus: int, policy: str, limit: float, repeat: int = 1) -> str:
    """The best of ``repeat`` runs (least CPU): on a shared machine a run is only ever slowed
    down by others, so the least is the closest to the code's own cost."""
    cpu, r = min((timed_run(trace, gpus, policy, limit) for _ in range(repeat)),
                 key=lambda run: run[0])
    text = (f"{r.wall_s:.1f} s, cpu {cpu:.1f} s ({1e3 * r.decision_percentile(50):.0f}/"
            f"{1e3 * r.decision_percentile(99):.0f} ms)")
    return f"{text} partial {r.metrics.num_jobs}/{r.trace_jobs}" if r.partial else text


#: CPU seconds of :func:`machine_check` before each run: the machine's speed as the bench went
MACHINE_CHECKS: list[float] = []


def machine_check(steps: int = 2_000_000) -> float:
    """CPU seconds of a fixed pure-Python loop. A virtual machine's speed drifts by up to ~2x
    from one minute to the next with nothing else running; these, printed with the table, say
    how much it drifted while the bench ran (a cell's own figure cannot)."""
    started = time.process_time()
    total = 0
    for step in range(steps):
        total += step
    return time.process_time() - started


def timed_run(trace: Path, gpus: int, policy: str, limit: float
              ) -> tuple[float, SimulationReport]:
    """One simulation and this process's CPU seconds for it (what others do not inflate)."""
    MACHINE_CHECKS.append(machine_check())
    cpu = time.process_time()
    r = simulate(SimulationSpec(trace=str(trace), throughputs=str(data.path(THROUGHPUTS)),
                                cluster=f"v100:{gpus}", policy=policy, round_s=ROUND_S),
                 progress=False, time_limit_s=limit)
    return time.process_time() - cpu, r


def warm_up(policy: str) -> None:
    """One short run of the policy before its cells: its module, its solver library and the
    solver's environment are loaded then, not inside the first cell's time."""
    simulate(SimulationSpec(trace=str(data.path(CANONICAL)),
                            throughputs=str(data.path(THROUGHPUTS)), cluster="v100:32",
                            policy=policy, round_s=ROUND_S), progress=False, time_limit_s=5.0)


def busy_round(jobs: int, spec: str, seed: int = 0) -> ClusterState:
    """A snapshot with ``jobs`` active jobs at random points of their lives on ``spec``."""
    source = load_trace(data.path(CANONICAL))
    nodes = parse_cluster_spec(spec)
    gpus = sum(n.gpus for n in nodes)
    trace = generate_trace(source, jobs, num_gpus=gpus, seed=seed, mean_gap_s=0.0)
    sim = TraceSimulator(trace, load_throughputs(data.path(THROUGHPUTS)), nodes, CLEAN,
                         ROUND_S)
    rng = np.random.default_rng(seed)
    now = 20_000.0
    for job in sim.jobs:
        job.run = float(int(job.total * rng.uniform(0, 0.9)))
        job.attained_s = float(rng.uniform(0, 0.5) * now)
        job.trace = replace(job.trace, arrival_s=float(rng.uniform(0, now)))
    sim.now = now
    return sim.snapshot()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="wall s per cell")
    parser.add_argument("--sizes", default=SIZES, help="jobs/GPUs,...")
    parser.add_argument("--policies", default=",".join(available_policies()))
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per cell; the one with the least CPU is shown")
    parser.add_argument("--skip-round", action="store_true",
                        help="skip the 1,000-job / 2,048-GPU round")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    policies = [p for p in args.policies.split(",") if p]
    sizes = [tuple(int(x) for x in s.split("/")) for s in args.sizes.split(",") if s]
    rows = [["policy", *(f"{j} jobs / {g} GPUs" for j, g in sizes)]]
    with tempfile.TemporaryDirectory() as tmp:
        traces = {(j, g): trace_for(j, g, Path(tmp)) for j, g in sizes}
        for name in policies:
            warm_up(name)
            rows.append([name, *(cell(traces[j, g], g, name, args.time_limit, args.repeat)
                                 for j, g in sizes)])
            print(".", end="", file=sys.stderr, flush=True)
    print(f"\nsimulation wall, CPU (decision p50/p99), clean semantics, R = {ROUND_S:g} s, "
          f"time limit {args.time_limit:g} s per cell, best CPU of {args.repeat}")
    if MACHINE_CHECKS:
        fastest, slowest = min(MACHINE_CHECKS), max(MACHINE_CHECKS)
        print(f"machine check before each run (a fixed Python loop): {fastest:.3f}-"
              f"{slowest:.3f} s CPU, the slowest {slowest / fastest:.2f}x the fastest")
    print()
    print(markdown(rows))
    if args.skip_round:
        return 0
    spec = "v100:1024,p100:512,k80:512"
    state = busy_round(1000, spec)
    rows = [["policy", "one round, 1,000 jobs / 2,048 GPUs (v100/p100/k80)"]]
    for name in policies:
        policy = create_policy(name, PolicyConfig(round_s=ROUND_S))
        started = time.perf_counter()
        policy.schedule(state, state.time_s)
        rows.append([name, f"{time.perf_counter() - started:.2f} s"])
    print(f"\none cold round on {spec}\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""AFS (issue 18): average JCT on elastic variants of the shared traces, and per-round time.

    python bench/bench_afs.py [--quick] [--resize-overhead S] [--unit S] [--elastic-max N]

Table 1 simulates each trace with ``--elastic`` (a job may run on 1 up to its scale factor of
GPUs, at the counts the throughputs file measured) on V100 servers of 4 GPUs, clean
semantics, R = 120 s, and prints the average JCT of AFS-L, AFS-P, SRTF, LAS (Tiresias),
Themis and max-min, with AFS's reduction rates (baseline avg JCT / AFS avg JCT, > 1 better:
the paper's metric). Only AFS uses the elasticity; the others run every job at its requested
gang, as the paper's SRTF/Tiresias-L baselines do. A resize costs ``--resize-overhead``
seconds (default 20 s, a restart from a checkpoint as on Slurm; 0 is CoDDL's in-place resize).
``--elastic-max N`` lets every job grow to N GPUs (as the paper's jobs grow to their model's
peak); the baselines still run each job at its request.

Table 2 times one cold AFS decision at 100 jobs / 64 GPUs and 1,000 jobs / 2,048 GPUs (elastic
jobs at random points of their lives), median of 3, wall and CPU seconds (the machine is
shared: CPU time is the steadier figure).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpufair import data
from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.generate import format_trace, generate_trace
from gpufair.adapters.simulator.semantics import CLEAN
from gpufair.adapters.simulator.throughputs import load_throughputs
from gpufair.adapters.simulator.trace import load_trace
from gpufair.core.simulation import SimulationSpec, simulate
from gpufair.model import ClusterState
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

THROUGHPUTS = "tacc_throughputs.json"
CANONICAL = "shockwave_120jobs_32gpus.trace"
ROUND_S = 120.0


@dataclass(frozen=True)
class Case:
    label: str
    trace: str      # a bundled name, or "gen:JOBS:GPUS" (generated from the canonical mix)
    gpus: int


CASES = (Case("demo 60 jobs", "demo_60jobs_16gpus.trace", 16),
         Case("shockwave 120 jobs", CANONICAL, 32),
         Case("generated 220 jobs", "gen:220:64", 64))
#: column -> (policy, options): the AFS paper's Themis is length-unaware (its Sec. 5.6 puts it
#: with Tiresias-L and AFS-P), so both Themis are shown: ours (totals known) and that one
BASELINES: dict[str, tuple[str, dict | None]] = {
    "srtf": ("srtf", None), "las": ("las", None), "themis": ("themis", None),
    "themis_unaware": ("themis", {"lengths": "attained"}), "max_min": ("max_min", None)}


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows[1:])])


def trace_path(case: Case, folder: Path) -> str:
    if not case.trace.startswith("gen:"):
        return str(data.path(case.trace))
    _, jobs, gpus = case.trace.split(":")
    path = folder / f"gen_{jobs}_{gpus}.trace"
    source = load_trace(data.path(CANONICAL))
    path.write_text(format_trace(generate_trace(source, int(jobs), num_gpus=int(gpus), seed=0)))
    return str(path)


def options_file(folder: Path, mode: str, unit_s: float) -> str:
    path = folder / f"afs_{mode}.toml"
    path.write_text(f'[policies.afs]\nmode = "{mode}"\nunit_s = {unit_s!r}\n')
    return str(path)


def run(trace: str, gpus: int, policy: str, overhead: float, config: str | None,
        grow: int | None, options: dict | None = None):
    return simulate(SimulationSpec(trace=trace, throughputs=str(data.path(THROUGHPUTS)),
                                   cluster=f"v100:{gpus}", gpus_per_server="4", policy=policy,
                                   round_s=ROUND_S, elastic=True, resize_overhead_s=overhead,
                                   config=config, elastic_max=grow, policy_options=options),
                    progress=False)


def jct_table(cases: tuple[Case, ...], overhead: float, unit_s: float,
              grow: int | None = None) -> str:
    rows = [["trace", "AFS-L", "AFS-P", *BASELINES, "SRTF/AFS-L", "LAS/AFS-P",
             "Themis/AFS-P", "Themis-unaware/AFS-P", "max-min/AFS-P", "resizes L/P"]]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        configs = {m: options_file(folder, m, unit_s) for m in ("afs_l", "afs_p")}
        for case in cases:
            trace = trace_path(case, folder)
            got = {m: run(trace, case.gpus, "afs", overhead, configs[m], grow)
                   for m in configs}
            got.update({b: run(trace, case.gpus, policy, overhead, None, grow, options)
                        for b, (policy, options) in BASELINES.items()})
            jct = {k: r.metrics.avg_jct_s for k, r in got.items()}
            rows.append([case.label, *(f"{jct[k]:.0f}" for k in ("afs_l", "afs_p", *BASELINES)),
                         f"{jct['srtf'] / jct['afs_l']:.2f}x", f"{jct['las'] / jct['afs_p']:.2f}x",
                         f"{jct['themis'] / jct['afs_p']:.2f}x",
                         f"{jct['themis_unaware'] / jct['afs_p']:.2f}x",
                         f"{jct['max_min'] / jct['afs_p']:.2f}x",
                         f"{got['afs_l'].resizes}/{got['afs_p'].resizes}"])
            print(".", end="", file=sys.stderr, flush=True)
    return markdown(rows)


def busy_state(jobs: int, gpus: int, seed: int = 0) -> ClusterState:
    """``jobs`` elastic jobs at random points of their lives on ``gpus`` V100s (4/server)."""
    source = load_trace(data.path(CANONICAL))
    nodes = parse_cluster_spec(f"v100:{gpus}", "4")
    trace = generate_trace(source, jobs, num_gpus=gpus, seed=seed, mean_gap_s=0.0)
    sim = TraceSimulator(trace, load_throughputs(data.path(THROUGHPUTS)), nodes, CLEAN,
                         ROUND_S, elastic=True)
    rng = np.random.default_rng(seed)
    for job in sim.jobs:
        job.run = float(int(job.total * rng.uniform(0, 0.9)))
    sim.now = 20_000.0
    return sim.snapshot()


def round_table(sizes: tuple[tuple[int, int], ...], unit_s: float) -> str:
    rows = [["jobs / GPUs", "mode", "wall s (median of 3)", "CPU s (median of 3)",
             "GPUs given"]]
    for jobs, gpus in sizes:
        state = busy_state(jobs, gpus)
        for mode in ("afs_l", "afs_p"):
            walls, cpus, used = [], [], 0
            for _ in range(3):
                policy = create_policy("afs", PolicyConfig(
                    round_s=ROUND_S, options={"mode": mode, "unit_s": unit_s}))
                wall, cpu = time.perf_counter(), time.process_time()
                plan = policy.schedule(state, state.time_s)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                used = sum(len(a.gpu_ids) for a in plan.assignments)
            rows.append([f"{jobs} / {gpus}", mode, f"{statistics.median(walls):.3f}",
                         f"{statistics.median(cpus):.3f}", str(used)])
    return markdown(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the 60-job demo trace")
    parser.add_argument("--resize-overhead", type=float, default=20.0, dest="overhead",
                        help="seconds per resize (default 20: restart from a checkpoint)")
    parser.add_argument("--unit", type=float, default=7200.0, dest="unit_s",
                        help="AFS-P unit of run time (default 7200 s, the paper's 2 h)")
    parser.add_argument("--elastic-max", type=int, dest="grow",
                        help="jobs may grow to this many GPUs (default: their request)")
    parser.add_argument("--skip-round", action="store_true", help="skip table 2")
    args = parser.parse_args()
    cases = CASES[:1] if args.quick else CASES
    print(f"avg JCT (s), elastic traces on V100 x 4/server, clean semantics, R = {ROUND_S:g} "
          f"s, resize overhead {args.overhead:g} s, AFS-P unit {args.unit_s:g} s, max GPUs "
          f"{'the request' if args.grow is None else f'max(request, {args.grow})'}\n")
    print(jct_table(cases, args.overhead, args.unit_s, args.grow))
    if not args.skip_round:
        print("\none cold AFS decision\n")
        print(round_table(((100, 64), (1000, 2048)), args.unit_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

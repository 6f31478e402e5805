"""Simulation benchmark: wall time per policy on the canonical trace, solver share, scaling.

    python bench/bench_simulation.py [--quick] [--semantics artifact|clean]

Prints two tables: (1) each baseline on the canonical 120-job trace on 32 V100 (wall time,
policy and solver time, rounds); (2) scaling on generated traces drawn from the same job mix
(900 jobs on 256 GPUs, 5,000 jobs on 2,048 GPUs) with peak traced memory.
Module import time is excluded: it is paid once per process, not per simulation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from shared_data import SHARED_DATA

from gpufair.adapters.simulator.generate import format_trace, generate_trace
from gpufair.adapters.simulator.trace import load_trace
from gpufair.core.simulation import SimulationSpec, simulate

DATA = SHARED_DATA
POLICIES = ["fifo", "srtf", "las", "max_min", "max_sum_throughput", "min_total_duration"]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True))
                     for r in rows)


def run_isolated(trace: Path, throughputs: Path, gpus: int, policy: str,
                 semantics: str) -> tuple[dict, float]:
    """One simulation in its own process, so its peak RSS is its own (os.wait4)."""
    cmd = [sys.executable, "-m", "gpufair.cli.main", "simulate", "--json", "--no-progress",
           "--trace", str(trace), "--throughputs", str(throughputs), "--cluster",
           f"v100:{gpus}", "--policy", policy, "--semantics", semantics]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed with {proc.returncode}")
    return json.loads(out), usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="skip the 5,000-job run")
    parser.add_argument("--semantics", default="artifact", choices=("artifact", "clean"))
    parser.add_argument("--data", default=str(DATA))
    args = parser.parse_args()
    data = Path(args.data)
    trace = data / "shockwave_120jobs_32gpus.trace"
    throughputs = data / "tacc_throughputs.json"
    for name in POLICIES:  # warm imports so they do not count in the first policy's time
        simulate(SimulationSpec(policy=name, semantics=args.semantics), progress=False)

    rows = [["policy", "wall s", "policy s", "solver s", "solver %", "solves", "rounds",
             "makespan s", "avg JCT s"]]
    for name in POLICIES:
        r = simulate(SimulationSpec(trace=str(trace), throughputs=str(throughputs),
                                    cluster="v100:32", policy=name,
                                    semantics=args.semantics), progress=False)
        rows.append([name, f"{r.wall_s:.2f}", f"{r.policy_s:.2f}", f"{r.solver_s:.2f}",
                     f"{100 * r.solver_s / r.wall_s:.0f}", str(r.solves), str(r.rounds),
                     f"{r.metrics.makespan_s:.0f}", f"{r.metrics.avg_jct_s:.0f}"])
    print(f"canonical trace (120 jobs, v100:32, R=120 s, {args.semantics})")
    print(table(rows))

    source = load_trace(trace)
    sizes = [(900, 256)] + ([] if args.quick else [(5000, 2048)])
    rows = [["jobs", "GPUs", "policy", "wall s", "solver %", "rounds", "peak MB",
             "avg JCT s"]]
    with tempfile.TemporaryDirectory() as tmp:
        for jobs, gpus in sizes:
            path = Path(tmp) / f"gen_{jobs}_{gpus}.trace"
            path.write_text(format_trace(generate_trace(source, jobs, num_gpus=gpus, seed=0)))
            for name in ("fifo", "max_min", "max_sum_throughput"):
                r, peak_mb = run_isolated(path, throughputs, gpus, name, args.semantics)
                rows.append([str(jobs), str(gpus), name, f"{r['wall_s']:.2f}",
                             f"{100 * r['solver_s'] / r['wall_s']:.0f}", str(r["rounds"]),
                             f"{peak_mb:.0f}", f"{r['avg_jct_s']:.0f}"])
                print(".", end="", file=sys.stderr, flush=True)
    print(f"\nscaling (generated from the canonical mix, {args.semantics})")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

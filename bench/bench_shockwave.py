"""Shockwave: re-plan solve time versus active jobs and GPUs, with the MIP gap reached.

    python bench/bench_shockwave.py [--time-limit 15]

Active jobs are drawn from the canonical trace's job mix with random progress, waiting and
service, so budgets (rho_hat^k) and remaining times vary as in a busy cluster. Each cell is
one cold re-plan (count MILP + layout; the full MILP only if the layout fails).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.generate import generate_trace
from gpufair.adapters.simulator.semantics import ARTIFACT
from gpufair.adapters.simulator.throughputs import load_throughputs
from gpufair.adapters.simulator.trace import load_trace
from gpufair.policy.base import PolicyConfig
from gpufair.policy.shockwave.policy import ShockwavePolicy

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def busy_state(jobs: int, gpus: int, seed: int):
    """A snapshot with ``jobs`` active jobs at random points of their lives."""
    source = load_trace(DATA / "shockwave_120jobs_32gpus.trace")
    trace = generate_trace(source, jobs, num_gpus=gpus, seed=seed, mean_gap_s=0.0)
    sim = TraceSimulator(trace, load_throughputs(DATA / "tacc_throughputs.json"),
                         parse_cluster_spec(f"v100:{gpus}"), ARTIFACT, 120.0)
    rng = np.random.default_rng(seed)
    now = 20_000.0
    for job in sim.jobs:
        job.run = float(int(job.total * rng.uniform(0, 0.9)))
        job.attained_s = float(rng.uniform(0, 0.5) * now)
        job.trace = replace(job.trace, arrival_s=float(rng.uniform(0, now)))
    sim.now = now
    return sim.snapshot()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--time-limit", type=float, default=15.0)
    args = parser.parse_args()
    print(f"shockwave re-plan (T=20 rounds, time limit {args.time_limit:g} s)")
    header = ["GPUs", "active jobs", "solve s", "MIP gap", "status", "full MILP?"]
    rows = [header]
    for gpus in (32, 256):
        for jobs in (50, 200, 900):
            state = busy_state(jobs, gpus, seed=0)
            policy = ShockwavePolicy(PolicyConfig(round_s=120.0, options={
                "solver_timeout_s": args.time_limit}))
            started = time.perf_counter()
            plan = policy.schedule(state, state.time_s)
            wall = time.perf_counter() - started
            _, _, gap, status = policy.solve_log[0]
            rows.append([str(gpus), str(jobs), f"{wall:.2f}",
                         "-" if gap is None else f"{gap:.1e}", status,
                         "yes" if policy.stats.solves > 1 else "no"])
            assert sum(len(a.gpu_ids) for a in plan.assignments) <= gpus
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Shockwave's count relaxation on HiGHS: solver time by objective scale (``user_objective_scale``).

    python bench/highs_objective_scale.py [--sizes 900/256,2000/512] [--time-limit 60]
                                          [--scales 0,3,4,6]

Runs Shockwave on the generated trace of each size (as ``bench/scale.py`` does: clean
semantics, V100 cluster, seed 0) for at most ``--time-limit`` seconds, keeps every count
relaxation that went to HiGHS, then solves each of them again with HiGHS's costs times 2**k
for each k, and prints per k: the total and worst solver seconds, simplex iterations, and the
largest relative objective difference to k = 0 (the optima must be the same). The policy's
choice is ``_LP_OBJECTIVE_SCALE`` in ``gpufair/policy/shockwave/policy.py``.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import highspy
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import scale

from gpufair.policy import solver
from gpufair.policy.solver import LinearProgram


def relaxations(jobs: int, gpus: int, limit: float, folder: Path) -> list[LinearProgram]:
    """The count relaxations a Shockwave run at this size hands to HiGHS."""
    caught: list[LinearProgram] = []
    real = solver._BACKEND_FUNCS["highs"]

    def keep(problem: LinearProgram, options: solver.SolveOptions):
        if problem.name == "shockwave_counts_lp":
            caught.append(problem)
        return real(problem, options)

    solver._BACKEND_FUNCS["highs"] = keep
    try:
        scale.timed_run(scale.trace_for(jobs, gpus, folder), gpus, "shockwave", limit)
    finally:
        solver._BACKEND_FUNCS["highs"] = real
    return caught


def timed(problem: LinearProgram, k: int) -> tuple[float, int, float]:
    """``problem`` solved as the policy solves it (:func:`solver.solve` on HiGHS) with its
    costs times 2**k: seconds (model passing included), simplex iterations, objective (NaN
    when HiGHS gives up: the policy then retries with the costs brought to 1, which this
    bench does not time; it counts them)."""
    made: list[highspy.Highs] = []
    real = solver._new_highs

    def recording() -> highspy.Highs:   # to read the iteration count after the run
        made.append(real())
        return made[-1]

    solver._new_highs = recording
    try:
        started = time.perf_counter()
        found = solver.solve(problem, solver.SolveOptions(backend="highs",
                                                          highs_objective_scale=k))
        elapsed = time.perf_counter() - started
    finally:
        solver._new_highs = real
    solved = found.status is solver.Status.OPTIMAL and found.objective is not None
    return elapsed, sum(int(h.getInfo().simplex_iteration_count) for h in made), \
        found.objective if solved else math.nan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="900/256,2000/512")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--scales", default="0,3,4,6")
    args = parser.parse_args()
    scales = [int(k) for k in args.scales.split(",")]
    rows = [["size", "LPs", "largest (cols x rows)", "2**k", "solver s", "worst s",
             "iterations", "max rel. objective diff", "given up"]]
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            jobs, gpus = (int(v) for v in size.split("/"))
            lps = relaxations(jobs, gpus, args.time_limit, Path(tmp))
            if not lps:
                print(f"{size}: no relaxation went to HiGHS (Gurobi took them all)")
                continue
            big = max(lps, key=lambda p: p.num_vars)
            base = None
            for k in scales:
                runs = [timed(p, k) for p in lps]
                objectives = np.array([r[2] for r in runs])
                base = objectives if base is None else base
                both = ~np.isnan(objectives) & ~np.isnan(base)
                diff = float(np.max(np.abs(objectives - base)[both] /
                                    np.maximum(np.abs(base[both]), 1e-12), initial=0.0))
                rows.append([size, str(len(lps)), f"{big.num_vars} x {big.num_constraints}",
                             str(k), f"{sum(r[0] for r in runs):.2f}",
                             f"{max(r[0] for r in runs):.3f}", str(sum(r[1] for r in runs)),
                             f"{diff:.1e}", str(int(np.isnan(objectives).sum()))])
    print(f"HiGHS {metadata.version('highspy')} on Shockwave's count relaxations")
    print(scale.markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

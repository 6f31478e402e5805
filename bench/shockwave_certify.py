"""Shockwave's certified market against the exact one: what the acceptance tolerance costs.

    python bench/shockwave_certify.py [--cases 120/32:clean,120/32:artifact,220/64:clean,...]
                                      [--gaps 1e-3] [--no-exact] [--lp-bound]
                                      [--loss-size 220/64] [--loss-every 3]

Each case simulates a trace (the canonical one at 120/32, else bench/scale.py's generated
trace, seed 0; V100 only, R = 120 s) with ``market_method = "exact"`` (the count MILP at
every re-plan), with ``"certified"`` at each ``certify_rel_gap`` of ``--gaps``, and with
``--lp-bound``: certified at the first gap with the LP value as its only bound, the method
before the dual bound (the MILP runs whenever the rounding is not within the gap of the LP).
It prints makespan, avg JCT, worst ρ, the share of jobs above ρ = 1.1, re-plans, MILP
fallbacks, solver seconds and this process's CPU seconds (the machine is shared: wall
seconds are inflated).

Then, at ``--loss-size`` (clean semantics), the per-plan loss: the certified run (the first
gap of ``--gaps``) also solves the count MILP to optimality (mip gap 0) at every
``--loss-every``-th re-plan, outside the timed path, and prints how far the counts it used are
below that optimum, and how far the LP bound and the dual bound are above it. The certified
method's guarantee is loss ≤ certify_rel_gap; these are the actual figures.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scale import THROUGHPUTS, markdown, trace_for

from gpufair import data
from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import semantics_named
from gpufair.adapters.simulator.throughputs import load_throughputs
from gpufair.adapters.simulator.trace import load_trace
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.policy.base import PolicyConfig
from gpufair.policy.shockwave.policy import Market, ShockwavePolicy
from gpufair.policy.solver import SolveOptions, solve

ROUND_S = 120.0
CASES = "120/32:clean,120/32:artifact,220/64:clean,460/128:clean"


class Probe:
    """Wraps a policy's ``_counts``: counts re-plans and certified ones, and at every
    ``every``-th re-plan (0: never) measures the counts' objective against the count MILP's
    optimum (gap 0) and the LP bound, relative to the counts' (untimed: the policy's solver
    statistics are restored)."""

    def __init__(self, policy: ShockwavePolicy, every: int = 0) -> None:
        self.policy, self.every = policy, every
        self.rows: list[tuple[int, str, float, float, float]] = []
        self.plans = self.certified = 0
        self._counts = policy._counts
        policy._counts = self  # type: ignore[method-assign]

    def __call__(self, market: Market) -> np.ndarray | None:
        counts = self._counts(market)
        self.plans += 1
        status = self.policy.solve_log[-1][3]
        self.certified += status == "certified"
        if counts is None or not self.every or self.plans % self.every:
            return counts
        saved = (self.policy.stats.solves, self.policy.stats.solver_s)
        options = SolveOptions(backend="highs", mip_gap=0.0, time_limit_s=120.0,
                               scale_objective=True)
        exact = solve(market.count_problem(), options)
        bound = solve(market.count_problem(relaxed=True), options)
        self.policy.stats.solves, self.policy.stats.solver_s = saved
        value = market.value(counts)
        if exact.status.value == "optimal" and bound.ok and bound.duals is not None:
            scale = max(abs(value), 1e-6)
            dual = min(bound.objective, market.dual_bound(bound.duals))
            self.rows.append((len(market.views), status, (exact.objective - value) / scale,
                              (bound.objective - exact.objective) / scale,
                              (dual - exact.objective) / scale))
        return counts


def run(jobs: int, gpus: int, semantics: str, options: dict, folder: Path,
        every: int = 0) -> tuple[list[str], Probe]:
    trace = load_trace(trace_for(jobs, gpus, folder))
    sim = TraceSimulator(trace, load_throughputs(data.path(THROUGHPUTS)),
                         parse_cluster_spec(f"v100:{gpus}"), semantics_named(semantics),
                         ROUND_S)
    options = dict(options)
    lp_only = options.pop("lp_bound_only", False)
    policy = ShockwavePolicy(PolicyConfig(round_s=ROUND_S, seed=0, options=options))
    probe = Probe(policy, every)
    dual_bound = Market.dual_bound
    if lp_only:
        Market.dual_bound = lambda self, duals: math.inf  # type: ignore[method-assign]
    try:
        cpu = time.process_time()
        run_to_end(sim, Round(policy))
        cpu = time.process_time() - cpu
    finally:
        Market.dual_bound = dual_bound  # type: ignore[method-assign]
    m = sim.metrics()
    return [f"{m.makespan_s:,.0f}", f"{m.avg_jct_s:,.0f}", f"{m.worst_rho:.3f}",
            f"{100 * m.unfair_fraction['1.1']:.1f}", str(probe.plans),
            str(probe.plans - probe.certified), f"{policy.stats.solver_s:.1f}",
            f"{cpu:.1f}"], probe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=CASES, help="jobs/GPUs:semantics,...")
    parser.add_argument("--gaps", default="1e-3", help="certify_rel_gap values")
    parser.add_argument("--no-exact", action="store_true", help="skip the exact method")
    parser.add_argument("--lp-bound", action="store_true",
                        help="also certified with the LP bound alone (the method before)")
    parser.add_argument("--loss-size", default="220/64", help="jobs/GPUs, or '' to skip")
    parser.add_argument("--loss-every", type=int, default=3)
    args = parser.parse_args()
    gaps = [float(g) for g in args.gaps.split(",") if g]
    methods = ([] if args.no_exact else [("exact", {"market_method": "exact"})]) + [
        (f"certified {g:g}", {"certify_rel_gap": g}) for g in gaps] + (
        [(f"certified {gaps[0]:g}, LP bound only",
          {"certify_rel_gap": gaps[0], "lp_bound_only": True})] if args.lp_bound else [])
    header = ["case", "method", "makespan s", "avg JCT s", "worst ρ", "ρ>1.1 %", "re-plans",
              "MILP fallbacks", "solver s", "CPU s"]
    rows = [header]
    with tempfile.TemporaryDirectory() as tmp:
        for case in (c for c in args.cases.split(",") if c):
            size, semantics = case.split(":")
            jobs, gpus = (int(x) for x in size.split("/"))
            for label, options in methods:
                cells, _ = run(jobs, gpus, semantics, options, Path(tmp))
                rows.append([f"{size} {semantics}", label, *cells])
                print(".", end="", file=sys.stderr, flush=True)
        print(f"\nclean/artifact semantics, V100, R = {ROUND_S:g} s; CPU = this process's\n")
        print(markdown(rows))
        if args.loss_size:
            jobs, gpus = (int(x) for x in args.loss_size.split("/"))
            _, probe = run(jobs, gpus, "clean", {"certify_rel_gap": gaps[0]}, Path(tmp),
                           every=args.loss_every)
            loss = np.array([r[2] for r in probe.rows])
            slack = np.array([r[3] for r in probe.rows])
            dual = np.array([r[4] for r in probe.rows])
            certified = [r for r in probe.rows if r[1] == "certified"]
            print(f"\nper-plan loss at {args.loss_size} (clean), certify_rel_gap {gaps[0]:g}, "
                  f"every {args.loss_every}th re-plan: {len(probe.rows)} plans "
                  f"({len(certified)} certified), vs the count MILP at gap 0\n")
            print(markdown([["", "max", "mean", "plans with loss > 0"],
                            ["(MILP optimum − used) / abs(used)", f"{loss.max():.2e}",
                             f"{loss.mean():.2e}", str(int(np.sum(loss > 1e-9)))],
                            ["(LP bound − MILP optimum) / abs(used)", f"{slack.max():.2e}",
                             f"{slack.mean():.2e}", "-"],
                            ["(dual bound − MILP optimum) / abs(used)", f"{dual.max():.2e}",
                             f"{dual.mean():.2e}", "-"]]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

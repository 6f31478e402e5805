"""Shockwave: re-plan solve time versus active jobs and GPUs, with the MIP gap reached.

    python bench/bench_shockwave.py [--time-limit 15]

Active jobs are drawn from the canonical trace's job mix with random progress, waiting and
service, so budgets (rho_hat^k) and remaining times vary as in a busy cluster. Each cell is
one cold re-plan: with ``--method certified`` (the default) the count problem's LP relaxation,
rounded and accepted within the gap of its bound, else the count MILP; with ``exact`` the count
MILP; then the layout (the full MILP only if the layout fails). "gap" is the last solve's: the
certified gap for a certified re-plan, the MIP gap otherwise. "own s" is the re-plan's time
outside the solver (tables, model building, rounding, layout, placement): Shockwave's own code.
"""

from __future__ import annotations

import argparse
import time

from scale import busy_round

from gpufair.model import ClusterState
from gpufair.policy.base import PolicyConfig
from gpufair.policy.shockwave.policy import ShockwavePolicy


def busy_state(jobs: int, gpus: int, seed: int) -> ClusterState:
    """A snapshot with ``jobs`` active jobs at random points of their lives (scale.py's)."""
    return busy_round(jobs, f"v100:{gpus}", seed)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--time-limit", type=float, default=15.0)
    parser.add_argument("--method", choices=("certified", "exact"), default="certified")
    args = parser.parse_args()
    print(f"shockwave re-plan (T=20 rounds, time limit {args.time_limit:g} s)")
    header = ["GPUs", "active jobs", "solve s", "own s", "gap", "status", "solves"]
    rows = [header]
    for gpus in (32, 256):
        for jobs in (50, 200, 900):
            state = busy_state(jobs, gpus, seed=0)
            policy = ShockwavePolicy(PolicyConfig(round_s=120.0, options={
                "solver_timeout_s": args.time_limit, "market_method": args.method}))
            started = time.perf_counter()
            plan = policy.schedule(state, state.time_s)
            wall = time.perf_counter() - started
            _, _, gap, status = policy.solve_log[-1]
            rows.append([str(gpus), str(jobs), f"{wall:.2f}",
                         f"{wall - policy.stats.solver_s:.3f}",
                         "-" if gap is None else f"{gap:.1e}", status,
                         str(policy.stats.solves)])
            assert sum(len(a.gpu_ids) for a in plan.assignments) <= gpus
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

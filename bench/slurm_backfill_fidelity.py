"""How closely ``slurm_backfill`` reproduces a real Slurm, per recorded history and option set:
the share of jobs started within one round (2 s) of Slurm's start, judged on Slurm's own state
at each decision (state replay) and through the whole simulation (open loop), and the share of
the starts slurmctld planned for waiting jobs (its backfill log, one_node_b only) that the
policy plans too. Then why the open-loop starts differ: the misses by cause, Slurm's start
latency, and the open loop again with that latency charged to the jobs (an experiment). See
tests/slurm_fidelity.py for the measures and the histories.

    python bench/slurm_backfill_fidelity.py [--histories one_node_b] [--sets default]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy
from tests.slurm_fidelity import (
    CAUSES,
    DATA,
    allocations,
    backfill_plans,
    miss_causes,
    open_loop,
    plan_agreement,
    start_latency,
    state_replay,
)

HISTORIES = ("one_node_a", "one_node_b", "fifo_backfill", "mixed_types")
#: every option spelled out, so that a change of default does not change a row
PLAIN = {"reservations": 0, "whole_nodes": False, "resolution_s": 0.0, "end_window_s": 0.0}
SETS = {
    "easy": ("EASY (reservations=1)", {**PLAIN, "reservations": 1}),
    "conservative": ("reservations=0", PLAIN),
    "per-node": ("reservations=0, whole_nodes, resolution 60 s",
                 {**PLAIN, "whole_nodes": True, "resolution_s": 60.0}),
    "slurm": ("Slurm 22.05: reservations=0, whole_nodes, resolution 60 s, end window 30 s",
              {**PLAIN, "whole_nodes": True, "resolution_s": 60.0, "end_window_s": 30.0}),
    "default": ("the defaults: Slurm 22.05's, with reservations=20", {}),
}


def share(agree: int, total: int) -> str:
    return f"{agree}/{total} ({agree / total:.0%})"


def main(histories: list[str], sets: list[str]) -> None:
    allocs = {h: allocations(DATA / h / "sacct_parsable2.txt") for h in histories}
    print("| history | options | state replay | open loop | planned starts |")
    print("|---|---|---|---|---|")
    for history in histories:
        log = DATA / history / "backfill.log"
        cycles = backfill_plans(log) if log.exists() else None
        jobs = allocs[history]
        for key in sets:
            label, options = SETS[key]
            policy = create_policy("slurm_backfill", PolicyConfig(options=options))
            replayed = len(jobs) - len(state_replay(jobs, policy))
            simulated = len(jobs) - len(open_loop(jobs, options))
            planned = share(*plan_agreement(jobs, cycles, policy)) if cycles else "-"
            print(f"| {history} | {label} | {share(replayed, len(jobs))} | "
                  f"{share(simulated, len(jobs))} | {planned} |")
    label, options = SETS[sets[-1]]
    policy = create_policy("slurm_backfill", PolicyConfig(options=options))
    print(f"\nOpen-loop misses by cause ({label}); Slurm's start latency (s after the GPUs "
          "came free: jobs); the open loop with each job holding its GPUs 1 s longer")
    print(f"\n| history | {' | '.join(CAUSES)} | latency | open loop, +1 s |")
    print(f"|---|{'---:|' * len(CAUSES)}---|---|")
    for history in histories:
        jobs = allocs[history]
        causes = miss_causes(jobs, policy, options)
        latency = ", ".join(f"{s}: {n}" for s, n in sorted(start_latency(jobs).items()))
        later = len(jobs) - len(open_loop(jobs, options, latency_s=1.0))
        print(f"| {history} | {' | '.join(str(causes[c]) for c in CAUSES)} | {latency} | "
              f"{share(later, len(jobs))} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", default=",".join(HISTORIES))
    parser.add_argument("--sets", default=",".join(SETS), help=f"of {', '.join(SETS)}")
    args = parser.parse_args()
    started = time.process_time()
    main(args.histories.split(","), args.sets.split(","))
    print(f"\n({time.process_time() - started:.0f} s CPU)")

"""How closely ``slurm_backfill`` reproduces a real Slurm's start times, per recorded history
and option set: the share of jobs started within one round (2 s) of Slurm's start, judged on
Slurm's own state at each decision (state replay) and through the whole simulation (open
loop). See tests/slurm_fidelity.py for the two measures and the histories.

    python bench/slurm_backfill_fidelity.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy
from tests.slurm_fidelity import DATA, allocations, open_loop, state_replay

HISTORIES = ("one_node_a", "one_node_b", "fifo_backfill")
OPTIONS = {
    "EASY (default)": {},
    "reservations=0": {"reservations": 0},
    "reservations=0, whole_nodes, resolution 60 s": {"reservations": 0, "whole_nodes": True,
                                                    "resolution_s": 60.0},
}


def main() -> None:
    print("| history | options | jobs | state replay | open loop |")
    print("|---|---|---|---|---|")
    for history in HISTORIES:
        allocs = allocations(DATA / history / "sacct_parsable2.txt")
        for label, options in OPTIONS.items():
            policy = create_policy("slurm_backfill", PolicyConfig(options=options))
            replayed = len(allocs) - len(state_replay(allocs, policy))
            simulated = len(allocs) - len(open_loop(allocs, options))
            print(f"| {history} | {label} | {len(allocs)} | {replayed}/{len(allocs)} "
                  f"({replayed / len(allocs):.0%}) | {simulated}/{len(allocs)} "
                  f"({simulated / len(allocs):.0%}) |")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"\n({time.perf_counter() - started:.0f} s)")

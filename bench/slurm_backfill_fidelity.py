"""How closely ``slurm_backfill`` reproduces a real Slurm, per recorded history and option set:
the share of jobs started within one round (2 s) of Slurm's start, judged on Slurm's own state
at each decision (state replay) and through the whole simulation (open loop), and the share of
the starts slurmctld planned for waiting jobs (its backfill log, one_node_b only) that the
policy plans too; the open loop also with Slurm's timing as modelled (tests/slurm_fidelity.py
SlurmTiming: backfill passes every 2 s, the main scheduler between them, the epilog). Then
the model checked on each history (the passes' phase, the backfill starts on them, the start
latency by scheduler), the open-loop misses by cause without and with it, and how far the open
loop moves with run times sacct's whole seconds cannot tell apart. See tests/slurm_fidelity.py
for the measures and the histories.

    python bench/slurm_backfill_fidelity.py [--histories one_node_b] [--sets default] [--seeds 8]
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
    ROUND_S,
    allocations,
    backfill_plans,
    measured_timing,
    miss_causes,
    on_pass_grid,
    open_loop,
    plan_agreement,
    slurm_timing,
    start_latency,
    state_replay,
    to_the_millisecond,
    truncation_spread,
)

HISTORIES = ("one_node_a", "one_node_b", "fifo_backfill", "mixed_types", "one_node_c")
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


def spread(counts: list[int]) -> str:
    return f"{min(counts)}–{max(counts)} (mean {sum(counts) / len(counts):.1f})"


def main(histories: list[str], sets: list[str], seeds: int) -> None:
    allocs = {h: allocations(DATA / h / "sacct_parsable2.txt") for h in histories}
    timings = {h: slurm_timing(jobs) for h, jobs in allocs.items()}
    print("| history | options | state replay | open loop | open loop, Slurm's timing "
          "| planned starts |")
    print("|---|---|---|---|---|---|")
    for history in histories:
        log = DATA / history / "backfill.log"
        cycles = backfill_plans(log) if log.exists() else None
        jobs = allocs[history]
        for key in sets:
            label, options = SETS[key]
            policy = create_policy("slurm_backfill", PolicyConfig(options=options))
            replayed = len(jobs) - len(state_replay(jobs, policy))
            simulated = len(jobs) - len(open_loop(jobs, options))
            timed = len(jobs) - len(open_loop(jobs, options, timing=timings[history]))
            planned = share(*plan_agreement(jobs, cycles, policy)) if cycles else "-"
            print(f"| {history} | {label} | {share(replayed, len(jobs))} | "
                  f"{share(simulated, len(jobs))} | {share(timed, len(jobs))} | {planned} |")
    label, options = SETS[sets[-1]]
    policy = create_policy("slurm_backfill", PolicyConfig(options=options))
    print(f"\nThe timing model on each history ({label}): the backfill passes' phase, the "
          "starts sacct credits to backfill that fall on them, Slurm's start latency by "
          "scheduler (s after the GPUs came free: jobs)")
    print("\n| history | passes at | backfill starts on a pass | latency, main | "
          "latency, backfill |")
    print("|---|---|---|---|---|")
    for history in histories:
        jobs, timing = allocs[history], timings[history]
        latency = {who: ", ".join(f"{s}: {n}" for s, n in sorted(
            start_latency(jobs, who).items())) for who in ("Main", "Backfill")}
        print(f"| {history} | {timing.phase_s:g} s mod {ROUND_S:g} | "
              f"{share(*on_pass_grid(jobs, timing))} | {latency['Main']} | "
              f"{latency['Backfill']} |")
    print(f"\nOpen-loop misses by cause ({label}), without → with Slurm's timing; the open "
          f"loop with run times drawn within sacct's whole seconds ({seeds} draws)")
    print(f"\n| history | {' | '.join(CAUSES)} | open loop, drawn run times | "
          "with Slurm's timing |")
    print(f"|---|{'---:|' * len(CAUSES)}---|---|")
    for history in histories:
        jobs, timing = allocs[history], timings[history]
        own = {job_id for job_id, _ in state_replay(jobs, policy)}
        before = miss_causes(jobs, policy, options, own=own)
        after = miss_causes(jobs, policy, options, timing, own=own)
        print(f"| {history} | {' | '.join(f'{before[c]} → {after[c]}' for c in CAUSES)} | "
              f"{spread(truncation_spread(jobs, options, None, seeds))} | "
              f"{spread(truncation_spread(jobs, options, timing, seeds))} |")
    timed = [h for h in histories if (DATA / h / "slurmctld.log").exists()]
    if not timed:
        return
    print(f"\nTo the millisecond (slurmctld's log in place of sacct's seconds; {label}): "
          "the timing model measured there, the open loop within 2 s of Slurm's start")
    print("\n| history | passes at, epilog (measured) | open loop, no model | with the model "
          "as read from sacct | with the model as measured |")
    print("|---|---|---|---|---|")
    for history in timed:
        exact = to_the_millisecond(allocs[history], DATA / history / "slurmctld.log")
        measured = measured_timing(exact)
        runs = [len(exact) - len(open_loop(exact, options, timing=t, exact=True))
                for t in (None, timings[history], measured)]
        print(f"| {history} | {measured.phase_s:.2f} s mod {ROUND_S:g}, "
              f"{measured.epilog_s:.2f} s | {' | '.join(share(n, len(exact)) for n in runs)} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", default=",".join(HISTORIES))
    parser.add_argument("--sets", default=",".join(SETS), help=f"of {', '.join(SETS)}")
    parser.add_argument("--seeds", type=int, default=8,
                        help="draws of run times within sacct's whole seconds")
    args = parser.parse_args()
    started = time.process_time()
    main(args.histories.split(","), args.sets.split(","), args.seeds)
    print(f"\n({time.process_time() - started:.0f} s CPU)")

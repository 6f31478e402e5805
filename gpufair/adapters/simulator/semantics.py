"""The two simulation semantics, as explicit switches so every difference is named in one place.

``artifact`` reproduces the Shockwave/Gavel simulators (SIMULATION.md) so numbers compare with
their recorded results; ``clean`` keeps the job model but drops what is an accident of that
code rather than of the problem. The README lists the switches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpufair.errors import InputError


@dataclass(frozen=True)
class Semantics:
    name: str
    # arrivals wait for the next round boundary (artifact) or are admitted at once (clean)
    admit_at_round_boundary: bool
    # a round ends when its last job's steps are done (artifact) or after exactly R seconds
    round_ends_at_last_finish: bool
    # arrivals and completions trigger a non-preemptive scheduling pass between rounds
    event_backfill: bool
    # checkpoint/restore cost of a (re)started job
    restart_overhead_s: float
    # artifact: charged only on full-length rounds and never in round 0; clean: on every start
    restart_overhead_full_rounds_only: bool
    # batch-size changes wait for the job's next completed round (artifact) or apply at once
    batch_switch_lag: bool
    # a batch-size switch counts the current epoch as done (artifact) or converts samples exactly
    switch_rounds_epoch_up: bool
    # a job over 1.5 × T_exclusive of run time is declared complete
    deadline_guard: bool
    # zero-progress rounds are counted and the job is removed after 5 (artifact)
    failure_path: bool
    # time-fraction policies recompute the allocation at most this often
    allocation_recompute_interval_s: float
    # charge attained service as held time (clean) or overhead-reduced run time (artifact)
    attained_includes_overhead: bool
    # solver for the allocation LPs: the artifacts' ECOS, whose interior (non-vertex) points
    # decide the round mechanism's order; gpufair's own choice (Gurobi/HiGHS) otherwise
    lp_backend: str
    # a job's first start costs the restart overhead too (a trace's work excludes start-up);
    # False for a replayed history, whose run times already include the jobs' start-up
    first_start_overhead: bool = True


ARTIFACT = Semantics(
    name="artifact", admit_at_round_boundary=True, round_ends_at_last_finish=True,
    event_backfill=False, restart_overhead_s=20.0, restart_overhead_full_rounds_only=True,
    batch_switch_lag=True, switch_rounds_epoch_up=True, deadline_guard=True, failure_path=True,
    allocation_recompute_interval_s=1000.0, attained_includes_overhead=False,
    lp_backend="ecos",
)
CLEAN = Semantics(
    name="clean", admit_at_round_boundary=False, round_ends_at_last_finish=False,
    event_backfill=True, restart_overhead_s=20.0, restart_overhead_full_rounds_only=False,
    batch_switch_lag=False, switch_rounds_epoch_up=False, deadline_guard=False,
    failure_path=False, allocation_recompute_interval_s=0.0, attained_includes_overhead=True,
    lp_backend="auto",
)
SEMANTICS = {s.name: s for s in (ARTIFACT, CLEAN)}
MAX_FAILED_ROUNDS = 5


def for_history(semantics: Semantics) -> Semantics:
    """``semantics`` for a replayed history: a job's recorded run time already holds its
    start-up, so only a restart (after a preemption or a move) costs the overhead."""
    return replace(semantics, name=f"{semantics.name}-history", first_start_overhead=False)


def semantics_named(name: str) -> Semantics:
    try:
        return SEMANTICS[name]
    except KeyError:
        raise InputError("--semantics", "expected 'artifact' or 'clean'", field="semantics",
                         value=name) from None

"""Each job's decision in one round: what happened to it, and why, in one record.

The policy says why in its own terms (:class:`gpufair.model.Reason`, from ``Plan.explain``);
the round knows what came of it: the diff's action (start, move, preemption...), a guard that
held the action back (:mod:`gpufair.core.guards`), or a start on GPUs the plan left idle
(:mod:`gpufair.core.fill`). :func:`decide` puts the two together, so the store, ``gpufair
explain`` and the job's AdminComment all read one record.

Only callers that keep reasons ask for them (the daemon, a dry run): a simulation never calls
``Plan.explain``, so reasons cost it nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpufair.core.guards import Deferred
from gpufair.model import (
    Action,
    ClusterState,
    Job,
    JobState,
    Migrate,
    Plan,
    Preempt,
    PreemptMode,
    Reason,
    Resize,
    Resume,
    SetPriority,
    Start,
)

#: What came of a job this round, in the words ``explain`` and the AdminComment show.
OUTCOMES = ("start", "fill", "run", "move", "resize", "preempt", "suspend", "resume",
            "priority", "wait", "held")


@dataclass(frozen=True, slots=True)
class Decision:
    """One job in one round: ``outcome`` (one of :data:`OUTCOMES`), the policy's ``reason``,
    and ``by``: what overrode the policy — the guard that held its action back (outcome
    ``held``), or the fill that started it on idle GPUs (outcome ``fill``)."""

    job_id: str
    outcome: str
    reason: Reason
    by: Reason | None = None

    def text(self) -> str:
        """One line for people: ``waiting — las.queue: queue 1, attained gpu s 7200``."""
        words = {"start": "starting", "fill": "starting on idle GPUs", "run": "running",
                 "move": "moving", "resize": "resizing", "preempt": "preempted",
                 "suspend": "suspended", "resume": "resuming", "priority": "reprioritised",
                 "wait": "waiting", "held": "held back"}
        head = words.get(self.outcome, self.outcome)
        if self.by is not None:
            return f"{head} ({self.by.text()}) — {self.reason.text()}"
        return f"{head} — {self.reason.text()}"


def _outcome(action: Action) -> str:
    if isinstance(action, Start):
        return "start"
    if isinstance(action, Preempt):
        return "suspend" if action.mode is PreemptMode.SUSPEND else "preempt"
    if isinstance(action, Migrate):
        return "move"
    if isinstance(action, Resize):
        return "resize"
    if isinstance(action, Resume):
        return "resume"
    if isinstance(action, SetPriority):
        return "priority"
    return type(action).__name__.lower()


def decide(state: ClusterState, plan: Plan, policy: str, actions: Iterable[Action],
           deferred: Iterable[Deferred], filled: Iterable[Action] = ()
           ) -> dict[str, Decision]:
    """Every active job's decision this round (and any job an action or guard touched).

    A job the policy gave no reason (a third-party policy without ``explain``) gets
    ``POLICY.unexplained``, so what the round did to it is still recorded."""
    reasons: Mapping[str, Reason] = plan.reasons()
    fills = {a.job_id for a in filled}
    idle = sum(len(getattr(a, "gpu_ids", ())) for a in filled)
    acted = {a.job_id: a for a in actions}
    held = {d.action.job_id: d for d in deferred}
    placed = {a.job_id for a in plan.assignments}
    out: dict[str, Decision] = {}
    for job in state.jobs:
        if not job.state.active and job.id not in acted and job.id not in held:
            continue
        reason = reasons.get(job.id) or Reason(f"{policy}.unexplained")
        if job.id in held:
            d = held[job.id]
            out[job.id] = Decision(job.id, "held", reason, Reason(d.code, d.figures))
        elif job.id in fills:
            out[job.id] = Decision(job.id, "fill", reason,
                                   Reason("fill.idle", {"idle_gpus_filled": idle}))
        elif job.id in acted:
            out[job.id] = Decision(job.id, _outcome(acted[job.id]), reason)
        elif job.state is JobState.PENDING or (job.state is JobState.SUSPENDED
                                               and job.id not in placed):
            out[job.id] = Decision(job.id, "wait", reason)
        else:
            out[job.id] = Decision(job.id, "run", reason)
    return out


def not_startable(waiting: Iterable[tuple[Job, str]]) -> dict[str, Decision]:
    """The decision of each job its resource manager would not start now, with its reason
    (its owner's hold, a dependency, a begin time, a Slurm limit with the association or
    QOS, the TRES and its use): such jobs are left out of the round, so no policy decides
    on them, yet their owners ask ``gpufair explain`` why they wait."""
    return {job.id: Decision(job.id, "wait", Reason("slurm.not_startable", {"because": why}))
            for job, why in waiting}

"""At most one re-plan per interval: the throttle every planning policy shares.

A plan (Gavel's time-fraction allocation, Shockwave's market over its window) acts on running
jobs only at round boundaries, since preemption waits for them, so an event mid-round (an
arrival, a completion, a batch-size change) need not re-plan at once. On a busy cluster events
come many times per round, and re-solving the plan's LP/MILP at each one was most of a
simulation's time (issue 15: 1,835 max-min solves in 239 rounds at 900 jobs / 256 GPUs).
An event less than the interval after the last plan leaves that plan standing, and what it
does not cover (a new job) waits for the next plan.

One option, ``replan_interval_s``, declared once here (:func:`replan_interval_setting`) and
read the same way by every policy that plans (:func:`replan_interval`, :func:`replan_due`).
A policy that also wants to know whether a decision is a round boundary (where its plan may
preempt, so a stale plan costs most) implements :class:`BoundaryAware`; the round pipeline
(:class:`gpufair.core.round.Round`) tells it before each decision.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

from gpufair.settings import setting

_HELP = ("an event (arrival, completion, batch-size change) re-plans only this long after the"
         " last plan; sooner, the plan stands and new jobs wait for the next one (default: {};"
         " 0: at once)")


def replan_interval_setting(default: str) -> Any:
    """The ``replan_interval_s`` option of a planning policy; ``default`` says in words what
    unset means for it (the policy's own fraction of a round)."""
    return setting(None, _HELP.format(default), ge=0.0)


def replan_interval(option: float | None, round_s: float, default_rounds: float) -> float:
    """Seconds between plans: the option when set, else ``default_rounds`` rounds."""
    interval = default_rounds * round_s if option is None else float(option)
    if not (math.isfinite(interval) and interval >= 0):   # options are checked on parsing
        raise ValueError(f"replan interval must be a finite number of seconds >= 0, "
                         f"got {interval!r}")
    return interval


def replan_due(last_plan_s: float | None, now: float, interval_s: float) -> bool:
    """May an event at ``now`` re-plan? Always when there is no plan yet."""
    return last_plan_s is None or now - last_plan_s >= interval_s


@runtime_checkable
class BoundaryAware(Protocol):
    """A policy told, before each decision, whether the decision may preempt (a round
    boundary) or only fill GPUs that are free (an event between boundaries)."""

    def next_decision(self, preemptive: bool) -> None: ...

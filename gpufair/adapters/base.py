"""The protocols every resource-manager adapter implements (Slurm, YARN, simulator, recorder).

Two levels, because a simulation and a live cluster need different things of an adapter:

- :class:`Adapter`: one consistent snapshot, and actions applied in order with a result each.
  The trace simulator implements this; so does every live adapter.
- :class:`ResourceManager`: what the daemon needs to act on a live cluster safely — the
  checkpoint warning before preemptions, one action at a time (so the journal can mark each),
  and a fresh check of whether an action is already in effect, so that a daemon restarted
  mid-round neither repeats nor loses an action. The daemon depends on this protocol only,
  never on one adapter.

Failures are told apart: :class:`Unavailable` (raised by ``snapshot``, or an
``ActionResult`` with ``retry``) means "the resource manager did not answer, try later";
``ok`` false without ``retry`` means "it answered, and refused this action".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Protocol, runtime_checkable

from gpufair.model import Action, ActionResult, ClusterState


class Unavailable(RuntimeError):
    """The resource manager did not give a usable answer (after the adapter's retries)."""


#: ``ours(job_id, run, at)``: whether gpufair itself requeued run ``run`` (the job's restart
#: count while it ran) of the job, at ``at`` (epoch s): the daemon answers from its journal.
RequeueCheck = Callable[[str, int, float], bool]


class Effect(str, Enum):
    """What the resource manager shows of an action right now."""

    IN_EFFECT = "in effect"      # done (perhaps just before a crash hid it)
    JOB_GONE = "job gone"        # the job finished or left: nothing to do
    NOT_YET = "not yet"          # still to be carried out


@runtime_checkable
class Adapter(Protocol):
    name: str

    def snapshot(self) -> ClusterState:
        """One consistent view of nodes and jobs; never a half-read state. Raises
        :class:`Unavailable` when the resource manager does not answer."""
        ...

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        """Carry actions out in order; report each outcome rather than raising."""
        ...


@runtime_checkable
class ResourceManager(Adapter, Protocol):
    def warn_preemptions(self, actions: Sequence[Action]) -> float:
        """Tell every job the actions will take GPUs from to checkpoint; return how long to
        wait (the longest grace) before acting."""
        ...

    def apply_one(self, action: Action) -> ActionResult:
        """Carry one action out; never raises for a refused or unreachable action."""
        ...

    def check(self, action: Action) -> Effect:
        """Whether ``action`` already shows, read fresh from the resource manager."""
        ...

    def reconcile(self, ours: RequeueCheck | None = None) -> list[str]:
        """Re-assert what the resource manager drifted from outside gpufair (a job requeued
        by its owner that would start again where nobody planned it); return what was
        re-asserted, for the log and the metrics. Called before each round's snapshot.
        ``ours`` tells gpufair's own requeues from others' (a job its owner requeued *held*
        is left held for them)."""
        ...

    def status(self) -> Mapping[str, float]:
        """The adapter's own health in numbers (credentials' expiry, renewals, ...), for
        the daemon's metrics; empty when there is nothing to say."""
        ...


@runtime_checkable
class AppliesMany(Protocol):
    """A resource manager that carries several actions out together, cheaper than one at a
    time (Slurm: many starts share their reads and one ``scontrol release``). Optional: the
    daemon hands it consecutive journalled actions, else one :meth:`apply_one` each."""

    def apply_many(self, actions: Sequence[Action]) -> list[ActionResult]:
        """Carry ``actions`` out in order; one outcome each, as :meth:`apply_one` gives it.
        Once the resource manager stops answering nothing more is sent: the rest come
        back with ``retry``."""
        ...


@runtime_checkable
class ShowsReasons(Protocol):
    """A resource manager that can show users why gpufair decided what it did about their
    jobs where they already look (Slurm: the job's AdminComment). Optional: the daemon asks
    only adapters that implement it, and never in a dry run."""

    def show_reasons(self, lines: Mapping[str, str]) -> int:
        """Show each job's one-line reason where it is not shown yet; return how many jobs
        the resource manager was asked to update (each at most once per change, and no
        more often than the adapter's own rate limit)."""
        ...

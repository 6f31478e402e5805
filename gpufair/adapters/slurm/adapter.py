"""The Slurm adapter: snapshot() reads squeue+sinfo and translates; apply() carries actions.

Reads are retried with exponential backoff (slurmctld restarting, a timeout) and then fail as
:class:`SlurmUnavailable`, which the daemon turns into a skipped round, never into actions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from gpufair.adapters.slurm.commands import NotExpressible, Step, steps_for
from gpufair.adapters.slurm.translate import SlurmJobInfo, SlurmView, block_nodes, translate
from gpufair.adapters.slurm.transport import (
    CliTransport,
    CommandResult,
    Transport,
    TransportError,
)
from gpufair.model import (
    Action,
    ActionResult,
    ClusterState,
    JobState,
    Migrate,
    Preempt,
    PreemptMode,
    Resize,
    Resume,
    SetPriority,
    Start,
    node_of,
)

log = logging.getLogger("gpufair.slurm")


class SlurmUnavailable(RuntimeError):
    """Slurm did not give a usable answer after the retries."""


@dataclass(frozen=True)
class SlurmSettings:
    managed_partitions: tuple[str, ...] = ("gpu",)
    mode: str = "hard"                 # hard | soft
    retries: int = 3
    backoff_s: float = 0.5
    settle_timeout_s: float = 30.0     # how long a requeued job may stay COMPLETING
    checkpoint_signal: str = "USR1"


@dataclass
class SlurmAdapter:
    transport: Transport = field(default_factory=CliTransport)
    settings: SlurmSettings = field(default_factory=SlurmSettings)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    last_view: SlurmView | None = None

    @property
    def hard(self) -> bool:
        return self.settings.mode == "hard"

    # ---- read side ------------------------------------------------------------------------
    def read_documents(self) -> tuple[dict, dict]:
        delay = self.settings.backoff_s
        last: Exception | None = None
        for attempt in range(1, self.settings.retries + 1):
            try:
                jobs = self.transport.read_jobs()
                nodes = self.transport.read_nodes()
                return jobs, nodes
            except TransportError as exc:
                last = exc
                log.warning("slurm read failed (attempt %d/%d): %s", attempt,
                            self.settings.retries, exc)
                if attempt < self.settings.retries:
                    self.sleep(delay)
                    delay *= 2
        raise SlurmUnavailable(str(last))

    def view(self) -> SlurmView:
        jobs, nodes = self.read_documents()
        view = translate(jobs, nodes, now=self.clock(),
                         managed_partitions=self.settings.managed_partitions,
                         source=self.transport.name)
        for problem in view.problems:
            log.warning("%s", problem)
        self.last_view = view
        return view

    def snapshot(self) -> ClusterState:
        view = self.view()
        if not self.hard:
            return view.state
        # hard mode: a pending job is gpufair's to start only if job_submit.lua marked it
        # (jobs of other partitions, or submitted before the plugin, are Slurm's business).
        # A marked job gpufair already released is committed to the nodes it was pinned to:
        # it leaves the plan, and those nodes are not offered to anybody else this round.
        keep = []
        starting: set[str] = set()
        for job in view.state.jobs:
            info = view.jobs[job.id]
            if job.state is JobState.PENDING and (not info.managed or not info.held):
                if info.managed:
                    starting.update(info.pinned)
                continue
            keep.append(job)
        state = view.state.with_jobs(keep)
        if starting:
            state = replace(state, nodes=tuple(block_nodes(state.nodes, starting)))
        return state

    # ---- write side -----------------------------------------------------------------------
    def warn_preemptions(self, actions: Sequence[Action]) -> float:
        """Send the checkpoint signal to every job a round will preempt; return the grace."""
        grace = 0.0
        for action in actions:
            if isinstance(action, Preempt) and action.grace_s > 0:
                result = self.transport.control("signal", action.job_id,
                                                {"signal": self.settings.checkpoint_signal})
                if not result.ok:
                    log.warning("job %s: checkpoint signal failed: %s", action.job_id,
                                result.detail)
                grace = max(grace, action.grace_s)
        return grace

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        grace = self.warn_preemptions(actions)
        if grace:
            self.sleep(grace)
        return [self.apply_one(a) for a in actions]

    def apply_one(self, action: Action) -> ActionResult:
        info = self._info(action.job_id)
        if info is None:
            return ActionResult(action, False, f"job {action.job_id} not in the last snapshot")
        try:
            steps = steps_for(action, info, hard=self.hard)
        except NotExpressible as exc:
            return ActionResult(action, False, f"job {action.job_id}: {exc}")
        if isinstance(action, Preempt) and action.mode is PreemptMode.SUSPEND:
            log.warning("job %s suspended: it keeps its GPUs until resumed", action.job_id)
        done: list[str] = []
        for step in steps:
            outcome = self._run(step)
            if not outcome[0]:
                return ActionResult(action, False, f"{step.verb} failed: {outcome[1]}"
                                    + (f" (after {', '.join(done)})" if done else ""))
            done.append(step.verb)
        return ActionResult(action, True, ", ".join(done))

    def _run(self, step: Step) -> tuple[bool, str]:
        if step.verb == "await-pending":
            return self._await_pending(step.job_id)
        result = self.transport.control(step.verb, step.job_id, step.as_fields() or None)
        return result.ok, result.detail

    def _await_pending(self, job_id: str) -> tuple[bool, str]:
        """After a requeue the job is COMPLETING; updates then would be overwritten."""
        deadline = self.clock() + self.settings.settle_timeout_s
        while self.clock() < deadline:
            try:
                jobs, _ = self.transport.read_jobs(), None
            except TransportError as exc:
                return False, str(exc)
            state = next((str(j.get("job_state")) for j in jobs.get("jobs", ())
                          if str(j.get("job_id")) == job_id), None)
            if state == "PENDING":
                return True, "pending"
            self.sleep(0.25)
        return False, f"still not pending after {self.settings.settle_timeout_s:g} s"

    def _info(self, job_id: str) -> SlurmJobInfo | None:
        if self.last_view is None:
            self.view()
        assert self.last_view is not None
        return self.last_view.jobs.get(job_id)

    def hold(self, job_id: str) -> CommandResult:
        """Admin operations outside the plan's vocabulary (no model action expresses them)."""
        return self.transport.control("hold", job_id)

    def cancel(self, job_id: str) -> CommandResult:
        return self.transport.control("cancel", job_id)

    # ---- idempotence ----------------------------------------------------------------------
    def effect_visible(self, action: Action, view: SlurmView) -> bool:
        """Whether Slurm already shows the action's effect (a crash may have hidden that it
        was carried out): used on restart so that an action is neither lost nor repeated."""
        job = next((j for j in view.state.jobs if j.id == action.job_id), None)
        info = view.jobs.get(action.job_id)
        if action.job_id in view.settling:
            return isinstance(action, Preempt)
        if job is None or info is None:
            return False
        if isinstance(action, Start):
            return job.state is JobState.RUNNING or (job.state is JobState.PENDING
                                                     and not info.held)
        if isinstance(action, Resume):
            return job.state is JobState.RUNNING
        if isinstance(action, Preempt):
            wanted = JobState.SUSPENDED if action.mode is PreemptMode.SUSPEND \
                else JobState.PENDING
            return job.state is wanted
        if isinstance(action, (Resize, Migrate)):
            target = {node_of(g) for g in action.gpu_ids}
            return job.state is JobState.RUNNING and set(info.nodes) == target
        if isinstance(action, SetPriority):
            return info.priority is not None and round(info.priority) == round(action.priority)
        return False



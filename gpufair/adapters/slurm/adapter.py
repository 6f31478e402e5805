"""The Slurm adapter: snapshot() reads squeue+sinfo and translates; apply() carries actions.

Reads are retried with exponential backoff (slurmctld restarting, a timeout) and then fail as
:class:`SlurmUnavailable`, which the daemon turns into a skipped round, never into actions.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from gpufair.adapters.base import Effect, RequeueCheck, Unavailable
from gpufair.adapters.slurm.arrays import parse_task_list
from gpufair.adapters.slurm.commands import (
    NotExpressible,
    Step,
    precondition,
    starting,
    steps_for,
)
from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.limits import read_limits, within_limits
from gpufair.adapters.slurm.record_cache import RecordCache
from gpufair.adapters.slurm.reservations import outside_reservations, read_reservations
from gpufair.adapters.slurm.token import TokenSource
from gpufair.adapters.slurm.translate import (
    REASON_SEP,
    REFUSED_NOTE,
    USER_HOLD_MARK,
    SlurmJobInfo,
    SlurmView,
    admin_marks,
    block_nodes,
    gpu_use_disagrees,
    mark_fits,
    no_resources,
    refused,
    translate,
)
from gpufair.adapters.slurm.transport import (
    MANY_VERBS,
    CliTransport,
    CommandResult,
    RestTransport,
    Transport,
    TransportError,
)
from gpufair.errors import InputError
from gpufair.model import (
    Action,
    ActionResult,
    ClusterState,
    Job,
    JobState,
    Migrate,
    NodeState,
    Preempt,
    PreemptMode,
    Resize,
    Resume,
    SetPriority,
    Start,
    node_of,
)
from gpufair.model.host_room import HostRoom
from gpufair.settings import setting

log = logging.getLogger("gpufair.slurm")


class SlurmUnavailable(Unavailable):
    """Slurm did not give a usable answer after the retries."""


@dataclass(frozen=True)
class SlurmSettings:
    """The ``[slurm]`` section of gpufair.toml."""

    transport: str = setting("cli", "cli: squeue/sinfo --json + scontrol; rest: slurmrestd",
                             choices=("cli", "rest"))
    rest_url: str | None = setting(None, "unix:/path/to/slurmrestd.socket or http://host:port")
    user: str | None = setting(None, "X-SLURM-USER-NAME with a token (rest over TCP)")
    token_file: str | None = setting(None, "file holding the JWT (output of scontrol token);"
                                     " re-read whenever it changes")
    token_renew: bool = setting(False, "renew the JWT with `scontrol token` before it expires"
                                " (the daemon runs as root or SlurmUser) and save it to"
                                " token_file")
    token_lifespan_s: int = setting(3600, "lifespan asked of a renewed JWT", ge=60)
    managed_partitions: tuple[str, ...] = setting(
        ("gpu",), "partitions gpufair schedules (the same list as MANAGED in job_submit.lua)")
    timeout_s: float = setting(10.0, "per Slurm command or request", gt=0.0)
    retries: int = setting(3, "reads tried before a round is skipped", ge=1)
    backoff_s: float = setting(0.5, "first pause between read retries (doubles)", ge=0.0)
    settle_timeout_s: float = setting(30.0, "how long a requeued job may stay COMPLETING",
                                      gt=0.0)
    kill_invalid_depend: bool = setting(
        False, "as slurm.conf's SchedulerParameters=kill_invalid_depend (set both alike): a"
        " held job whose dependency can never be met is cancelled unless it asked"
        " --kill-on-invalid-dep=no (one that asked =yes is cancelled either way)")
    read_limits: bool = setting(
        True, "hard mode: read the association/QOS limits (scontrol show assoc_mgr) each"
        " round and start no job one of them forbids (GPUs, running jobs)")
    read_reservations: bool = setting(
        True, "hard mode: read the reservations (scontrol -o show reservation) each round and"
        " plan no job onto a reserved node for a run that would overlap the reservation")
    checkpoint_signal: str = setting("USR1", "sent grace_s before a preemption or move, to the"
                                     " jobs that opted in")
    checkpoint_opt_in: str = setting(
        "gpufair:checkpoint", "jobs whose --comment holds this text get the checkpoint signal"
        " (a job that does not handle it would die of it); empty: every job gets it")
    reason_comment: bool = setting(True, "hard mode: show each managed job's one-line reason"
                                   " (gpufair explain) in its AdminComment, after the marks")
    reason_comment_min_interval_s: float = setting(
        60.0, "update a job's AdminComment reason at most this often (it changes only when"
        " the job's outcome, reason code or guard does)", ge=0.0)
    reason_comment_max_per_round: int = setting(
        50, "AdminComment updates per round at most (the rest wait for later rounds)", ge=1)

    def __post_init__(self) -> None:
        if any(not p for p in self.managed_partitions):
            raise ValueError("managed_partitions: empty partition name")


#: squeue + sinfo pairs read at most, while they disagree on the GPUs in use (a job started or
#: ended between them); the last pair stands (what sinfo shows in use and no job holds is
#: never offered). Three: a disagreement that outlives two re-reads is not a race
CONSISTENT_READS = 3
#: How far into the next second a restart after a requeue waits (see ``_await_pending``).
REVOKE_MARGIN_S = 0.05
#: ``state_description`` of a job ``scontrol requeuehold`` stopped: the same whoever ran it
#: (gpufair's preemption or the job's owner: Slurm 22.05 shows nothing else that differs)
REQUEUE_HELD = "job requeued in held state"
#: how long reconcile()'s view stands in for the round's snapshot read (it is read right after)
JUDGED_FOR_S = 2.0
#: :meth:`SlurmAdapter.changed` asks Slurm for changes since this long before the last read:
#: slurmctld's clock and this host's may differ a little, and a change in the same second as
#: the read must not look older than it (a change inside the margin costs one full read more)
CHANGE_MARGIN_S = 5.0
#: gpufair's note in the admin comment (users cannot change it) of a job it left held for its
#: owner: ``gpufair:ownerhold=RESTARTS``. Once the owner's release took their hold mark out,
#: the note says that run is gpufair's again (Slurm still describes it "requeued in held state")
OWNER_HOLD_NOTE = "gpufair:ownerhold="


def _batch_kind(action: Action) -> str | None:
    """Which run of actions ``action`` may be sent with (:meth:`SlurmAdapter.apply_many`):
    starts with starts, requeueing preemptions with preemptions; None alone (a suspend, a
    move, a resize, a priority: their steps differ job to job)."""
    if isinstance(action, Start):
        return "start"
    if isinstance(action, Preempt) and action.mode is not PreemptMode.SUSPEND:
        return "preempt"
    return None


@dataclass
class SlurmAdapter:
    transport: Transport = field(default_factory=CliTransport)
    settings: SlurmSettings = field(default_factory=SlurmSettings)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    last_view: SlurmView | None = None
    mode: str = "hard"                 # the daemon's: hard starts/places, soft only ranks
    #: reconcile()'s view when it changed nothing, for the snapshot right after it (monotonic
    #: time it was read): the round then plans on the very state reconcile judged
    _judged: tuple[SlurmView, float] | None = field(default=None, repr=False)
    #: wall time (this host's) right before the last complete read of jobs and nodes
    _read_at: float | None = field(default=None, repr=False)
    #: the problems of the last read, logged already (see ``_log_problems``)
    _logged: set[str] = field(default_factory=set, repr=False)
    #: monotonic time each job's AdminComment reason was last written (the rate limit)
    _shown_at: dict[str, float] = field(default_factory=dict, repr=False)
    #: the last read's job records and their translations: unchanged ones are not translated
    #: again (issue 30; see ``record_cache``)
    records: RecordCache = field(default_factory=RecordCache, repr=False)
    #: the transport's fingerprints of the documents of the last view (see ``changed``)
    _stamps: Any = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, settings: SlurmSettings, *, mode: str = "hard") -> SlurmAdapter:
        """The adapter ``[slurm]`` describes: the CLI, or slurmrestd (with its token)."""
        cli = CliTransport(timeout_s=settings.timeout_s)
        transport: Transport = cli
        if settings.transport == "rest":
            if not settings.rest_url:
                raise InputError("config", "transport rest needs rest_url",
                                 field="slurm.rest_url")
            tokens = None
            if settings.token_file or settings.token_renew:
                if settings.token_file and not settings.token_renew:
                    try:
                        Path(settings.token_file).read_bytes()
                    except OSError as exc:
                        raise InputError(settings.token_file, f"cannot read token: "
                                         f"{exc.strerror}", field="slurm.token_file") from exc
                tokens = TokenSource(settings.token_file, user=settings.user or "root",
                                     renew=settings.token_renew,
                                     lifespan_s=settings.token_lifespan_s)
            transport = RestTransport(settings.rest_url, user=settings.user,
                                      timeout_s=settings.timeout_s, cli=cli, tokens=tokens)
        return cls(transport=transport, settings=settings, mode=mode)

    @property
    def name(self) -> str:
        return f"slurm/{self.transport.name}"

    @property
    def hard(self) -> bool:
        return self.mode == "hard"

    # ---- read side ------------------------------------------------------------------------
    def read_documents(self) -> tuple[dict, dict]:
        """squeue and sinfo, retried with exponential backoff (slurmctld restarting), and
        read again (at most ``CONSISTENT_READS`` times) while they disagree on the GPUs in
        use: a job started or ended between the two reads (see ``gpu_use_disagrees``)."""
        retrying = Retrying(
            stop=stop_after_attempt(self.settings.retries),
            wait=wait_exponential(multiplier=self.settings.backoff_s, exp_base=2),
            retry=retry_if_exception_type(TransportError), sleep=self.sleep, reraise=True,
            before_sleep=lambda rs: log.warning(
                "slurm read failed (attempt %d/%d): %s", rs.attempt_number,
                self.settings.retries, rs.outcome.exception() if rs.outcome else "?"))
        try:
            for attempt in retrying:
                with attempt:
                    started = time.time()   # Slurm's clock domain, never the injected clock
                    documents = self._consistent_read()
                    self._read_at = started
                    return documents
        except TransportError as exc:
            log.warning("slurm read failed %d times: %s", self.settings.retries, exc)
            raise SlurmUnavailable(str(exc)) from exc
        raise AssertionError("unreachable: tenacity returns or raises")

    def changed(self) -> bool:
        """Whether jobs or nodes may have changed since the last read: False only when the
        transport can ask slurmctld (slurmrestd's ``update_time``) and it says nothing did,
        or (the CLI) squeue prints the very bytes, and sinfo the same records, as at the
        last view. The daemon's poll asks this first, so a quiet cluster is neither decoded
        in full nor translated every ``poll_s`` (issue 30)."""
        current = getattr(self.transport, "current_stamps", None)
        if current is not None and self._stamps is not None:
            try:
                return bool(current() != self._stamps)
            except TransportError:
                return True   # the full read that follows reports it
        probe = getattr(self.transport, "changed_since", None)
        if probe is None or self._read_at is None:
            return True
        try:
            return bool(probe(self._read_at - CHANGE_MARGIN_S))
        except TransportError:
            return True   # the full read that follows reports it

    def _consistent_read(self) -> tuple[dict, dict]:
        """One squeue and one sinfo that agree on who holds which GPU, or the last pair read
        (then the disagreement is real: GPUs of jobs gpufair cannot see, never offered)."""
        for _ in range(CONSISTENT_READS - 1):
            jobs, nodes = self.transport.read_jobs(), self.transport.read_nodes()
            differ = gpu_use_disagrees(jobs, nodes)
            if not differ:
                return jobs, nodes
            log.debug("squeue and sinfo disagree on the GPUs in use on %s: read again",
                      ",".join(differ))
        return self.transport.read_jobs(), self.transport.read_nodes()

    def view(self) -> SlurmView:
        jobs, nodes = self.read_documents()
        stamps = getattr(self.transport, "stamps", None)
        self._stamps = stamps() if stamps is not None else None
        if self._stamps is not None and None in self._stamps:
            self._stamps = None   # (a transport that read some other way: no stamp)
        view = translate(jobs, nodes, now=self.clock(),
                         managed_partitions=self.settings.managed_partitions,
                         source=self.transport.name, cache=self.records)
        self._log_problems(view.problems)
        self.last_view = view
        return view

    def _log_problems(self, problems: Sequence[str]) -> None:
        """Log each problem of a read once while it lasts, not at every read: the daemon reads
        Slurm two or three times a round and at every poll, so a job's malformed
        ``gpufair:gpus=`` comment was warned about twice per round for as long as it waited
        (issue 29). A problem that goes away and comes back is logged again."""
        for problem in problems:
            if problem not in self._logged:
                log.warning("%s", problem)
        self._logged = set(problems)

    def snapshot(self) -> ClusterState:
        judged, self._judged = self._judged, None
        fresh = judged is not None and time.monotonic() - judged[1] < JUDGED_FOR_S
        view = judged[0] if judged is not None and fresh else self.view()
        if not self.hard:
            return view.state
        # hard mode: a pending job is gpufair's to start only if job_submit.lua marked it
        # (jobs of other partitions, or submitted before the plugin, are Slurm's business).
        # A marked job gpufair already released is committed to the nodes it was pinned to:
        # the policy sees it running there (it got its GPUs; Slurm starts it at its next
        # pass), so no policy forgets it or plans it twice. That holds while a requeue is
        # still settling on a pinned node: the job is shown running there, on a node not
        # usable this round, so the guards leave it and its GPUs as they are. One that
        # cannot start there (too few GPUs left, a node down or drained in Slurm) is shown
        # waiting, as reconcile leaves it (held again) before the daemon's snapshot: the
        # round plans it anew, and a dry run of a snapshot taken without reconcile plans
        # what the daemon does. Where it cannot be told (a pinned node unknown, or held back
        # for an unreadable or contradictory record) it leaves the plan and its nodes are
        # not offered to anybody else this round.
        placed = starting_places(view)
        keep = []
        blocked: set[str] = set()
        for job in view.state.jobs:
            info = view.jobs[job.id]
            if starting(info):
                gpus = placed.get(job.id)
                if gpus:
                    keep.append(replace(job, state=JobState.RUNNING, gpus_held=gpus,
                                        start_s=view.state.time_s))
                elif gpus == ():
                    keep.append(job)      # stranded: pending, to be placed anew
                else:
                    blocked.update(info.pinned)
                continue
            if job.state is JobState.PENDING and not info.managed:
                continue
            keep.append(job)
        state = view.state.with_jobs(keep)
        if blocked:
            state = replace(state, nodes=tuple(block_nodes(state.nodes, blocked)))
        return self._within_limits(view, self._outside_reservations(state))

    def _outside_reservations(self, state: ClusterState) -> ClusterState:
        """Waiting jobs kept off reserved nodes for a run that would overlap the
        reservation (:mod:`gpufair.adapters.slurm.reservations`)."""
        if not self.settings.read_reservations:
            return state
        reservations = read_reservations(self.transport)
        return state if reservations is None else outside_reservations(state, reservations)

    def _within_limits(self, view: SlurmView, state: ClusterState) -> ClusterState:
        """The state without the waiting jobs an association or QOS limit forbids to start
        now (:mod:`gpufair.adapters.slurm.limits`); the dry run lists them as waiting."""
        if not self.settings.read_limits:
            return state
        limits = read_limits(self.transport)
        if limits is None:
            return state
        state, kept_out = within_limits(state, view.jobs, limits)
        if kept_out:
            out = {j.id for j, _ in kept_out}
            self.last_view = replace(
                view, state=view.state.with_jobs([j for j in view.state.jobs
                                                  if j.id not in out]),
                waiting=view.waiting + kept_out)
        return state

    def reconcile(self, ours: RequeueCheck | None = None) -> list[str]:
        """Hold again the managed jobs that are pending unheld because somebody else requeued
        them (their owner's ``scontrol requeue``, or Slurm after a node failure): they wait for
        their begin time, then Slurm would start them wherever it likes. gpufair's own starts
        never leave a job waiting on BeginTime (verify-released sets it to now).

        A job somebody else requeued *held* (its owner's ``scontrol requeuehold``, which no
        job_submit.lua hook sees) looks in Slurm exactly like one gpufair preempted; ``ours``
        (the daemon's journal) tells them apart. Such a job is left held for its owner: it
        gets the owner's hold mark, as ``scontrol hold`` would have given it, so gpufair does
        not start it and the owner's ``scontrol release`` makes it gpufair's again."""
        if not self.hard:
            return []
        try:
            view = self.view()
        except SlurmUnavailable:
            return []
        read_at = time.monotonic()
        held = []
        marked = False
        for job in view.state.jobs:
            info = view.jobs[job.id]
            if job.state is not JobState.PENDING or not info.managed or job.restarts <= 0:
                continue
            if not info.held and info.reason == "BeginTime":
                result = self.hold(info.record_id)
                if result.ok:
                    held.append(job.id)
                else:
                    log.warning("job %s requeued outside gpufair, not held again: %s",
                                job.id, result.detail)
            elif info.held and info.description == REQUEUE_HELD and ours is not None \
                    and f"{OWNER_HOLD_NOTE}{job.restarts}" not in \
                    admin_marks(info.admin_comment).split() \
                    and not ours(job.id, job.restarts - 1, job.arrival_s):
                marked = self._leave_to_owner(info.control_id, job.restarts) or marked
        rehold = self._rehold_stranded(view)
        cancelled = self._cancel_never_met(view)
        if not held and not marked and not rehold and not cancelled:
            # a job requeued held between this view and a fresh read would be planned
            # unjudged (started again): the round's snapshot is this view
            self._judged = (view, read_at)
        return held

    def _cancel_never_met(self, view: SlurmView) -> bool:
        """Cancel the held jobs whose dependency can never be met and that ask for it
        (``--kill-on-invalid-dep=yes``, or ``kill_invalid_depend`` and not ``=no``), as Slurm
        would: it re-checks no held job's dependencies, and gpufair holds them all, so
        such a job waited forever. The others wait, as they would in Slurm (its reason then
        DependencyNeverSatisfied; ``gpufair dry-run`` lists why). A fresh read first: the
        job must still wait on the same dependency. True if Slurm was asked to change
        anything."""
        asked = False
        for job_id, (kill, dependency) in view.never_met.items():
            if not (self.settings.kill_invalid_depend if kill is None else kill):
                continue
            try:
                fresh = self._read_job(job_id)
            except TransportError as exc:
                log.warning("job %s: not read, not cancelled: %s", job_id, exc)
                continue
            if fresh is None or fresh.get("job_state") != "PENDING" or \
                    fresh.get("dependency") != dependency:
                continue
            asked = True
            result = self.cancel(job_id)
            why = next((w for j, w in view.waiting if j.id == job_id), "")
            if result.ok:
                log.warning("job %s cancelled: %s, and it asked to be cancelled then "
                            "(--kill-on-invalid-dep)", job_id, why,
                            extra={"fields": {"event": "dependency_never_met",
                                              "job": job_id}})
            else:
                log.warning("job %s: %s, not cancelled: %s", job_id, why, result.detail)
        return asked

    def _rehold_stranded(self, view: SlurmView) -> bool:
        """Hold again the jobs gpufair released that can no longer start where they are
        pinned, so that this round plans them anew. True if Slurm was asked to change
        anything (the round's snapshot must then read it afresh).

        Slurm starts the jobs gpufair does not manage whenever it likes: one may take GPUs
        of a node between the snapshot a round planned on and the release of a job pinned
        there. Left alone, that job would wait as long as the other runs (each round
        showing it running where it cannot start) and never be planned again. So would a
        job pinned to a node that went down or that an admin drained: Slurm starts nothing
        there until the node is back."""
        rehold = False
        for job_id in stranded(view):
            rehold = True
            info = view.jobs[job_id]
            result = self.hold(info.record_id)
            if result.ok and refused(info.reason):
                self._note_refusal(info)
            if result.ok:
                log.warning("job %s was released onto %s, where it cannot start (a node "
                            "down or drained, or its GPUs taken): held again to be placed "
                            "anew", job_id, ",".join(view.jobs[job_id].pinned),
                            extra={"fields": {"event": "stranded", "job": job_id}})
            else:
                log.warning("job %s cannot start where it was released, not held again: "
                            "%s", job_id, result.detail)
        return rehold

    def _note_refusal(self, info: SlurmJobInfo) -> None:
        """Note in the job's admin comment that Slurm refused to start it, and when: the
        translation keeps it out of the plan for a while (a limit lasts until other jobs end;
        offered again at once, it would be released and refused round after round). The note
        lives in Slurm, so a dry run, a restarted daemon and ``gpufair explain`` see it."""
        marks = admin_marks(info.admin_comment)   # a reason shown after the marks stays
        words = [w for w in marks.split() if not w.startswith(REFUSED_NOTE)]
        note = " ".join([*words, f"{REFUSED_NOTE}{info.reason}@{self.clock():.0f}"]) + \
            info.admin_comment[len(marks):]
        result = self.transport.control("update", info.record_id, {"AdminComment": note})
        level = logging.WARNING if result.ok else logging.ERROR
        log.log(level, "job %s: Slurm refused to start it where gpufair released it (%s): "
                "held again%s", info.job_id, info.reason,
                "" if result.ok else f", the refusal not noted: {result.detail}",
                extra={"fields": {"event": "refused", "job": info.job_id,
                                  "reason": info.reason}})

    def _leave_to_owner(self, job_id: str, restarts: int) -> bool:
        """Mark a job requeued held by somebody else with the owner's hold (job_submit.lua's
        word in its comment), after a fresh read shows it still so. True if Slurm was
        asked to change anything (the round's snapshot must then read it afresh)."""
        try:
            fresh = self._read_job(job_id)
        except TransportError as exc:
            log.warning("job %s: not read, its hold left as it is: %s", job_id, exc)
            return True   # unknown: the snapshot reads afresh
        if fresh is None or fresh.get("job_state") != "PENDING" or fresh.get("priority") != 0 \
                or fresh.get("restart_cnt") != restarts \
                or fresh.get("state_description") != REQUEUE_HELD:
            return True   # changed since the view, or held some other way: not this case
        comment = str(fresh.get("comment") or "")
        admin = str(fresh.get("admin_comment") or "")
        # once per run (reconcile checks it); an earlier run's note goes; a reason stays after
        marks, reason = admin_marks(admin), admin[len(admin_marks(admin)):]
        words = [w for w in marks.split() if not w.startswith(OWNER_HOLD_NOTE)]
        fields = {}
        if USER_HOLD_MARK not in comment.split():
            if mark_fits(comment):
                fields["Comment"] = f"{comment} {USER_HOLD_MARK}" if comment.strip() \
                    else USER_HOLD_MARK
            elif USER_HOLD_MARK not in words:   # no room: where job_submit.lua keeps it then
                words.append(USER_HOLD_MARK)
        fields["AdminComment"] = " ".join([*words, f"{OWNER_HOLD_NOTE}{restarts}"]) + reason
        result = self.transport.control("update", job_id, fields)
        if result.ok:
            log.warning("job %s was requeued held by its owner, not by gpufair: left held "
                        "for them until their scontrol release", job_id,
                        extra={"fields": {"event": "owner_requeuehold", "job": job_id}})
        else:
            log.warning("job %s requeued held outside gpufair, not marked as its owner's "
                        "hold: %s", job_id, result.detail)
        return True

    # ---- reasons where users look ---------------------------------------------------------
    def show_reasons(self, lines: Mapping[str, str]) -> int:
        """Each managed job's reason in its AdminComment, after job_submit.lua's marks and
        :data:`REASON_SEP`: users see it in ``squeue -O AdminComment`` and ``scontrol show
        job``, and cannot change it (Slurm lets only operators set the admin comment, and
        the marks before the separator are all gpufair reads).

        slurmctld is asked only where the comment does not show the line yet (compared with
        the round's own view: no extra read), and for each job at most once per
        ``reason_comment_min_interval_s``; a refused update is logged and tried again at a
        later round. The daemon hands the same line until the job's decision changes."""
        view = self.last_view
        if not (self.settings.reason_comment and self.hard) or view is None:
            return 0
        now = time.monotonic()
        gap = self.settings.reason_comment_min_interval_s
        live = set(view.jobs)
        self._shown_at = {j: t for j, t in self._shown_at.items() if j in live}
        asked = 0
        for job_id, line in lines.items():
            info = view.jobs.get(job_id)
            if info is None or not info.managed or info.record:
                # (a pending array task still in its array's record: an update of the task
                # would split it out of the record, which only its start should do)
                continue
            wanted = admin_marks(info.admin_comment).rstrip() + REASON_SEP + _one_line(line)
            last = self._shown_at.get(job_id)
            if wanted == info.admin_comment or (last is not None and now - last < gap):
                continue
            if asked >= self.settings.reason_comment_max_per_round:
                break
            self._shown_at[job_id] = now
            asked += 1
            try:
                result = self.transport.control("update", info.control_id,
                                                {"AdminComment": wanted})
            except (TransportError, ValueError) as exc:
                log.warning("job %s: reason not shown: %s", job_id, exc)
                continue
            if not result.ok:
                log.warning("job %s: reason not shown: %s", job_id, result.detail)
        return asked

    # ---- write side -----------------------------------------------------------------------
    def warn_preemptions(self, actions: Sequence[Action]) -> float:
        """Send the checkpoint signal to the jobs a round will stop that asked for it; return
        how long to wait.

        Only jobs that opted in (``checkpoint_opt_in`` in their comment) get it: SIGUSR1's
        default action is to terminate, so a job that does not trap it would end FAILED
        instead of being requeued. Every preempted job still gets Slurm's own SIGTERM and
        KillWait on the requeue.
        """
        victims = [a for a in actions if getattr(a, "grace_s", 0.0) > 0]
        if not victims:
            return 0.0
        try:
            raw = {_id_key(j.get("job_id")): j for j in self.transport.read_jobs().get("jobs", ())
                   if isinstance(j, Mapping)}
        except TransportError as exc:
            log.warning("checkpoint signals not sent: %s", exc)
            return 0.0
        mark = self.settings.checkpoint_opt_in
        grace = 0.0
        for n, action in enumerate(victims):
            comment = str((raw.get(action.job_id) or {}).get("comment") or "")
            if mark and mark not in comment:
                continue
            # an array task by A_T: 22.05's scancel does not find it by its own job id
            # ("Invalid job id specified", yet exit status 0: the signal lost unnoticed)
            info = self._info(action.job_id)
            result = self.transport.control("signal", info.control_id if info else
                                            action.job_id,
                                            {"signal": self.settings.checkpoint_signal})
            if result.unavailable:
                # Slurm stopped answering: each further signal would wait out its own
                # timeout while the round's freed GPUs idle (soak seed 3: two scancels of
                # 10 s each, one after the other, 20 s of a node idle); the requeues that
                # follow meet the same silence and are retried by a later round
                log.warning("checkpoint signals not sent to %s: %s",
                            ", ".join(a.job_id for a in victims[n:]), result.detail)
                break
            if not result.ok:
                log.warning("job %s: checkpoint signal failed: %s", action.job_id,
                            result.detail)
                continue
            grace = max(grace, getattr(action, "grace_s", 0.0))
        return grace

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        grace = self.warn_preemptions(actions)
        if grace:
            self.sleep(grace)
        return [self.apply_one(a) for a in actions]

    def apply_one(self, action: Action) -> ActionResult:
        info = self._info(action.job_id)
        job = self._job(action.job_id)
        if info is None or job is None:
            return ActionResult(action, False, f"job {action.job_id} not in the last snapshot")
        try:
            steps = steps_for(action, info, hard=self.hard)
        except NotExpressible as exc:
            return ActionResult(action, False, f"job {action.job_id}: {exc}")
        try:
            fresh = self._read_job(action.job_id)
        except TransportError as exc:
            return ActionResult(action, False, f"cannot check the job first: {exc}", retry=True)
        problem = precondition(action, job, fresh)
        if problem is not None:
            return ActionResult(action, False, f"not applied: {problem}", stale=True)
        if isinstance(action, Preempt) and action.mode is PreemptMode.SUSPEND:
            log.warning("job %s suspended: it keeps its GPUs until resumed", action.job_id)
        done: list[str] = []
        for step in steps:
            outcome = self._run(step)
            if not outcome.ok:
                return ActionResult(action, False, f"{step.verb} failed: {outcome.detail}"
                                    + (f" (after {', '.join(done)})" if done else ""),
                                    retry=outcome.unavailable)
            done.append(step.verb)
        return ActionResult(action, True, ", ".join(done))

    def apply_many(self, actions: Sequence[Action]) -> list[ActionResult]:
        """Carry ``actions`` out in order, each run of consecutive Starts, and each run of
        consecutive requeueing Preempts, together; one outcome per action, as
        :meth:`apply_one` gives it.

        Why: a first round on a large site starts thousands of jobs, and one start alone
        costs a read before it, a pin, a release and two reads to check them (~8 RPCs and 5
        processes; each read is the whole queue). Together, a run of starts shares one read
        before, one read per check and one ``scontrol release`` of all their ids; each keeps
        its own pin (22.05 takes no placement ``update`` for several jobs) and its own
        outcome: a job that failed a step stops there, the others go on. A run of
        preemptions likewise shares its reads and one ``scontrol requeuehold 1,2,3``. Other
        actions go one at a time, in their place. Once Slurm stops answering nothing more is
        sent: the rest come back ``retry`` (the daemon drops the rest of the round)."""
        results: list[ActionResult] = []
        first = 0
        while first < len(actions):
            lost = next((r for r in results if r.retry), None)
            if lost is not None:
                results += [ActionResult(a, False, f"not sent: {lost.detail}", retry=True)
                            for a in actions[first:]]
                break
            kind = _batch_kind(actions[first])
            end = first + 1
            while kind is not None and end < len(actions) and _batch_kind(actions[end]) == kind:
                end += 1
            if kind is not None:
                results += self._together(list(actions[first:end]))
            else:
                results.append(self.apply_one(actions[first]))
            first = end
        return results

    def _together(self, batch: list[Action]) -> list[ActionResult]:
        """Actions of one kind together, step by step: step k of every action still going,
        then step k + 1 (see :meth:`apply_many`)."""
        results: dict[int, ActionResult] = {}
        steps: dict[int, list[Step]] = {}
        for n, action in enumerate(batch):
            info = self._info(action.job_id)
            if info is None or self._job(action.job_id) is None:
                results[n] = ActionResult(action, False,
                                          f"job {action.job_id} not in the last snapshot")
                continue
            try:
                steps[n] = steps_for(action, info, hard=self.hard)
            except NotExpressible as exc:
                results[n] = ActionResult(action, False, f"job {action.job_id}: {exc}")
        if steps:
            try:
                fresh = JobIndex(self.transport.read_jobs())
            except TransportError as exc:
                for n in steps:
                    results[n] = ActionResult(batch[n], False,
                                              f"cannot check the job first: {exc}", retry=True)
                steps = {}
            for n in list(steps):
                job = self._job(batch[n].job_id)
                assert job is not None
                problem = precondition(batch[n], job, fresh.find(batch[n].job_id))
                if problem is not None:
                    results[n] = ActionResult(batch[n], False, f"not applied: {problem}",
                                              stale=True)
                    del steps[n]
        done: dict[int, list[str]] = {n: [] for n in steps}
        phase = 0
        while current := {n: todo[phase] for n, todo in steps.items() if phase < len(todo)}:
            outcomes = self._steps_together(current)
            for n, outcome in outcomes.items():
                if outcome.ok:
                    done[n].append(current[n].verb)
                    continue
                after = f" (after {', '.join(done[n])})" if done[n] else ""
                results[n] = ActionResult(batch[n], False, f"{current[n].verb} failed: "
                                          f"{outcome.detail}{after}",
                                          retry=outcome.unavailable)
                del steps[n]
            phase += 1
            lost = next((o for o in outcomes.values() if o.unavailable), None)
            if lost is not None:   # nothing more is sent: the rest wait for a later round
                for n in [n for n, todo in steps.items() if phase < len(todo)]:
                    results[n] = ActionResult(batch[n], False, f"not sent: {lost.detail} "
                                              f"(after {', '.join(done[n])})", retry=True)
                    del steps[n]
        for n in steps:
            results[n] = ActionResult(batch[n], True, ", ".join(done[n]))
        return [results[n] for n in range(len(batch))]

    def _steps_together(self, steps: Mapping[int, Step]) -> dict[int, CommandResult]:
        """One step of each of several actions: the checks against one read of the queue,
        each :data:`MANY_VERBS` verb in one call for all its jobs, the rest one by one."""
        out: dict[int, CommandResult] = {}
        checks = {n: s for n, s in steps.items() if s.verb.startswith("verify-")}
        if checks:
            try:
                index = JobIndex(self.transport.read_jobs())
                read_at = self.clock()
            except TransportError as exc:
                out.update({n: CommandResult(False, str(exc), unavailable=True)
                            for n in checks})
            else:   # one read for all: one wait past a revocation at most (read_at)
                out.update({n: self._verify(s, index.find(s.job_id, own=True), read_at)
                            for n, s in checks.items()})
        grouped: dict[str, dict[int, Step]] = {}
        lost: CommandResult | None = None
        for n, step in steps.items():
            if n in checks:
                continue
            if step.verb in MANY_VERBS and not step.fields:
                grouped.setdefault(step.verb, {})[n] = step
            elif lost is not None:   # Slurm stopped answering: not sent
                out[n] = CommandResult(False, f"not sent: {lost.detail}", unavailable=True)
            else:
                out[n] = self._run(step)
                lost = out[n] if out[n].unavailable else None
        for verb, group in grouped.items():
            by_id = self._control_many(verb, list(dict.fromkeys(s.job_id
                                                                  for s in group.values())))
            out.update({n: by_id[s.job_id] for n, s in group.items()})
        return out

    def _control_many(self, verb: str, job_ids: list[str]) -> dict[str, CommandResult]:
        """One call for all ``job_ids`` where the transport can (a transport without
        ``control_many``, such as a test's stand-in, is asked per id)."""
        many = getattr(self.transport, "control_many", None)
        if many is None or len(job_ids) == 1:
            return {job_id: self.transport.control(verb, job_id) for job_id in job_ids}
        return many(verb, job_ids)

    def _run(self, step: Step) -> CommandResult:
        if step.verb == "await-pending":
            return self._await_pending(step.job_id)
        if step.verb.startswith("verify-"):
            try:
                fresh = self._read_job(step.job_id, own=True)
            except TransportError as exc:
                return CommandResult(False, str(exc), unavailable=True)
            return self._verify(step, fresh)
        return self.transport.control(step.verb, step.job_id, step.as_fields() or None)

    def _read_job(self, job_id: str, *, own: bool = False) -> Mapping[str, Any] | None:
        """One job as Slurm shows it now (22.05's ``squeue --json`` ignores ``-j``)."""
        return find_record(self.transport.read_jobs(), job_id, own=own)

    def _past_revocation(self, fresh: Mapping[str, Any], read_at: float) -> None:
        """Before releasing a job requeued moments ago, wait into the second after the read
        that shows it PENDING.

        Why: a requeue — gpufair's own (a resize or move), its owner's ``scontrol requeue``,
        an admin's, Slurm's after a node failure — revokes the incarnation's launch
        credential on its nodes, with a time in whole seconds, before the job turns PENDING;
        slurmd refuses a credential made in that same second ("Job credential revoked") and
        the job ends FAILED. A restart right away on one of its nodes hit that about one
        time in three on loopback Slurm, and in a 10-minute soak an owner's requeue restarted
        0.05 s later did. Slurm itself keeps such a job back for ``cred_expire`` + 1 s (its
        BeginTime); gpufair starts it sooner, so it waits this much. Slurm 22.05 resets a
        requeued job's ``submit_time`` to the requeue: only a job requeued within the settle
        window waits (a longer COMPLETING is gpufair's ``settle_timeout_s``)."""
        restarts = fresh.get("restart_cnt")
        requeued_at = fresh.get("submit_time")
        if not isinstance(restarts, int) or restarts <= 0 or isinstance(requeued_at, bool) \
                or not isinstance(requeued_at, (int, float)):
            return
        if read_at - float(requeued_at) > self.settings.settle_timeout_s + 1.0:
            return
        wait = math.floor(read_at) + 1.0 + REVOKE_MARGIN_S - self.clock()
        if wait > 0:
            self.sleep(wait)

    def _verify(self, step: Step, fresh: Mapping[str, Any] | None,
                read_at: float | None = None) -> CommandResult:
        """That the step before took effect, before the next one builds on it. ``read_at``:
        when ``fresh`` was read (this adapter's clock)."""
        if fresh is None:
            return CommandResult(False, "the job disappeared" if "_" not in step.job_id else
                                 "the array task has no record of its own (gone, or not "
                                 "split out of its array record)")
        state = str(fresh.get("job_state") or "?").upper()
        priority = fresh.get("priority")
        if step.verb == "verify-requeued":
            held = priority == 0 or not self.hard
            if state in ("PENDING", "COMPLETING") and held:
                return CommandResult(True, f"{state.lower()}, held" if self.hard else
                                     state.lower())
            return CommandResult(False, f"the job is {state} (priority {priority}) after the "
                                 "requeue")
        if step.verb == "verify-pinned":
            wanted = set(expand_hostlist(step.as_fields()["NodeList"]))
            pinned = set(expand_hostlist(str(fresh.get("required_nodes") or "")))
            if state == "PENDING" and pinned == wanted:
                self._past_revocation(fresh, self.clock() if read_at is None else read_at)
                return CommandResult(True, "pinned")
            return CommandResult(False, f"the job is {state} on {sorted(pinned)}, not pinned "
                                 f"to {sorted(wanted)}")
        if step.verb == "verify-held":
            if state == "PENDING" and priority == 0:
                return CommandResult(True, "held")
            return CommandResult(False, f"the job is {state} (priority {priority}) after the "
                                 "hold")
        if step.verb == "verify-released":
            if priority == 0:
                return CommandResult(False, "still held after the release")
            if state == "PENDING" and fresh.get("state_reason") == "BeginTime":
                # a requeue that finished after our update reset the begin time: once more
                return self.transport.control("update", step.job_id, {"StartTime": "now"})
            return CommandResult(True, state.lower())
        raise ValueError(f"unknown check {step.verb}")

    def _await_pending(self, job_id: str) -> CommandResult:
        """After a requeue the job is COMPLETING; updates then would be overwritten. (The
        wait past the revoked credential comes before the release: :meth:`_past_revocation`.)"""
        deadline = self.clock() + self.settings.settle_timeout_s
        while self.clock() < deadline:
            try:
                jobs = self.transport.read_jobs()
            except TransportError as exc:
                return CommandResult(False, str(exc), unavailable=True)
            record = find_record(jobs, job_id, own=True)
            state = None if record is None else str(record.get("job_state"))
            if state == "PENDING":
                return CommandResult(True, "pending")
            self.sleep(0.25)
        return CommandResult(False, f"still not pending after "
                             f"{self.settings.settle_timeout_s:g} s")

    def _info(self, job_id: str) -> SlurmJobInfo | None:
        if self.last_view is None:
            self.view()
        assert self.last_view is not None
        return self.last_view.jobs.get(job_id)

    def _job(self, job_id: str) -> Job | None:
        if self.last_view is None:
            self.view()
        assert self.last_view is not None
        return next((j for j in self.last_view.state.jobs if j.id == job_id), None)

    def hold(self, job_id: str) -> CommandResult:
        """Admin operations outside the plan's vocabulary (no model action expresses them).

        gpufair's hold is a *user* hold (``scontrol uhold``, Reason=JobHeldUser, as
        job_submit.lua's at submission): an administrator's ``scontrol hold``
        (JobHeldAdmin) then stays theirs, and gpufair starts no job under it."""
        return self.transport.control("uhold", job_id)

    def release(self, job_id: str) -> CommandResult:
        return self.transport.control("release", job_id)

    def cancel(self, job_id: str) -> CommandResult:
        return self.transport.control("cancel", job_id)

    def status(self) -> dict[str, float]:
        """The JWT's expiry and renewals, when slurmrestd is reached with one."""
        tokens = getattr(self.transport, "tokens", None)
        if not isinstance(tokens, TokenSource):
            return {}
        out = {"slurm_token_renewals": float(tokens.renewals),
               "slurm_token_failures": float(tokens.failures)}
        if tokens.expires is not None:
            out["slurm_token_expires_at"] = tokens.expires
        return out

    # ---- idempotence ----------------------------------------------------------------------
    def check(self, action: Action) -> Effect:
        """What Slurm shows of ``action`` now (a fresh read; raises SlurmUnavailable)."""
        view = self.view()
        if self.effect_visible(action, view):
            return Effect.IN_EFFECT
        if not any(j.id == action.job_id and j.state.active for j in view.state.jobs):
            return Effect.JOB_GONE
        return Effect.NOT_YET

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
            if job.state is JobState.PENDING:   # requeued, or taken back while starting
                return info.held or not self.hard
            wanted = JobState.SUSPENDED if action.mode is PreemptMode.SUSPEND \
                else JobState.PENDING
            return job.state is wanted
        if isinstance(action, (Resize, Migrate)):
            target = {node_of(g) for g in action.gpu_ids}
            return job.state is JobState.RUNNING and set(info.nodes) == target
        if isinstance(action, SetPriority):
            return info.priority is not None and round(info.priority) == round(action.priority)
        return False


def find_record(jobs: Mapping[str, Any], job_id: str, *, own: bool = False
                ) -> Mapping[str, Any] | None:
    """The record of ``job_id`` in a jobs document (see :meth:`JobIndex.find`)."""
    return JobIndex(jobs).find(job_id, own=own)


def _id_key(value: Any) -> str:
    """An id as text for lookup; "" for a number too long to print (Python refuses ``str``
    of an int over 4,300 digits: ValueError), which is no job gpufair acts on anyway."""
    if isinstance(value, int) and not -10 ** 18 < value < 10 ** 18:
        return ""
    return str(value)


class JobIndex:
    """A jobs document indexed by job id and by array task, read once: the records of a
    whole batch of actions are then found in one pass over the queue, not one each."""

    def __init__(self, jobs: Mapping[str, Any]) -> None:
        self.by_id: dict[str, Mapping[str, Any]] = {}
        self.by_task: dict[tuple[str, str], Mapping[str, Any]] = {}
        for raw in jobs.get("jobs", ()):
            if not isinstance(raw, Mapping):
                continue
            self.by_id[_id_key(raw.get("job_id"))] = raw
            if raw.get("array_task_id") is not None:
                self.by_task.setdefault((_id_key(raw.get("array_job_id")),
                                         _id_key(raw.get("array_task_id"))), raw)

    def find(self, job_id: str, *, own: bool = False) -> Mapping[str, Any] | None:
        """The record of ``job_id``. An array task ``A_T`` is the record of that task once
        Slurm split it out of its array record (gpufair's update of ``A_T`` does), else
        that array record if the task is the one it stands for (``own``: None then, for
        the checks that the update split it)."""
        array, _, task = job_id.partition("_")
        if task and (array, task) in self.by_task:
            return self.by_task[(array, task)]
        record = self.by_id.get(array if task else job_id)
        if task and (own or record is None or not _stands_for(record, task)):
            return None
        return record


def _stands_for(record: Mapping[str, Any], task: str) -> bool:
    """Whether an array record still stands for ``task`` (not split out of it yet: the
    record is that task's job to the model, see ``translate._array_tasks``)."""
    if record.get("array_task_id") is not None or not task.isdigit():
        return False
    try:
        return int(task) in parse_task_list(str(record.get("array_task_string") or ""))
    except ValueError:
        return False


def starting_places(view: SlurmView) -> dict[str, tuple[str, ...] | None]:
    """Where each managed job gpufair released (pending, not held, pinned) will start: GPUs
    of its pinned nodes that jobs gpufair does not schedule (``Node.unavailable``), running
    jobs and the released jobs before it leave free, lowest index first (Slurm places by
    count: the indices are the model's, Slurm picks its own).

    A pinned node where a job is settling (COMPLETING: typically the one gpufair requeued
    to make room for this one) counts as up: the job starts there once it is gone, on the
    GPUs it frees. Jobs gpufair does not schedule are not told apart there this round
    (sinfo counts the settling job's GPUs in use until it is gone); the next round does.

    ``()`` when the job cannot start there: Slurm says it will not (a reason in
    :data:`~gpufair.adapters.slurm.translate.REFUSALS`, a limit, or Resources still
    :data:`~gpufair.adapters.slurm.translate.RESOURCES_GRACE_S` after the release with
    nothing settling there), too few GPUs left, too few
    CPUs or too little
    memory left beside them (what Slurm shows allocated to what gpufair does not schedule,
    to the running jobs and to the released jobs before it), or a pinned node that Slurm
    itself shows down or drained (it starts nothing there until an admin or the node brings
    it back, which may be never). None when a pinned node is unknown or held back for what
    cannot be told (a record that could not be read, records that contradict each other):
    nothing to tell this round."""
    nodes = {n.name: n for n in view.state.nodes}
    taken = {g for job in view.state.jobs for g in job.gpus_held}
    room = HostRoom(view.state.nodes)
    for job in view.state.jobs:
        room.take(job, job.gpus_held)
    out: dict[str, tuple[str, ...] | None] = {}
    for job in view.state.jobs:
        info = view.jobs[job.id]
        if not starting(info) or not info.pinned:
            continue
        if (refused(info.reason) or no_resources(info)) and \
                view.settling_nodes.isdisjoint(info.pinned):
            out[job.id] = ()       # Slurm's own word: it will not start it there as it is
            continue
        pinned = [nodes.get(name) for name in dict.fromkeys(info.pinned)]
        if any(n is not None and n.state is not NodeState.UP and n.name not in view.held_back
               for n in pinned):
            out[job.id] = ()
            continue
        if any(n is None or (n.state is not NodeState.UP
                             and n.name not in view.settling_nodes) for n in pinned):
            out[job.id] = None
            continue
        free = [[g for g in n.gpu_ids() if g not in taken] for n in pinned if n is not None]
        if info.gres_field == "TresPerNode":
            per, rest = divmod(job.gpus, len(free))
            gpus = [g for f in free for g in f[:per]]
            short = rest != 0 or any(len(f) < per for f in free)
        else:   # a count for the whole job: at least one on each node, the rest in order
            gpus = [f[0] for f in free if f]
            extra = [g for f in free for g in f[1:]]
            gpus += extra[:job.gpus - len(gpus)]
            short = any(not f for f in free) or len(gpus) != job.gpus
        counts = {n: sum(node_of(g) == n for g in gpus) for n in dict.fromkeys(info.pinned)}
        if short or not all(room.fits(job, n, k) for n, k in counts.items()):
            out[job.id] = ()
            continue
        room.take(job, gpus)
        taken.update(gpus)
        out[job.id] = tuple(sorted(gpus, key=lambda g: (info.pinned.index(node_of(g)),
                                                        int(g.rpartition(":")[2]))))
    return out


def stranded(view: SlurmView) -> list[str]:
    """Managed jobs gpufair released that cannot start where they are pinned: their nodes no
    longer have the GPUs they ask (taken by jobs gpufair does not schedule or held by running
    jobs, or too few CPUs or too little memory left beside them), one of them is down or
    drained in Slurm, or Slurm refuses it for a reason a wait does not cure (see
    :func:`starting_places`)."""
    return [job_id for job_id, gpus in starting_places(view).items() if gpus == ()]


#: The longest reason an AdminComment gets (Slurm keeps more; squeue columns do not).
REASON_MAX = 200


def _one_line(text: str) -> str:
    """One printable line without the separator: job and tenant names are users' words."""
    clean = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    clean = clean.replace(REASON_SEP.strip(), "/")
    return clean if len(clean) <= REASON_MAX else clean[:REASON_MAX - 1] + "…"

"""``gpufair serve``: the round on a timer and on hook events, against a live resource manager.

Each round: (recover an interrupted round) → snapshot → the one round pipeline
(:class:`gpufair.core.round.Round`: history, profiles, policy, diff, guards, keys) → journal →
actions. Rounds come from a timer (preemptive) and from hook events (a job started or ended: a
non-preemptive round that only fills idle GPUs), and from a poll that notices a new job or
freed GPUs between them (a submission is no hook event). The daemon knows the resource manager only
through :class:`gpufair.adapters.base.ResourceManager`; a dry run is this daemon against a
:class:`gpufair.adapters.recording.RecordingAdapter`, with ``dry_run`` set so the journal
says so and the policy state is not persisted.
"""

from __future__ import annotations

import json
import logging
import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufair.adapters.base import (
    AppliesMany,
    Effect,
    ResourceManager,
    ShowsReasons,
    Unavailable,
)
from gpufair.core.explain import Decision, not_startable
from gpufair.core.fill import may_fill, occupancy
from gpufair.core.gc_pause import gc_paused
from gpufair.core.guards import Deferred, takes_gpus
from gpufair.core.history import rho_estimates
from gpufair.core.round import Round, RoundResult
from gpufair.model import ClusterState, Plan, Preempt, Start
from gpufair.plugin.events import EventListener
from gpufair.plugin.explain_server import ExplainServer, admins
from gpufair.plugin.metrics import Metrics
from gpufair.plugin.store import APPLYING, DONE, FAILED, PLANNED, SKIPPED, JournalEntry, Store
from gpufair.plugin.submit_stamp import SubmitStamp
from gpufair.plugin.wake import WakeSocket
from gpufair.plugin.wording import Words, describe, words_for
from gpufair.policy.base import Policy, StatefulPolicy

log = logging.getLogger("gpufair.daemon")

#: Actions journalled per commit while a round is applied (see :meth:`Daemon.apply_round`).
JOURNAL_BATCH = 256
#: Between rounds, how often the submission stamp is looked at (a stat; see ``_wait``).
STAMP_LOOK_S = 0.5
#: A submission's poll waits this long: job_submit.lua runs before Slurm writes the record
SUBMIT_SETTLE_S = 0.2


@dataclass(frozen=True)
class ServiceSettings:
    """What the daemon's loop needs beyond the round itself (``[daemon]``)."""

    round_s: float = 120.0
    dry_run: bool = False              # journal as skipped; never persist policy state
    shadow: bool = False               # a dry run that records what the RM itself did
    action_interval_s: float = 0.0     # pause between actions: spreads load on slurmctld
    apply_batch: int = 100             # consecutive actions sent together (see apply_round)
    hook_dir: str = "/var/spool/gpufair"
    event_min_interval_s: float = 5.0  # hook events: at most one fill-only round per this
    poll_s: float = 5.0                # between rounds: snapshot this often for changes
    poll_soon_s: float = 1.0           # a hook event or submission: poll this soon after the last
    wake_group: str | None = None      # group that may wake the daemon (SlurmUser's)
    event_listen: str | None = None        # HOST:PORT for hook events from other hosts
    event_key: bytes | None = None         # their shared HMAC key
    keep_finished_s: float = 7 * 86400.0   # store: job history kept after the job ended
    keep_rounds_s: float = 30 * 86400.0    # store: rounds, actions, events kept
    prune_every_s: float = 600.0           # how often the store is pruned
    explain_socket: str | None = None      # where `gpufair explain` asks (None: not served)
    admin_group: str | None = None         # its readers of every job, besides root/SlurmUser


class Daemon:
    """The round on a timer and on hook events, journalled, against one resource manager."""

    def __init__(self, adapter: ResourceManager, rounds: Round, store: Store,
                 settings: ServiceSettings, metrics: Metrics | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.adapter = adapter
        self.rounds = rounds
        self.store = store
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.sleep = sleep
        self.stopping = False
        self.last: RoundResult | None = None
        self.pruned_at = -float("inf")
        self.seen: object = None           # occupancy at the last round (gpufair.core.fill)
        #: the resource manager's words in logs and explanations (apps on YARN)
        self.words: Words = words_for(getattr(adapter, "name", None))
        self.next_round_at: float | None = None   # wall time of the next timer round
        self._shown: dict[str, tuple[tuple[str, str, str | None], str]] = {}  # reason lines
        self.submitted = SubmitStamp(settings.hook_dir)   # job_submit.lua's, between rounds

    @property
    def policy(self) -> Policy:
        return self.rounds.policy

    # ---- one round ------------------------------------------------------------------------
    @gc_paused
    def run_round(self, *, preemptive: bool = True) -> int | None:
        started = time.perf_counter()
        name = self.policy.name
        try:
            if not self.settings.dry_run:
                for job_id in self.adapter.reconcile(self.requeued_by_gpufair):
                    self.metrics.count_bypass()
                    log.warning("job %s was requeued outside gpufair: held again", job_id,
                                extra={"fields": {"event": "bypass", "job": job_id}})
            raw = self.adapter.snapshot()
        except Unavailable as exc:
            self.seen = None
            self.store.skip_round(name, f"resource manager unavailable: {exc}")
            self.metrics.observe_round("skipped", None)
            log.error("round skipped: %s", exc, extra={"fields": {"event": "round_skipped"}})
            return None
        self.seen = occupancy(raw)
        history = self.store.job_history([j.id for j in raw.jobs])
        result = self.rounds.run(raw, preemptive=preemptive, history=history)
        self.last = result
        self.store.save_jobs(result.history)
        self._report_deferred(result.deferred)
        dry = self.settings.dry_run
        round_id = self.store.begin_round(name, _plan_dict(result.plan), result.actions,
                                          keys=result.keys, reason=result.plan.reason,
                                          dry_run=dry)
        if self.settings.shadow:   # what the resource manager did, beside the plan
            self.store.record_shadow(round_id, raw)
        # why each job runs, waits or stops (gpufair explain); and why the jobs left out of
        # the round wait (a Slurm limit...)
        waiting = getattr(getattr(self.adapter, "last_view", None), "waiting", ())
        decisions = {**not_startable(waiting), **result.decisions} if self.rounds.explain \
            else {}
        if decisions:
            self.store.record_decisions(
                round_id, decisions,
                {j.id: j.owner_uid for j in (*result.state.jobs, *(j for j, _ in waiting))})
        if isinstance(self.policy, StatefulPolicy) and not dry:
            # leases, trackers, RNG: what the policy must remember across a restart
            self.store.save_policy_state(name, self.policy.state_dict())
        state = result.state
        fields = {"event": "round", "round": round_id, "preemptive": preemptive,
                  "jobs": len(state.active_jobs()), "actions": len(result.actions),
                  "dry_run": dry, "planned": sorted(a.job_id for a in result.plan.assignments),
                  "attained_s": {j.id: round(j.attained_s, 1) for j in state.active_jobs()}}
        for seq, action in enumerate(result.actions):
            log.info("%s %s", "would" if dry else "will", describe(action, self.words),
                     extra={"fields": {"event": "action", "round": round_id, "seq": seq,
                                       "job": action.job_id, "kind": type(action).__name__,
                                       "gpus": list(getattr(action, "gpu_ids", ())),
                                       "key": result.keys[seq]}})
        if result.actions:
            self.apply_round(round_id)
        if not dry and decisions and isinstance(self.adapter, ShowsReasons):
            self.adapter.show_reasons(self._reason_lines(decisions))
        latency = time.perf_counter() - started
        status = "dry-run" if dry else "done"
        if not self.stopping:
            self.store.finish_round(round_id, latency, status=status)
        self.metrics.observe_round(status, latency)
        self.metrics.set_adapter_status(self.adapter.status())
        self._prune()
        self.metrics.set_allocation(_tenant_gpus(state, result.plan), rho_estimates(state))
        log.info("round %d: %d actions in %.3f s", round_id, len(result.actions), latency,
                 extra={"fields": {**fields, "latency_s": round(latency, 4)}})
        return round_id

    def _reason_lines(self, decisions: dict[str, Decision]) -> dict[str, str]:
        """Each job's line for its resource manager to show: made when the job's decision
        changes (its outcome, reason code or guard; a start and the run after it are one
        decision), and the same line, with the time it was made, until then — so the
        resource manager is asked once per change, not each time a figure moves."""
        lines: dict[str, tuple[tuple[str, str, str | None], str]] = {}
        for job_id, d in decisions.items():
            running = d.outcome in ("start", "fill", "resume", "run")
            key = ("running" if running else d.outcome, d.reason.code,
                   d.by.code if d.by else None)
            shown = self._shown.get(job_id)
            if shown is not None and shown[0] == key:
                lines[job_id] = shown
            else:
                lines[job_id] = (key, f"gpufair {time.strftime('%H:%M')}: {d.text()}")
        self._shown = lines
        return {job_id: line for job_id, (_, line) in lines.items()}

    def requeued_by_gpufair(self, job_id: str, run: int, at: float) -> bool:
        """Whether gpufair itself requeued run ``run`` of the job (at ``at``): its journal says
        so. A requeue older than the journal (pruned, or before this store) cannot be told
        apart, and counts as gpufair's: the job stays gpufair's to start, as it always was,
        rather than wait for an owner who never held it."""
        first = self.store.journal_from()
        if first is None or at < first:
            return True
        return self.store.tried_requeue(job_id, run)

    def _prune(self) -> None:
        """Bound the store (it grew by every job and round forever): at most every
        ``prune_every_s``; never in a dry run, whose store is a scratch copy anyway."""
        now = time.monotonic()
        if self.settings.dry_run or now - self.pruned_at < self.settings.prune_every_s:
            return
        self.pruned_at = now
        jobs, rounds = self.store.prune(keep_finished_s=self.settings.keep_finished_s,
                                        keep_rounds_s=self.settings.keep_rounds_s)
        if jobs or rounds:
            log.info("store pruned: %d jobs, %d rounds", jobs, rounds,
                     extra={"fields": {"event": "pruned", "jobs": jobs, "rounds": rounds}})

    def _report_deferred(self, deferred: list[Deferred]) -> None:
        capped = [d for d in deferred if "cap" in d.reason]
        if capped:
            self.metrics.count_capped(sum(takes_gpus(d.action) for d in capped))
        for reason in dict.fromkeys(d.reason for d in deferred):
            held = [describe(d.action, self.words) for d in deferred if d.reason == reason]
            log.warning("%d actions deferred: %s", len(held), reason,
                        extra={"fields": {"event": "deferred", "reason": reason,
                                          "deferred": held}})

    def apply_round(self, round_id: int, *, recovering: bool = False) -> None:
        """Carry out the journalled actions of a round that are not done yet.

        The journal is written a batch at a time (:data:`JOURNAL_BATCH` actions): one
        commit marks the whole batch ``applying`` (with the outcomes of the batch before)
        before its first action is sent, and the outcomes wait in memory for the next
        commit. A kill at any point leaves every action that may have been sent
        ``applying`` or done: on restart each is checked against the resource manager
        before anything is sent again, as for one action at a time; only the commits are
        fewer (one per batch rather than two per action, which made most of a large round's
        journal time, issue 30)."""
        entries = [e for e in self.store.journal(round_id) if e.status in (PLANNED, APPLYING)]
        done_before = self.store.done_keys([e.key for e in entries if e.key], round_id)
        victims = [e.action for e in entries if e.key not in done_before
                   and takes_gpus(e.action)]
        if victims and not recovering:   # only the jobs that will really be stopped now
            grace = self.adapter.warn_preemptions(victims)
            if grace:
                self.sleep(grace)
        # together: consecutive actions handed to the resource manager in one call (Slurm
        # shares its reads and one `scontrol release` among them); one at a time where it
        # cannot take several, so that nothing is sent after it stopped answering
        together = self.settings.apply_batch if isinstance(self.adapter, AppliesMany) else 1
        outcomes: list[tuple[int, str, str]] = []
        for start in range(0, len(entries), JOURNAL_BATCH):
            batch = entries[start:start + JOURNAL_BATCH]
            self.store.mark_many(round_id, outcomes + [(e.seq, APPLYING, "") for e in batch
                                                       if e.key not in done_before])
            outcomes = []
            group: list[JournalEntry] = []
            for entry in batch:
                if entry.key in done_before:
                    outcomes.append((entry.seq, SKIPPED, f"done in round "
                                     f"{done_before[entry.key]} (same incarnation)"))
                    continue
                if not (recovering or entry.status == APPLYING):
                    group.append(entry)
                    if len(group) >= together:
                        if not self._apply_group(round_id, group, outcomes):
                            return
                        group = []
                    continue
                # sent before a crash, maybe: asked about on its own, after those before it
                if not self._apply_group(round_id, group, outcomes):
                    return
                group = []
                if self.stopping:
                    self.store.mark_many(round_id, outcomes)
                    return
                try:
                    effect = self.adapter.check(entry.action)
                except Unavailable as exc:
                    self.store.mark_many(round_id, outcomes)
                    self._defer_rest(round_id, entry.seq, str(exc))
                    return
                if effect is Effect.IN_EFFECT:
                    outcomes.append((entry.seq, DONE, "already in effect (recovered)"))
                    log.info("round %d action %d already in effect: %s", round_id,
                             entry.seq, describe(entry.action, self.words),
                             extra={"fields": {"event": "recovered", "round": round_id}})
                elif effect is Effect.JOB_GONE:
                    outcomes.append((entry.seq, SKIPPED, "job no longer active"))
                elif not self._apply_group(round_id, [entry], outcomes):
                    return
            if not self._apply_group(round_id, group, outcomes):
                return
        self.store.mark_many(round_id, outcomes)

    def _apply_group(self, round_id: int, group: list[JournalEntry],
                     outcomes: list[tuple[int, str, str]]) -> bool:
        """Send ``group``'s actions (journalled ``applying`` already) in one call to the
        resource manager and add their outcomes to ``outcomes``. False when the round must
        end here: the daemon is stopping (nothing sent: the journal's ``applying`` says
        they may have been), or the resource manager stopped answering (the outcomes so
        far are committed and the rest of the round dropped). The pause that bounds the
        action rate (``action_interval_s`` per action) follows the group."""
        if not group:
            return True
        if self.stopping:
            self.store.mark_many(round_id, outcomes)
            return False
        actions = [e.action for e in group]
        if len(actions) > 1 and isinstance(self.adapter, AppliesMany):
            results = self.adapter.apply_many(actions)
        else:
            results = [self.adapter.apply_one(a) for a in actions]
        lost: str | None = None
        for entry, result in zip(group, results, strict=True):
            if result.retry:
                outcomes.append((entry.seq, SKIPPED,
                                 f"resource manager unavailable: {result.detail}"))
                lost = lost or result.detail
                continue
            status = DONE if result.ok else SKIPPED if result.stale else FAILED
            outcomes.append((entry.seq, status, result.detail))
            self.metrics.count_action(type(entry.action).__name__,
                                      {DONE: "ok", SKIPPED: "skipped"}.get(status, "failed"))
            log.log(logging.INFO if result.ok else logging.WARNING, "%s: %s",
                    describe(entry.action, self.words), result.detail,
                    extra={"fields": {"event": "applied", "round": round_id,
                                      "seq": entry.seq, "ok": result.ok}})
        if lost is not None:
            self.store.mark_many(round_id, outcomes)
            outcomes.clear()
            self._defer_rest(round_id, group[-1].seq + 1, lost)
            return False
        if self.settings.action_interval_s > 0:
            self.sleep(self.settings.action_interval_s * len(group))
        return True

    def _defer_rest(self, round_id: int, from_seq: int, why: str) -> None:
        """The resource manager stopped answering: the rest of this round's actions are
        dropped (the next round plans again from a fresh snapshot, rather than acting on
        a stale plan)."""
        self.store.mark_many(round_id, [
            (entry.seq, SKIPPED, f"resource manager unavailable: {why}")
            for entry in self.store.journal(round_id)
            if entry.seq >= from_seq and entry.status in (PLANNED, APPLYING)])
        log.error("round %d: resource manager unavailable, rest of the round dropped: %s",
                  round_id, why, extra={"fields": {"event": "unavailable", "round": round_id}})

    def restore_policy_state(self) -> bool:
        saved = self.store.policy_state(self.policy.name)
        if saved is None or not isinstance(self.policy, StatefulPolicy):
            return False
        self.policy.load_state_dict(saved)
        log.info("policy %s state restored", self.policy.name,
                 extra={"fields": {"event": "policy_state_restored"}})
        return True

    def recover(self) -> None:
        self.restore_policy_state()
        adopt = getattr(self.adapter, "adopt_started", None)
        if callable(adopt) and not self.settings.dry_run:
            adopt(started_not_preempted(self.store.journal()))
        for round_id in self.store.unfinished_rounds():
            log.warning("finishing round %d interrupted by a restart", round_id,
                        extra={"fields": {"event": "recovering", "round": round_id}})
            self.apply_round(round_id, recovering=True)
            if not self.stopping:
                self.store.finish_round(round_id)

    # ---- hook events ----------------------------------------------------------------------
    def ingest_spool(self) -> int:
        spool = Path(self.settings.hook_dir) / "spool"
        if not spool.is_dir():
            return 0
        count = 0
        for path in sorted(spool.iterdir()):
            if path.name.startswith("."):
                continue
            try:
                event = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(event, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:
                log.warning("hook event %s unreadable (%s); moved to bad/", path, exc)
                (spool.parent / "bad").mkdir(exist_ok=True)
                path.replace(spool.parent / "bad" / path.name)
                continue
            count += self.store.add_event(event, path.name)
            path.unlink(missing_ok=True)
        return count

    # ---- the loop -------------------------------------------------------------------------
    def serve(self, *, max_rounds: int | None = None) -> None:
        wake = WakeSocket(self.settings.hook_dir, group=self.settings.wake_group)
        self.wake = wake
        self.listener = None
        if self.settings.event_listen and self.settings.event_key:
            self.listener = EventListener(self.settings.event_listen, self.settings.event_key)
            log.info("hook events from other hosts on %s:%d", *self.listener.address,
                     extra={"fields": {"event": "listening"}})
        explainer = self._explain_server(wake.owner[0])
        try:
            self.recover()
            rounds = 0
            timer = time.monotonic()
            preemptive = True
            while not self.stopping and (max_rounds is None or rounds < max_rounds):
                self.ingest_spool()
                self.run_round(preemptive=preemptive)
                rounds += 1
                if max_rounds is not None and rounds >= max_rounds:
                    break   # `--rounds N` ends after its last round, not a round period later
                ended = time.monotonic()
                if preemptive:
                    timer = ended + self.settings.round_s
                    self.next_round_at = time.time() + (timer - time.monotonic())
                preemptive = self._wait(wake, timer, ended + self.settings.event_min_interval_s)
        finally:
            wake.close()
            if self.listener is not None:
                self.listener.close()
            if explainer is not None:
                explainer.close()

    def _explain_server(self, slurm_user: int) -> ExplainServer | None:
        """The explain socket, when configured and possible: a daemon that cannot bind it
        still schedules (explain then says the daemon is unavailable)."""
        path = self.settings.explain_socket
        if not path or self.store.path == ":memory:":
            return None
        try:
            uids, gid = admins(self.settings.admin_group, (slurm_user,))
            server = ExplainServer(path, self.store.path, admin_uids=uids, admin_gid=gid,
                                   next_round=lambda: self.next_round_at)
        except (OSError, ValueError) as exc:
            log.warning("explain socket %s not served: %s", path, exc,
                        extra={"fields": {"event": "explain_unavailable"}})
            return None
        log.info("gpufair explain on %s", path, extra={"fields": {"event": "explain_socket"}})
        return server

    def _wait(self, wake: WakeSocket, timer: float, events_from: float) -> bool:
        """Sleep until the round timer (→ preemptive round) or a change (→ fill-only round).

        A change is a hook event (a job started or ended), or what the poll finds every
        ``poll_s``: a new job or freed GPUs while a job waits (a submission sends no hook
        event). Changes are coalesced: however many arrive, at most one fill-only round runs
        per ``event_min_interval_s`` after the last round, so a burst of job starts and ends
        (or a user hammering the socket) costs one round, not one per datagram.

        A hook event or a submission (job_submit.lua's stamp,
        :mod:`gpufair.plugin.submit_stamp`) also brings the poll forward, and a poll that
        finds room for a job the last round did not see (a new or changed job with idle
        GPUs: ``_changed``) runs the fill-only round at once rather than after the
        coalescing interval: GPUs idled for those seconds while Slurm alone starts such a
        job at once (issue 29's soak). Polls brought forward stay at most one per
        ``poll_soon_s``, and a poll that finds nothing new costs no round.
        """
        woken = False
        poll_s = self.settings.poll_s
        polled = time.monotonic()
        next_poll = polled + poll_s if poll_s > 0 else float("inf")
        while not self.stopping:
            now = time.monotonic()
            if now >= timer:
                return True
            if woken and now >= events_from:
                return False
            if self.submitted.moved():
                next_poll = self._poll_soon(next_poll, now, polled)
            if now >= next_poll:
                if self._changed():   # room for a job the last round did not see: now
                    return False
                polled = time.monotonic()
                next_poll = polled + poll_s if poll_s > 0 else float("inf")
                continue
            until = min(timer, events_from if woken else next_poll, next_poll)
            sources: list[Any] = [wake] if self.listener is None else [wake, self.listener]
            ready, _, _ = select.select(sources, [], [],
                                        max(0.0, min(until - now, STAMP_LOOK_S)))
            if wake in ready and wake.drain():
                woken = True
                next_poll = self._poll_soon(next_poll, time.monotonic(), polled)
            if self.listener is not None and self.listener in ready:
                for event in self.listener.drain():
                    self.store.add_event(event, f"udp-{event['nonce']}")
                    woken = True
                    next_poll = self._poll_soon(next_poll, time.monotonic(), polled)
        return True

    def _poll_soon(self, next_poll: float, now: float, polled: float) -> float:
        """When the poll comes after a sign of change (a hook event, a submission's stamp):
        ``SUBMIT_SETTLE_S`` from now (Slurm writes a job's record after job_submit.lua
        returns), at least ``poll_soon_s`` after the last poll, never later than due
        (``poll_soon_s`` 0: signs of change do not bring the poll forward)."""
        soon = self.settings.poll_soon_s
        if soon <= 0:
            return next_poll
        return min(next_poll, max(now + SUBMIT_SETTLE_S, polled + soon))

    @gc_paused
    def _changed(self) -> bool:
        """The poll: did jobs or GPUs change since the last round, with a job that may fit on
        idle GPUs? One snapshot; the resource manager being away is no change. A resource
        manager that can tell cheaply that nothing changed since its last read (its
        ``changed()``, e.g. Slurm over slurmrestd) is asked first; after a round that could
        not read it (``seen`` None) the poll reads in full, as before."""
        changed = getattr(self.adapter, "changed", None)
        if changed is not None and self.seen is not None and not changed():
            return False
        try:
            raw = self.adapter.snapshot()
        except Unavailable:
            return False
        return occupancy(raw) != self.seen and may_fill(raw)


def _tenant_gpus(state: ClusterState, plan: Plan) -> dict[str, int]:
    owner = {j.id: j.tenant for j in state.jobs}
    out: dict[str, int] = dict.fromkeys(sorted({j.tenant for j in state.jobs}), 0)
    for assignment in plan.assignments:
        out[owner.get(assignment.job_id, "?")] = out.get(owner.get(assignment.job_id, "?"), 0) \
            + assignment.size
    return out


def _plan_dict(plan: Plan) -> dict[str, Any]:
    return {"assignments": {a.job_id: list(a.gpu_ids) for a in plan.assignments},
            "priorities": dict(plan.priorities), "reason": plan.reason}


def started_not_preempted(journal: list[JournalEntry]) -> list[str]:
    """The jobs the journal shows gpufair started (done) and has not tried to preempt since:
    what a restarted daemon still answers for — on YARN, the apps whose leases it renews,
    which would otherwise run out after a restart although the plan keeps the apps."""
    kept: dict[str, None] = {}
    for entry in journal:
        if isinstance(entry.action, Start) and entry.status == DONE:
            kept[entry.action.job_id] = None
        elif isinstance(entry.action, Preempt) and entry.status != PLANNED:
            kept.pop(entry.action.job_id, None)
    return list(kept)

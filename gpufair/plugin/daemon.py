"""``gpufair serve``: the arbiter daemon for a real resource manager.

Each round: (recover an interrupted round) → snapshot → history merge (attained service and
waiting time from the store, neutral profiles for unmeasured jobs) → policy → plan → diff →
preemption cap → journal → actions. Rounds come from a timer (preemptive) and from hook
events (a job started or ended: a non-preemptive round that only fills idle GPUs). With
``dry_run`` the actions are journalled as skipped and logged, never sent.
"""

from __future__ import annotations

import json
import logging
import math
import os
import select
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpufair.adapters.slurm.adapter import SlurmUnavailable
from gpufair.adapters.slurm.commands import slurm_priorities
from gpufair.core.actions import plan_actions
from gpufair.core.enrich import measure, with_default_profiles
from gpufair.model import (
    Action,
    ClusterState,
    JobState,
    Plan,
    Preempt,
    PreemptMode,
    SetPriority,
    node_of,
)
from gpufair.plugin.metrics import Metrics
from gpufair.plugin.store import APPLYING, DONE, FAILED, PLANNED, SKIPPED, Store
from gpufair.policy.base import Policy
from gpufair.profiler.profiler import Profiler

log = logging.getLogger("gpufair.daemon")


@dataclass(frozen=True)
class DaemonSettings:
    round_s: float = 60.0
    mode: str = "hard"                 # hard: start/preempt/place; soft: priorities only
    dry_run: bool = False
    max_preempt_share: float = 0.5     # of all usable GPUs, per round
    grace_s: float = 0.0               # checkpoint window between signal and requeue
    preempt_mode: PreemptMode = PreemptMode.REQUEUE
    action_interval_s: float = 0.0     # pause between actions: spreads load on slurmctld
    hook_dir: str = "/var/spool/gpufair"


def cap_preemptions(state: ClusterState, actions: Sequence[Action], share: float
                    ) -> tuple[list[Action], list[Action]]:
    """Keep preemptions (in plan order) while they free at most ``share`` of the GPUs; the
    starts that needed the GPUs of a dropped victim are dropped too. Returns (kept, dropped)."""
    limit = math.floor(share * state.gpu_count() + 1e-9)
    held = {j.id: set(j.gpus_held) for j in state.jobs}
    freed = 0
    kept: list[Action] = []
    dropped: list[Action] = []
    blocked: set[str] = set()
    for action in actions:
        if isinstance(action, Preempt):
            size = len(held.get(action.job_id, ()))
            if freed + size > limit:
                dropped.append(action)
                blocked |= held.get(action.job_id, set())
                continue
            freed += size
        elif blocked.intersection(getattr(action, "gpu_ids", ())):
            dropped.append(action)
            continue
        kept.append(action)
    return kept, dropped


def leave_alone_on_unusable_nodes(state: ClusterState, actions: Sequence[Action]
                                  ) -> tuple[list[Action], list[Action]]:
    """Jobs that hold GPUs on a drained, down or settling node are left as they are this
    round (the policy only sees usable nodes, so it would "preempt" them for nothing), and so
    is every start that would need their GPUs. Returns (kept, deferred)."""
    usable = {n.name for n in state.usable_nodes()}
    frozen = {j.id: set(j.gpus_held) for j in state.jobs
              if any(node_of(g) not in usable for g in j.gpus_held)}
    busy = set().union(*frozen.values()) if frozen else set()
    kept: list[Action] = []
    deferred: list[Action] = []
    for action in actions:
        if action.job_id in frozen or busy.intersection(getattr(action, "gpu_ids", ())):
            deferred.append(action)
        else:
            kept.append(action)
    return kept, deferred


def merge_history(state: ClusterState, history: dict[str, dict[str, Any]]
                  ) -> tuple[ClusterState, list[dict[str, Any]]]:
    """Arrival, attained service and waiting time that survive requeues and daemon restarts.

    Slurm restarts a requeued job's clock and resets its submit time to the requeue; the
    store keeps the first submit time and accumulates the time each job held GPUs (or
    waited) between the snapshots the daemon saw, so that policies see the job's whole
    history (a preempted job would otherwise lose its place in FIFO/LAS order).
    """
    now = state.time_s
    jobs = []
    rows = []
    for job in state.jobs:
        old = history.get(job.id)
        attained = old["attained_s"] if old else 0.0
        waiting = old["waiting_s"] if old else 0.0
        since = old["last_seen"] if old else now
        if job.state is JobState.RUNNING:
            began = job.start_s if job.start_s is not None else now
            attained += max(0.0, now - max(since, began)) if old else job.attained_s
        elif job.state is JobState.PENDING:
            waiting += max(0.0, now - since) if old else max(0.0, now - job.arrival_s)
        arrival = job.arrival_s
        if old and old.get("arrival_s") is not None:
            arrival = min(arrival, old["arrival_s"])
        jobs.append(replace(job, attained_s=attained, arrival_s=arrival))
        rows.append({"job_id": job.id, "tenant": job.tenant, "arrival_s": arrival,
                     "first_seen": old["first_seen"] if old else now,
                     "state": job.state.value, "attained_s": attained, "waiting_s": waiting,
                     "restarts": job.restarts, "last_seen": now,
                     "finished_at": now if not job.state.active and not (
                         old and old["finished_at"]) else (old or {}).get("finished_at"),
                     "exit_code": None})
    return state.with_jobs(jobs), rows


def rho_estimates(state: ClusterState) -> dict[str, float]:
    """Time in the system over GPU time received, for active jobs that have run."""
    out = {}
    for job in state.active_jobs():
        if job.attained_s > 0:
            out[job.id] = max(1.0, (state.time_s - job.arrival_s) / job.attained_s)
    return out


class Daemon:
    def __init__(self, adapter: Any, policy: Policy, store: Store, settings: DaemonSettings,
                 metrics: Metrics | None = None, sleep: Callable[[float], None] = time.sleep,
                 profiler: Profiler | None = None) -> None:
        self.adapter = adapter
        self.policy = policy
        self.store = store
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.sleep = sleep
        self.profiler = profiler
        self.stopping = False

    # ---- one round ------------------------------------------------------------------------
    def run_round(self, *, preemptive: bool = True) -> int | None:
        started = time.perf_counter()
        try:
            raw = self.adapter.snapshot()
        except SlurmUnavailable as exc:
            self.store.skip_round(self.policy.name, f"resource manager unavailable: {exc}")
            self.metrics.observe_round("skipped", None)
            log.error("round skipped: %s", exc, extra={"fields": {"event": "round_skipped"}})
            return None
        state, rows = merge_history(raw, self.store.job_history())
        self.store.save_jobs(rows)
        if self.profiler is not None:
            state = measure(state, self.profiler)
        state = with_default_profiles(state)
        plan = self.policy.schedule(state, state.time_s)
        actions = self.plan_to_actions(state, plan, preemptive)
        round_id = self.store.begin_round(self.policy.name, _plan_dict(plan), actions,
                                          reason=plan.reason, dry_run=self.settings.dry_run)
        if hasattr(self.policy, "state_dict") and not self.settings.dry_run:
            # leases, trackers, RNG: what the policy must remember across a restart
            self.store.save_policy_state(self.policy.name, self.policy.state_dict())
        fields = {"event": "round", "round": round_id, "preemptive": preemptive,
                  "jobs": len(state.active_jobs()), "actions": len(actions),
                  "dry_run": self.settings.dry_run,
                  "planned": sorted(a.job_id for a in plan.assignments),
                  "attained_s": {j.id: round(j.attained_s, 1) for j in state.active_jobs()}}
        for seq, action in enumerate(actions):
            log.info("%s %s", "would" if self.settings.dry_run else "will",
                     _describe(action), extra={"fields": {"event": "action", "round": round_id,
                                                          "seq": seq, "job": action.job_id,
                                                          "kind": type(action).__name__}})
        if not self.settings.dry_run and actions:
            self.apply_round(round_id)
        latency = time.perf_counter() - started
        if not self.stopping:
            self.store.finish_round(round_id, latency,
                                    status="dry-run" if self.settings.dry_run else "done")
        self.metrics.observe_round("dry-run" if self.settings.dry_run else "done", latency)
        self.metrics.set_allocation(_tenant_gpus(state, plan), rho_estimates(state))
        log.info("round %d: %d actions in %.3f s", round_id, len(actions), latency,
                 extra={"fields": {**fields, "latency_s": round(latency, 4)}})
        return round_id

    def plan_to_actions(self, state: ClusterState, plan: Plan, preemptive: bool
                        ) -> list[Action]:
        if self.settings.mode == "soft":
            pending = {j.id for j in state.jobs if j.state is JobState.PENDING}
            wanted = slurm_priorities({k: v for k, v in plan.priorities.items()
                                       if k in pending})
            return [SetPriority(job_id, float(p)) for job_id, p in wanted.items()]
        actions = plan_actions(state, plan, preemptive=preemptive,
                               preempt_mode=self.settings.preempt_mode,
                               grace_s=self.settings.grace_s)
        actions, frozen = leave_alone_on_unusable_nodes(state, actions)
        if frozen:
            log.info("%d actions wait for drained or settling nodes", len(frozen),
                     extra={"fields": {"event": "frozen",
                                       "deferred": [_describe(a) for a in frozen]}})
        kept, dropped = cap_preemptions(state, actions, self.settings.max_preempt_share)
        if dropped:
            self.metrics.capped_preemptions += sum(isinstance(a, Preempt) for a in dropped)
            log.warning("preemption cap %.0f%%: %d actions deferred",
                        100 * self.settings.max_preempt_share, len(dropped),
                        extra={"fields": {"event": "capped",
                                          "deferred": [_describe(a) for a in dropped]}})
        return kept

    def apply_round(self, round_id: int, *, recovering: bool = False) -> None:
        """Carry out the journalled actions of a round that are not done yet."""
        entries = [e for e in self.store.journal(round_id) if e.status in (PLANNED, APPLYING)]
        if not recovering:
            grace = self.adapter.warn_preemptions([e.action for e in entries])
            if grace:
                self.sleep(grace)
        for entry in entries:
            if self.stopping:
                return
            if recovering or entry.status == APPLYING:
                view = self.adapter.view()
                if self.adapter.effect_visible(entry.action, view):
                    self.store.mark(round_id, entry.seq, DONE, "already in effect (recovered)")
                    log.info("round %d action %d already in effect: %s", round_id, entry.seq,
                             _describe(entry.action),
                             extra={"fields": {"event": "recovered", "round": round_id}})
                    continue
                if not any(j.id == entry.action.job_id and j.state.active
                           for j in view.state.jobs):
                    self.store.mark(round_id, entry.seq, SKIPPED, "job no longer active")
                    continue
            self.store.mark(round_id, entry.seq, APPLYING)
            result = self.adapter.apply_one(entry.action)
            self.store.mark(round_id, entry.seq, DONE if result.ok else FAILED, result.detail)
            self.metrics.count_action(type(entry.action).__name__,
                                      "ok" if result.ok else "failed")
            log.log(logging.INFO if result.ok else logging.WARNING, "%s: %s",
                    _describe(entry.action), result.detail,
                    extra={"fields": {"event": "applied", "round": round_id, "seq": entry.seq,
                                      "ok": result.ok}})
            if self.settings.action_interval_s > 0:
                self.sleep(self.settings.action_interval_s)

    def restore_policy_state(self) -> bool:
        saved = self.store.policy_state(self.policy.name)
        if saved is None or not hasattr(self.policy, "load_state_dict"):
            return False
        self.policy.load_state_dict(saved)
        log.info("policy %s state restored", self.policy.name,
                 extra={"fields": {"event": "policy_state_restored"}})
        return True

    def recover(self) -> None:
        self.restore_policy_state()
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
        wake = _bind_wake_socket(Path(self.settings.hook_dir))
        try:
            self.recover()
            rounds = 0
            next_round = time.monotonic()
            preemptive = True
            while not self.stopping and (max_rounds is None or rounds < max_rounds):
                self.ingest_spool()
                self.run_round(preemptive=preemptive)
                rounds += 1
                if preemptive:
                    next_round = time.monotonic() + self.settings.round_s
                preemptive = self._wait(wake, next_round)
        finally:
            wake.close()

    def _wait(self, wake: socket.socket, deadline: float) -> bool:
        """Sleep until the round timer (→ preemptive round) or a hook event (→ fill-only)."""
        while not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            ready, _, _ = select.select([wake], [], [], min(left, 1.0))
            if ready:
                _drain(wake)
                return False
        return True


def _bind_wake_socket(hook_dir: Path) -> socket.socket:
    hook_dir.mkdir(parents=True, exist_ok=True)
    path = hook_dir / "wake.sock"
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    old = os.umask(0o077)  # only the daemon's user (root/SlurmUser) may wake it
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    sock.setblocking(False)
    return sock


def _drain(sock: socket.socket) -> None:
    while True:
        try:
            sock.recv(1024)
        except BlockingIOError:
            return


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


def _describe(action: Action) -> str:
    name = type(action).__name__.lower()
    gpus = getattr(action, "gpu_ids", None)
    return f"{name} job {action.job_id}" + (f" on {','.join(gpus)}" if gpus else "")

"""The YARN adapter: the same ResourceManager protocol as Slurm's, over the RM's REST API.

Read side: nodes with ``yarn.io/gpu``, the active apps, and the live containers of the running
ones (for where their GPUs are) → :func:`gpufair.adapters.yarn.translate.translate`.

Write side — what a REST-only arbiter can do (specs/yarn_rm_rest.md §9), each only when the
configuration says the RM allows it, with a clear refusal otherwise:

- ``Start``: the tenant's GPU share grows by the job's GPUs, enforced as CapacityScheduler
  queue capacities through ``scheduler-conf`` (validated first) — YARN's own placement then
  gives the queue its GPUs; the started app's priority is raised so that within its queue the
  RM serves the app the plan chose; optionally the app is moved into its tenant's queue, and
  given a lifetime (``lease_s``) after which the RM kills it: a lease, renewed before each
  round while the plan keeps the app (never once the plan has preempted it).
- ``Preempt``: kill (``PUT state KILLED`` with a diagnostic), then the tenant's share shrinks.
  YARN has no requeue: the app's framework (or its owner) submits again.
- ``SetPriority`` (soft mode): ``PUT priority``; the RM may clamp it to the cluster or queue
  maximum, and the reply says what it kept.
- ``Resize``, ``Migrate``, ``Resume``: not expressible — YARN cannot move or resize a running
  app's containers from outside, nor suspend one.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpufair.adapters.base import Effect, RequeueCheck
from gpufair.adapters.yarn.client import RMClient, RMError, RMReplyError, RMUnavailable
from gpufair.adapters.yarn.decode import as_float, as_int, as_list, items
from gpufair.adapters.yarn.enforce import QueueLayout, capacities, capacity_keys, mutation
from gpufair.adapters.yarn.queues import QueueTree, queue_tree
from gpufair.adapters.yarn.translate import ACTIVE_STATES, APP_ID, YarnView, leaf, translate
from gpufair.errors import InputError
from gpufair.model import (
    Action,
    ActionResult,
    ClusterState,
    JobState,
    Migrate,
    NodeState,
    Preempt,
    Resize,
    Resume,
    SetPriority,
    Start,
)
from gpufair.settings import setting

log = logging.getLogger("gpufair.yarn")
ATTEMPT_ID = re.compile(r"appattempt_\d{1,20}_\d{1,12}_\d{1,9}")


@dataclass(frozen=True)
class YarnSettings:
    """The ``[yarn]`` section of gpufair.toml."""

    urls: tuple[str, ...] = setting((), "ResourceManager web addresses, http(s)://host:port;"
                                    " several for RM HA (the active one is found and"
                                    " followed)")
    auth: str = setting("none", "none (the RM's static user), simple (user.name), kerberos"
                        " (SPNEGO; needs requests-gssapi), token (delegation token)",
                        choices=("none", "simple", "kerberos", "token"))
    user: str | None = setting(None, "user.name for simple auth")
    token_file: str | None = setting(None, "file holding an RM delegation token (auth token)")
    ca_bundle: str | None = setting(None, "CA bundle for HTTPS; unset: the system's")
    client_cert: str | None = setting(None, "client certificate (PEM with its key) for HTTPS")
    timeout_s: float = setting(10.0, "per request", gt=0.0, le=600.0)
    retries: int = setting(3, "attempts per request (reads and idempotent writes)", ge=1,
                           le=20)
    backoff_s: float = setting(0.5, "first pause between attempts (doubles)", ge=0.0, le=60.0)
    managed_queues: tuple[str, ...] = setting((), "leaf queues whose apps gpufair schedules;"
                                              " empty: every queue")
    tenant_from: str = setting("queue", "a tenant per leaf queue, or per user",
                               choices=("queue", "user"))
    gpu_type_attribute: str = setting("gpu_type", "node attribute naming the GPU type (else"
                                      " the node's first label, else default_gpu_type)")
    default_gpu_type: str = setting("gpu", "GPU type of nodes that name none")
    app_tag_prefix: str = setting("", "an app tag starting with this names the app's group"
                                  " (the rest of the tag); empty: the first tag")
    enforce: str = setting("none", "capacity: tenants' GPU shares become CapacityScheduler"
                           " queue capacities via scheduler-conf (CS with a mutable"
                           " configuration store); none: no queue changes",
                           choices=("none", "capacity"))
    parent_queue: str = setting("root", "full path of the tenants' parent queue")
    rest_queue: str | None = setting(None, "full path of the sibling queue that takes the"
                                     " capacity no tenant gets (enforce = capacity)")
    allow_kill: bool = setting(True, "preemption kills the app (YARN cannot requeue)")
    allow_priority: bool = setting(True, "set app priorities (CapacityScheduler only)")
    started_priority: int = setting(10, "priority given to an app gpufair starts, so that"
                                    " its queue serves it first", ge=0, le=1_000_000)
    allow_move: bool = setting(False, "move a started app into its tenant's queue"
                               " (tenant_from = user)")
    lease_s: float = setting(0.0, "lifetime given to a started app (the RM kills it then),"
                             " renewed before each round while the plan keeps the app once"
                             " less than half of it is left (make it over twice round_s);"
                             " 0: none", ge=0.0, le=30 * 86400.0)
    kill_wait_s: float = setting(30.0, "how long a kill may take to show", gt=0.0)
    grant_ttl_s: float = setting(600.0, "a started app keeps its share in its queue's"
                                 " capacity until it runs, leaves, or this long passes",
                                 gt=0.0)

    def __post_init__(self) -> None:
        if self.enforce == "capacity":
            if self.tenant_from == "user" and not self.allow_move:
                raise ValueError("enforce = capacity with tenant_from = user needs allow_move"
                                 " (apps must sit in their user's queue)")
            if not self.rest_queue:
                raise ValueError("enforce = capacity needs rest_queue (a sibling of the"
                                 " tenant queues: CapacityScheduler needs siblings' capacities"
                                 " to sum to 100)")
            if not self.rest_queue.startswith(self.parent_queue + "."):
                raise ValueError("rest_queue must be a child of parent_queue")


class NotExpressible(ValueError):
    """An action YARN's REST API cannot carry out (or this RM's configuration forbids)."""


@dataclass
class YarnAdapter:
    client: RMClient
    settings: YarnSettings = field(default_factory=YarnSettings)
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    last_view: YarnView | None = None
    mode: str = "hard"
    _granted: dict[str, tuple[str, tuple[str, ...], float]] = field(default_factory=dict)
    _killed: set[str] = field(default_factory=set)
    _written: dict[str, dict[str, str]] | None = None   # partition → queue path → percent
    _tree: QueueTree | None = None
    _attempts: dict[str, str] = field(default_factory=dict)
    _fresh_at: float | None = None
    _leases: dict[str, float] = field(default_factory=dict)   # app → lifetime end gpufair set
    _lease_renewals: int = 0
    _lease_failures: int = 0

    @classmethod
    def from_settings(cls, settings: YarnSettings, *, mode: str = "hard",
                      urls: Sequence[str] | None = None) -> YarnAdapter:
        token = None
        if settings.token_file:
            try:
                token = Path(settings.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise InputError(settings.token_file, f"cannot read token: {exc.strerror}",
                                 field="yarn.token_file") from exc
        client = RMClient(list(urls or settings.urls), timeout_s=settings.timeout_s,
                          retries=settings.retries, backoff_s=settings.backoff_s,
                          auth=settings.auth, user=settings.user, token=token,
                          verify=settings.ca_bundle or True, cert=settings.client_cert)
        return cls(client, settings, mode=mode)

    @property
    def name(self) -> str:
        return f"yarn/{self.client.active or self.client.urls[0]}"

    # ---- read side ------------------------------------------------------------------------
    def read(self) -> tuple[Any, Any, dict[str, list[Any]]]:
        """Nodes, active apps and the running apps' containers (raises RMUnavailable)."""
        nodes = self.client.get("/nodes")
        apps = self.client.get("/apps", states=",".join(ACTIVE_STATES))
        containers: dict[str, list[Any]] = {}
        for raw in items(apps, "apps", "app", "yarn/apps"):
            if str(raw.get("state")) != "RUNNING":
                continue
            app_id = str(raw.get("id"))
            if APP_ID.fullmatch(app_id):   # ids go into URL paths (translate reports others)
                containers[app_id] = self._containers(app_id)
        self._attempts = {k: v for k, v in self._attempts.items() if k in containers}
        return nodes, apps, containers

    def _containers(self, app_id: str) -> list[Any]:
        """The live containers of a running app's current attempt. The attempt id is kept
        from one snapshot to the next (it changes only when the AM restarts, and then the
        old attempt's containers are gone: a 404 or an empty list sends us to look again),
        so a running app costs one request per snapshot, not two."""
        attempt = self._attempts.get(app_id)
        if attempt is not None:
            found = self._attempt_containers(app_id, attempt)
            if found:
                return found
        attempt = self._current_attempt(app_id)
        if attempt is None:
            return []
        self._attempts[app_id] = attempt
        return self._attempt_containers(app_id, attempt)

    def _current_attempt(self, app_id: str) -> str | None:
        try:
            attempts = self.client.get(f"/apps/{app_id}/appattempts")
        except RMError as exc:
            if exc.status == 404:     # finished between the two reads
                return None
            raise
        wrapper = attempts.get("appAttempts") if isinstance(attempts, Mapping) else None
        listed = [a for a in as_list(wrapper.get("appAttempt"))
                  if isinstance(a, Mapping)] if isinstance(wrapper, Mapping) else []
        if not listed:
            return None
        last = max(listed, key=lambda a: as_int(a.get("id")))
        attempt = str(last.get("appAttemptId") or "")
        return attempt if ATTEMPT_ID.fullmatch(attempt) else None

    def _attempt_containers(self, app_id: str, attempt: str) -> list[Any]:
        try:
            doc = self.client.get(f"/apps/{app_id}/appattempts/{attempt}/containers")
        except RMError as exc:
            if exc.status == 404:
                return []
            raise
        return items(doc, "containers", "container", f"yarn/{app_id}/containers")

    def view(self) -> YarnView:
        s = self.settings
        try:
            nodes, apps, containers = self.read()
            view = translate(nodes, apps, containers, now=self.clock(),
                             managed_queues=s.managed_queues, tenant_from=s.tenant_from,
                             gpu_type_attribute=s.gpu_type_attribute,
                             default_gpu_type=s.default_gpu_type,
                             app_tag_prefix=s.app_tag_prefix, source=self.name,
                             queue_labels=self._queue_labels(nodes))
        except RMError as exc:   # refused a read (auth, ACL): no usable answer this round
            raise RMUnavailable(f"the ResourceManager refused a read: {exc}") from exc
        except InputError as exc:   # a reply that is not the documented shape
            raise RMReplyError(f"unreadable ResourceManager reply: {exc}") from exc
        for problem in view.problems:
            log.warning("%s", problem)
        self.last_view = view
        return view

    def _queue_labels(self, nodes: Any) -> dict[str, str]:
        """Leaf queue → the partition its apps run in, read from ``/scheduler`` only when a
        node carries a label (an unlabelled cluster has one partition: no extra request)."""
        if not any(as_list(n.get("nodeLabels")) for n in items(nodes, "nodes", "node",
                                                                 "yarn/nodes")):
            return {}
        tree = queue_tree(self.client.get("/scheduler"))
        return {leaf(path): q.default_label for path, q in tree.queues.items()}

    def snapshot(self) -> ClusterState:
        if self._fresh_at is not None and self.last_view is not None \
                and time.monotonic() - self._fresh_at < 1.0:
            view = self.last_view        # read by reconcile() just before this round
        else:
            view = self.view()
        self._fresh_at = None
        self._settle(view)
        if self.settings.enforce != "capacity":
            return view.state
        placed = self._starting_places(view.state)
        return view.state.with_jobs(
            replace(j, state=JobState.RUNNING, gpus_held=j.gpus_held + placed[j.id],
                    start_s=j.start_s if j.gpus_held else view.state.time_s)
            if j.id in placed else j for j in view.state.jobs)

    def _starting_places(self, state: ClusterState) -> dict[str, tuple[str, ...]]:
        """The GPUs each app gpufair started is shown on beyond those YARN placed it on.

        A start grows the tenant's queue at once, but the CapacityScheduler places at
        NodeManager heartbeats: for seconds (on a busy RM, rounds) the app is ACCEPTED with
        nothing held, then, spread over nodes, RUNNING on those whose heartbeat came first.
        Shown as the RM shows it, a round would plan it anew and stateful policies would not
        count it as running (AFS' ``run_s``, Shockwave's tables), though its queue keeps its
        GPUs. So it is shown running on all of its GPUs: those it holds, and for the rest
        the plan's where still free, else the lowest free of the nodes it may use (its
        node-label partition's); no service is counted before this
        round when it holds nothing yet (``start_s`` now) — as Slurm's released jobs are.
        When too few are free (apps gpufair does not schedule took them) it is shown as the
        RM shows it, to be planned anew. Only with ``enforce = capacity``: otherwise a start
        only raises a priority and promises no GPUs."""
        nodes = [n for n in state.nodes if n.state is NodeState.UP]
        free = [g for n in nodes for g in n.gpu_ids()]
        taken = {g for j in state.jobs for g in j.gpus_held}
        out: dict[str, tuple[str, ...]] = {}
        for job in state.jobs:
            grant = self._granted.get(job.id)
            missing = job.gpus - len(job.gpus_held)
            if grant is None or missing <= 0:
                continue
            spare = [g for g in free if g not in taken and (
                job.allowed_nodes is None or g.rpartition(":")[0] in job.allowed_nodes)]
            extra = tuple(dict.fromkeys([g for g in grant[1] if g in spare] + spare))[:missing]
            if len(extra) == missing:
                taken.update(extra)
                out[job.id] = extra
        return out

    def _settle(self, view: YarnView) -> None:
        """A grant lasts until its app holds all its GPUs (then they count as held) or
        leaves, or expires; kills of the last round show in the view now. Not merely until
        it runs: YARN places an app spread over nodes part by part (one NodeManager
        heartbeat each), and a queue shrunk to what the app held after the first part would
        never let the rest in."""
        now = self.clock()
        short = {j.id for j in view.state.jobs if len(j.gpus_held) < j.gpus}
        self._granted = {k: g for k, g in self._granted.items()
                         if k in short and now - g[2] < self.settings.grant_ttl_s}
        self._killed.clear()

    def reconcile(self, ours: RequeueCheck | None = None) -> list[str]:
        """Before each live round (never in a dry run): renew the leases of the apps the
        plan keeps, then set the tenants' queue capacities to what they hold now plus what
        gpufair started that YARN has not placed yet, when the RM shows anything else — an
        admin's edit, the capacities the cluster started with, a tenant whose app finished.
        Without this a round that plans no change would leave queues free to grow into GPUs
        the plan gave nobody. Logged here; the list the daemon counts as bypasses stays
        empty (no job was re-held)."""
        capacity = self.settings.enforce == "capacity"
        if self.mode != "hard" or not (capacity or self._leases):
            return []
        try:
            view = self.view()
        except RMUnavailable as exc:
            log.warning("yarn: leases not renewed, queue capacities not re-asserted: %s", exc)
            return []
        self._fresh_at = time.monotonic()
        self._renew_leases(view)
        if not capacity:
            return []
        try:
            self._settle(view)
            detail = self._enforce(check_rm=True)
        except (RMUnavailable, RMError, NotExpressible, InputError) as exc:
            log.warning("yarn: queue capacities not re-asserted: %s", exc)
            return []
        if detail != "queue capacities unchanged":
            log.info("yarn: %s (re-asserted before the round)", detail)
        return []

    def adopt_started(self, app_ids: Sequence[str]) -> None:
        """After a restart: the apps the daemon's journal shows gpufair started and has not
        preempted since. Their leases (set by the daemon before the restart) are renewed at
        the next round if they are still active — without this they would run out, and the
        RM end apps the plan keeps. Apps that are gone are dropped at that round."""
        if self.settings.lease_s > 0:
            for app_id in app_ids:
                self._leases.setdefault(app_id, -math.inf)   # due at once

    def _renew_leases(self, view: YarnView) -> None:
        """Give each app gpufair started with a lease a new lifetime of ``lease_s`` once
        less than half of it is left — one request per app every ``lease_s / 2``, not every
        round. Only apps still active and never preempted are here (a Preempt drops its app
        at once, whether or not the kill succeeds): a lease the plan no longer backs runs
        out, and the RM ends the app even when gpufair may not kill it (``allow_kill``
        off). A renewal that fails is retried next round; the lease is lost only if none
        succeeds before it ends."""
        now = self.clock()
        for app_id, until in list(self._leases.items()):
            if app_id not in view.apps:          # finished, killed, or timed out
                del self._leases[app_id]
                continue
            if until - now >= self.settings.lease_s / 2:
                continue
            try:
                self._leases[app_id] = self._set_lifetime(app_id)
                self._lease_renewals += 1
            except RMError as exc:
                self._lease_failures += 1
                if exc.status == 404 or "state" in exc.message:   # gone meanwhile
                    del self._leases[app_id]
                log.warning("app %s: lease not renewed: %s", app_id, exc)
            except RMUnavailable as exc:
                self._lease_failures += 1
                log.warning("app %s: lease not renewed: %s", app_id, exc)
                return

    def _set_lifetime(self, app_id: str) -> float:
        """``PUT /apps/{id}/timeout``: the app's LIFETIME ends ``lease_s`` from now (the RM
        kills it then); returns that end (epoch seconds)."""
        until = self.clock() + self.settings.lease_s
        expiry = datetime.fromtimestamp(until, tz=timezone.utc)
        text = expiry.strftime("%Y-%m-%dT%H:%M:%S.") + f"{expiry.microsecond // 1000:03d}+0000"
        self.client.put(f"/apps/{app_id}/timeout",
                        {"timeout": {"type": "LIFETIME", "expiryTime": text}})
        return until

    def status(self) -> dict[str, float]:
        """The RM connection and the leases, for ``/metrics`` (``gpufair_adapter_status``):
        failovers and requests; apps under a lease, renewals and failed renewals, and the
        soonest lease end (epoch seconds; NaN when none is known, so that no stale end
        lingers in the gauge once the last lease is gone) — alert when it comes close to
        now."""
        out = {"yarn_rm_failovers": float(self.client.failovers),
               "yarn_rm_requests": float(self.client.requests),
               "yarn_leases": float(len(self._leases)),
               "yarn_lease_renewals": float(self._lease_renewals),
               "yarn_lease_failures": float(self._lease_failures)}
        known = [t for t in self._leases.values() if math.isfinite(t)]
        out["yarn_lease_expires_at"] = min(known) if known else math.nan
        return out

    # ---- write side -----------------------------------------------------------------------
    def warn_preemptions(self, actions: Sequence[Action]) -> float:
        """YARN's REST API has no checkpoint signal an app can catch before its kill (a
        container signal would stop the container itself): nothing to wait for."""
        if any(getattr(a, "grace_s", 0.0) > 0 for a in actions):
            log.warning("yarn: no checkpoint warning before a kill is possible through REST;"
                        " grace_s is ignored")
        return 0.0

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        return [self.apply_one(a) for a in actions]

    def apply_one(self, action: Action) -> ActionResult:
        try:
            view = self.last_view or self.view()
        except RMUnavailable as exc:
            return ActionResult(action, False, str(exc), retry=True)
        job = next((j for j in view.state.jobs if j.id == action.job_id), None)
        info = view.apps.get(action.job_id)
        if job is None or info is None:
            return ActionResult(action, False, f"app {action.job_id} not in the last snapshot")
        try:
            if isinstance(action, Start):
                return ActionResult(action, True, self._start(action, job.tenant, info.queue))
            if isinstance(action, Preempt):
                self._leases.pop(action.job_id, None)   # the plan no longer backs it
                return ActionResult(action, True, self._kill(action.job_id))
            if isinstance(action, SetPriority):
                return ActionResult(action, True, self._priority(action.job_id,
                                                                 round(action.priority)))
            if isinstance(action, (Resize, Migrate, Resume)):
                raise NotExpressible(f"YARN cannot {type(action).__name__.lower()} a running"
                                     " app's containers through its REST API")
            raise NotExpressible(f"unknown action {type(action).__name__}")
        except NotExpressible as exc:
            return ActionResult(action, False, f"app {action.job_id}: {exc}")
        except RMUnavailable as exc:
            return ActionResult(action, False, str(exc), retry=True)
        except RMError as exc:
            stale = exc.status == 404 or "state cannot" in exc.message
            return ActionResult(action, False, f"app {action.job_id}: the RM refused: {exc}",
                                stale=stale)
        except InputError as exc:
            return ActionResult(action, False, f"app {action.job_id}: {exc}")

    def _start(self, action: Start, tenant: str, queue: str) -> str:
        s = self.settings
        done = []
        if s.allow_move and s.tenant_from == "user" and leaf(queue) != tenant:
            target = f"{s.parent_queue}.{tenant}"
            reply = self.client.put(f"/apps/{action.job_id}/queue", {"queue": target})
            done.append(f"moved to {reply.data.get('queue', target)}")
        # the priority first: once the queue grows, the RM may place at its next heartbeat,
        # and it must then pick this app, not an older one of the same queue
        if s.allow_priority:
            try:
                done.append(self._priority(action.job_id, s.started_priority))
            except RMError as exc:   # a FairScheduler RM: the quota alone must do
                log.warning("app %s: priority not set: %s", action.job_id, exc)
        self._granted[action.job_id] = (tenant, tuple(action.gpu_ids), self.clock())
        if s.enforce == "capacity":
            done.append(self._enforce())
        elif self.mode == "hard":
            log.info("yarn: enforce = none: start of %s only raises its priority",
                     action.job_id)
        if s.lease_s > 0:
            until = self._set_lifetime(action.job_id)
            self._leases[action.job_id] = until
            done.append("lease until " + datetime.fromtimestamp(until, tz=timezone.utc)
                        .strftime("%Y-%m-%dT%H:%M:%S+0000"))
        return ", ".join(done) or "nothing to do (enforce = none, priorities off)"

    def _kill(self, app_id: str) -> str:
        if not self.settings.allow_kill:
            raise NotExpressible("preemption would kill the app (YARN cannot requeue one) and"
                                 " allow_kill is off")
        body = {"state": "KILLED", "diagnostics": "preempted by gpufair"}
        reply = self.client.put(f"/apps/{app_id}/state", body)
        deadline = self.clock() + self.settings.kill_wait_s
        state = str((reply.data or {}).get("state", ""))
        while reply.status == 202 and state != "KILLED" and self.clock() < deadline:
            self.sleep(0.2)
            reply = self.client.put(f"/apps/{app_id}/state", body)
            state = str((reply.data or {}).get("state", ""))
        if state != "KILLED":
            raise RMError(reply.status, None, f"still {state or '?'} after "
                          f"{self.settings.kill_wait_s:g} s")
        self._killed.add(app_id)
        self._granted.pop(app_id, None)
        detail = "killed"
        if self.settings.enforce == "capacity":
            detail += ", " + self._enforce()
        return detail

    def _priority(self, app_id: str, wanted: int) -> str:
        if not self.settings.allow_priority:
            raise NotExpressible("allow_priority is off")
        reply = self.client.put(f"/apps/{app_id}/priority", {"priority": wanted})
        kept = as_int((reply.data or {}).get("priority"), wanted)
        if kept != wanted:
            log.warning("app %s: the RM clamped priority %d to %d (see "
                        "yarn.cluster.max-application-priority)", app_id, wanted, kept)
        return f"priority {kept}"

    # ---- queue capacities -----------------------------------------------------------------
    def shares(self) -> dict[str, dict[str, int]]:
        """Each managed tenant's GPUs this round, per partition that holds GPU nodes ("" the
        default one): what its running apps hold (apps killed this round excepted) plus
        what gpufair started since the snapshot, each GPU counted in its node's partition."""
        assert self.last_view is not None
        part_of = self.last_view.partition_of
        out = {p: {leaf(q): 0 for q in self.settings.managed_queues}
               for p in sorted(set(part_of.values()))}

        def count(tenant: str, gpu: str) -> None:
            row = out.setdefault(part_of.get(gpu.rpartition(":")[0], ""), {})
            row[tenant] = row.get(tenant, 0) + 1

        for job in self.last_view.state.jobs:
            if job.state is JobState.RUNNING and job.id not in self._killed \
                    and job.id not in self._granted:
                for gpu in job.gpus_held:
                    count(job.tenant, gpu)
        for tenant, gpus, _ in self._granted.values():
            for gpu in gpus:
                count(tenant, gpu)
        return out

    def _capacities(self) -> dict[str, dict[str, str]]:
        """The capacities that carry this round's shares: partition → queue path → percent.

        A labelled partition is enforced only when a managed queue may use it; there the
        rest queue must be able to use it too (siblings' capacities on a label sum to 100),
        and only the queues that may use it get a capacity on it — a dedicated-VC queue keeps
        its 0 on the default partition and gets its share on its own."""
        assert self.last_view is not None and self._tree is not None
        s = self.settings
        parent = self._tree.queues[s.parent_queue]
        totals: dict[str, int] = {}
        for node in self.last_view.state.nodes:
            part = self.last_view.partition_of.get(node.name, "")
            totals[part] = totals.get(part, 0) + node.gpus
        out: dict[str, dict[str, str]] = {}
        for part, shares in sorted(self.shares().items()):
            users = {t: n for t, n in shares.items()
                     if self._can_use(f"{s.parent_queue}.{t}", part)}
            if part and not users:
                continue                      # GPUs no managed queue may use: not ours
            where = f"partition {part!r}" if part else "the default partition"
            stray = sorted(t for t, n in shares.items() if n and t not in users)
            if stray:   # a non-exclusive label lent them idle nodes: no capacity governs that
                log.warning("yarn: queues of %s hold GPUs of %s they may not be given"
                            " (accessible-node-labels): left out of its capacities",
                            ", ".join(stray), where)
            if not self._can_use(str(s.rest_queue), part):
                raise NotExpressible(f"rest_queue {s.rest_queue} may not use {where}"
                                     f" ({totals.get(part, 0)} GPUs): add it to its"
                                     " accessible-node-labels, the capacities on a label must"
                                     " sum to 100")
            if parent.share(part) <= 0:
                raise NotExpressible(f"parent_queue {s.parent_queue} has no capacity on"
                                     f" {where} ({totals.get(part, 0)} GPUs)")
            layout = QueueLayout(s.parent_queue, str(s.rest_queue), parent.share(part))
            out[part] = capacities(users, totals.get(part, 0), layout)
        return out

    def _can_use(self, path: str, partition: str) -> bool:
        assert self._tree is not None
        queue = self._tree.queues.get(path)
        return queue is not None and queue.can_use(partition)

    def _enforce(self, *, check_rm: bool = False) -> str:
        """Write the shares as capacities unless they are what was last written (or, with
        ``check_rm``, what the RM's configuration holds now)."""
        assert self.last_view is not None
        self._preflight()
        caps = self._capacities()
        if check_rm:
            self._written = self._rm_capacities(caps)
        if caps == self._written:
            return "queue capacities unchanged"
        body = mutation(caps)
        try:
            self.client.post("/scheduler-conf/validate", body, idempotent=True)
        except RMError as exc:
            if exc.status in (404, 405):   # an RM older than the validate endpoint
                log.info("scheduler-conf/validate not available (%s): PUT only", exc)
            else:
                raise RMError(exc.status, exc.exception,
                              f"queue capacities {caps} refused by validation: {exc.message}"
                              ) from exc
        self.client.put("/scheduler-conf", body)
        self._written = caps
        return "capacities " + ", ".join(
            f"{leaf(q)}{'@' + part if part else ''}={v}%"
            for part, by_queue in sorted(caps.items()) for q, v in sorted(by_queue.items()))

    def _rm_capacities(self, caps: Mapping[str, Mapping[str, str]]
                       ) -> dict[str, dict[str, str]] | None:
        """The RM's capacities of the queues and partitions in ``caps``, in ``caps``'
        spelling where they are equal (so a dict compares equal when nothing differs), or
        None when any queue's capacity and maximum-capacity differ from each other (a tenant
        may then grow)."""
        doc = self.client.get("/scheduler-conf")
        props = {str(p.get("name")): p.get("value")
                 for p in as_list(doc.get("property") if isinstance(doc, Mapping) else None)
                 if isinstance(p, Mapping)}
        out: dict[str, dict[str, str]] = {}
        for part, by_queue in caps.items():
            cap_key, max_key = capacity_keys(part)
            row = out.setdefault(part, {})
            for path, want in by_queue.items():
                got = props.get(f"yarn.scheduler.capacity.{path}.{cap_key}")
                top = props.get(f"yarn.scheduler.capacity.{path}.{max_key}")
                if got is None or top is None or as_float(got, -1.0) != as_float(top, -2.0):
                    return None
                row[path] = want if abs(as_float(got) - float(want)) < 1e-9 else str(got)
        return out

    def _preflight(self) -> QueueTree:
        """Whether this RM lets queue capacities carry the shares, checked once before the
        first write; returns its queue tree (the parent's share of each partition).

        Clear refusals: not a CapacityScheduler (FairScheduler has no mutation API), a
        managed or rest queue that is not a leaf under ``parent_queue``, a configuration
        store that is not mutable, a user that is not a YARN admin."""
        if self._tree is not None:
            return self._tree
        s = self.settings
        tree = queue_tree(self.client.get("/scheduler"))
        if tree.scheduler != "capacityScheduler":
            raise NotExpressible(f"enforce = capacity needs the CapacityScheduler; this RM runs"
                                 f" the {tree.scheduler or 'unknown scheduler'} (FairScheduler"
                                 " has no scheduler-conf mutation API)")
        parent = tree.queues.get(s.parent_queue)
        if parent is None or parent.leaf:
            raise NotExpressible(f"parent_queue {s.parent_queue} is not a parent queue of this"
                                 f" RM (queues: {', '.join(sorted(tree.queues))})")
        wanted = [f"{s.parent_queue}.{leaf(q)}" for q in s.managed_queues] + \
            [str(s.rest_queue)]
        missing = [q for q in wanted if q not in parent.children or not tree.queues[q].leaf]
        if missing:
            raise NotExpressible(f"{', '.join(missing)}: not leaf queues under"
                                 f" {s.parent_queue} (its children: "
                                 f"{', '.join(parent.children) or 'none'}); every managed"
                                 " queue and rest_queue must be one")
        try:
            self.client.get("/scheduler-conf")
        except RMError as exc:
            if exc.status in (400, 404, 405):
                raise NotExpressible(
                    "enforce = capacity needs the CapacityScheduler with a mutable"
                    " configuration store (yarn.scheduler.configuration.store.class ="
                    f" memory, leveldb, zk or fs); the RM answered: {exc.message}") from exc
            if exc.status in (401, 403):
                raise NotExpressible("scheduler-conf needs a YARN admin (yarn.admin.acl);"
                                     f" the RM answered: {exc.message}") from exc
            raise
        self._tree = tree
        return tree

    # ---- idempotence ----------------------------------------------------------------------
    def check(self, action: Action) -> Effect:
        view = self.view()
        job = next((j for j in view.state.jobs if j.id == action.job_id), None)
        info = view.apps.get(action.job_id)
        if job is None or info is None:
            return Effect.IN_EFFECT if isinstance(action, Preempt) else Effect.JOB_GONE
        if isinstance(action, Start):
            return Effect.IN_EFFECT if job.state is JobState.RUNNING else Effect.NOT_YET
        if isinstance(action, SetPriority):
            return Effect.IN_EFFECT if info.priority == round(action.priority) \
                else Effect.NOT_YET
        return Effect.NOT_YET


__all__ = ["NotExpressible", "YarnAdapter", "YarnSettings"]

"""A stateful emulator of the YARN ResourceManager REST API, on real HTTP over loopback.

No Hadoop can run here, so the YARN adapter is tested against this: written from the contract
(shared/specs/yarn_rm_rest.md), and itself checked against the RM replies Apache Hadoop
published (tests/data/yarn, tests/test_yarn_emulator_contract.py). It keeps a cluster —
nodes with ``yarn.io/gpu``, a CapacityScheduler queue tree, apps that ask for and hold GPU
containers — and a small placement loop (:meth:`Cluster.tick`) that honours queue capacities
and app priorities, so that what the adapter enforces through ``scheduler-conf`` has a
visible effect. Two :class:`RMServer` instances on one :class:`Cluster` are an HA pair: the
standby answers 307 exactly like ``RMWebAppFilter``.

Quirks reproduced on purpose (§1.2, §1.3): ``null`` for empty lists, repeated ``"entry"`` keys
in ``resourceSecondsMap``, numbers as strings in the mapped DAOs (containers, scheduler-conf),
RemoteException bodies, plain-text bodies on several write errors, 202 + Location on a kill.
Failure injection: :meth:`Cluster.inject` (an HTTP status, a dropped connection, a delay).
Placement runs on every request by default (the RM at its fastest); ``heartbeats=True`` makes
it wait for :meth:`Cluster.heartbeat`, as the CapacityScheduler waits for NodeManager
heartbeats, so that what the RM shows between a decision and its effect can be tested.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GPU = "yarn.io/gpu"
BASE = "/ws/v1/cluster"
FINAL = ("FINISHED", "FAILED", "KILLED")
BIG = 9223372036854775807
CS = "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler"


class Pairs(list):
    """An object whose keys may repeat (Jersey 1's map entries): a list of (key, value)."""


def dumps(value: Any) -> str:
    """JSON like Jersey 1 writes it, repeated keys included."""
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value)


def resource(memory: int, vcores: int, gpus: int) -> dict:
    """A ResourceInfo (§3): extended types only inside resourceInformations."""
    def info(name: str, units: str, value: int) -> dict:
        return {"attributes": {}, "maximumAllocation": BIG, "minimumAllocation": 0,
                "name": name, "resourceType": "COUNTABLE", "units": units, "value": value}
    return {"memory": memory, "vCores": vcores, "resourceInformations": {
        "resourceInformation": [info("memory-mb", "Mi", memory), info("vcores", "", vcores),
                                info(GPU, "", gpus)]}}


def hadoop_ai_resource(memory: int, vcores: int, gpus: int) -> dict:
    """A resource object of Hadoop-AI (OpenPAI's 2.9 fork): ``GPUs`` beside memory and vCores,
    no ``resourceInformations`` (tests/data/yarn/hadoop-ai/scheduler.json)."""
    return {"memory": memory, "vCores": vcores, "GPUs": gpus}


#: The reply shapes the emulator speaks: upstream Hadoop 3.1+ (``yarn.io/gpu`` in
#: resourceInformations) and Hadoop-AI (``GPUs`` in every resource object; nodes with
#: usedGPUs/availableGPUs/availableGPUAttribute and no totalResource).
SHAPES = ("hadoop-3", "hadoop-ai")


def listed(values: list) -> list | None:
    """Jersey 1 natural notation writes an empty collection as null."""
    return values or None


@dataclass
class EmuNode:
    host: str
    gpus: int
    port: int = 45454
    memory_mb: int = 262144
    vcores: int = 64
    label: str | None = None
    gpu_type: str | None = None      # a node attribute nm.yarn.io/gpu_type
    state: str = "RUNNING"
    rack: str = "/default-rack"

    @property
    def id(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Container:
    id: str
    node: str          # node id
    gpus: int
    memory_mb: int
    vcores: int
    started_ms: int
    indices: tuple[int, ...] = ()     # the node's GPUs it holds (Hadoop-AI's bitmask shows them)


@dataclass
class EmuApp:
    id: str
    user: str
    queue: str                      # leaf name
    name: str
    containers: int                 # GPU containers it asks for (a gang)
    gpus_per_container: int = 1
    memory_mb: int = 4096
    vcores: int = 2
    priority: int = 0
    tags: tuple[str, ...] = ()
    state: str = "ACCEPTED"         # RMAppState subset: ACCEPTED, RUNNING, KILLING, final
    started_ms: int = 0
    launch_ms: int = 0
    finished_ms: int = 0
    diagnostics: str = ""
    expiry_ms: int | None = None
    placed: list[Container] = field(default_factory=list)
    gpu_seconds: float = 0.0
    mem_seconds: float = 0.0
    vcore_seconds: float = 0.0
    final_status: str = "UNDEFINED"

    @property
    def outstanding(self) -> int:
        if self.state not in ("ACCEPTED", "RUNNING"):
            return 0
        return self.containers - len(self.placed)

    @property
    def held_gpus(self) -> int:
        return sum(c.gpus for c in self.placed)


@dataclass
class Queue:
    path: str
    capacity: float
    max_capacity: float
    state: str = "RUNNING"
    children: list[str] = field(default_factory=list)
    #: node-label partitions the queue may use (accessible-node-labels) → [capacity,
    #: maximum-capacity] on that partition; the default partition "" is the two fields above
    labels: dict[str, list[float]] = field(default_factory=dict)
    default_label: str = ""         # default-node-label-expression: where its apps run
    accessible: tuple[str, ...] | None = None   # accessible-node-labels; None: "*" (all)

    def may_use(self, label: str) -> bool:
        return not label or self.accessible is None or label in self.accessible

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]

    def caps(self, partition: str) -> tuple[float, float]:
        """(capacity, maximum-capacity) on ``partition``; 0 where it has no access."""
        if not partition:
            return self.capacity, self.max_capacity
        cap = self.labels.get(partition)
        return (cap[0], cap[1]) if cap else (0.0, 0.0)


@dataclass
class Fault:
    path: str          # substring of the request path
    action: str        # "status", "drop", "delay"
    status: int = 503
    times: int = 1
    delay_s: float = 0.0
    method: str | None = None
    to: str | None = None       # action "failover": the RM that becomes active
    then_to: str | None = None  # ... and the one active ``then_after_s`` later
    then_after_s: float = 0.0
    body: str | None = None     # action "body": served with status 200 and this text


class Cluster:
    """The RM state shared by every server of an HA pair; all access under one lock."""

    def __init__(self, nodes: list[EmuNode], queues: dict[str, tuple[float, float]], *,
                 mutable_conf: bool = True, max_priority: int = 20, scheduler: str = "capacity",
                 clock: Callable[[], float] = time.time, kill_ticks: int = 1,
                 auth: str = "none", rest_submit: bool = True,
                 heartbeats: bool = False, shape: str = "hadoop-3",
                 partitions: dict[str, dict[str, tuple[float, float]]] | None = None,
                 default_labels: dict[str, str] | None = None,
                 accessible: dict[str, tuple[str, ...]] | None = None) -> None:
        """``partitions``: queue path → {node label: (capacity, maximum-capacity)} on that
        label's partition (the root gets 100 on every label); ``default_labels``: queue path
        → the partition its apps run in (nodes with that label); ``accessible``: queue path
        → the only labels it may use (others: ``*``, every label)."""
        if shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}")
        self.shape = shape
        self.lock = threading.RLock()
        self.nodes = {n.id: n for n in nodes}
        self.queues: dict[str, Queue] = {"root": Queue("root", 100.0, 100.0)}
        for path, (cap, max_cap) in queues.items():
            self.queues[path] = Queue(path, cap, max_cap)
        for path in list(self.queues):
            parent = path.rpartition(".")[0]
            if parent:
                self.queues[parent].children.append(path)
        for path, caps in (partitions or {}).items():
            for label, (cap, max_cap) in caps.items():
                self.queues[path].labels[label] = [cap, max_cap]
                self.queues["root"].labels[label] = [100.0, 100.0]
        for path, label in (default_labels or {}).items():
            self.queues[path].default_label = label
        for path, labels in (accessible or {}).items():
            self.queues[path].accessible = tuple(labels)
        self.apps: dict[str, EmuApp] = {}
        self.mutable_conf = mutable_conf
        self.max_priority = max_priority
        self.scheduler = scheduler
        self.clock = clock
        self.started = int(clock() * 1000)
        self.kill_ticks = kill_ticks
        self.auth = auth
        self.rest_submit = rest_submit
        self.heartbeats = heartbeats
        self.active: str | None = None      # id of the active RM; None: no active RM
        self.servers: dict[str, RMServer] = {}
        self.faults: list[Fault] = []
        self.conf_version = 0
        self.conf_log: list[dict] = []
        self.requests: list[tuple[str, str, str]] = []   # (rm, method, path)
        self._seq = 0
        self._killing: dict[str, int] = {}
        self._last_tick = clock()
        self.dirty = True       # something placement depends on changed since it last ran

    # ---- test controls --------------------------------------------------------------------
    def submit(self, user: str, queue: str, containers: int, *, gpus_per_container: int = 1,
               name: str = "train", priority: int = 0, tags: tuple[str, ...] = ()) -> str:
        with self.lock:
            if not self.is_leaf(queue):
                raise ValueError(f"no leaf queue {queue}")
            self._seq += 1
            app_id = f"application_{self.started}_{self._seq:04d}"
            self.apps[app_id] = EmuApp(app_id, user, self.leaf_name(queue), name, containers,
                                       gpus_per_container,
                                       priority=min(priority, self.max_priority),
                                       tags=tuple(t.lower() for t in tags),
                                       started_ms=int(self.clock() * 1000))
            self.dirty = True
            return app_id

    def finish(self, app_id: str, status: str = "SUCCEEDED") -> None:
        with self.lock:
            self._end(self.apps[app_id], "FINISHED", status, "")

    def inject(self, path: str, action: str = "status", *, status: int = 503, times: int = 1,
               delay_s: float = 0.0, method: str | None = None, to: str | None = None,
               then_to: str | None = None, then_after_s: float = 0.0,
               body: str | None = None) -> None:
        """The next ``times`` requests whose path contains ``path`` (and of ``method``) fail:
        ``status`` (an HTTP error), ``body`` (200 with ``body`` as JSON content), ``drop``
        (connection closed, no answer), ``delay`` (slow, then served), or ``failover`` (the
        RM ``to`` becomes active *after* this request is served by the current one: a
        failover in the middle of a round; with ``then_to``, that RM becomes active
        ``then_after_s`` later — a failover that takes a while)."""
        with self.lock:
            self.faults.append(Fault(path, action, status, times, delay_s, method, to,
                                     then_to, then_after_s, body))

    def failover(self, to: str | None) -> None:
        with self.lock:
            self.active = to

    def gpus_by_queue(self) -> dict[str, int]:
        with self.lock:
            out = {self.queues[p].name: 0 for p in self.queues if self.is_leaf(p)}
            for app in self.apps.values():
                out[app.queue] = out.get(app.queue, 0) + app.held_gpus
            return out

    # ---- queues ---------------------------------------------------------------------------
    def is_leaf(self, queue: str) -> bool:
        path = self.find_queue(queue)
        return path is not None and not self.queues[path].children

    def find_queue(self, queue: str) -> str | None:
        if queue in self.queues:
            return queue
        matches = [p for p in self.queues if self.queues[p].name == queue]
        return matches[0] if len(matches) == 1 else None

    def leaf_name(self, queue: str) -> str:
        path = self.find_queue(queue)
        assert path is not None
        return self.queues[path].name

    def absolute(self, path: str, attr: str, partition: str = "") -> float:
        """Percent of a partition: the product of the (max) capacities down the path."""
        value = 100.0
        parts = path.split(".")
        which = 0 if attr == "capacity" else 1
        for i in range(1, len(parts)):
            q = self.queues[".".join(parts[: i + 1])]
            value *= q.caps(partition)[which] / 100.0
        return value

    def total_gpus(self, partition: str | None = None) -> int:
        """GPUs of the running nodes (of one partition: the nodes with that label)."""
        return sum(n.gpus for n in self.nodes.values() if n.state == "RUNNING"
                   and (partition is None or (n.label or "") == partition))

    def partition_of(self, leaf: str) -> str:
        path = self.find_queue(leaf)
        return self.queues[path].default_label if path else ""

    def gpu_limit(self, leaf: str) -> int:
        """The queue's GPUs at most, on the partition its apps run in."""
        path = self.find_queue(leaf)
        assert path is not None
        part = self.queues[path].default_label
        # the RM compares usage with the limit as fractions: no rounding in the queue's
        # favour (the 1e-9 only absorbs float multiplication error)
        return math.floor(self.absolute(path, "max_capacity", part)
                          * self.total_gpus(part) / 100.0 + 1e-9)

    # ---- the scheduler --------------------------------------------------------------------
    def tick(self) -> None:
        """Time passes: usage accrues, lifetimes expire, kills complete, pending asks are
        placed (gang by gang) where the queue's maximum capacity and free GPUs allow,
        least-served queue first, then priority, then submission order — at once, unless
        ``heartbeats`` (then only at :meth:`heartbeat`)."""
        with self.lock:
            now = self.clock()
            dt = max(0.0, now - self._last_tick)
            self._last_tick = now
            for app in self.apps.values():
                app.gpu_seconds += dt * app.held_gpus
                app.mem_seconds += dt * sum(c.memory_mb for c in app.placed)
                app.vcore_seconds += dt * sum(c.vcores for c in app.placed)
                if app.expiry_ms is not None and app.state in ("ACCEPTED", "RUNNING") \
                        and now * 1000 >= app.expiry_ms:
                    self._end(app, "KILLED", "KILLED", "Application is killed by "
                              "ResourceManager as Application is timed out.")
            for app_id in list(self._killing):
                self._killing[app_id] -= 1
                if self._killing[app_id] <= 0:
                    del self._killing[app_id]
                    app = self.apps[app_id]
                    self._end(app, "KILLED", "KILLED", app.diagnostics or
                              f"Application {app_id} was killed by user")
            if not self.heartbeats:
                self._place()

    def heartbeat(self, node: str | None = None) -> None:
        """The NodeManagers' heartbeats (``heartbeats`` mode): the CapacityScheduler places
        pending asks only on these, never on a REST request or a ``scheduler-conf`` change
        (specs/yarn_rm_rest.md §9), so an app whose queue was grown stays ACCEPTED, holding
        nothing, until the next one. ``node`` (an id): that node's heartbeat alone, which
        places containers on it only, as many as fit there and in the queue — an app
        spread over nodes is placed part by part, one heartbeat each."""
        with self.lock:
            self.tick()
            self._place(node)

    def _place(self, node: str | None = None) -> None:
        self.dirty = False
        free = {nid: n.gpus - sum(c.gpus for a in self.apps.values() for c in a.placed
                                  if c.node == nid)
                for nid, n in self.nodes.items() if n.state == "RUNNING"}
        tried: set[str] = set()
        while True:
            used = self.gpus_by_queue()
            waiting = [a for a in self.apps.values() if a.outstanding > 0 and a.id not in tried
                       and self.queues[self.find_queue(a.queue) or "root"].state == "RUNNING"]
            if not waiting:
                return

            app = min(waiting, key=lambda a, used=used: self._order(a, used))
            tried.add(app.id)
            need = app.outstanding * app.gpus_per_container
            part = self.partition_of(app.queue)
            room = {n: f for n, f in free.items() if (self.nodes[n].label or "") == part}
            if node is not None:    # one node's heartbeat: what fits there, gang or not
                fits = min(app.outstanding, room.get(node, 0) // app.gpus_per_container,
                           (self.gpu_limit(app.queue) - used.get(app.queue, 0))
                           // app.gpus_per_container)
                plan = [node] * max(0, fits)
                if not plan:
                    continue
            elif used.get(app.queue, 0) + need > self.gpu_limit(app.queue):
                continue
            else:
                plan = self._gang(app, room)
                if len(plan) < app.outstanding:
                    continue        # the gang does not fit: nothing of it is placed
            now_ms = int(self.clock() * 1000)
            attempt = len(app.placed)
            for k, nid in enumerate(plan):
                cid = f"container_{app.id[12:]}_01_{attempt + k + 2:06d}"
                busy = {i for a in self.apps.values() for c in a.placed if c.node == nid
                        for i in c.indices}
                indices = tuple(i for i in range(self.nodes[nid].gpus)
                                if i not in busy)[:app.gpus_per_container]
                app.placed.append(Container(cid, nid, app.gpus_per_container, app.memory_mb,
                                            app.vcores, now_ms, indices))
                free[nid] -= app.gpus_per_container
            if app.state == "ACCEPTED":
                app.state = "RUNNING"
                app.launch_ms = now_ms

    @staticmethod
    def _gang(app: EmuApp, free: dict[str, int]) -> list[str]:
        """Nodes for all of the app's outstanding containers, lowest first (short when they
        do not all fit)."""
        plan: list[str] = []
        room = dict(free)
        for _ in range(app.outstanding):
            nid = next((n for n in sorted(room) if room[n] >= app.gpus_per_container), None)
            if nid is None:
                break
            room[nid] -= app.gpus_per_container
            plan.append(nid)
        return plan

    def _order(self, app: EmuApp, used: dict[str, int]) -> tuple:
        """Least-served queue first (used / its GPU limit), then priority, then age."""
        limit = self.gpu_limit(app.queue)
        served = used.get(app.queue, 0) / limit if limit else math.inf
        return (served, -app.priority, app.started_ms, app.id)

    def _end(self, app: EmuApp, state: str, final: str, diagnostics: str) -> None:
        self.dirty = True
        app.state = state
        app.final_status = final
        app.finished_ms = int(self.clock() * 1000)
        app.placed = []
        if diagnostics:
            app.diagnostics = diagnostics

    # ---- scheduler-conf -------------------------------------------------------------------
    def conf_properties(self, queues: dict[str, Queue] | None = None) -> list[dict]:
        queues = queues or self.queues
        props = []
        for path, q in sorted(queues.items()):
            if q.children:
                props.append({"name": f"yarn.scheduler.capacity.{path}.queues",
                              "value": ",".join(queues[c].name for c in q.children)})
            if path != "root":
                props.append({"name": f"yarn.scheduler.capacity.{path}.capacity",
                              "value": f"{q.capacity:g}"})
                props.append({"name": f"yarn.scheduler.capacity.{path}.maximum-capacity",
                              "value": f"{q.max_capacity:g}"})
            if q.labels:
                key = f"yarn.scheduler.capacity.{path}.accessible-node-labels"
                props.append({"name": key, "value": ",".join(sorted(q.labels))})
                for label, (cap, max_cap) in sorted(q.labels.items()):
                    props.append({"name": f"{key}.{label}.capacity", "value": f"{cap:g}"})
                    props.append({"name": f"{key}.{label}.maximum-capacity",
                                  "value": f"{max_cap:g}"})
            if q.default_label:
                props.append({"name": f"yarn.scheduler.capacity.{path}."
                              "default-node-label-expression", "value": q.default_label})
        return props

    def mutate(self, body: Any) -> dict[str, Queue]:
        """The queue tree after ``body`` (a sched-conf), or ValueError with the RM's text."""
        if not isinstance(body, dict):
            raise ValueError("javax.xml.bind.UnmarshalException: not a sched-conf")
        import copy
        queues = copy.deepcopy(self.queues)
        for update in body.get("update-queue") or []:
            path = update.get("queue-name")
            if path not in queues:
                raise ValueError(f"java.io.IOException: Queue {path} not found")
            params = {e["key"]: e["value"] for e in
                      _entry_list((update.get("params") or {}).get("entry"))}
            q = queues[path]
            for key, value in params.items():
                labelled = re.fullmatch(r"accessible-node-labels\.([^.]+)\."
                                        r"(capacity|maximum-capacity)", key)
                if key not in ("capacity", "maximum-capacity", "state") and not labelled:
                    continue
                if key == "state":
                    q.state = str(value)
                    continue
                try:
                    number = float(value)
                except (TypeError, ValueError):
                    raise ValueError(f"java.lang.NumberFormatException: For input string: "
                                     f"\"{value}\"") from None
                if labelled:
                    label, which = labelled.groups()
                    if not q.may_use(label):
                        raise ValueError(f"java.io.IOException: Failed to re-init queues : "
                                         f"queue {path} cannot access node label {label}")
                    q.labels.setdefault(label, [0.0, 0.0])[
                        0 if which == "capacity" else 1] = number
                elif key == "capacity":
                    q.capacity = number
                else:
                    q.max_capacity = number
        for path, q in queues.items():
            if not 0 <= q.capacity <= 100 or not 0 <= q.max_capacity <= 100:
                raise ValueError("java.io.IOException: Failed to re-init queues : Illegal "
                                 f"capacity of {q.capacity / 100} for queue {path}")
            if q.max_capacity < q.capacity:
                raise ValueError("java.io.IOException: Failed to re-init queues : Illegal "
                                 f"queue capacity setting (abs-capacity={q.capacity / 100}) > "
                                 f"(abs-maximum-capacity={q.max_capacity / 100}) for queue "
                                 f"{path}")
            for cap, max_cap in q.labels.values():
                if not 0 <= cap <= max_cap <= 100:
                    raise ValueError("java.io.IOException: Failed to re-init queues : Illegal "
                                     f"node-label capacity of {cap / 100} for queue {path}")
            if q.children:
                for label in ["", *q.labels]:
                    total = sum(queues[c].caps(label)[0] for c in q.children)
                    if abs(total - 100.0) > 0.0005 and total > 0:
                        raise ValueError("java.io.IOException: Failed to re-init queues : "
                                         f"Illegal capacity sum of {total / 100} for "
                                         f"children of queue {path}"
                                         + (f" for label={label}" if label else ""))
        return queues

    # ---- JSON views -----------------------------------------------------------------------
    def res(self, memory: int, vcores: int, gpus: int) -> dict:
        """A resource object in this RM's shape."""
        if self.shape == "hadoop-ai":
            return hadoop_ai_resource(memory, vcores, gpus)
        return resource(memory, vcores, gpus)

    def cluster_info(self, rm: str) -> dict:
        state = "ACTIVE" if rm == self.active else "STANDBY"
        return {"clusterInfo": {
            "id": self.started, "startedOn": self.started, "state": "STARTED",
            "haState": state,
            "rmStateStoreName": "org.apache.hadoop.yarn.server.resourcemanager.recovery."
                                "ZKRMStateStore",
            "resourceManagerVersion": "3.3.6",
            "resourceManagerBuildVersion": "3.3.6 from emulator by gpufair source checksum 0",
            "resourceManagerVersionBuiltOn": "2023-06-18T08:22Z", "hadoopVersion": "3.3.6",
            "hadoopBuildVersion": "3.3.6 from emulator by gpufair source checksum 0",
            "hadoopVersionBuiltOn": "2023-06-18T08:22Z",
            "haZooKeeperConnectionState": "CONNECTED"}}

    def metrics(self) -> dict:
        running = [a for a in self.apps.values() if a.state == "RUNNING"]
        used_gpus = sum(a.held_gpus for a in self.apps.values())
        used_mb = sum(c.memory_mb for a in self.apps.values() for c in a.placed)
        used_vc = sum(c.vcores for a in self.apps.values() for c in a.placed)
        active = [n for n in self.nodes.values() if n.state == "RUNNING"]
        total_mb = sum(n.memory_mb for n in active)
        total_vc = sum(n.vcores for n in active)
        count = lambda s: sum(1 for n in self.nodes.values() if n.state == s)  # noqa: E731
        return {"clusterMetrics": {
            "appsSubmitted": len(self.apps),
            "appsCompleted": sum(1 for a in self.apps.values() if a.state in FINAL),
            "appsPending": sum(1 for a in self.apps.values() if a.state == "ACCEPTED"),
            "appsRunning": len(running),
            "appsFailed": sum(1 for a in self.apps.values() if a.state == "FAILED"),
            "appsKilled": sum(1 for a in self.apps.values() if a.state == "KILLED"),
            "reservedMB": 0, "availableMB": total_mb - used_mb, "allocatedMB": used_mb,
            "reservedVirtualCores": 0, "availableVirtualCores": total_vc - used_vc,
            "allocatedVirtualCores": used_vc,
            "containersAllocated": sum(len(a.placed) for a in self.apps.values()),
            "containersReserved": 0,
            "containersPending": sum(a.outstanding for a in self.apps.values()),
            "totalMB": total_mb, "totalVirtualCores": total_vc,
            "totalNodes": len(self.nodes), "lostNodes": count("LOST"),
            "unhealthyNodes": count("UNHEALTHY"),
            "decommissioningNodes": count("DECOMMISSIONING"),
            "decommissionedNodes": count("DECOMMISSIONED"), "rebootedNodes": count("REBOOTED"),
            "activeNodes": len(active), "shutdownNodes": count("SHUTDOWN"),
            "totalUsedResourcesAcrossPartition": self.res(used_mb, used_vc, used_gpus),
            "totalClusterResourcesAcrossPartition": self.res(total_mb, total_vc,
                                                             self.total_gpus()),
            "totalReservedResourcesAcrossPartition": self.res(0, 0, 0),
            "totalAllocatedContainersAcrossPartition":
                sum(len(a.placed) for a in self.apps.values()),
            "crossPartitionMetricsAvailable": True}}

    def node_json(self, node: EmuNode) -> dict:
        placed = [c for a in self.apps.values() for c in a.placed if c.node == node.id]
        gpus = sum(c.gpus for c in placed)
        mem = sum(c.memory_mb for c in placed)
        vc = sum(c.vcores for c in placed)
        out: dict[str, Any] = {
            "rack": node.rack, "state": node.state, "id": node.id,
            "nodeHostName": node.host, "nodeHTTPAddress": f"{node.host}:8042",
            "lastHealthUpdate": self.started, "version": "3.3.6", "healthReport": "",
            "numContainers": len(placed), "usedMemoryMB": mem,
            "availMemoryMB": node.memory_mb - mem, "usedVirtualCores": vc,
            "availableVirtualCores": node.vcores - vc, "numRunningOpportContainers": 0,
            "usedMemoryOpportGB": 0, "usedVirtualCoresOpport": 0, "numQueuedContainers": 0,
            "nodeLabels": listed([node.label] if node.label else []),
            "resourceUtilization": {"nodePhysicalMemoryMB": 1027, "nodeVirtualMemoryMB": 1027,
                                    "nodeCPUUsage": 0.016661113128066063,
                                    "aggregatedContainersPhysicalMemoryMB": 0,
                                    "aggregatedContainersVirtualMemoryMB": 0,
                                    "containersCPUUsage": 0},
            "usedResource": self.res(mem, vc, gpus),
            "availableResource": self.res(node.memory_mb - mem, node.vcores - vc,
                                          node.gpus - gpus),
            "totalResource": self.res(node.memory_mb, node.vcores, node.gpus)}
        if self.shape == "hadoop-ai":   # no totalResource: GPU counts and a bitmask
            for key in ("usedResource", "availableResource", "totalResource"):
                del out[key]
            busy = {i for c in placed for i in c.indices}
            out.update({"version": "2.9.0", "usedGPUs": gpus, "availableGPUs": node.gpus - gpus,
                        "availableGPUAttribute": sum(1 << i for i in range(node.gpus)
                                                     if i not in busy)})
            return out
        if node.gpu_type:
            out["nodeAttributesInfo"] = {"nodeAttributeInfo": [
                {"prefix": "nm.yarn.io", "name": "gpu_type", "type": "STRING",
                 "value": node.gpu_type}]}
        return out

    def app_json(self, app: EmuApp) -> dict:
        final = app.state in FINAL
        now_ms = int(self.clock() * 1000)
        state = "RUNNING" if app.state == "KILLING" else app.state
        held_mb = sum(c.memory_mb for c in app.placed)
        held_vc = sum(c.vcores for c in app.placed)
        asks = []
        if app.outstanding:
            asks.append({"priority": 1, "allocationRequestId": -1, "resourceName": "*",
                         "capability": self.res(app.memory_mb, app.vcores,
                                                app.gpus_per_container),
                         "numContainers": app.outstanding, "relaxLocality": True,
                         "nodeLabelExpression": "",
                         "executionTypeRequest": {"executionType": "GUARANTEED",
                                                  "enforceExecutionType": False},
                         "enforceExecutionType": False})
        expiry = "UNLIMITED" if app.expiry_ms is None else _iso(app.expiry_ms)
        remaining = -1 if app.expiry_ms is None else max(0, (app.expiry_ms - now_ms) // 1000)
        out: dict[str, Any] = {
            "id": app.id, "user": app.user, "name": app.name,
            "queue": self.find_queue(app.queue) if self.scheduler == "fair" else app.queue,
            "state": state, "finalStatus": app.final_status,
            "progress": 100.0 if final else (10.0 if app.state == "RUNNING" else 0.0),
            "trackingUI": "History" if final else ("ApplicationMaster"
                                                   if app.state == "RUNNING" else "UNASSIGNED"),
            "diagnostics": app.diagnostics, "clusterId": self.started,
            "applicationType": "TENSORFLOW", "applicationTags": ",".join(app.tags),
            "priority": app.priority, "startedTime": app.started_ms,
            "launchTime": app.launch_ms, "finishedTime": app.finished_ms,
            "elapsedTime": (app.finished_ms or now_ms) - app.started_ms,
            "amContainerLogs": "", "amHostHttpAddress": "", "amRPCAddress": "",
            "masterNodeId": "",
            "allocatedMB": -1 if final else held_mb,
            "allocatedVCores": -1 if final else held_vc,
            "reservedMB": -1 if final else 0, "reservedVCores": -1 if final else 0,
            "runningContainers": -1 if final else len(app.placed),
            "memorySeconds": int(app.mem_seconds), "vcoreSeconds": int(app.vcore_seconds),
            "queueUsagePercentage": 0.0, "clusterUsagePercentage": 0.0,
            "resourceSecondsMap": Pairs([
                ("entry", {"key": "memory-mb", "value": str(int(app.mem_seconds))}),
                ("entry", {"key": "vcores", "value": str(int(app.vcore_seconds))}),
                ("entry", {"key": GPU, "value": str(int(app.gpu_seconds))})]),
            "preemptedResourceMB": 0, "preemptedResourceVCores": 0,
            "numNonAMContainerPreempted": 0, "numAMContainerPreempted": 0,
            "preemptedMemorySeconds": 0, "preemptedVcoreSeconds": 0,
            "preemptedResourceSecondsMap": {},
            "resourceRequests": listed(asks),
            "logAggregationStatus": "NOT_START", "unmanagedApplication": False,
            "amNodeLabelExpression": "", "appNodeLabelExpression": "",
            "resourceInfo": {"resourceUsagesByPartition": [{
                "partitionName": "", "used": self.res(held_mb, held_vc, app.held_gpus),
                "reserved": self.res(0, 0, 0),
                "pending": self.res(app.outstanding * app.memory_mb,
                                    app.outstanding * app.vcores,
                                    app.outstanding * app.gpus_per_container),
                "amUsed": self.res(0, 0, 0), "amLimit": self.res(0, 0, 0),
                "userAmLimit": self.res(0, 0, 0)}]},
            "timeouts": {"timeout": [{"type": "LIFETIME", "expiryTime": expiry,
                                      "remainingTimeInSeconds": remaining}]}}
        if self.shape == "hadoop-ai":   # 2.9: no resource types, so no resource-seconds maps
            del out["resourceSecondsMap"], out["preemptedResourceSecondsMap"]
        if final:             # absent only while UNASSIGNED (§4.7)
            out["trackingUrl"] = f"http://rm:8088/cluster/app/{app.id}"
        elif app.state in ("RUNNING", "KILLING"):
            out["trackingUrl"] = f"http://rm:8088/proxy/{app.id}/"
        return out

    def container_json(self, c: Container) -> dict:
        """The containers DAO is 'mapped' JSON: every number a string (§4.9)."""
        now_ms = int(self.clock() * 1000)
        host = self.nodes[c.node].host
        out = {"containerId": c.id, "allocatedMB": str(c.memory_mb),
                "allocatedVCores": str(c.vcores), "assignedNodeId": c.node, "priority": "1",
                "startedTime": str(c.started_ms), "finishedTime": "0",
                "elapsedTime": str(now_ms - c.started_ms),
                "logUrl": f"http://{host}:8042/node/containerlogs/{c.id}/user",
                "containerExitStatus": "0", "containerState": "RUNNING",
                "nodeHttpAddress": f"http://{host}:8042", "nodeId": c.node,
                "allocatedResources": [{"key": "memory-mb", "value": str(c.memory_mb)},
                                       {"key": "vcores", "value": str(c.vcores)},
                                       {"key": GPU, "value": str(c.gpus)}]}
        if self.shape == "hadoop-ai":
            # 2.9 has no allocatedResources map; no Hadoop-AI containers reply was found, so
            # its GPUs are given as the fork gives them everywhere: a resource object with GPUs
            del out["allocatedResources"]
            out["resource"] = self.res(c.memory_mb, c.vcores, c.gpus)
        return out

    def queue_json(self, path: str) -> dict:
        q = self.queues[path]
        total = self.total_gpus()
        mem = sum(n.memory_mb for n in self.nodes.values() if n.state == "RUNNING")
        vc = sum(n.vcores for n in self.nodes.values() if n.state == "RUNNING")
        apps = [a for a in self.apps.values() if a.queue == q.name and a.state not in FINAL]
        if q.children:
            leaves = [self.queues[p].name for p in self.queues
                      if p.startswith(path + ".") and not self.queues[p].children]
            apps = [a for a in self.apps.values() if a.queue in leaves
                    and a.state not in FINAL]
        gpus = sum(a.held_gpus for a in apps)
        used_mb = sum(c.memory_mb for a in apps for c in a.placed)
        used_vc = sum(c.vcores for a in apps for c in a.placed)
        abs_cap = self.absolute(path, "capacity")
        abs_max = self.absolute(path, "max_capacity")
        used_share = 100.0 * gpus / total if total else 0.0
        vector = f"[memory-mb={q.capacity:g}%,vcores={q.capacity:g}%,{GPU}={q.capacity:g}%]"
        out: dict[str, Any] = {}
        if not q.children:
            out["type"] = "capacitySchedulerLeafQueueInfo"
        out.update({
            "queuePath": path, "capacity": q.capacity,
            "usedCapacity": used_share / abs_cap * 100.0 if abs_cap else 0.0,
            "maxCapacity": q.max_capacity, "absoluteCapacity": abs_cap,
            "absoluteMaxCapacity": abs_max, "absoluteUsedCapacity": used_share,
            "weight": -1.0, "normalizedWeight": 0.0, "numApplications": len(apps),
            "maxParallelApps": 2147483647, "queueName": q.name, "isAbsoluteResource": False,
            "state": q.state, "resourcesUsed": self.res(used_mb, used_vc, gpus),
            "hideReservationQueues": False, "nodeLabels": ["*"],
            "allocatedContainers": sum(len(a.placed) for a in apps), "reservedContainers": 0,
            "pendingContainers": sum(a.outstanding for a in apps),
            "capacities": {"queueCapacitiesByPartition": [{
                "partitionName": "",
                "queueCapacityVectorInfo": {"configuredCapacityVector": vector,
                                            "capacityVectorEntries": [
                                                {"resourceName": "memory-mb",
                                                 "resourceValue": f"{q.capacity:g}%"},
                                                {"resourceName": "vcores",
                                                 "resourceValue": f"{q.capacity:g}%"},
                                                {"resourceName": GPU,
                                                 "resourceValue": f"{q.capacity:g}%"}]},
                "capacity": q.capacity, "usedCapacity": 0.0, "maxCapacity": q.max_capacity,
                "absoluteCapacity": abs_cap, "absoluteUsedCapacity": used_share,
                "absoluteMaxCapacity": abs_max, "maxAMLimitPercentage": 10.0,
                "weight": -1.0, "normalizedWeight": 0.0,
                "configuredMinResource": self.res(0, 0, 0),
                "configuredMaxResource": self.res(0, 0, 0),
                "effectiveMinResource": self.res(int(mem * abs_cap / 100),
                                                 int(vc * abs_cap / 100),
                                                 int(total * abs_cap / 100)),
                "effectiveMaxResource": self.res(int(mem * abs_max / 100),
                                                 int(vc * abs_max / 100),
                                                 int(total * abs_max / 100))}]},
            "resources": {"resourceUsagesByPartition": [{
                "partitionName": "", "used": self.res(used_mb, used_vc, gpus),
                "reserved": self.res(0, 0, 0),
                "pending": self.res(sum(a.outstanding * a.memory_mb for a in apps),
                                    sum(a.outstanding * a.vcores for a in apps),
                                    sum(a.outstanding * a.gpus_per_container for a in apps)),
                "amUsed": self.res(0, 0, 0), "amLimit": self.res(0, 0, 0),
                "userAmLimit": self.res(0, 0, 0)}]},
            "minEffectiveCapacity": self.res(int(mem * abs_cap / 100), int(vc * abs_cap / 100),
                                             int(total * abs_cap / 100)),
            "maxEffectiveCapacity": self.res(int(mem * abs_max / 100), int(vc * abs_max / 100),
                                             int(total * abs_max / 100)),
            "maximumAllocation": self.res(8192, 4, 8),
            "queueAcls": {"queueAcl": [
                {"accessType": "ADMINISTER_QUEUE", "accessControlList": " "},
                {"accessType": "APPLICATION_MAX_PRIORITY", "accessControlList": "*"},
                {"accessType": "SUBMIT_APP", "accessControlList": " "}]},
            "queuePriority": 0, "orderingPolicyInfo": "fifo" if not q.children
            else "utilization",
            "mode": "percentage", "queueType": "leaf" if not q.children else "parent",
            "creationMethod": "static", "autoCreationEligibility": "off",
            "autoQueueTemplateProperties": {}, "autoQueueParentTemplateProperties": {},
            "autoQueueLeafTemplateProperties": {}})
        if q.accessible is not None:
            out["nodeLabels"] = sorted(q.accessible)
        if q.labels:       # a queue with node-label partitions: one entry per partition
            for label in sorted(q.labels):
                out["capacities"]["queueCapacitiesByPartition"].append(
                    self._partition_caps(path, label))
                mine = [a for a in apps if self.partition_of(a.queue) == label]
                out["resources"]["resourceUsagesByPartition"].append({
                    "partitionName": label,
                    "used": self.res(sum(c.memory_mb for a in mine for c in a.placed),
                                     sum(c.vcores for a in mine for c in a.placed),
                                     sum(a.held_gpus for a in mine)),
                    "reserved": self.res(0, 0, 0), "pending": self.res(0, 0, 0),
                    "amUsed": self.res(0, 0, 0), "amLimit": self.res(0, 0, 0)})
        if not q.children:     # "" on a leaf without one (tests/data/yarn/hadoop-ai)
            out["defaultNodeLabelExpression"] = q.default_label
        if q.children:
            out["queues"] = {"queue": [self.queue_json(c) for c in q.children]}
        else:
            users = sorted({a.user for a in apps})
            out.update({"numActiveApplications": sum(1 for a in apps if a.state == "RUNNING"),
                        "numPendingApplications": sum(1 for a in apps
                                                      if a.state == "ACCEPTED"),
                        "numContainers": sum(len(a.placed) for a in apps),
                        "maxApplications": 10000, "maxApplicationsPerUser": 10000,
                        "userLimit": 100,
                        "users": {"user": [self._user_json(u, apps) for u in users]}
                        if users else None,
                        "userLimitFactor": 1.0, "configuredMaxAMResourceLimit": 0.1,
                        "AMResourceLimit": self.res(0, 0, 0),
                        "usedAMResource": self.res(0, 0, 0),
                        "userAMResourceLimit": self.res(0, 0, 0),
                        "preemptionDisabled": True, "intraQueuePreemptionDisabled": True,
                        "defaultPriority": 0, "isAutoCreatedLeafQueue": False,
                        "maxApplicationLifetime": -1, "defaultApplicationLifetime": -1,
                        "autoCreateChildQueueEnabled": False, "leafQueueTemplate": {}})
        return out

    def _user_json(self, user: str, apps: list[EmuApp]) -> dict:
        """A user of a leaf queue (UserInfo), with what its apps there hold."""
        mine = [a for a in apps if a.user == user]
        used = self.res(sum(c.memory_mb for a in mine for c in a.placed),
                        sum(c.vcores for a in mine for c in a.placed),
                        sum(a.held_gpus for a in mine))
        none = self.res(0, 0, 0)
        return {"username": user, "resourcesUsed": used,
                "numPendingApplications": sum(1 for a in mine if a.state == "ACCEPTED"),
                "numActiveApplications": sum(1 for a in mine if a.state == "RUNNING"),
                "AMResourceUsed": none, "userResourceLimit": none,
                "resources": {"resourceUsagesByPartition": [{
                    "partitionName": "", "used": used, "reserved": none, "pending": none,
                    "amUsed": none, "amLimit": none}]},
                "userWeight": 1.0, "isActive": any(a.state == "RUNNING" for a in mine)}

    def _partition_caps(self, path: str, label: str) -> dict:
        """A queue's capacities on one labelled partition, as Hadoop-AI's RM lists them
        (tests/data/yarn/hadoop-ai/scheduler_with_label.json)."""
        cap, max_cap = self.queues[path].caps(label)
        abs_cap = self.absolute(path, "capacity", label)
        total = self.total_gpus(label)
        held = sum(a.held_gpus for a in self.apps.values() if a.state not in FINAL
                   and self.partition_of(a.queue) == label
                   and ((self.find_queue(a.queue) or "") + ".").startswith(path + "."))
        used = 100.0 * held / total if total else 0.0
        return {"partitionName": label, "capacity": cap,
                "usedCapacity": used / abs_cap * 100.0 if abs_cap else 0.0,
                "maxCapacity": max_cap, "absoluteCapacity": abs_cap,
                "absoluteUsedCapacity": used,
                "absoluteMaxCapacity": self.absolute(path, "max_capacity", label),
                "maxAMLimitPercentage": 10.0}

    def fair_queue_json(self, path: str) -> dict:
        """A FairScheduler queue (§4.3): full-path names, ``childQueues`` omitted on leaves."""
        q = self.queues[path]
        mem = sum(n.memory_mb for n in self.nodes.values() if n.state == "RUNNING")
        vc = sum(n.vcores for n in self.nodes.values() if n.state == "RUNNING")
        leaves = [self.queues[p].name for p in self.queues
                  if (p == path or p.startswith(path + ".")) and not self.queues[p].children]
        apps = [a for a in self.apps.values() if a.queue in leaves and a.state not in FINAL]
        used = self.res(sum(c.memory_mb for a in apps for c in a.placed),
                        sum(c.vcores for a in apps for c in a.placed),
                        sum(a.held_gpus for a in apps))
        share = self.absolute(path, "capacity") / 100.0
        out: dict[str, Any] = {
            "allocatedContainers": sum(len(a.placed) for a in apps),
            "clusterResources": self.res(mem, vc, self.total_gpus()),
            "demandResources": self.res(0, 0, sum(a.outstanding * a.gpus_per_container
                                                  for a in apps)),
            "fairResources": self.res(int(mem * share), int(vc * share),
                                      int(self.total_gpus() * share)),
            "maxApps": 2147483647, "maxResources": self.res(mem, vc, self.total_gpus()),
            "minResources": self.res(0, 0, 0),
            "pendingContainers": sum(a.outstanding for a in apps), "preemptable": True,
            "queueName": path, "reservedContainers": 0, "schedulingPolicy": "fair",
            "steadyFairResources": self.res(int(mem * share), int(vc * share),
                                            int(self.total_gpus() * share)),
            "usedResources": used}
        if q.children:
            out["childQueues"] = {"queue": [self.fair_queue_json(c) for c in q.children]}
        else:
            out["type"] = "fairSchedulerLeafQueueInfo"
            out["numActiveApps"] = sum(1 for a in apps if a.state == "RUNNING")
            out["numPendingApps"] = sum(1 for a in apps if a.state == "ACCEPTED")
        return out

    def scheduler_json(self) -> dict:
        if self.scheduler == "fair":
            return {"scheduler": {"schedulerInfo": {"rootQueue": self.fair_queue_json("root"),
                                                    "type": "fairScheduler"}}}
        root = self.queue_json("root")
        root.pop("queuePath", None)
        info = {"type": "capacityScheduler", **root, "queuePath": "root"}
        if self.shape == "hadoop-ai":    # 2.9's scheduler health (hadoop-ai/scheduler.json)
            idle = {"count": 0, "resources": self.res(0, 0, 0)}
            info["health"] = {"lastrun": int(self.clock() * 1000), "operationsInfo": {},
                              "lastRunDetails": [{"operation": op, **idle} for op in
                                                 ("releases", "allocations", "reservations")]}
        info["queueCapacityVectorInfo"] = root["capacities"]["queueCapacitiesByPartition"][0][
            "queueCapacityVectorInfo"]
        return {"scheduler": {"schedulerInfo": info}}


def _entry_list(value: Any) -> list[dict]:
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]
    return [v for v in value if isinstance(v, dict)]


def _iso(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+0000"


def _parse_iso(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000)


def remote(exception: str, message: str | None, package: str = "org.apache.hadoop.yarn.webapp"
           ) -> dict:
    return {"RemoteException": {"exception": exception, "message": message,
                                "javaClassName": f"{package}.{exception}"}}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:   # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every keep-alive request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_POST(self) -> None:
        self._handle("POST")

    def _send(self, status: int, body: Any, *, text: bool = False,
              headers: dict[str, str] | None = None) -> None:
        data = (body if text else dumps(body)).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8" if text
                         else "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if getattr(self, "_cookie", None):
            self.send_header("Set-Cookie", self._cookie)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        return json.loads(raw)

    def _handle(self, method: str) -> None:
        rm = self.server.rm
        cluster = rm.cluster
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            body = self._body() if method != "GET" else None
        except ValueError:
            self._send(400, remote("BadRequestException", "javax.xml.bind.UnmarshalException"))
            return
        with cluster.lock:
            cluster.requests.append((rm.rm_id, method, path))
            fault = next((f for f in cluster.faults if f.path in path and f.times > 0
                          and (f.method is None or f.method == method)), None)
            if fault is not None:
                fault.times -= 1
        if fault is not None:
            if fault.action == "drop":
                self.close_connection = True
                self.connection.close()
                return
            if fault.action == "delay":
                time.sleep(fault.delay_s)
            elif fault.action == "body":
                data = (fault.body or "").encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            elif fault.action == "failover":
                self._after = lambda: self._failover(cluster, fault)
            else:
                self._send(fault.status, f"injected failure {fault.status}", text=True)
                return
        # --- RM HA: a standby redirects everything but a few paths (RMWebAppFilter) ---
        if path == "/isActive":
            if cluster.active == rm.rm_id:
                self._send(200, "I am Active!", text=True)
            else:
                self._send(405, "I am not Active!", text=True)
            return
        if cluster.active != rm.rm_id and path not in (f"{BASE}/info", "/cluster/cluster"):
            target = cluster.servers.get(cluster.active) if cluster.active else None
            if target is None:
                self._send(307, "Can not find any active RM. Will retry in next 5 seconds.\n"
                           "HA Zookeeper Connection State: CONNECTED", text=True,
                           headers={"Refresh": "5;url=" + self.path})
                return
            location = target.url + self.path
            self._send(307, f"This is standby RM. The redirect url is: {location}", text=True,
                       headers={"Location": location})
            return
        # --- authentication ---
        self._cookie = None
        if cluster.auth == "simple":
            user = query.get("user.name")
            cookie = self.headers.get("Cookie") or ""
            if f"hadoop.auth=u={rm.rm_id}" not in cookie:   # a cookie is good on its RM only
                if not user:
                    self._send(401, remote("AuthorizationException",
                                           "Authentication required",
                                           "org.apache.hadoop.security.authorize"))
                    return
                self._cookie = f"hadoop.auth=u={rm.rm_id}&p={user}; Path=/; HttpOnly"
        try:
            self._route(cluster, rm, method, path, query, body)
        except _Reply as reply:
            self._send(reply.status, reply.body, text=reply.text, headers=reply.headers)
        after = getattr(self, "_after", None)
        if after is not None:
            self._after = None
            after()

    @staticmethod
    def _failover(cluster: Cluster, fault: Fault) -> None:
        cluster.failover(fault.to)
        if fault.then_to is not None:
            timer = threading.Timer(fault.then_after_s, cluster.failover, (fault.then_to,))
            timer.daemon = True
            timer.start()

    def _route(self, cluster: Cluster, rm: RMServer, method: str, path: str,
               query: dict[str, str], body: Any) -> None:
        if not path.startswith(BASE):
            raise _Reply(404, "Not found", text=True)
        sub = path[len(BASE):] or "/"
        with cluster.lock:
            cluster.tick()
            if sub in ("/", "/info") and method == "GET":
                raise _Reply(200, cluster.cluster_info(rm.rm_id))
            if sub == "/metrics":
                raise _Reply(200, cluster.metrics())
            if sub == "/scheduler":
                raise _Reply(200, cluster.scheduler_json())
            if sub == "/nodes":
                states = {s.strip().upper() for s in query.get("states", "").split(",")
                          if s.strip()}
                valid = {"NEW", "RUNNING", "UNHEALTHY", "DECOMMISSIONING", "DECOMMISSIONED",
                         "LOST", "REBOOTED", "SHUTDOWN"}
                if states - valid:
                    raise _Reply(400, remote("IllegalArgumentException",
                                             "No enum constant org.apache.hadoop.yarn.api."
                                             f"records.NodeState.{sorted(states - valid)[0]}",
                                             "java.lang"))
                nodes = [cluster.node_json(n) for n in cluster.nodes.values()
                         if not states or n.state in states]
                raise _Reply(200, {"nodes": {"node": nodes} if nodes else None})
            if sub == "/apps" and method == "GET":
                states = {s.strip().upper() for s in query.get("states", "").split(",")
                          if s.strip()}
                apps = [cluster.app_json(a) for a in sorted(cluster.apps.values(),
                                                            key=lambda a: a.id)
                        if not states or ("RUNNING" if a.state == "KILLING"
                                          else a.state) in states]
                raise _Reply(200, {"apps": {"app": apps} if apps else None})
            if sub.startswith("/scheduler-conf"):
                self._conf(cluster, method, sub, body)
            match = re.fullmatch(r"/apps/(application_\d+_\d+)(/.*)?", sub)
            if match:
                self._app(cluster, method, match.group(1), match.group(2) or "", body)
        raise _Reply(404, remote("NotFoundException", f"java.lang.Exception: {path}"))

    def _app(self, cluster: Cluster, method: str, app_id: str, rest: str, body: Any) -> None:
        app = cluster.apps.get(app_id)
        if app is None:
            raise _Reply(404, remote("NotFoundException",
                                     f"java.lang.Exception: app with id: {app_id} not found"))
        final = app.state in FINAL
        if rest == "" and method == "GET":
            raise _Reply(200, {"app": cluster.app_json(app)})
        if rest == "/appattempts":
            attempt = {"id": 1, "startTime": app.started_ms, "finishedTime": app.finished_ms,
                       "containerId": f"container_{app.id[12:]}_01_000001",
                       "nodeHttpAddress": "", "nodeId": "", "logsLink": "",
                       "blacklistedNodes": "", "nodesBlacklistedBySystem": "",
                       "appAttemptId": f"appattempt_{app.id[12:]}_000001"}
            raise _Reply(200, {"appAttempts": {"appAttempt": [attempt]}})
        m = re.fullmatch(r"/appattempts/appattempt_\d+_\d+_(\d+)/containers", rest)
        if m:
            containers = [cluster.container_json(c) for c in app.placed]
            raise _Reply(200, {"containers": {"container": containers} if containers else {}})
        if rest == "/state":
            if method == "GET":
                raise _Reply(200, {"state": app.state})
            target = (body or {}).get("state")
            if target == app.state:
                raise _Reply(200, {"state": app.state})
            if target != "KILLED":
                raise _Reply(400, remote("BadRequestException", "java.lang.Exception: Only "
                                         "'KILLED' is allowed as a target state."))
            if final:
                raise _Reply(200, {"state": app.state})
            if app.state != "KILLING":
                app.diagnostics = str((body or {}).get("diagnostics") or "")
                app.state = "KILLING"
                cluster._killing[app.id] = cluster.kill_ticks
                if cluster.kill_ticks <= 0:
                    cluster.tick()
            if app.state in FINAL:
                raise _Reply(200, {"state": app.state})
            raise _Reply(202, {"state": app.state},
                         headers={"Location": f"{self.server.rm.url}{BASE}/apps/{app.id}"})
        if rest == "/queue":
            if method == "GET":
                raise _Reply(200, {"queue": app.queue})
            target = str((body or {}).get("queue") or "")
            if final:
                raise _Reply(400, f"App in {app.state} state cannot be moved.", text=True)
            if not cluster.is_leaf(target):
                raise _Reply(500, remote("UndeclaredThrowableException", None,
                                         "java.lang.reflect"))
            app.queue = cluster.leaf_name(target)
            cluster.dirty = True
            raise _Reply(200, {"queue": app.queue})
        if rest == "/priority":
            if method == "GET":
                raise _Reply(200, {"priority": app.priority})
            if final:
                raise _Reply(400, f"Application in {app.state} state cannot be update "
                             "priority.", text=True)
            if cluster.scheduler != "capacity":
                raise _Reply(500, remote("UndeclaredThrowableException", None,
                                         "java.lang.reflect"))
            wanted = int((body or {}).get("priority", 0))
            app.priority = max(0, min(wanted, cluster.max_priority))
            cluster.dirty = True
            raise _Reply(200, {"priority": app.priority})
        if rest in ("/timeouts", "/timeouts/LIFETIME") and method == "GET":
            item = cluster.app_json(app)["timeouts"]["timeout"][0]
            raise _Reply(200, {"timeouts": {"timeout": [item]}} if rest == "/timeouts"
                         else {"timeout": item})
        if rest == "/timeout" and method == "PUT":
            timeout = (body or {}).get("timeout") or {}
            if not timeout.get("type") or not timeout.get("expiryTime"):
                raise _Reply(400, "Timeout type or ExpiryTime is null.", text=True)
            try:
                app.expiry_ms = _parse_iso(str(timeout["expiryTime"]))
            except ValueError:
                raise _Reply(400, f"Unparseable date: \"{timeout['expiryTime']}\"",
                             text=True) from None
            raise _Reply(200, {"timeout": cluster.app_json(app)["timeouts"]["timeout"][0]})
        raise _Reply(404, remote("NotFoundException", f"java.lang.Exception: {rest}"))

    def _conf(self, cluster: Cluster, method: str, sub: str, body: Any) -> None:
        if not cluster.mutable_conf:
            if sub == "/scheduler-conf/validate":
                raise _Reply(400, "Configuration change validation only supported by "
                             "MutableConfScheduler.", text=True)
            if method == "PUT":
                raise _Reply(400, "Configuration change only supported by "
                             "MutableConfScheduler.", text=True)
            raise _Reply(400, "This API only supports to retrieve scheduler configuration "
                         "from a mutable-conf scheduler, underneath scheduler "
                         f"{CS} is not an instance of MutableConfScheduler", text=True)
        if sub == "/scheduler-conf" and method == "GET":
            raise _Reply(200, {"property": cluster.conf_properties()})
        if sub == "/scheduler-conf/version" and method == "GET":
            raise _Reply(200, {"versionID": str(cluster.conf_version)})
        if sub == "/scheduler-conf/validate" and method == "POST":
            try:
                proposed = cluster.mutate(body)
            except ValueError as exc:
                raise _Reply(400, f"CapacityScheduler configuration validation failed:{exc}",
                             text=True) from None
            raise _Reply(200, {"property": cluster.conf_properties(proposed)})
        if sub == "/scheduler-conf" and method == "PUT":
            try:
                proposed = cluster.mutate(body)
            except ValueError as exc:
                raise _Reply(400, str(exc), text=True) from None
            cluster.queues = proposed
            cluster.conf_version += 1
            cluster.conf_log.append(body)
            if not cluster.heartbeats:
                cluster._place()
            raise _Reply(200, "Configuration change successfully applied.", text=True)
        raise _Reply(405, "Method not allowed", text=True)


@dataclass
class _Reply(Exception):
    status: int
    body: Any
    text: bool = False
    headers: dict[str, str] | None = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    rm: RMServer


class RMServer:
    """One RM web endpoint on 127.0.0.1 (an ephemeral port) serving ``cluster``."""

    def __init__(self, cluster: Cluster, rm_id: str = "rm1") -> None:
        self.cluster = cluster
        self.rm_id = rm_id
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.rm = self
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        with cluster.lock:
            cluster.servers[rm_id] = self
            if cluster.active is None and len(cluster.servers) == 1:
                cluster.active = rm_id
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

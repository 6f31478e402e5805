"""ResourceManager replies → the common cluster model (nodes with ``yarn.io/gpu``, GPU apps).

Pure functions of the documents read: the adapter reads, this module decides what they mean,
and the tests feed it both the RM's published replies and the emulator's.

What YARN does not say, and how it is filled in:

- *which* GPUs of a node an app holds: YARN counts GPUs per container and node, not by
  device. Indices are given per node in container order (apps by id), which is stable
  between rounds while nothing changes — enough for the model's ``node:index`` identity,
  since gpufair never asks YARN for a particular device.
- a job's size: the GPUs it holds plus what its pending ``*`` asks want
  (``capability`` × ``numContainers``).
- GPUs in use by apps gpufair does not manage (other queues) are ``unavailable`` on their node.

Nothing here raises on the content of an app record: what cannot be read is a ``problem``
naming the app, and the rest of the round goes on. A node whose GPUs cannot be read (a shape
not known here, GPU counts that do not add up) is an InputError naming the field instead:
skipped, its GPUs would silently vanish from the cluster.

GPU shapes read (:func:`node_gpus`, :func:`gpufair.adapters.yarn.decode.resource_amount`):
upstream 3.1+ ``yarn.io/gpu`` in ``resourceInformations``, and Hadoop-AI's (OpenPAI's GPU fork
of 2.9) ``GPUs`` in every resource object with ``usedGPUs``/``availableGPUs``/
``availableGPUAttribute`` (a bitmask of the free GPUs' indices) on nodes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpufair.adapters.yarn.decode import (
    GPU,
    GPU_TYPES,
    as_int,
    as_list,
    entries,
    items,
    partition_name,
    resource_amount,
)
from gpufair.errors import InputError
from gpufair.model import ClusterState, GpuType, Job, JobState, Node, NodeState, Tenant, gpu_id

#: What an RM application id looks like; anything else would go into a URL path unchecked.
APP_ID = re.compile(r"application_\d{1,20}_\d{1,12}")
#: YarnApplicationState values of an app that still wants or holds resources.
ACTIVE_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
_NODE_STATES = {"RUNNING": NodeState.UP, "DECOMMISSIONING": NodeState.DRAIN,
                "NEW": NodeState.DOWN, "UNHEALTHY": NodeState.DOWN}


@dataclass(frozen=True)
class YarnAppInfo:
    """What the adapter needs of an app beyond the model (its queue, to size and move it)."""

    queue: str                 # as the RM reports it (leaf name or full path)
    user: str
    state: str                 # YarnApplicationState
    priority: int
    held: int                  # GPUs held now
    pending: int               # GPUs its pending asks want
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class YarnView:
    state: ClusterState
    apps: Mapping[str, YarnAppInfo]
    problems: tuple[str, ...] = ()
    node_ids: Mapping[str, str] = field(default_factory=dict)   # node name → NM id
    #: GPU node → its node-label partition ("" the default one): a queue's capacity on a
    #: partition governs that partition's GPUs only
    partition_of: Mapping[str, str] = field(default_factory=dict)


def leaf(queue: str) -> str:
    """``root.gpu.alice`` → ``alice``; CS reports leaf names, FS full paths."""
    return queue.rpartition(".")[2] if queue else queue


def node_name(node_id: str) -> str:
    return node_id.rpartition(":")[0] or node_id


def container_gpus(container: Mapping[str, Any]) -> int:
    """GPUs of one container record (mapped JSON: strings; or a ResourceInfo)."""
    allocated = entries(container.get("allocatedResources"))
    gpus = next((allocated[t] for t in GPU_TYPES if t in allocated), None)
    if gpus is not None:
        return max(0, as_int(gpus))
    return resource_amount(container.get("resource"), GPU)


def translate(nodes_doc: Any, apps_doc: Any, containers: Mapping[str, Sequence[Any]], *,
              now: float, managed_queues: Sequence[str] = (), tenant_from: str = "queue",
              gpu_type_attribute: str = "gpu_type", default_gpu_type: str = "gpu",
              app_tag_prefix: str = "", source: str = "yarn",
              queue_labels: Mapping[str, str] | None = None) -> YarnView:
    """Build the model from one nodes reply, one apps reply and the running apps' containers.

    ``managed_queues`` (leaf names or paths; empty: all) are the queues gpufair schedules;
    ``tenant_from`` is ``queue`` (a tenant per leaf queue) or ``user``; ``queue_labels``
    (leaf → default node-label expression) says in which partition a queue's apps run.

    When GPU nodes sit in node-label partitions, an app can run only on the nodes of its
    partition (its ``appNodeLabelExpression``, else its queue's default; labels are
    exclusive, YARN's default): its job's ``allowed_nodes`` are those nodes, so no plan
    puts it on GPUs YARN would never give it."""
    problems: list[str] = []
    managed = {leaf(q) for q in managed_queues}
    nodes, node_ids, used_on, used_at, labels_of = _nodes(
        nodes_doc, gpu_type_attribute, default_gpu_type, problems, f"{source}/nodes")
    orders = {n.name: _order(n.gpus, used_at.get(n.name)) for n in nodes}
    partition_of = {n.name: labels_of.get(n.name, "") for n in nodes}
    partitioned = any(partition_of.values())
    by_id = {nid: name for name, nid in node_ids.items()}
    jobs: list[Job] = []
    infos: dict[str, YarnAppInfo] = {}
    next_index: dict[str, int] = {}
    accounted: dict[str, int] = {}
    records = items(apps_doc, "apps", "app", f"{source}/apps")
    for raw in sorted(records, key=lambda r: str(r.get("id"))):
        app_id = str(raw.get("id") or "")
        where = f"{source}/apps: app {app_id or '?'}"
        try:
            state = str(raw.get("state") or "").upper()
            if state not in ACTIVE_STATES:
                continue
            if not APP_ID.fullmatch(app_id):
                raise ValueError(f"not an application id: {app_id[:60]!r}")
            queue = str(raw.get("queue") or "")
            placed = _placement(containers.get(app_id, ()), by_id)
            held = sum(placed.values())
            for name, count in placed.items():
                accounted[name] = accounted.get(name, 0) + count
            if managed and leaf(queue) not in managed:
                continue        # its GPUs count as used by somebody else (see below)
            pending = _pending_gpus(raw)
            if held + pending == 0:
                continue        # not a GPU app: not gpufair's business
            gpus_held = []
            for name, count in sorted(placed.items()):
                start = next_index.get(name, 0)
                order = orders.get(name, ())
                gpus_held += [gpu_id(name, order[i] if i < len(order) else i)
                              for i in range(start, start + count)]
                next_index[name] = start + count
            tags = tuple(t for t in str(raw.get("applicationTags") or "").split(",") if t)
            user = str(raw.get("user") or "")
            app = next((t[len(app_tag_prefix):] for t in tags if t.startswith(app_tag_prefix)),
                       None) if tags else None
            started = as_int(raw.get("startedTime")) / 1000.0
            launched = as_int(raw.get("launchTime"), as_int(raw.get("startedTime"))) / 1000.0
            allowed = None
            if partitioned:
                part = partition_name(raw.get("appNodeLabelExpression")) or \
                    (queue_labels or {}).get(leaf(queue), "")
                # and where it runs now: a non-exclusive label lends idle nodes to others
                allowed = tuple(n for n, p in partition_of.items()
                                if p == part or n in placed)
            job = Job(id=app_id, tenant=leaf(queue) if tenant_from == "queue" else user,
                      app=app or None, gpus=held + pending,
                      state=JobState.RUNNING if held else JobState.PENDING,
                      arrival_s=started, start_s=launched if held else None,
                      gpus_held=tuple(gpus_held), allowed_nodes=allowed)
            priority = raw.get("priority", raw.get("applicationPriority"))
            infos[app_id] = YarnAppInfo(queue, user, state, as_int(priority), held, pending,
                                        tags)
            jobs.append(job)
        except Exception as exc:   # one record must never stop a round
            problems.append(f"{where}: skipped: {type(exc).__name__}: {exc}")
    out_nodes = []
    for node in nodes:
        foreign = max(used_on.get(node.name, 0), accounted.get(node.name, 0)) \
            - sum(1 for j in jobs for g in j.gpus_held if g.rpartition(":")[0] == node.name)
        first_free = next_index.get(node.name, 0)
        blocked = tuple(sorted(orders[node.name][first_free:first_free + max(0, foreign)]))
        out_nodes.append(Node(node.name, node.gpu_type, node.gpus, rack=node.rack,
                              state=node.state, unavailable=blocked))
    state = ClusterState(time_s=now, nodes=tuple(out_nodes), jobs=tuple(jobs),
                         tenants=tuple(Tenant(t) for t in sorted({j.tenant for j in jobs})),
                         gpu_types=tuple(GpuType(t) for t in sorted({n.gpu_type
                                                                     for n in out_nodes})))
    return YarnView(state, infos, tuple(problems), node_ids, partition_of)


def _nodes(doc: Any, attribute: str, default_type: str, problems: list[str], source: str
           ) -> tuple[list[Node], dict[str, str], dict[str, int],
                      dict[str, tuple[int, ...] | None], dict[str, str]]:
    nodes: list[Node] = []
    ids: dict[str, str] = {}
    used: dict[str, int] = {}
    used_at: dict[str, tuple[int, ...] | None] = {}
    labels: dict[str, str] = {}
    for i, raw in enumerate(items(doc, "nodes", "node", source)):
        node_id = str(raw.get("id") or "")
        where = f"{source}: node {node_id or f'#{i}'}"
        gpus, busy, busy_at = node_gpus(raw, where)
        if gpus <= 0:
            continue                  # no GPUs (or a 2.x/3.0 RM that cannot say)
        name = str(raw.get("nodeHostName") or node_name(node_id))
        if not node_id or name in ids:
            problems.append(f"{where}: skipped: {'no id' if not node_id else 'duplicate node'}")
            continue
        state = _NODE_STATES.get(str(raw.get("state") or "").upper(), NodeState.DOWN)
        ids[name] = node_id
        used[name] = busy
        used_at[name] = busy_at
        labels[name] = next((partition_name(x) for x in as_list(raw.get("nodeLabels"))), "")
        rack = str(raw.get("rack") or "") or None
        nodes.append(Node(name, _gpu_type(raw, attribute, default_type), gpus, rack=rack,
                          state=state))
    return nodes, ids, used, used_at, labels


#: Fields of a node record in a shape whose GPUs are known (or known to be absent): upstream
#: 3.1+ ``totalResource``; Hadoop-AI's ``usedGPUs``/``availableGPUs``; 2.x memory counters.
_HADOOP_AI = ("usedGPUs", "availableGPUs")
_PLAIN = ("usedMemoryMB", "availMemoryMB")


def node_gpus(raw: Mapping[str, Any], where: str) -> tuple[int, int, tuple[int, ...] | None]:
    """A node record's GPUs: (total, in use, the indices in use when the RM says which).

    Upstream 3.1+ publishes ``yarn.io/gpu`` in ``totalResource``/``usedResource``. Hadoop-AI
    (OpenPAI's fork of 2.9) has no ``totalResource``: it counts ``usedGPUs`` and
    ``availableGPUs`` and gives ``availableGPUAttribute``, a bitmask of the free GPUs'
    indices, so which GPUs are busy is known, not guessed. A 2.x/3.0 node with neither has
    no GPUs YARN knows of. A record in none of these shapes, or with GPU fields that do not
    add up, is an InputError naming the field: read as "no GPUs", a GPU cluster in a shape
    not known here would look empty, and gpufair would schedule nothing without a word."""
    if isinstance(raw.get("totalResource"), Mapping):
        return (resource_amount(raw["totalResource"], GPU),
                resource_amount(raw.get("usedResource"), GPU), None)
    if any(key in raw for key in _HADOOP_AI):
        used, free = (_count(raw, key, where) for key in _HADOOP_AI)
        total = used + free
        if "availableGPUAttribute" not in raw:
            return total, used, None
        mask = _count(raw, "availableGPUAttribute", where)
        free_at = [i for i in range(mask.bit_length()) if mask >> i & 1]
        if len(free_at) != free:
            raise InputError(where, f"{len(free_at)} GPUs free in the bitmask, availableGPUs"
                             f" says {free}", field="availableGPUAttribute", value=mask)
        if free_at and free_at[-1] >= total:
            return total, used, None    # device indices with gaps: which are busy is unknown
        return total, used, tuple(i for i in range(total) if i not in free_at)
    if "totalResource" in raw or any(key in raw for key in _PLAIN):
        return 0, 0, None
    raise InputError(where, "a node record in no shape known here (none of totalResource,"
                     " usedGPUs/availableGPUs, usedMemoryMB/availMemoryMB): its GPUs cannot"
                     f" be read; fields: {', '.join(sorted(raw)[:12])}", field="totalResource")


def _count(raw: Mapping[str, Any], key: str, where: str) -> int:
    value = raw.get(key)
    number = as_int(value, -1)
    if number < 0 or (isinstance(value, float) and not value.is_integer()):
        raise InputError(where, "not a count of GPUs", field=key, value=value)
    return number


def _order(total: int, busy_at: tuple[int, ...] | None) -> tuple[int, ...]:
    """The order in which a node's GPUs are handed to the apps found on it: the GPUs the RM
    says are busy first (apps hold busy GPUs, not free ones), then the rest; when it does not
    say which, lowest first."""
    busy = tuple(i for i in busy_at or () if i < total)
    return busy + tuple(i for i in range(total) if i not in busy)


def _gpu_type(raw: Mapping[str, Any], attribute: str, default: str) -> str:
    """The node attribute ``attribute`` (3.2+), else its first node label, else default."""
    attrs = raw.get("nodeAttributesInfo")
    if isinstance(attrs, Mapping):
        for item in as_list(attrs.get("nodeAttributeInfo")):
            if isinstance(item, Mapping) and item.get("name") == attribute and item.get("value"):
                return str(item["value"])
    labels = [str(x) for x in as_list(raw.get("nodeLabels")) if x]
    return labels[0] if labels else default


def _placement(records: Sequence[Any], by_id: Mapping[str, str]) -> dict[str, int]:
    """GPUs per node of an app's live containers."""
    out: dict[str, int] = {}
    for container in records:
        if not isinstance(container, Mapping):
            continue
        if str(container.get("containerState") or "RUNNING").upper() == "COMPLETE":
            continue
        gpus = container_gpus(container)
        nid = str(container.get("assignedNodeId") or container.get("nodeId") or "")
        if gpus and nid:
            name = by_id.get(nid, node_name(nid))
            out[name] = out.get(name, 0) + gpus
    return out


def _pending_gpus(raw: Mapping[str, Any]) -> int:
    """GPUs the app's outstanding asks want (only ``*`` rows count: the rack and host rows
    repeat the same containers)."""
    total = 0
    for ask in as_list(raw.get("resourceRequests")):
        if isinstance(ask, Mapping) and ask.get("resourceName", "*") == "*":
            total += resource_amount(ask.get("capability"), GPU) * \
                max(0, as_int(ask.get("numContainers")))
    return total

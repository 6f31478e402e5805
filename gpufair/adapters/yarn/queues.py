"""The scheduler's queue tree (``GET /scheduler``), flattened: what the adapter checks before
it writes queue capacities, so that a wrong ``[yarn]`` section is a clear error at the first
write rather than a RM-side validation failure or, worse, capacities on the wrong queues."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufair.adapters.yarn.decode import (
    GPU,
    as_float,
    as_list,
    partition_name,
    resource_amount,
    unwrap,
)


@dataclass(frozen=True)
class QueueInfo:
    """One queue. GPU clusters often put their GPU nodes in node-label partitions (Hadoop-AI's
    dedicated virtual clusters: a queue with capacity 0 on the default partition and 100 %
    of its own), so capacities and usage are kept per partition (``""`` is the default
    one), from ``queueCapacitiesByPartition`` and ``resourceUsagesByPartition``."""

    path: str
    absolute_capacity: float     # percent of the cluster's default partition
    children: tuple[str, ...]    # full paths
    partitions: Mapping[str, float] = field(default_factory=dict)  # partition → absolute %
    used_gpus: Mapping[str, int] = field(default_factory=dict)     # partition → GPUs in use
    labels: tuple[str, ...] = ()     # partitions it may use (nodeLabels; "*": every one)
    default_label: str = ""          # defaultNodeLabelExpression: where its apps run

    @property
    def leaf(self) -> bool:
        return not self.children

    def share(self, partition: str) -> float:
        """Percent of ``partition`` the queue is guaranteed (the root: all of every one)."""
        if self.path == "root":
            return 100.0
        if partition in self.partitions:
            return self.partitions[partition]
        return self.absolute_capacity if not partition else 0.0

    def can_use(self, partition: str) -> bool:
        """Whether the queue may run containers on ``partition``'s nodes."""
        return not partition or self.path == "root" or "*" in self.labels \
            or partition in self.labels or partition in self.partitions


@dataclass(frozen=True)
class QueueTree:
    scheduler: str               # capacityScheduler, fairScheduler, fifoScheduler
    queues: Mapping[str, QueueInfo]


def queue_tree(doc: Any, source: str = "yarn/scheduler") -> QueueTree:
    """Every queue by full path. CS names queues by their short name (``queuePath`` only
    from 3.3), so paths are built from the root down; FS names them by full path already."""
    info = unwrap(unwrap(doc, "scheduler", source), "schedulerInfo", source)
    if not isinstance(info, Mapping):
        return QueueTree("unknown", {})
    kind = str(info.get("type") or "")
    queues: dict[str, QueueInfo] = {}
    if kind == "capacityScheduler":
        _walk_cs(info, "root", queues)
    elif kind == "fairScheduler":
        _walk_fs(info.get("rootQueue"), queues)
    return QueueTree(kind, queues)


def _walk_cs(queue: Mapping[str, Any], path: str, out: dict[str, QueueInfo]) -> None:
    children = []
    wrapper = queue.get("queues")
    for child in as_list(wrapper.get("queue")) if isinstance(wrapper, Mapping) else []:
        if isinstance(child, Mapping) and child.get("queueName"):
            child_path = f"{path}.{child['queueName']}"
            children.append(child_path)
            _walk_cs(child, child_path, out)
    share = 100.0 if path == "root" else as_float(queue.get("absoluteCapacity"))
    caps = queue.get("capacities")
    rows = as_list(caps.get("queueCapacitiesByPartition")) if isinstance(caps, Mapping) else []
    partitions = {partition_name(r.get("partitionName")): as_float(r.get("absoluteCapacity"))
                  for r in rows if isinstance(r, Mapping)}
    usage = queue.get("resources")
    rows = as_list(usage.get("resourceUsagesByPartition")) if isinstance(usage, Mapping) \
        else []
    used = {partition_name(r.get("partitionName")): resource_amount(r.get("used"), GPU)
            for r in rows if isinstance(r, Mapping)}
    labels = tuple(str(x) for x in as_list(queue.get("nodeLabels")) if x)
    out[path] = QueueInfo(path, share, tuple(children), partitions, used, labels,
                          partition_name(queue.get("defaultNodeLabelExpression")))


def _walk_fs(queue: Any, out: dict[str, QueueInfo]) -> None:
    if not isinstance(queue, Mapping) or not queue.get("queueName"):
        return
    path = str(queue["queueName"])
    wrapper = queue.get("childQueues")
    children = [c for c in as_list(wrapper.get("queue")) if isinstance(c, Mapping)] \
        if isinstance(wrapper, Mapping) else []
    for child in children:
        _walk_fs(child, out)
    out[path] = QueueInfo(path, 0.0, tuple(str(c.get("queueName")) for c in children))

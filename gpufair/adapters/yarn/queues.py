"""The scheduler's queue tree (``GET /scheduler``), flattened: what the adapter checks before
it writes queue capacities, so that a wrong ``[yarn]`` section is a clear error at the first
write rather than a RM-side validation failure or, worse, capacities on the wrong queues."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufair.adapters.yarn.decode import as_float, as_list, unwrap


@dataclass(frozen=True)
class QueueInfo:
    path: str
    absolute_capacity: float     # percent of the cluster
    children: tuple[str, ...]    # full paths

    @property
    def leaf(self) -> bool:
        return not self.children


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
    out[path] = QueueInfo(path, share, tuple(children))


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

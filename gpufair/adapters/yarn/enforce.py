"""Per-tenant GPU shares as CapacityScheduler queue capacities (``PUT /scheduler-conf``).

YARN will not start an app on GPUs an outside arbiter picks (specs/yarn_rm_rest.md §9): the
REST-only lever is the queue quota. Each tenant is a leaf queue under one parent; a share of
N of the cluster's G GPUs becomes ``capacity = maximum-capacity = 100·N/G`` percent of the
parent (scaled by the parent's own absolute capacity) — per node-label partition when GPU
nodes sit in labelled partitions (N and G counted in that partition, the per-label keys of
:func:`capacity_keys`) — and one *rest* queue under the same
parent takes what is left, because CS requires siblings' capacities to sum to 100. With
``maximum-capacity`` equal to ``capacity`` a tenant cannot grow into idle GPUs the plan gave
nobody, so the RM's own placement converges to the plan's shares. (The DominantResource
calculator, required for GPU scheduling, applies the percentage to GPUs like any resource.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from gpufair.errors import InputError

_STEP = Decimal("0.000001")
#: CapacityScheduler's tolerance on the sum of siblings' capacities (ParentQueue PRECISION,
#: 0.0005 of the parent), in percent
_SUM_TOLERANCE = Decimal("0.05")


@dataclass(frozen=True)
class QueueLayout:
    parent: str                  # full path of the tenants' parent queue
    rest: str                    # full path of the sibling that takes what is left
    parent_share: float = 100.0  # the parent's absolute capacity, percent of the cluster

    def path(self, tenant: str) -> str:
        return f"{self.parent}.{tenant}"


def capacities(shares: Mapping[str, int], total_gpus: int, layout: QueueLayout
               ) -> dict[str, str]:
    """Queue path → capacity percent (as the text sent to the RM), rest queue included.

    Percentages are rounded *up* to 1e-6: the RM compares a queue's usage with its limit as
    fractions, so 1 GPU of 3 needs 33.333334 %, not 33.3333 % (which lets no whole GPU in);
    the excess is below one GPU for any cluster under 10**6 GPUs, so N+1 never fits. The rest
    queue takes what is left; when the tenants have every GPU the excess is within the RM's
    own tolerance on the sum (0.05 %), and the rest queue gets 0.
    """
    if total_gpus <= 0:
        raise InputError("yarn", "no GPUs in the cluster: no share can be enforced")
    if sum(shares.values()) > total_gpus:
        raise InputError("yarn", f"the plan gives {sum(shares.values())} GPUs of {total_gpus}")
    if layout.parent_share <= 0:
        raise InputError("yarn", "the tenants' parent queue has no capacity",
                         field="yarn.parent_queue", value=layout.parent)
    scale = Decimal(100) / Decimal(repr(layout.parent_share))
    out: dict[str, str] = {}
    used = Decimal(0)
    for tenant in sorted(shares):
        count = shares[tenant]
        if count < 0:
            raise InputError("yarn", "negative share", field=tenant, value=count)
        pct = (Decimal(100) * count / total_gpus * scale).quantize(_STEP, ROUND_CEILING)
        out[layout.path(tenant)] = _text(pct)
        used += pct
    if used > 100 + _SUM_TOLERANCE:
        raise InputError("yarn", f"the shares need {used}% of parent {layout.parent}: it has "
                         f"only {layout.parent_share:g}% of the cluster")
    out[layout.rest] = _text(max(Decimal(0), Decimal(100) - used))
    return out


def _text(value: Decimal) -> str:
    text = format(value.normalize(), "f")
    return text if text not in ("-0", "") else "0"


def capacity_keys(partition: str) -> tuple[str, str]:
    """The queue properties that hold a queue's capacity and maximum capacity on a partition:
    ``capacity`` for the default one; on a node-label partition
    ``accessible-node-labels.<label>.capacity`` (CapacityScheduler's documented per-label
    keys) — the plain ones would leave the labelled GPUs to the old capacities."""
    if not partition:
        return "capacity", "maximum-capacity"
    key = f"accessible-node-labels.{partition}"
    return f"{key}.capacity", f"{key}.maximum-capacity"


def mutation(caps: Mapping[str, Mapping[str, str]]) -> dict:
    """The ``sched-conf`` body for ``caps`` (partition → queue path → percent): capacity and
    maximum-capacity of every queue on every partition given, one update per queue, one
    request (the RM applies it whole or not at all)."""
    params: dict[str, list[dict[str, str]]] = {}
    for partition, by_queue in sorted(caps.items()):
        cap_key, max_key = capacity_keys(partition)
        for path, value in sorted(by_queue.items()):
            params.setdefault(path, []).extend([{"key": cap_key, "value": value},
                                                {"key": max_key, "value": value}])
    return {"update-queue": [{"queue-name": path, "params": {"entry": entries}}
                             for path, entries in sorted(params.items())]}

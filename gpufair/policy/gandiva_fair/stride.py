"""Gang-aware stride scheduling (Algorithm 1) and the central half of the split scheduler.

A job's stride is its size over its tickets (= 1 / its user's tickets per GPU): each quantum it
runs advances its pass by the GPU-time it consumed per ticket, so GPU-time — not quanta — is
proportional to tickets. This normalisation is what reproduces the paper's Table 2 and §5.1/5.2
(an unnormalised stride gives every job of Table 2 the same share). Ties go to the earlier
arrival, which makes Table 2 exact after six quanta.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass
class Entry:
    """One schedulable unit: a job (local or large) or a server's aggregate of small jobs."""

    key: str
    size: int                 # GPUs it needs (local scheduler)
    stride: float
    pass_: float
    seq: int                  # arrival order: the tie-break
    servers: tuple[str, ...] = ()   # the servers it needs whole (central scheduler)
    aggregate: bool = False   # a server's small jobs as one (``key`` is then the server)


def order_key(entry: Entry) -> tuple[object, int]:
    """Pass, then arrival. Float passes are compared at 12 significant digits so that sums of
    equal strides taken in different orders still tie (exact numbers compare as they are)."""
    value = entry.pass_
    if isinstance(value, float):
        value = float(f"{value:.12g}")
    return value, entry.seq


def gang_stride(entries: Iterable[Entry], num_gpus: int, *, charge: float = 1) -> list[Entry]:
    """Algorithm 1: walk jobs by pass; each that fits runs and its pass moves by its stride
    (times ``charge``, the share of a quantum it will run); one that does not fit keeps its
    pass, so it leads the next quantum."""
    free = num_gpus
    scheduled = []
    for entry in sorted(entries, key=order_key):
        if free <= 0:
            break
        if entry.size <= free:
            free -= entry.size
            scheduled.append(entry)
            entry.pass_ += entry.stride * charge
    return scheduled


def central_select(entries: Iterable[Entry], servers: Sequence[str]) -> list[Entry]:
    """The central scheduler: large jobs and server aggregates by pass; an entry runs when all
    its servers are still free this quantum. Passes are not moved here: the caller charges
    what really ran."""
    free = set(servers)
    chosen = []
    for entry in sorted(entries, key=order_key):
        if not free:
            break
        if free.issuperset(entry.servers):
            free.difference_update(entry.servers)
            chosen.append(entry)
    return chosen


def join_pass(existing: Iterable[float], default: float = 0.0) -> float:
    """A newcomer's pass: the minimum of those already there (the paper's join rule)."""
    return min(existing, default=default)

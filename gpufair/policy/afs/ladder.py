"""From a model job to the ladder of GPU counts AFS may give it on one GPU type.

A count is on the ladder when the job may hold it (its min/max GPUs if elastic, exactly its
request if rigid), the profiler measured a positive rate for it on that type, it fits the
pool, network packing allows it (elastic jobs only: a rigid gang asked for its size), and it
is faster than every smaller count on the ladder — a count that adds no throughput is one
the job "cannot use" (issue 18), so it is left out rather than handed a useless GPU.
"""

from __future__ import annotations

from gpufair.errors import InputError
from gpufair.model import Job
from gpufair.policy.afs.allocation import Rung


def job_bounds(job: Job) -> tuple[int, int]:
    """(fewest, most) GPUs the job may hold: its min/max when elastic, else its request.

    An impossible range is an InputError, not a job quietly never scheduled (snapshots and
    the Slurm adapter check it first; this guards records built any other way)."""
    if job.elastic:
        low, high = int(job.min_gpus or 0), int(job.max_gpus or 0)
        if not 1 <= low <= high:
            raise InputError(f"job {job.id}", "needs 1 <= min_gpus <= max_gpus",
                             field="min_gpus/max_gpus", value=(job.min_gpus, job.max_gpus))
        return low, high
    if job.gpus < 1:
        raise InputError(f"job {job.id}", "needs at least one GPU", field="gpus",
                         value=job.gpus)
    return job.gpus, job.gpus


def packing_sizes(per_node: int, limit: int) -> frozenset[int]:
    """Network packing's shares (App. E) up to ``limit``: the power-of-two divisors of the
    GPUs per server below it, and multiples of it ({1, 2, 4n} on 4-GPU servers). Only
    power-of-two divisors, so that first-fit-decreasing always packs them (Prop. 1)."""
    sizes = {p for p in (1 << k for k in range(per_node.bit_length()))
             if p < per_node and per_node % p == 0}
    sizes.update(range(per_node, limit + 1, per_node))
    return frozenset(s for s in sizes if s <= limit)


def ladder(job: Job, gpu_type: str, pool_gpus: int,
           sizes: frozenset[int] | None = None) -> Rung | None:
    """The job's rungs on ``gpu_type`` (None when it has none there).

    ``sizes`` restricts an elastic job's counts (network packing); ``remaining`` is the
    job's iterations left, None when unknown."""
    low, high = job_bounds(job)
    high = min(high, pool_gpus)
    counts: list[int] = []
    rates: list[float] = []
    best = 0.0
    for (kind, count), rate in sorted(job.throughput.rates.items(), key=lambda kv: kv[0][1]):
        if kind != gpu_type or not low <= count <= high:
            continue
        if job.elastic and sizes is not None and count not in sizes:
            continue
        rate = job.rate(gpu_type, count)   # 0 on a type the job may not use
        if rate > best:
            counts.append(count)
            rates.append(rate)
            best = rate
    if not counts:
        return None
    return Rung(job.id, tuple(counts), tuple(rates), job.progress.iterations_left)

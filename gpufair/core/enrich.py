"""Throughput profiles: measured ones from the jobs' logs, neutral ones for the rest.

``measure`` runs one profiler round over the logs of the jobs (Slurm's StdOut path) and puts
what was measured (progress, batch size, iterations/s per GPU type and count) into the job
records.

Policies place a job only on GPU types with a known rate for its gang size. A job fresh from
a resource manager has no measured rate; it gets a *neutral* profile (rate 1.0 on every GPU
type for its gang size), and a job measured on some types only gets its best measured rate on
the others: no speedup is assumed, so the policy stays type-blind where nothing is known.
Measured rates are never overwritten, and a user's declaration never enters here.

An elastic job (min/max GPUs) needs its rate at every count it may hold: the profiler's
scaling curve answers for the counts it can model from what it measured, and counts nothing
answers for get the rate at the job's own count scaled linearly, AFS's
"overestimate first, re-adjust when measured" (NSDI'21 §4.3): the next round's measurement
at the new size corrects it.
"""

from __future__ import annotations

import logging
from itertools import repeat

from gpufair.model import ClusterState, Job, JobState, ThroughputProfile, node_of
from gpufair.model.records import job_replaced
from gpufair.profiler.profiler import JobLog, Profiler

log = logging.getLogger("gpufair.profiles")
NEUTRAL_RATE = 1.0
#: A running job's neutral rate elsewhere is a hair lower than on the type it runs on: with
#: equal rates the placement would move it across types on a tie, and a move costs a restart.
STAY_MARGIN = 1e-6
#: what a node name not in the cluster maps to in ``_usable_types`` (a GPU type may be None)
_UNKNOWN = object()


def measure(state: ClusterState, profiler: Profiler) -> ClusterState:
    type_of = {n.name: n.gpu_type for n in state.nodes}
    logs = []
    for job in state.jobs:
        if not job.log_path or job.log_path == "/dev/null" or not job.state.active:
            continue
        types = {type_of.get(node_of(g)) for g in job.gpus_held}
        running = job.state is JobState.RUNNING and len(types) == 1
        logs.append(JobLog(job.id, job.log_path,
                           gpu_type=types.pop() if running else None,
                           gpus=len(job.gpus_held) if running else None, model=job.model,
                           owner_uid=job.owner_uid,
                           owner_gids=() if job.owner_gid is None else (job.owner_gid,)))
    profiler.round(logs)
    for job_id, problem in sorted(profiler.problems.items()):
        log.info("job %s: log not read: %s", job_id, problem,
                 extra={"fields": {"event": "log_refused", "job": job_id, "why": problem}})
    names = state.gpu_type_names()
    cluster = state.gpu_count()
    return state.with_jobs(profiler.apply(j, names, elastic_counts(j, cluster))
                           for j in state.jobs)


def elastic_counts(job: Job, cluster_gpus: int) -> tuple[int, ...]:
    """The GPU counts a job may hold that fit the cluster: min..max for an elastic job, its
    request otherwise (a count beyond the cluster is never scheduled, so not computed)."""
    if not job.elastic:
        return (job.gpus,)
    low, high = job.min_gpus or 1, min(job.max_gpus or job.gpus, max(cluster_gpus, job.gpus))
    return tuple(sorted({*range(low, high + 1), job.gpus}))


def _usable_types(job: Job, type_of: dict[str, str],
                  types_on: dict[int, tuple[tuple[str, ...], set[str]]] | None = None
                  ) -> set[str] | None:
    """The GPU types the job may run on (--gres=gpu:TYPE, its allowed nodes' types).
    ``types_on`` keeps the types of each allowed-node tuple already seen: the jobs of a
    partition share one, and it can name a thousand nodes (issue 30). It is keyed by the
    tuple's identity (the translation hands one tuple to all the jobs of a combination):
    hashing a tuple of 8,192 names for each of 100,000 jobs was most of a round's
    enrichment; an equal tuple that is another object is computed once more, not wrongly."""
    usable = None if job.gpu_types is None else set(job.gpu_types)
    if job.allowed_nodes is not None:
        seen = None if types_on is None else types_on.get(id(job.allowed_nodes))
        if seen is not None and seen[0] is job.allowed_nodes:
            on_nodes = seen[1]
        else:
            on_nodes = set(map(type_of.get, job.allowed_nodes, repeat(_UNKNOWN)))
            on_nodes.discard(_UNKNOWN)   # (one map in C: 8,192 names, a thousand tuples)
            if types_on is not None:   # (the tuple kept alive with it: its id stays its own)
                types_on[id(job.allowed_nodes)] = (job.allowed_nodes, on_nodes)
        usable = set(on_nodes) if usable is None else usable & on_nodes
    return usable


def with_default_profiles(state: ClusterState) -> ClusterState:
    types = state.gpu_type_names()
    type_of = {n.name: n.gpu_type for n in state.nodes}
    types_on: dict[int, tuple[tuple[str, ...], set[str]]] = {}
    #: the neutral profile of each (types allowed, GPUs, types held now) met so far: a job
    #: with nothing measured gets the one its first peer got (a site's 100,000 jobs share a
    #: few dozen; made anew for each, they were most of a round's enrichment, issue 30)
    neutral: dict[tuple[tuple[str, ...], int, frozenset[str | None]], ThroughputProfile] = {}
    cluster = state.gpu_count()
    jobs = []
    for job in state.jobs:
        usable = _usable_types(job, type_of, types_on)
        allowed = [t for t in types if usable is None or t in usable]
        if job.throughput.rates or job.elastic or not allowed:
            jobs.append(_with_defaults(job, usable, allowed, type_of, cluster))
            continue
        key = (tuple(allowed), job.gpus, frozenset(type_of.get(node_of(g))
                                                   for g in job.gpus_held))
        profile = neutral.get(key)
        if profile is None:
            job = _with_defaults(job, usable, allowed, type_of, cluster)
            neutral[key] = job.throughput
        else:
            job = job_replaced(job, throughput=profile)
        jobs.append(job)
    return state.with_jobs(jobs)


def _with_defaults(job: Job, usable: set[str] | None, allowed: list[str],
                   type_of: dict[str, str], cluster_gpus: int) -> Job:
    """The job with rates only on the types it may use, and a rate on each of them."""
    if usable is not None:   # no rate on a type it may not use: no placement there
        allowed_rates = {k: r for k, r in job.throughput.rates.items() if k[0] in usable}
        if len(allowed_rates) != len(job.throughput.rates):
            job = job_replaced(job, throughput=ThroughputProfile(allowed_rates))
    known = [r for t in allowed if (r := job.throughput.rate(t, job.gpus)) is not None]
    if allowed and len(known) < len(allowed):
        # unmeasured types: as fast as the best measured one (no speedup assumed)
        base = max(known, default=NEUTRAL_RATE)
        rates = dict(job.throughput.rates)
        here = {type_of.get(node_of(g)) for g in job.gpus_held}
        for gpu_type in allowed:
            stay = not here or gpu_type in here
            rates.setdefault((gpu_type, job.gpus),
                             base if stay else base * (1 - STAY_MARGIN))
        job = job_replaced(job, throughput=ThroughputProfile(rates))
    if job.elastic and allowed:
        job = _linear_elsewhere(job, allowed, cluster_gpus)
    return job


def _linear_elsewhere(job: Job, types: list[str], cluster_gpus: int) -> Job:
    """Rates for an elastic job's counts nothing measured or modelled: linear in the count
    from its rate at its own count on each type."""
    rates = dict(job.throughput.rates)
    for gpu_type in types:
        base = rates.get((gpu_type, job.gpus))
        if not base:
            continue
        for count in elastic_counts(job, cluster_gpus):
            rates.setdefault((gpu_type, count), base * count / job.gpus)
    if len(rates) == len(job.throughput.rates):
        return job
    return job_replaced(job, throughput=ThroughputProfile(rates))

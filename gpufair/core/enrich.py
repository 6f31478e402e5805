"""Throughput profiles: measured ones from the jobs' logs, neutral ones for the rest.

``measure`` runs one profiler round over the logs of the jobs (Slurm's StdOut path) and puts
what was measured (progress, batch size, iterations/s per GPU type and count) into the job
records.

Policies place a job only on GPU types with a known rate for its gang size. A job fresh from
a resource manager has no measured rate; it gets a *neutral* profile (rate 1.0 on every GPU
type for its gang size), and a job measured on some types only gets its best measured rate on
the others: no speedup is assumed, so the policy stays type-blind where nothing is known.
Measured rates are never overwritten, and a user's declaration never enters here.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from gpufair.model import ClusterState, JobState, ThroughputProfile, node_of
from gpufair.profiler.profiler import JobLog, Profiler

log = logging.getLogger("gpufair.profiles")
NEUTRAL_RATE = 1.0
#: A running job's neutral rate elsewhere is a hair lower than on the type it runs on: with
#: equal rates the placement would move it across types on a tie, and a move costs a restart.
STAY_MARGIN = 1e-6


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
    return state.with_jobs(profiler.apply(j, names, (j.gpus,)) for j in state.jobs)


def with_default_profiles(state: ClusterState) -> ClusterState:
    types = state.gpu_type_names()
    type_of = {n.name: n.gpu_type for n in state.nodes}
    jobs = []
    for job in state.jobs:
        known = [r for t in types if (r := job.throughput.rate(t, job.gpus)) is not None]
        if types and len(known) < len(types):
            # unmeasured types: as fast as the best measured one (no speedup assumed)
            base = max(known, default=NEUTRAL_RATE)
            rates = dict(job.throughput.rates)
            here = {type_of.get(node_of(g)) for g in job.gpus_held}
            for gpu_type in types:
                stay = not here or gpu_type in here
                rates.setdefault((gpu_type, job.gpus),
                                 base if stay else base * (1 - STAY_MARGIN))
            job = replace(job, throughput=ThroughputProfile(rates))
        jobs.append(job)
    return state.with_jobs(jobs)

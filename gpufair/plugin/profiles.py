"""Throughput profiles for jobs that have no measurement yet.

Policies place a job only on GPU types with a known rate for its gang size. A job fresh from
a resource manager has no measured rate; it gets a *neutral* profile (rate 1.0 on every GPU
type for its gang size): no type is preferred and no speedup is assumed, so the policy
degrades to its type-blind form until the profiler has measured the job. Measured rates are
never overwritten, and a user's declaration never enters here.
"""

from __future__ import annotations

from dataclasses import replace

from gpufair.model import ClusterState, ThroughputProfile, node_of

NEUTRAL_RATE = 1.0
#: A running job's neutral rate elsewhere is a hair lower than on the type it runs on: with
#: equal rates the placement would move it across types on a tie, and a move costs a restart.
STAY_MARGIN = 1e-6


def with_default_profiles(state: ClusterState) -> ClusterState:
    types = state.gpu_type_names()
    type_of = {n.name: n.gpu_type for n in state.nodes}
    jobs = []
    for job in state.jobs:
        if types and all(job.throughput.rate(t, job.gpus) is None for t in types):
            rates = dict(job.throughput.rates)
            here = {type_of.get(node_of(g)) for g in job.gpus_held}
            for gpu_type in types:
                stay = not here or gpu_type in here
                rates.setdefault((gpu_type, job.gpus),
                                 NEUTRAL_RATE if stay else NEUTRAL_RATE - STAY_MARGIN)
            job = replace(job, throughput=ThroughputProfile(rates))
        jobs.append(job)
    return state.with_jobs(jobs)

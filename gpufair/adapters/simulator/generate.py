"""Synthetic traces drawn from a real trace's job mix: larger ones for scaling studies, and
the regimes of the papers where no public trace fits (docs/FORMATS.md, "Generated traces").

Jobs (type, GPUs, adaptation mode, steps) are resampled from a source trace with replacement
and arrive as a Poisson process; the default inter-arrival scales the canonical trace's 40 s
on 32 GPUs to the target cluster, so load per GPU stays the same. Every generator is a pure
function of its seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpufair.adapters.simulator.trace import TraceJob


def generate_trace(source: Sequence[TraceJob], num_jobs: int, *, num_gpus: int,
                   seed: int = 0, mean_gap_s: float | None = None) -> list[TraceJob]:
    if num_jobs < 1 or not source:
        raise ValueError("need at least one job and a non-empty source trace")
    rng = np.random.default_rng(seed)
    gap = mean_gap_s if mean_gap_s is not None else 40.0 * 32 / num_gpus
    arrivals = np.concatenate([[0.0], np.cumsum(rng.exponential(gap, num_jobs - 1))])
    picks = rng.integers(0, len(source), num_jobs)
    return [TraceJob(index=i, job_type=source[k].job_type, total_steps=source[k].total_steps,
                     scale_factor=source[k].scale_factor, arrival_s=float(int(arrivals[i])),
                     mode=source[k].mode, priority_weight=source[k].priority_weight,
                     duration_s=source[k].duration_s, line=i + 1)
            for i, k in enumerate(picks)]


def format_trace(jobs: Sequence[TraceJob]) -> str:
    """12-column Shockwave lines, so generated traces round-trip through the parser."""
    lines = []
    for j in jobs:
        lines.append("\t".join([
            j.job_type, "python3 train.py", ".", "--num_steps", "0", str(j.total_steps),
            str(j.scale_factor), j.mode.value, f"{j.priority_weight:g}", "-1.000000",
            str(int(j.duration_s or 0)), f"{j.arrival_s:g}"]))
    return "\n".join(lines) + "\n"


def generate_heavy_tailed_trace(source: Sequence[TraceJob], num_jobs: int, *, num_gpus: int,
                                seed: int = 0, mean_gap_s: float | None = None,
                                sigma: float = 1.5) -> list[TraceJob]:
    """:func:`generate_trace` with each job's length (steps, and its recorded duration) scaled
    by a log-normal factor of mean 1 and shape ``sigma``: most jobs shorter, a few many times
    longer, as in Philly's traces (the AFS paper's regime, where arrivals never stop and
    length-unaware policies must find the short jobs). The mean factor 1 keeps the offered
    load of :func:`generate_trace`; ``sigma = 1.5`` puts the median job at a third of the mean
    and the longest 1 % at about 10x it."""
    if sigma < 0:
        raise ValueError("sigma must be >= 0")
    jobs = generate_trace(source, num_jobs, num_gpus=num_gpus, seed=seed, mean_gap_s=mean_gap_s)
    rng = np.random.default_rng([seed, 1])   # its own stream: the mix and arrivals stay put
    factor = rng.lognormal(-sigma * sigma / 2, sigma, len(jobs))
    return [replace(j, total_steps=max(1, int(j.total_steps * f)),
                    duration_s=None if j.duration_s is None else j.duration_s * float(f))
            for j, f in zip(jobs, factor, strict=True)]


def generate_tenant_trace(source: Sequence[TraceJob], tenants: int, jobs_per_tenant: float, *,
                          num_gpus: int, seed: int = 0, tenant_gap_s: float | None = None,
                          job_gap_s: float = 600.0) -> tuple[list[TraceJob], list[str]]:
    """Tenants that each own jobs of one type (one job of the source, repeated), about
    ``jobs_per_tenant`` of them (Poisson, at least 1), and leave when those are done: the OEF
    paper's JCT experiment (50 tenants x ~20 jobs). Tenants arrive as a Poisson process (mean
    gap ``tenant_gap_s``, default the per-GPU load of :func:`generate_trace` for the whole
    tenant), each tenant's jobs ``job_gap_s`` apart on average. Returns the trace in arrival
    order and each job's tenant (``tenants[i]`` for trace index i): traces name no tenants."""
    if tenants < 1 or jobs_per_tenant <= 0 or not source:
        raise ValueError("need tenants, jobs per tenant and a non-empty source trace")
    rng = np.random.default_rng(seed)
    gap = tenant_gap_s if tenant_gap_s is not None else 40.0 * 32 / num_gpus * jobs_per_tenant
    starts = np.concatenate([[0.0], np.cumsum(rng.exponential(gap, tenants - 1))])
    kinds = rng.integers(0, len(source), tenants)
    counts = np.maximum(1, rng.poisson(jobs_per_tenant, tenants))
    drawn = []
    for t in range(tenants):
        arrivals = starts[t] + np.concatenate(
            [[0.0], np.cumsum(rng.exponential(job_gap_s, counts[t] - 1))])
        drawn += [(float(int(a)), t) for a in arrivals]
    drawn.sort()
    jobs, owner = [], []
    for i, (arrival, t) in enumerate(drawn):
        jobs.append(replace(source[kinds[t]], index=i, arrival_s=arrival, line=i + 1,
                            source="<generated>"))
        owner.append(f"tenant{t:03d}")
    return jobs, owner


@dataclass(frozen=True)
class UserClass:
    """One user of a fixed-population experiment: its jobs are all of one type and gang
    (a model trained over and over, as each user of the Gandiva_fair paper's §5.4–5.5 runs
    150 ResNet-50 or SuperResolution jobs), ``mean_steps`` long on average."""

    job_type: str
    gpus: int
    jobs: int
    mean_steps: float


def generate_user_class_trace(users: Sequence[UserClass], *, seed: int = 0, sigma: float = 0.5,
                              job_gap_s: float = 0.0) -> tuple[list[TraceJob], list[str]]:
    """Users (``user1``, ``user2``, ... in the order given) that each submit their class's
    jobs: all at time 0 (``job_gap_s = 0``: the backlog of the Gandiva_fair paper's
    heterogeneous experiments, where trading has something to trade for hours) or as a
    Poisson process of that mean gap per user. Lengths are log-normal of mean ``mean_steps``
    and shape ``sigma``, so jobs do not all end in the same round. Returns the trace in
    arrival order and each job's user (``owner[i]`` for trace index i)."""
    if not users or any(u.jobs < 1 or u.gpus < 1 or u.mean_steps <= 0 for u in users):
        raise ValueError("need users, each with >= 1 job of >= 1 GPU and a positive length")
    if sigma < 0 or job_gap_s < 0:
        raise ValueError("sigma and job_gap_s must be >= 0")
    rng = np.random.default_rng(seed)
    drawn = []
    for u, user in enumerate(users):
        gaps = rng.exponential(job_gap_s, user.jobs - 1) if job_gap_s > 0 \
            else np.zeros(user.jobs - 1)
        arrivals = np.concatenate([[0.0], np.cumsum(gaps)])
        lengths = user.mean_steps * rng.lognormal(-sigma * sigma / 2, sigma, user.jobs)
        drawn += [(float(int(a)), u, max(1, int(s))) for a, s in zip(arrivals, lengths,
                                                                    strict=True)]
    drawn.sort(key=lambda d: (d[0], d[1]))
    jobs = [TraceJob(index=i, job_type=users[u].job_type, total_steps=steps,
                     scale_factor=users[u].gpus, arrival_s=arrival, line=i + 1,
                     source="<generated>")
            for i, (arrival, u, steps) in enumerate(drawn)]
    return jobs, [f"user{u + 1}" for _, u, _ in drawn]


def generate_app_trace(source: Sequence[TraceJob], apps: int, jobs_per_app: float, *,
                       num_gpus: int, seed: int = 0, single_job_share: float = 0.1,
                       max_gpus: int = 2, sigma: float = 1.0,
                       app_gap_s: float | None = None) -> list[TraceJob]:
    """Apps of hyper-parameter trials, the THEMIS paper's unit of fairness (its Workload 1:
    Hyperdrive searches from Microsoft's trace, every job 1 or 2 GPUs): ``single_job_share``
    of the apps train one model (the paper: ~10 %), the others launch about
    ``jobs_per_app`` trials (Poisson, at least 2; the paper's median is 75 at full scale) of
    one source job (its model and gang, gangs of at most ``max_gpus``) at once, each trial
    stopped at its own point (steps × a log-normal factor of mean 1 and shape ``sigma``).
    Apps arrive as a Poisson process, by default at the per-GPU load of
    :func:`generate_trace` for a whole app. Each job's ``app`` is ``app007``; jobs are in
    arrival order (an app's trials in a row)."""
    pool = [j for j in source if j.scale_factor <= max_gpus]
    if apps < 1 or jobs_per_app < 2 or not pool:
        raise ValueError(f"need apps, >= 2 jobs per app and source jobs of <= {max_gpus} GPUs")
    if sigma < 0 or not 0 <= single_job_share <= 1:
        raise ValueError("sigma must be >= 0 and single_job_share within [0, 1]")
    rng = np.random.default_rng(seed)
    gap = app_gap_s if app_gap_s is not None else 40.0 * 32 / num_gpus * jobs_per_app
    starts = np.concatenate([[0.0], np.cumsum(rng.exponential(gap, apps - 1))])
    kinds = rng.integers(0, len(pool), apps)
    single = rng.random(apps) < single_job_share
    counts = np.where(single, 1, np.maximum(2, rng.poisson(jobs_per_app, apps)))
    jobs: list[TraceJob] = []
    for a in range(apps):
        factors = rng.lognormal(-sigma * sigma / 2, sigma, counts[a])
        base = pool[kinds[a]]
        for f in factors:
            jobs.append(replace(base, index=len(jobs), arrival_s=float(int(starts[a])),
                                total_steps=max(1, int(base.total_steps * f)),
                                duration_s=None if base.duration_s is None
                                else base.duration_s * float(f),
                                line=len(jobs) + 1, source="<generated>", app=f"app{a:03d}"))
    return jobs

"""Scheduling metrics on any job history: simulated runs and real clusters alike.

Finish-time fairness ρ_j = JCT_j / (T_isolated_j · contention) with two contention factors:
the artifact's static max(1, N/G) and Themis's mean of active jobs over the job's life / G.
ρ is rounded to 5 decimals as the artifact does, so threshold counts match exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

THRESHOLDS = (1.0, 1.05, 1.1)


@dataclass(frozen=True)
class JobOutcome:
    job_id: str
    arrival_s: float
    finish_s: float
    isolated_s: float
    gpus: int = 1
    avg_contention: float = math.nan
    failed: bool = False

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.arrival_s


@dataclass(frozen=True)
class Metrics:
    num_jobs: int
    makespan_s: float
    avg_jct_s: float
    p50_jct_s: float
    p90_jct_s: float
    p99_jct_s: float
    worst_rho: float
    mean_rho: float
    unfair_fraction: dict[str, float]
    worst_rho_themis: float
    unfair_fraction_themis: dict[str, float]
    jain: float
    utilization: float
    failed_jobs: int

    def as_dict(self) -> dict:
        return asdict(self)


def rho_static(outcomes: Sequence[JobOutcome], num_gpus: int) -> np.ndarray:
    factor = max(1.0, len(outcomes) / num_gpus)
    return np.array([round(o.jct_s / (o.isolated_s * factor), 5) for o in outcomes])


def rho_themis(outcomes: Sequence[JobOutcome]) -> np.ndarray:
    return np.array([round(o.jct_s / (o.isolated_s * max(1.0, o.avg_contention)), 5)
                     if not math.isnan(o.avg_contention) else math.nan for o in outcomes])


def unfair_fractions(rho: np.ndarray) -> dict[str, float]:
    """Share of jobs with ρ strictly above each threshold (0..1), keyed "1.0", "1.05", "1.1"."""
    valid = rho[~np.isnan(rho)]
    n = len(valid)
    return {str(t): (float(np.sum(valid > t)) / n if n else 0.0) for t in THRESHOLDS}


def jain_index(values: np.ndarray) -> float:
    values = values[~np.isnan(values)]
    if len(values) == 0 or not np.any(values):
        return math.nan
    return float(values.sum() ** 2 / (len(values) * np.square(values).sum()))


def compute_metrics(outcomes: Sequence[JobOutcome], num_gpus: int, makespan_s: float,
                    busy_gpu_s: float) -> Metrics:
    """Metrics of finished jobs; utilization = busy GPU time / (GPUs · makespan)."""
    if not outcomes:
        nan = math.nan
        empty = dict.fromkeys(map(str, THRESHOLDS), nan)
        return Metrics(0, makespan_s, nan, nan, nan, nan, nan, nan, empty, nan, empty, nan,
                       nan, 0)
    jct = np.array([o.jct_s for o in outcomes])
    rho = rho_static(outcomes, num_gpus)
    themis = rho_themis(outcomes)
    with np.errstate(divide="ignore"):
        inverse = np.where(rho > 0, 1.0 / rho, np.nan)
    p50, p90, p99 = np.percentile(jct, [50, 90, 99])
    return Metrics(
        num_jobs=len(outcomes), makespan_s=float(makespan_s), avg_jct_s=float(jct.mean()),
        p50_jct_s=float(p50), p90_jct_s=float(p90), p99_jct_s=float(p99),
        worst_rho=float(rho.max()), mean_rho=float(rho.mean()),
        unfair_fraction=unfair_fractions(rho),
        worst_rho_themis=float(np.nanmax(themis)) if np.any(~np.isnan(themis)) else math.nan,
        unfair_fraction_themis=unfair_fractions(themis),
        jain=jain_index(inverse),
        utilization=float(busy_gpu_s / (num_gpus * makespan_s)) if makespan_s > 0 else math.nan,
        failed_jobs=sum(o.failed for o in outcomes),
    )


def rho_apps(outcomes: Sequence[JobOutcome], app_of: Mapping[str, str],
             num_gpus: int) -> dict[str, float]:
    """THEMIS's finish-time fairness per app (its unit: a hyper-parameter search), over the
    finished jobs ``outcomes`` holds: ρ = T_sh / T_id, T_sh the app's time from its first
    arrival to its last finish, T_id its time alone with 1/N of the cluster — its trials'
    GPU-work (each alone on its gang) over G/N GPUs, but never less than its longest trial —
    with N the number of apps active on average over its life (itself included), as the
    paper's N_avg. A job missing from ``app_of`` is an app of its own."""
    spans: dict[str, list[float]] = {}
    for o in outcomes:
        app = app_of.get(o.job_id, o.job_id)
        span = spans.setdefault(app, [math.inf, -math.inf, 0.0, 0.0])
        span[0] = min(span[0], o.arrival_s)
        span[1] = max(span[1], o.finish_s)
        span[2] += o.isolated_s * o.gpus
        span[3] = max(span[3], o.isolated_s)
    names = list(spans)
    start = np.array([spans[a][0] for a in names])
    end = np.array([spans[a][1] for a in names])
    overlap = np.clip(np.minimum(end[:, None], end[None, :])
                      - np.maximum(start[:, None], start[None, :]), 0.0, None)
    length = end - start
    with np.errstate(divide="ignore", invalid="ignore"):
        contention = np.where(length > 0, overlap.sum(axis=1) / length, 1.0)
    out = {}
    for i, app in enumerate(names):
        work, longest = spans[app][2], spans[app][3]
        alone = max(longest, work * max(1.0, contention[i]) / num_gpus)
        out[app] = float(length[i] / alone) if alone > 0 else math.nan
    return out

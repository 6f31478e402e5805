"""Larger synthetic traces for scaling studies, drawn from a real trace's job mix.

Jobs (type, GPUs, adaptation mode, steps) are resampled from a source trace with replacement
and arrive as a Poisson process; the default inter-arrival scales the canonical trace's 40 s
on 32 GPUs to the target cluster, so load per GPU stays the same.
"""

from __future__ import annotations

from collections.abc import Sequence

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

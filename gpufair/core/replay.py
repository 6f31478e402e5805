"""Replay a job history: "as run" beside every chosen policy, in the simulator's metrics.

"As run" is computed from the history itself (what the resource manager achieved): each job's
wait is start − submit, its JCT end − submit, its isolated time the work of the neutral model
(``adapters/history/convert.py``), so ρ, JCT percentiles, utilization and the per-tenant
table mean the same for it as for a simulated policy. The policies run through the one
``simulate`` of ``gpufair simulate`` on a simulator built from the converted history.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from gpufair.adapters.history.convert import ReplayTrace, history_to_trace, work_steps
from gpufair.adapters.history.table import History
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import for_history, semantics_named
from gpufair.core.simulation import SimulationReport, SimulationSpec, simulate
from gpufair.metrics import JobOutcome, compute_metrics

AS_RUN = "as_run"
#: columns of the per-tenant table, one row per run and tenant
TENANT_COLUMNS = ("run", "tenant", "jobs", "finished", "mean_wait_s", "mean_jct_s",
                  "gpu_hours")


@dataclass
class ReplayResult:
    history: History
    replay: ReplayTrace
    runs: list[SimulationReport]       # "as run" first (if known), then the policies
    tenants: pd.DataFrame               # TENANT_COLUMNS


def replay(history: History, policies: Sequence[str], spec: SimulationSpec, *,
           cluster: str | None = None, gpus_per_server: str | None = None,
           progress: bool | None = None, time_limit_s: float | None = None,
           on_report: Callable[[SimulationReport], object] | None = None,
           capture: bool = False, round_phase_s: float | None = None) -> ReplayResult:
    """``spec`` carries the round, seed, semantics and config; its trace is ignored.
    ``on_report`` sees each run as it ends (``--json`` prints it then); ``capture``: keep
    what each run did, for a results directory (``--out``). ``round_phase_s``: the rounds
    begin this many seconds past a multiple of the round on the history's clock (epoch
    seconds; Slurm's backfill passes, for ``slurm_backfill``'s ``backfill_at_boundaries``),
    not at the arrival that finds the cluster idle."""
    converted = history_to_trace(history, cluster, gpus_per_server)
    semantics = for_history(semantics_named(spec.semantics))
    runs: list[SimulationReport] = []
    frames = []
    if history.starts_known:   # a trace without start times has no waits to measure
        as_run = as_run_report(history, converted, semantics.name)
        runs.append(as_run)
        frames.append(tenant_table(AS_RUN, *_as_run_columns(history)))
        if on_report is not None:
            on_report(as_run)
    phase = None if round_phase_s is None else (round_phase_s - history.t0) % spec.round_s
    for name in policies:
        sim = TraceSimulator(converted.trace, converted.throughputs, converted.nodes,
                             semantics, spec.round_s, capture=capture, round_phase_s=phase)
        report = simulate(replace(spec, policy=name, trace=history.source), progress=progress,
                          time_limit_s=time_limit_s, simulator=sim)
        runs.append(report)
        frames.append(tenant_table(report.policy, *_simulated_columns(sim)))
        if on_report is not None:
            on_report(report)
    return ReplayResult(history, converted, runs, pd.concat(frames, ignore_index=True))


def as_run_report(history: History, converted: ReplayTrace, semantics: str
                  ) -> SimulationReport:
    """What the resource manager did, measured as a simulation is."""
    jobs = history.jobs
    t0 = history.t0
    outcomes = [JobOutcome(job_id=job_id, arrival_s=submit - t0, finish_s=end - t0,
                           isolated_s=float(work_steps(attained)), gpus=gpus)
                for job_id, submit, end, attained, gpus in zip(
                    jobs["job_id"].tolist(), jobs["submit"].tolist(), jobs["end"].tolist(),
                    jobs["attained_s"].tolist(), jobs["gpus"].tolist(), strict=True)]
    makespan = float(jobs["end"].max() - t0)
    busy = float((jobs["attained_s"] * jobs["gpus"]).sum())
    metrics = compute_metrics(outcomes, converted.num_gpus, makespan, busy)
    return SimulationReport(policy=AS_RUN, semantics=semantics, metrics=metrics, wall_s=0.0,
                            policy_s=0.0, solver_s=0.0, solves=0, recomputes=0, rounds=0,
                            decisions=0, num_gpus=converted.num_gpus, busy_gpu_s=busy,
                            trace=history.source, trace_jobs=len(jobs), outcomes=outcomes)


def _as_run_columns(history: History) -> tuple[np.ndarray, ...]:
    jobs = history.jobs
    return (jobs["tenant"].to_numpy(), jobs["submit"].to_numpy(), jobs["start"].to_numpy(),
            jobs["end"].to_numpy(), (jobs["attained_s"] * jobs["gpus"]).to_numpy())


def _simulated_columns(sim: TraceSimulator) -> tuple[np.ndarray, ...]:
    def num(value: float | None) -> float:
        return math.nan if value is None else value
    return (np.array([j.trace.tenant for j in sim.jobs], dtype=object),
            np.array([j.arrival_s for j in sim.jobs]),
            np.array([num(j.start_s) for j in sim.jobs]),
            np.array([num(j.finish_s) for j in sim.jobs]),
            np.array([j.attained_s * j.sf for j in sim.jobs]))


def tenant_table(run: str, tenant: np.ndarray, submit: np.ndarray, start: np.ndarray,
                 end: np.ndarray, gpu_s: np.ndarray) -> pd.DataFrame:
    """One row per tenant: jobs, finished, mean wait (of started jobs), mean JCT (of
    finished ones) and GPU-hours held."""
    frame = pd.DataFrame({"tenant": tenant, "wait": start - submit, "jct": end - submit,
                          "gpu_hours": gpu_s / 3600.0})
    grouped = frame.groupby("tenant", sort=True)
    out = pd.DataFrame({"jobs": grouped.size(), "finished": grouped["jct"].count(),
                        "mean_wait_s": grouped["wait"].mean(),
                        "mean_jct_s": grouped["jct"].mean(),
                        "gpu_hours": grouped["gpu_hours"].sum()}).reset_index()
    out.insert(0, "run", run)
    return out[list(TENANT_COLUMNS)]

"""Simulated runs (``gpufair simulate`` / ``compare --out DIR``) as a results directory: each
policy's run is one run of the directory, its rows the simulator's capture."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpufair.adapters.simulator.capture import RunCapture
from gpufair.core.simulation import (
    DEMO_CLUSTER,
    DEMO_THROUGHPUTS,
    DEMO_TRACE,
    SimulationReport,
    SimulationSpec,
    bundled,
)
from gpufair.policy.gandiva_fair.tickets import water_fill
from gpufair.results.writer import ResultsWriter, input_file


def fair_shares(capacity: float, demand: Mapping[str, float]) -> dict[str, float]:
    """Each tenant's max-min fair GPUs: equal shares of ``capacity``, a tenant asking less
    keeping only its demand and leaving the rest to the others (water filling, the same
    computation Gandiva_fair's tickets use, with one ticket each). What a report sets a
    tenant's GPUs against: what it would hold if GPUs were split equally among the tenants
    that want them."""
    if capacity <= 0:   # (water_fill's effective tickets would divide by a zero level)
        return dict.fromkeys(demand, 0.0)
    shares, _ = water_fill(float(capacity), dict.fromkeys(demand, 1.0), demand)
    return {tenant: float(shares.get(tenant, 0.0)) for tenant in demand}


def tenant_rows(capture: RunCapture) -> list[tuple[float, str, float, float]]:
    """``tenants.csv``'s rows (without ``run``): each round's GPUs held, and fair share."""
    rows: list[tuple[float, str, float, float]] = []
    start = 0
    samples = capture.tenants
    while start < len(samples):
        end = start
        while end < len(samples) and samples[end][0] == samples[start][0]:
            end += 1
        shares = fair_shares(capture.capacity, {row[1]: row[3] for row in samples[start:end]})
        rows += [(t, tenant, gpus, shares[tenant]) for t, tenant, gpus, _ in
                 samples[start:end]]
        start = end
    return rows


def simulation_inputs(spec: SimulationSpec, t0: float) -> dict[str, Any]:
    """What ``meta.json`` records of the runs' inputs: the files by path and sha256 (the
    trace's sha256 is what keeps two traces' results from being mixed), every option."""
    trace = spec.trace or bundled(DEMO_TRACE)
    inputs: dict[str, Any] = {
        "trace": input_file(trace),
        "throughputs": input_file(spec.throughputs or bundled(DEMO_THROUGHPUTS)),
        "config": None if spec.config is None else input_file(spec.config),
        "cluster": spec.cluster or (DEMO_CLUSTER if spec.trace is None else "v100:32"),
        "t0": t0,
    }
    options = asdict(spec)
    for name in ("trace", "throughputs", "config", "cluster", "policy"):
        options.pop(name)
    return {**inputs, **options}


def write_simulations(out: str | os.PathLike[str], spec: SimulationSpec,
                      reports: Sequence[SimulationReport], *, kind: str,
                      command: Sequence[str]) -> Path:
    """One run per report (each captured: ``simulate(..., capture=True)``), in order."""
    first = reports[0].capture
    if first is None:
        raise ValueError("write_simulations needs runs simulated with capture=True")
    writer = ResultsWriter(out, kind=kind, command=command,
                           inputs=simulation_inputs(spec, first.t0))
    for report in reports:
        add_simulated_run(writer, report)
    return writer.commit()


def add_simulated_run(writer: ResultsWriter, report: SimulationReport,
                      job_ids: Sequence[str] | None = None) -> None:
    """One captured simulation as a run of ``writer``: its metrics, jobs, allocations and
    the cluster and tenants each round. ``job_ids`` names the trace's jobs by their index (a
    replay's history ids); without it they keep the trace's own."""
    capture = report.capture
    if capture is None:
        raise ValueError("a run written to a results directory is simulated with capture=True")

    def named(rows: Sequence[tuple]) -> Sequence[tuple]:
        return rows if job_ids is None else [(job_ids[int(r[0])], *r[1:]) for r in rows]
    writer.add_run(report.policy, report.as_dict())
    writer.add_rows("jobs", named(report.job_rows), run=report.policy)
    writer.add_rows("allocations", named(capture.allocations), run=report.policy)
    writer.add_rows("cluster", capture.cluster, run=report.policy)
    writer.add_rows("tenants", tenant_rows(capture), run=report.policy)

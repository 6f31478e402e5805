"""Simulated runs (``gpufair simulate`` / ``compare --out DIR``) as a results directory: each
policy's run is one run of the directory, its rows the simulator's capture."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpufair.core.simulation import (
    DEMO_CLUSTER,
    DEMO_THROUGHPUTS,
    DEMO_TRACE,
    SimulationReport,
    SimulationSpec,
    bundled,
)
from gpufair.results.writer import ResultsWriter, input_file


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
        capture = report.capture
        assert capture is not None
        writer.add_run(report.policy, report.as_dict())
        writer.add_rows("jobs", report.job_rows, run=report.policy)
        writer.add_rows("allocations", capture.allocations, run=report.policy)
        writer.add_rows("cluster", capture.cluster, run=report.policy)
        writer.add_rows("tenants", capture.tenants, run=report.policy)
    return writer.commit()

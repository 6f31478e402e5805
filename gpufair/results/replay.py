"""``gpufair replay --out DIR``: the history "as run" and each replayed policy as one results
directory (docs/FORMATS.md §9), so a replay renders as a report like a simulation.

The policies' rows are the simulator's capture, their job ids turned back into the history's
(the simulator numbers jobs by trace line). "As run" has no rounds: its ``cluster`` and
``tenants`` rows are taken at each submit, start and end of the history, which is when its
state changes; a requeued job has one allocation per incarnation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gpufair.metrics import rho_static
from gpufair.results.schema import AS_RUN
from gpufair.results.simulation import add_simulated_run, fair_shares
from gpufair.results.writer import ResultsWriter, input_file

if TYPE_CHECKING:
    from gpufair.core.replay import ReplayResult
    from gpufair.core.simulation import SimulationSpec


def write_replay(out: str | os.PathLike[str], result: ReplayResult, spec: SimulationSpec,
                 *, history_path: str, history_format: str, command: Sequence[str]) -> Path:
    history, converted = result.history, result.replay
    inputs: dict[str, Any] = {
        "history": input_file(history_path), "format": history_format,
        "tenant": history.tenant_key, "cluster": converted.cluster,
        "round_s": spec.round_s, "seed": spec.seed, "semantics": spec.semantics,
        "config": None if spec.config is None else input_file(spec.config),
        "t0": history.t0, "excluded": history.excluded,
        "merged_requeues": history.merged_requeues, "notes": list(converted.notes),
    }
    writer = ResultsWriter(out, kind="replay", command=command, inputs=inputs)
    ids = converted.job_ids
    for report in result.runs:
        if report.policy == AS_RUN:
            writer.add_run(report.policy, report.as_dict())
            for table, rows in as_run_tables(result, report).items():
                writer.add_rows(table, rows, run=AS_RUN)
            continue
        add_simulated_run(writer, report, ids)
    return writer.commit()


def as_run_tables(result: ReplayResult, report) -> dict[str, pd.DataFrame]:
    """``jobs``, ``allocations``, ``cluster`` and ``tenants`` rows of what the history did."""
    history, converted = result.history, result.replay
    jobs = history.jobs
    t0 = history.t0
    types = [n.gpu_type for n in converted.nodes]
    totals = {t: sum(n.gpus for n in converted.nodes if n.gpu_type == t)
              for t in dict.fromkeys(types)}
    only = types[0] if len(set(types)) == 1 else ""
    gpu_type = jobs["gpu_type"].where(jobs["gpu_type"] != "", only)
    submit, start, end = (jobs[c].to_numpy() - t0 for c in ("submit", "start", "end"))
    spans = [[(start[i], end[i])] if not isinstance(s, list) else
             [(a - t0, b - t0) for a, b in s] for i, s in enumerate(jobs["spans"].tolist())]
    owner = np.array([i for i, runs in enumerate(spans) for _ in runs], dtype=np.int64)
    held_from = np.array([a for runs in spans for a, _ in runs])
    held_to = np.array([b for runs in spans for _, b in runs])
    rho = rho_static(report.outcomes, report.num_gpus)
    job_rows = pd.DataFrame({
        "job_id": jobs["job_id"], "tenant": jobs["tenant"], "submit_s": submit,
        "start_s": start, "end_s": end, "wait_s": start - submit, "jct_s": end - submit,
        "gpus": jobs["gpus"], "gpu_types": gpu_type, "rho": rho, "outcome": "finished"})
    allocations = pd.DataFrame({"job_id": jobs["job_id"].to_numpy()[owner],
                                "start_s": held_from, "end_s": held_to,
                                "gpu_type": gpu_type.to_numpy()[owner],
                                "gpus": jobs["gpus"].to_numpy()[owner]})
    times = np.unique(np.concatenate([submit, start, end]))
    gpus = jobs["gpus"].to_numpy()
    cluster, tenants = [], []
    tenant = jobs["tenant"].to_numpy()
    capacity = float(sum(totals.values()))
    times = np.unique(np.concatenate([times, held_from, held_to]))
    alloc_gpus, alloc_tenant = gpus[owner], tenant[owner]
    kinds = gpu_type.to_numpy()
    for t in times:
        running = (held_from <= t) & (t < held_to)
        waiting = (submit <= t) & (t < start)
        for kind, total in totals.items():
            mine = (kinds == kind) | (kinds == "")
            cluster.append((t, kind, total, int(alloc_gpus[running & mine[owner]].sum()),
                            int((waiting & mine).sum())))
        active = (submit <= t) & (t < end)
        if active.any():
            held = pd.Series(alloc_gpus[running], index=alloc_tenant[running]
                             ).groupby(level=0).sum()
            demand = pd.Series(gpus[active], index=tenant[active]).groupby(level=0).sum()
            shares = fair_shares(capacity, demand.astype(float).to_dict())
            tenants += [(t, name, float(held.get(name, 0)), shares[name])
                        for name in demand.index]
    return {"jobs": job_rows, "allocations": allocations,
            "cluster": pd.DataFrame(cluster, columns=["t_s", "gpu_type", "total", "busy",
                                                      "queued_jobs"]),
            "tenants": pd.DataFrame(tenants, columns=["t_s", "tenant", "gpus",
                                                      "fair_share_gpus"])}

"""A history → the trace, throughputs and cluster the simulator runs (the one conversion).

The neutral model: a history says what each job did on what it had, nothing about how it
would run on other GPUs. So a job's work is its attained seconds on its own gang (one
"iteration" per second at rate 1), its gang is the GPUs it held, and it runs at that same rate
on any GPU type it may use: a job that asked for a type (``gres/gpu:a100``) only on that
type, an untyped one on every type of the cluster. No policy can then gain from
heterogeneity it cannot measure, and a policy's difference from "as run" is its ordering and
sharing alone.

Each job keeps its time limit and node count where the history gives them (``Timelimit``,
``NNodes``): a backfill policy plans with the one and places the job on exactly the other,
as Slurm did. A node count the cluster cannot give (GPUs not split evenly, too few nodes
large enough) is dropped, counted in the notes.

The cluster is ``--cluster`` when given; otherwise each GPU type's peak concurrent use in
the history (untyped use counted as the most used type, or ``gpu`` when none is typed), said
so in the notes: the smallest cluster on which the history as run fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpufair.adapters.history.table import History, peak_use
from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.throughputs import Throughputs
from gpufair.adapters.simulator.trace import TraceJob
from gpufair.model import Node

#: the job type of a history job: the prefix, then ":TYPE" when it asked for one
JOB_TYPE = "history"
#: the GPU type an untyped history's GPUs are given
UNTYPED = "gpu"


@dataclass(frozen=True)
class ReplayTrace:
    """What the simulator needs, plus the history job id of each trace index."""

    trace: list[TraceJob]
    throughputs: Throughputs
    nodes: tuple[Node, ...]
    cluster: str
    job_ids: list[str]
    notes: tuple[str, ...]

    @property
    def num_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)


def history_to_trace(history: History, cluster: str | None = None,
                     gpus_per_server: str | None = None) -> ReplayTrace:
    notes = list(history.notes)
    if cluster is None:
        cluster = inferred_cluster(history)
        notes.append(f"cluster inferred as each GPU type's peak concurrent use in the "
                     f"history: {cluster} (give --cluster for the real one)")
    nodes = parse_cluster_spec(cluster, gpus_per_server)
    types = tuple(dict.fromkeys(n.gpu_type for n in nodes))
    jobs = history.jobs
    t0 = history.t0
    trace: list[TraceJob] = []
    gangs: dict[str, set[int]] = {}
    unplaceable = 0
    placeable: dict[tuple[int, int, str], bool] = {}
    for index, (gpu_type, gpus, attained, submit, tenant, line, node_field, limit) in enumerate(zip(
            jobs["gpu_type"].tolist(), jobs["gpus"].tolist(), jobs["attained_s"].tolist(),
            jobs["submit"].tolist(), jobs["tenant"].tolist(), jobs["line"].tolist(),
            jobs["nodes"].tolist(), jobs["time_limit_s"].tolist(), strict=True)):
        job_type = f"{JOB_TYPE}:{gpu_type}" if gpu_type else JOB_TYPE
        gangs.setdefault(job_type, set()).add(gpus)
        node_count = None if math.isnan(node_field) else int(node_field)
        if node_count is not None:
            key = (gpus, node_count, gpu_type)   # few distinct requests: each checked once
            if key not in placeable:
                placeable[key] = fits_on_nodes(gpus, node_count, gpu_type, nodes)
            if not placeable[key]:
                node_count, unplaceable = None, unplaceable + 1
        trace.append(TraceJob(index=index, job_type=job_type,
                              total_steps=work_steps(attained), scale_factor=gpus,
                              arrival_s=submit - t0, line=line, source=history.source,
                              tenant=tenant, nodes=node_count,
                              time_limit_s=None if math.isnan(limit) else limit))
    if unplaceable:
        notes.append(f"{unplaceable} job(s) ran on a node count this cluster cannot give "
                     "them (GPUs not evenly split, or too few nodes with that many GPUs): "
                     "replayed on any nodes")
    rates: dict[str, dict[tuple[str, int], float]] = {t: {} for t in types}
    for job_type, sizes in gangs.items():
        asked = job_type.partition(":")[2]
        for gpu_type in types if not asked else [asked] if asked in types else []:
            rates[gpu_type].update({(job_type, gpus): 1.0 for gpus in sizes})
    notes.append("neutral model: each job does its attained seconds of work on its own GPU "
                 "count, at the same speed on any GPU type it may use")
    return ReplayTrace(trace=trace, throughputs=Throughputs(rates, {}, "(neutral model)"),
                       nodes=nodes, cluster=cluster, job_ids=jobs["job_id"].tolist(),
                       notes=tuple(notes))


def fits_on_nodes(gpus: int, node_count: int, gpu_type: str, nodes: tuple[Node, ...]
                  ) -> bool:
    """Whether ``node_count`` nodes of the cluster (of ``gpu_type``, any type when "") can
    hold the job's GPUs split evenly, as Slurm splits ``--gres`` per node. A job held to a
    node count it can never have would wait for ever, so such a job runs unconstrained."""
    if gpus % node_count:
        return False
    per_node = gpus // node_count
    by_type: dict[str, int] = {}
    for node in nodes:
        if node.gpus >= per_node and (not gpu_type or node.gpu_type == gpu_type):
            by_type[node.gpu_type] = by_type.get(node.gpu_type, 0) + 1
    return any(count >= node_count for count in by_type.values())


def work_steps(attained_s: float) -> int:
    """A job's work in the neutral model: its attained whole seconds (at least one, so a job
    that ran for no time still exists and has an isolated time to measure ρ by)."""
    return max(1, math.ceil(attained_s))


def inferred_cluster(history: History) -> str:
    """``TYPE:N,...`` from each type's peak concurrent use; untyped use counts as the most
    used type's (so a history of one GPU type that forgot to name it on some jobs fits)."""
    peaks = peak_use(history)
    untyped = peaks.pop("", 0)
    if not peaks:
        return f"{UNTYPED}:{max(1, untyped)}"
    busiest = max(peaks, key=lambda t: (peaks[t], t))
    peaks[busiest] += untyped
    return ",".join(f"{t}:{max(1, n)}" for t, n in sorted(peaks.items()))

"""A dry run (``gpufair dry-run --out DIR``) as a results directory: which job holds which GPU
on each node now and after the planned actions (``nodes.csv``), and each action with its
reason (``actions.csv``). One run, named after the policy."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpufair.model import Action, ClusterState, Preempt, SetPriority
from gpufair.model.records import gpu_id, node_of
from gpufair.results.writer import ResultsWriter

#: ``nodes.csv``'s ``job_id`` of a GPU that something gpufair does not schedule holds
NOT_OURS = "(not gpufair's)"


def holders_before(state: ClusterState) -> dict[str, str]:
    """GPU id → the active job holding it, as the snapshot shows."""
    return {gpu: job.id for job in state.active_jobs() for gpu in job.gpus_held}


def holders_after(before: Mapping[str, str], actions: Iterable[Action]) -> dict[str, str]:
    """``before`` with the actions carried out in order: a preempted job lets go of its GPUs,
    a started, resumed, moved or resized one holds exactly the GPUs its action names. A
    priority (soft mode) moves nothing: Slurm places the job later."""
    after = dict(before)
    for action in actions:
        if isinstance(action, SetPriority):
            continue
        after = {g: j for g, j in after.items() if j != action.job_id}
        if not isinstance(action, Preempt):
            after.update(dict.fromkeys(action.gpu_ids, action.job_id))
    return after


def node_rows(state: ClusterState, phase: str, holders: Mapping[str, str]) -> list[tuple]:
    rows = []
    for node in state.nodes:
        unavailable = set(node.unavailable)
        for index in range(node.gpus):
            holder = NOT_OURS if index in unavailable else holders.get(gpu_id(node.name,
                                                                               index), "")
            rows.append((phase, node.name, node.gpu_type, index, holder))
    return rows


def action_rows(state: ClusterState, actions: Sequence[Action], reasons: Mapping[str, str],
                held_back: Sequence[tuple[Action, str]] = ()) -> list[tuple]:
    """One row per action and node it touches (a gang over two nodes: two rows), then the
    actions the guards held back, named ``… (held back)`` with the guard's reason."""
    gpu_type = {g: n.gpu_type for n in state.nodes for g in n.gpu_ids()}
    held = {j.id: j.gpus_held for j in state.jobs}
    rows = []
    for action, reason, suffix in [*((a, reasons.get(a.job_id, ""), "") for a in actions),
                                   *((a, r, " (held back)") for a, r in held_back)]:
        name = type(action).__name__.lower() + suffix
        gpus = held.get(action.job_id, ()) if isinstance(action, Preempt) else \
            getattr(action, "gpu_ids", ())
        by_node: dict[str, list[str]] = {}
        for gpu in gpus:
            by_node.setdefault(node_of(gpu), []).append(gpu)
        if not by_node:
            rows.append((0.0, action.job_id, name, "", 0, "", reason))
        for node, ids in by_node.items():
            rows.append((0.0, action.job_id, name, node, len(ids), gpu_type.get(ids[0], ""),
                         reason))
    return rows


def write_dry_run(out: str | os.PathLike[str], *, policy: str, state: ClusterState,
                  actions: Sequence[Action], reasons: Mapping[str, str],
                  held_back: Sequence[tuple[Action, str]], metrics: Mapping[str, Any],
                  inputs: Mapping[str, Any], command: Sequence[str]) -> Path:
    writer = ResultsWriter(out, kind="dry-run", command=command,
                           inputs={**inputs, "t0": state.time_s})
    writer.add_run(policy, metrics)
    writer.add_rows("actions", action_rows(state, actions, reasons, held_back), run=policy)
    before = holders_before(state)
    writer.add_rows("nodes", node_rows(state, "before", before)
                    + node_rows(state, "after", holders_after(before, actions)))
    return writer.commit()

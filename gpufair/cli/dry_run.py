"""``gpufair dry-run``: what a policy would do with a saved cluster state, and why.

Input is a gpufair snapshot or raw ``squeue --json`` + ``sinfo --json`` files. Nothing is
applied and nothing reads the clock: the policy's "now" is the snapshot's time (or, for raw
Slurm files, the latest timestamp in them), so the same input, policy and seed print the same
bytes every time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufair.adapters.slurm.translate import translate
from gpufair.core.actions import plan_actions
from gpufair.core.enrich import with_default_profiles
from gpufair.errors import InputError
from gpufair.model import (
    ClusterState,
    JobState,
    Migrate,
    Plan,
    Preempt,
    Resize,
    Resume,
    Start,
)
from gpufair.model.snapshot import load_snapshot
from gpufair.policy.base import Policy


@dataclass(frozen=True)
class Decision:
    job_id: str
    tenant: str
    state: str
    gpus: int
    now_on: str
    decision: str
    planned_on: str
    why: str


def load_state(snapshot: str | None, squeue: str | None = None, sinfo: str | None = None,
               managed_partitions: tuple[str, ...] = ()) -> ClusterState:
    if snapshot is not None:
        return load_snapshot(snapshot)
    if squeue is None or sinfo is None:
        raise InputError("dry-run", "give a snapshot file, or both --squeue and --sinfo")
    jobs = _read_json(squeue, "jobs")
    nodes = _read_json(sinfo, "nodes")
    view = translate(jobs, nodes, now=_latest_time(jobs), managed_partitions=managed_partitions,
                     source=squeue)
    return view.state


def _read_json(path: str, key: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from exc
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise InputError(path, f"expected the output of {'squeue' if key == 'jobs' else 'sinfo'}"
                         f" --json (an object with a {key!r} list)", field=key)
    return data


def _latest_time(doc: Mapping[str, Any]) -> float:
    """The newest event in the document (a pending job's start_time is a forecast: skipped)."""
    keys = ("submit_time", "start_time", "suspend_time")
    times = [0.0]
    for job in doc.get("jobs", ()):
        if not isinstance(job, dict):
            continue
        for key in keys[:1] if job.get("job_state") == "PENDING" else keys:
            value = job.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                times.append(float(value))
    return max(times)


def decide(state: ClusterState, policy: Policy) -> tuple[Plan, list[Decision]]:
    state = with_default_profiles(state)
    plan = policy.schedule(state, state.time_s)
    actions = {a.job_id: a for a in plan_actions(state, plan)}
    placed = plan.by_job()
    ranked = sorted(plan.priorities.items(), key=lambda kv: (-kv[1], kv[0]))
    rank = {job_id: i + 1 for i, (job_id, _) in enumerate(ranked)}
    free_after = _free_gpus(state, plan)
    rows = []
    for job in state.active_jobs():
        action = actions.get(job.id)
        assignment = placed.get(job.id)
        order = f"rank {rank[job.id]}/{len(rank)}" if job.id in rank else "unranked"
        if isinstance(action, Start):
            decision, why = "start", f"{order}; placed by {policy.name}"
        elif isinstance(action, Resume):
            decision, why = "resume", f"{order}; placed by {policy.name}"
        elif isinstance(action, Preempt):
            decision, why = "preempt", f"{order}; its GPUs go to higher-ranked jobs"
        elif isinstance(action, (Migrate, Resize)):
            decision = type(action).__name__.lower()
            why = f"{order}; the plan gives it {assignment.size if assignment else 0} GPUs " \
                  "elsewhere"
        elif assignment is not None:
            decision, why = "keep", f"{order}; stays where it runs"
        elif job.state is JobState.SUSPENDED:
            decision, why = "stay suspended", f"{order}; not in the plan"
        else:
            decision = "wait"
            why = f"{order}; asks {job.gpus} GPUs, {free_after} free after the plan"
        rows.append(Decision(job.id, job.tenant, job.state.value, job.gpus,
                             _nodes(job.gpus_held), decision,
                             _nodes(assignment.gpu_ids) if assignment else "", why))
    return plan, rows


def _free_gpus(state: ClusterState, plan: Plan) -> int:
    return state.gpu_count() - sum(a.size for a in plan.assignments)


def _nodes(gpu_ids: tuple[str, ...]) -> str:
    counts: dict[str, int] = {}
    for gpu in gpu_ids:
        node = gpu.rpartition(":")[0]
        counts[node] = counts.get(node, 0) + 1
    return ",".join(f"{n}:{c}" for n, c in counts.items())


def render_json(policy: str, state: ClusterState, plan: Plan, rows: list[Decision]) -> str:
    data = {"policy": policy, "time_s": state.time_s, "reason": plan.reason,
            "gpus": state.gpu_count(),
            "jobs": [row.__dict__ for row in rows]}
    return json.dumps(data, sort_keys=True, indent=2)


def render_table(policy: str, state: ClusterState, plan: Plan, rows: list[Decision]) -> str:
    header = ("job", "tenant", "state", "gpus", "now on", "decision", "planned on", "why")
    cells = [header] + [(r.job_id, r.tenant, r.state, str(r.gpus), r.now_on or "-", r.decision,
                         r.planned_on or "-", r.why) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header) - 1)]
    lines = [f"policy {policy} at t={state.time_s:g} on {state.gpu_count()} GPUs: "
             f"{plan.reason} (dry run: nothing applied)"]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True))
                     + "  " + row[-1])
    return "\n".join(lines)

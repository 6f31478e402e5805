"""The shadow period in figures, from the daemon's store (docs/shadow.md).

A shadow round ``i`` at time ``t_i`` holds what the resource manager showed (each active job:
state, GPUs asked and held, tenant; the usable GPUs per type) and gpufair's plan for it. Each
figure counts the interval from one shadow round to the next, ``[t_i, t_{i+1})``, as the
round saw it (the last round opens no interval):

- **idle GPU-seconds while a job that fit waited**: ``(t_{i+1} - t_i) · idle_i`` over the
  rounds where some waiting job asked at most ``idle_i`` GPUs, ``idle_i`` being the usable GPUs
  no job held. A count, not a placement: a job that fits the idle GPUs only across nodes it
  may not span is counted too (an upper bound of the waste).
- **each tenant's GPUs against the policy's share**: per round, the GPUs the tenant's jobs
  held, and the GPUs gpufair's plan gave them; time-weighted means over the period.
- **jobs gpufair would have started earlier**: a job the plan placed at a round where the
  resource manager still had it waiting, by ``start - t`` (its start as the resource manager
  reported it, or the period's end for a job that never started: a lower bound).
- **preemptions gpufair would have made**: its would-be preemptions, moves and resizes, each
  counted once (by its action key: one run of one job), though its plan asks for it again
  every round the resource manager does not make it; ``actions.csv`` lists every round's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufair.plugin.store import Store
from gpufair.results import OBSERVED, ResultsWriter

STOPS = ("Preempt", "Migrate", "Resize")


@dataclass
class ShadowFigures:
    """The period's figures; times in seconds from the first shadow round (``t0``)."""

    t0: float
    period_s: float
    rounds: int
    policy: str
    idle_gpu_s_while_fit_waited: float = 0.0
    tenants: list[dict[str, Any]] = field(default_factory=list)      # tenants.csv rows
    tenant_means: dict[str, tuple[float, float]] = field(default_factory=dict)
    earlier: dict[str, float] = field(default_factory=dict)         # job → seconds earlier
    jobs: list[dict[str, Any]] = field(default_factory=list)         # jobs.csv rows
    actions: list[dict[str, Any]] = field(default_factory=list)      # actions.csv rows
    cluster: list[dict[str, Any]] = field(default_factory=list)      # cluster.csv rows

    #: the would-be preemptions, moves and resizes, each once: a plan asks again every round
    #: for a stop the resource manager never made (the same action key: the same job's run)
    stops: set[str] = field(default_factory=set)

    @property
    def preemptions(self) -> int:
        return len(self.stops)

    def metrics(self) -> dict[str, dict[str, float]]:
        """Per run: what the resource manager did (``slurm``), what gpufair would have."""
        return {
            OBSERVED: {"period_s": self.period_s, "rounds": self.rounds,
                       "idle_gpu_s_while_fit_waited": self.idle_gpu_s_while_fit_waited},
            self.policy: {"would_start_earlier_jobs": len(self.earlier),
                          "would_start_earlier_s": sum(self.earlier.values()),
                          "would_preempt": self.preemptions},
        }


def figures(store: Store) -> ShadowFigures:
    """Everything the report shows, from the store of a shadow run."""
    jobs, gpus = store.shadow_rows()
    if not gpus:
        raise ValueError("the store holds no shadow round (gpufair serve --shadow records "
                         "them)")
    times: dict[int, float] = {}
    totals: dict[int, dict[str, int]] = defaultdict(dict)
    for row in gpus:
        times[row["round_id"]] = row["t_s"]
        totals[row["round_id"]][row["gpu_type"]] = row["total"]
    order = sorted(times)
    seen: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in jobs:
        seen[row["round_id"]].append(row)
    plans = store.plans()
    policy = _policy(store, order)
    t0, end = times[order[0]], times[order[-1]]
    out = ShadowFigures(t0, end - t0, len(order), policy)
    planned_at: dict[str, float] = {}
    sizes: dict[str, int] = {}
    for i, round_id in enumerate(order):
        t = times[round_id]
        dt = times[order[i + 1]] - t if i + 1 < len(order) else 0.0
        here = seen[round_id]
        placed = {j: len(g) for j, g in plans.get(round_id, {}).get("assignments", {}).items()}
        total = sum(totals[round_id].values())
        held = sum(r["held"] for r in here)
        idle = max(0, total - held)
        waiting = [r for r in here if r["state"] == "pending"]
        if dt and any(r["gpus"] <= idle for r in waiting):
            out.idle_gpu_s_while_fit_waited += dt * idle
        out.cluster.append({"t_s": t - t0, "gpu_type": "all", "total": total, "busy": held,
                            "queued_jobs": len(waiting)})
        by_tenant: dict[str, list[float]] = {}
        for r in here:
            mine = by_tenant.setdefault(r["tenant"], [0.0, 0.0])
            mine[0] += r["held"]
            mine[1] += placed.get(r["job_id"], 0)
            sizes[r["job_id"]] = r["gpus"]
            if r["state"] == "pending" and r["job_id"] in placed:
                planned_at.setdefault(r["job_id"], t)
        for tenant, (have, share) in sorted(by_tenant.items()):
            out.tenants.append({"t_s": t - t0, "tenant": tenant, "gpus": have,
                                "fair_share_gpus": share})
            mean = out.tenant_means.get(tenant, (0.0, 0.0))
            out.tenant_means[tenant] = (mean[0] + have * dt, mean[1] + share * dt)
    if out.period_s > 0:
        out.tenant_means = {k: (a / out.period_s, b / out.period_s)
                            for k, (a, b) in out.tenant_means.items()}
    _jobs(out, jobs, planned_at, sizes, end)
    _actions(out, store, set(order), times)
    return out


def _policy(store: Store, order: Sequence[int]) -> str:
    rounds = {r["id"]: r["policy"] for r in store.rounds()}
    names = sorted({rounds[r] for r in order if r in rounds})
    return names[0] if len(names) == 1 else "+".join(names) or "gpufair"


def _jobs(out: ShadowFigures, rows: Sequence[Mapping[str, Any]],
          planned_at: Mapping[str, float], sizes: Mapping[str, int], end: float) -> None:
    """Each job as the resource manager ran it, and as gpufair would have started it."""
    first: dict[str, Mapping[str, Any]] = {}
    last: dict[str, Mapping[str, Any]] = {}
    started: dict[str, float] = {}
    for r in rows:
        first.setdefault(r["job_id"], r)
        last[r["job_id"]] = r
        if r["state"] != "pending" and r["start_s"] is not None:
            started.setdefault(r["job_id"], r["start_s"])
    final = max(r["round_id"] for r in rows) if rows else None
    t0 = out.t0
    for job_id, r in first.items():
        submit = r["arrival_s"] if r["arrival_s"] is not None else r["t_s"]
        start = started.get(job_id)
        still = last[job_id]["round_id"] == final
        outcome = "never_started" if start is None else "unfinished" if still else "finished"
        out.jobs.append(_job_row(OBSERVED, job_id, r["tenant"], submit - t0, start, t0,
                                 sizes[job_id], outcome))
        plan = planned_at.get(job_id)
        if plan is not None and (start if start is not None else end) > plan:
            out.earlier[job_id] = (start if start is not None else end) - plan
        mine = plan if plan is not None and (start is None or plan < start) else start
        out.jobs.append(_job_row(out.policy, job_id, r["tenant"], submit - t0, mine, t0,
                                 sizes[job_id], "never_started" if mine is None else
                                 "unfinished"))


def _job_row(run: str, job_id: str, tenant: str, submit_s: float, start: float | None,
             t0: float, gpus: int, outcome: str) -> dict[str, Any]:
    start_s = None if start is None else start - t0
    return {"run": run, "job_id": job_id, "tenant": tenant, "submit_s": submit_s,
            "start_s": start_s, "end_s": None,
            "wait_s": None if start_s is None else start_s - submit_s, "jct_s": None,
            "gpus": gpus, "gpu_types": "", "rho": None, "outcome": outcome}


def _actions(out: ShadowFigures, store: Store, rounds: set[int],
             times: Mapping[int, float]) -> None:
    for entry in store.journal():
        if entry.round_id not in rounds:
            continue
        action = entry.action
        if type(action).__name__ in STOPS:
            out.stops.add(entry.key or f"{entry.round_id}:{entry.seq}")
        gpus = tuple(getattr(action, "gpu_ids", ()))
        nodes = sorted({g.rsplit(":", 1)[0] for g in gpus})
        out.actions.append({"t_s": times[entry.round_id] - out.t0, "job_id": action.job_id,
                            "action": type(action).__name__, "node": ",".join(nodes),
                            "gpus": len(gpus), "gpu_type": "", "reason": ""})


def write(out_dir: str | Path, shadow: ShadowFigures, *, command: Sequence[str],
          store_path: str) -> Path:
    """The results directory of the shadow period (kind ``shadow``): runs ``slurm`` (what the
    resource manager did) and the policy (what gpufair would have done)."""
    writer = ResultsWriter(out_dir, kind="shadow", command=command,
                           inputs={"store": store_path, "t0": shadow.t0,
                                   "policy": shadow.policy})
    metrics = shadow.metrics()
    writer.add_run(OBSERVED, metrics[OBSERVED])
    writer.add_run(shadow.policy, metrics[shadow.policy])
    writer.add_rows("jobs", shadow.jobs)
    writer.add_rows("cluster", shadow.cluster, run=OBSERVED)
    writer.add_rows("tenants", shadow.tenants, run=OBSERVED)
    writer.add_rows("actions", shadow.actions, run=shadow.policy)
    return writer.commit()


def summary(shadow: ShadowFigures) -> str:
    """The figures for people (what ``gpufair shadow-report`` prints)."""
    lines = [f"shadow period: {shadow.period_s:.0f} s, {shadow.rounds} rounds, policy "
             f"{shadow.policy}",
             f"idle GPU-seconds while a job that fit waited: "
             f"{shadow.idle_gpu_s_while_fit_waited:.0f}",
             "tenant GPUs (mean held by the resource manager / mean the policy gave):"]
    for tenant, (have, share) in sorted(shadow.tenant_means.items()):
        lines.append(f"  {tenant}: {have:.2f} / {share:.2f}")
    lines.append(f"jobs gpufair would have started earlier: {len(shadow.earlier)}"
                 + (f", by {sum(shadow.earlier.values()):.0f} s in all" if shadow.earlier
                    else ""))
    for job_id, by in sorted(shadow.earlier.items(), key=lambda kv: -kv[1]):
        lines.append(f"  job {job_id}: {by:.0f} s earlier")
    lines.append(f"preemptions gpufair would have made: {shadow.preemptions}")
    return "\n".join(lines)

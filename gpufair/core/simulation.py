"""Run one policy on one trace in the simulator and measure it: what `gpufair simulate` does."""

from __future__ import annotations

import gc
import math
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from gpufair.adapters.simulator.capture import RunCapture
from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import DroppedJob, TraceSimulator
from gpufair.adapters.simulator.semantics import semantics_named
from gpufair.adapters.simulator.throughputs import load_throughputs
from gpufair.adapters.simulator.trace import load_trace
from gpufair.core.config import DEFAULT_ROUND_S, load_config
from gpufair.core.round import Round
from gpufair.metrics import JobOutcome, Metrics, rho_static
from gpufair.policy.registry import create_policy, resolve_policy

DEMO_TRACE = "demo_60jobs_16gpus.trace"
DEMO_THROUGHPUTS = "tacc_throughputs_v100.json"
DEMO_CLUSTER = "v100:16"


def bundled(name: str) -> Path:
    return Path(str(resources.files("gpufair") / "data" / name))


@dataclass(frozen=True)
class SimulationSpec:
    trace: str | None = None
    throughputs: str | None = None
    cluster: str | None = None
    gpus_per_server: str | None = None
    policy: str = "max_min"
    round_s: float = DEFAULT_ROUND_S
    seed: int = 0
    semantics: str = "clean"
    config: str | None = None
    elastic: bool = False                    # trace jobs may run on 1..scale factor GPUs
    resize_overhead_s: float | None = None   # None: the semantics' restart overhead
    elastic_max: int | None = None           # elastic jobs' max GPUs when above their request
    #: the policy's options as a table (a sweep cell's); they take the place of any the
    #: config file gives that policy
    policy_options: Mapping[str, Any] | None = None


@dataclass
class SimulationReport:
    policy: str
    semantics: str
    metrics: Metrics
    wall_s: float
    policy_s: float
    solver_s: float
    solves: int
    recomputes: int
    rounds: int
    decisions: int
    num_gpus: int
    busy_gpu_s: float
    dropped: list[DroppedJob] = field(default_factory=list)
    trace: str = ""
    #: the wall-time budget ran out first: the metrics cover the jobs finished by then
    partial: bool = False
    trace_jobs: int = 0
    #: wall seconds of each policy decision (one per round or event the policy saw)
    decision_s: list[float] = field(default_factory=list)
    #: decisions counted but not made (a fill-only event that can start nothing, for a
    #: policy that need not see it): ``len(decision_s) == decisions - skipped_decisions``
    skipped_decisions: int = 0
    #: elastic runs only: resizes carried out
    resizes: int = 0
    elastic: bool = False
    #: per-job outcomes of the finished jobs, for analyses the summary metrics cannot answer
    #: (which job set the worst ρ, leaving out the failure path); not part of ``as_dict``
    outcomes: list[JobOutcome] = field(default_factory=list, repr=False)
    #: ``simulate(..., capture=True)`` only: what the run did (allocations, the cluster and
    #: the tenants each round) and one ``jobs.csv`` row per trace job, for ``--out``
    capture: RunCapture | None = field(default=None, repr=False)
    job_rows: list[tuple] = field(default_factory=list, repr=False)

    def decision_percentile(self, q: float) -> float:
        """The q-th percentile of the decision times (NaN before any decision)."""
        return float(np.percentile(self.decision_s, q)) if self.decision_s else math.nan

    def as_dict(self) -> dict[str, Any]:
        m = self.metrics
        out: dict[str, Any] = {
            "policy": self.policy, "semantics": self.semantics, "trace": self.trace,
            "num_jobs": m.num_jobs, "num_gpus": self.num_gpus,
            "makespan_s": m.makespan_s, "avg_jct_s": m.avg_jct_s, "p50_jct_s": m.p50_jct_s,
            "p90_jct_s": m.p90_jct_s, "p99_jct_s": m.p99_jct_s, "worst_rho": m.worst_rho,
            "mean_rho": m.mean_rho, "unfair_fraction": m.unfair_fraction,
            "worst_rho_themis": m.worst_rho_themis,
            "unfair_fraction_themis": m.unfair_fraction_themis, "jain": m.jain,
            "utilization": m.utilization, "failed_jobs": m.failed_jobs,
            "rounds": self.rounds, "decisions": self.decisions, "recomputes": self.recomputes,
            "solves": self.solves, "wall_s": self.wall_s, "policy_s": self.policy_s,
            "solver_s": self.solver_s, "partial": self.partial, "trace_jobs": self.trace_jobs,
            "dropped_jobs": [{"index": d.index, "line": d.line, "reason": d.reason}
                             for d in self.dropped],
        }
        if self.elastic:   # only then: rigid runs keep their recorded output to the byte
            out["elastic"] = True
            out["resizes"] = self.resizes
        return out


def build_simulator(spec: SimulationSpec, *, capture: bool = False) -> TraceSimulator:
    trace_path = spec.trace or bundled(DEMO_TRACE)
    throughputs_path = spec.throughputs or bundled(DEMO_THROUGHPUTS)
    cluster = spec.cluster or (DEMO_CLUSTER if spec.trace is None else "v100:32")
    semantics = semantics_named(spec.semantics)
    nodes = parse_cluster_spec(cluster, spec.gpus_per_server)
    return TraceSimulator(load_trace(trace_path), load_throughputs(throughputs_path), nodes,
                          semantics, spec.round_s, elastic=spec.elastic,
                          resize_overhead_s=spec.resize_overhead_s,
                          elastic_max=spec.elastic_max, capture=capture)


def simulate(spec: SimulationSpec, *, progress: bool | None = None,
             time_limit_s: float | None = None, capture: bool = False,
             simulator: TraceSimulator | None = None) -> SimulationReport:
    """Simulate ``spec``; ``progress`` None shows a bar (on stderr) only when both stdout and
    stderr are terminals: a user watching, not a script reading the output.

    ``time_limit_s``: wall seconds (setup included) after which the run stops at the next
    decision and reports what finished, marked partial, rather than running on unbounded:
    a long run then always leaves its numbers behind.

    ``capture``: also keep what the run did, job by job and round by round (``--out``);
    the decisions and the metrics are the same with or without it.

    ``simulator``: one built by the caller (a replayed history's trace, which is no file) in
    place of the one ``spec`` names (``capture`` is then the caller's to set on it); the
    caller keeps it to read its jobs after the run."""
    started = time.perf_counter()
    sim = build_simulator(spec, capture=capture) if simulator is None else simulator
    semantics = sim.semantics
    config = load_config(spec.config)
    if spec.policy_options is not None:
        config = replace(config, policy_json=dict(spec.policy_options))
    name = resolve_policy(spec.policy)
    policy = create_policy(name, config.policy_config(
        name, round_s=spec.round_s, seed=spec.seed,
        recompute_interval_s=semantics.allocation_recompute_interval_s,
        default_backend=semantics.lp_backend, preempt_cost_s=semantics.restart_overhead_s))
    rounds = Round(policy)
    bar = _progress_bar(len(sim.jobs), name, progress)
    decisions: list[float] = []
    finished = run_to_end(sim, rounds, None if bar is None else
                          lambda: bar.update(sum(j.finished for j in sim.jobs) - bar.n),
                          deadline=None if time_limit_s is None else started + time_limit_s,
                          decision_times=decisions)
    if bar is not None:
        bar.close()
    wall = time.perf_counter() - started
    metrics = sim.metrics()
    stats = getattr(policy, "stats", None)
    outcomes = sim.outcomes()
    job_rows: list[tuple] = []
    if sim.capture is not None:
        sim.capture.finish(sim.now)
        rho = dict(zip([o.job_id for o in outcomes], rho_static(outcomes, sim.num_gpus).tolist(),
                       strict=True)) if outcomes else {}
        job_rows = sim.capture.job_rows(sim.jobs, sim.dropped_jobs, rho)
    return SimulationReport(
        policy=name, semantics=semantics.name, metrics=metrics, wall_s=wall,
        policy_s=rounds.policy_s, solver_s=getattr(stats, "solver_s", 0.0),
        solves=getattr(stats, "solves", 0), recomputes=getattr(stats, "recomputes", 0),
        rounds=sim.rounds, decisions=rounds.decisions, skipped_decisions=rounds.skipped,
        num_gpus=sim.num_gpus,
        busy_gpu_s=sim.busy_gpu_s, dropped=list(sim.dropped),
        trace=str(spec.trace or f"(bundled) {DEMO_TRACE}"), partial=not finished,
        trace_jobs=len(sim.jobs), decision_s=decisions, resizes=sim.resizes(),
        elastic=sim.elastic, outcomes=outcomes, capture=sim.capture, job_rows=job_rows)


def run_to_end(sim: TraceSimulator, rounds: Round,
               after_decision: Callable[[], object] | None = None, *,
               deadline: float | None = None,
               decision_times: list[float] | None = None) -> bool:
    """The round loop on the virtual clock: decide (preempting only at round boundaries,
    filling idle GPUs between them), then let the simulated cluster run to the next event.

    Returns False when ``deadline`` (a ``time.perf_counter()`` value) passed before the trace
    finished: the loop stops after the step in progress, so the simulator's state is a
    consistent point of the run. ``decision_times`` receives each decision's wall seconds.
    """
    with fewer_collections():
        return _run(sim, rounds, after_decision, deadline, decision_times)


#: Young-generation threshold of the garbage collector while a simulation runs
SIMULATION_GC_THRESHOLD = 20_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's young-generation threshold for the duration (restored after).

    A decision builds hundreds of short-lived containers (records, keys, allocation rows)
    that reference counting frees; at Python's default of 700 they still trigger a young
    collection at almost every decision and, through promotions, full collections of the
    whole heap — about 8 % of a 900-job LP-baseline simulation. Nothing else changes: every
    object is freed as before, and cyclic garbage is collected a little later.
    """
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, SIMULATION_GC_THRESHOLD), *older)
    try:
        yield
    finally:
        gc.set_threshold(young, *older)


def _run(sim: TraceSimulator, rounds: Round, after_decision: Callable[[], object] | None,
         deadline: float | None, decision_times: list[float] | None) -> bool:
    skips = not getattr(rounds.policy, "observes_every_event", True)
    # (a policy that says it must see every event is shown every round too)
    holds_for = getattr(rounds.policy, "plan_holds_for_s", None) if skips else None
    settled_at = None   # sim.changes when a preemptive decision last found nothing to do
    settled_until = -math.inf   # and till when its plan stands with nothing else changed
    while not sim.finished:
        if deadline is not None and time.perf_counter() >= deadline:
            return False
        if settled_at == sim.changes and sim.at_round_boundary and sim.now < settled_until:
            # nothing the plan depends on changed since a round's plan asked for no action,
            # and the policy says the clock and progress alone do not move it yet: this one
            # would be the same plan, and ask for none (issue 31: on a full cluster most
            # rounds of a long history pass so, each a walk over thousands of waiting jobs)
            rounds.skip()
            sim.advance()
            continue
        if skips and not sim.at_round_boundary and not sim.may_start_any():
            # a fill-only decision where no waiting job fits the idle GPUs starts nothing
            # whatever the plan (between boundaries the diff only starts jobs on idle GPUs),
            # and this policy need not see it: counted, not made (issue 15: 40 % of them)
            rounds.skip()
            sim.advance()
            continue
        began = time.perf_counter()
        preemptive = sim.at_round_boundary
        state = sim.snapshot()
        result = rounds.run(state, preemptive=preemptive)
        if decision_times is not None:
            decision_times.append(time.perf_counter() - began)
        if result.actions:
            sim.apply(result.actions)
        if holds_for is not None:
            settled = preemptive and not result.actions
            settled_at = sim.changes if settled else None
            settled_until = state.time_s + holds_for(result.state) if settled else -math.inf
        if after_decision is not None:
            after_decision()
        sim.advance()
    return True


def _progress_bar(total: int, name: str, enabled: bool | None):
    if enabled is None:
        enabled = sys.stdout.isatty() and sys.stderr.isatty()
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=f"simulating {name}", unit="job", leave=False)

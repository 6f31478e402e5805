"""OEF: simulated throughput, JCT and tenant fairness against max_min (and gandiva_fair when
it is registered), LP solve times, and per-round times.

    python bench/bench_oef.py [--parts sim,steady,lp,round] [--trace PATH]
                              [--cluster v100:8,p100:8,k80:8] [--time-limit 600]

* ``sim``: an MSR (Philly VC) trace on a heterogeneous cluster with Gavel's measured
  throughputs, clean semantics, 300 s rounds (OEF's default). The traces name no users, so
  each job type (model and batch size) is one tenant — the paper's §6.3 set-up ("tenants each
  owning DL training jobs of the same type"). Columns: avg JCT, makespan, utilization,
  normalized throughput in slowest-GPU equivalents (busy-time mean; *alloc.* as the GPUs were
  given, *actual* from the iterations trained, so restarts cost), SI and EF measured by
  :mod:`gpufair.tenant_metrics`.
* ``steady``: 20 tenants, each with a backlog of ``--per-tenant`` (3) 1-GPU jobs of one type
  that never runs out, for ``--hours`` (12) hours of 300 s rounds: the steady contention of
  the paper's Figs. 7/8, where the throughput gap between policies shows without arrivals
  and completions diluting it. Against OEF: ``max_min`` as the OEF paper's Gavel (tenant
  level, one and two stages) and ``gandiva_fair`` with and without trading.
* ``lp``: solve time of the OEF LP for 50 / 500 / 5,000 tenants x 3 / 8 GPU types.
* ``round``: one ``schedule`` call at 100 / 1,000 jobs on 64 / 2,048 GPUs (first call, which
  solves, and a later round that re-uses the solution).

Times are wall and CPU (``time.process_time``) seconds: the machine is shared, so wall
times are inflated and CPU time is the steadier figure. In the simulation tables "policy s"
is the wall time spent in ``schedule`` and "wall s" the whole simulation's.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from scipy.optimize import linprog
from shared_data import MSR_TRACES

from gpufair import data
from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import CLEAN
from gpufair.adapters.simulator.throughputs import Throughputs, load_throughputs
from gpufair.adapters.simulator.trace import TraceJob, load_trace
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.model import (
    ClusterState,
    Job,
    JobState,
    Migrate,
    Node,
    Preempt,
    Resume,
    Start,
    Tenant,
    ThroughputProfile,
)
from gpufair.policy.base import PolicyConfig
from gpufair.policy.oef.fastpath import solve_non_cooperative_fast
from gpufair.policy.oef.lp import OefProblem, solve_oef
from gpufair.policy.registry import available_policies, create_policy
from gpufair.policy.solver import SolveOptions
from gpufair.tenant_metrics import TenantLedger

ROUND_S = 300.0
#: The MSR VC traces are in the shared data folder; only 51b7ef (17 jobs) ships in gpufair.
MSR_TRACE = str(MSR_TRACES / "e13805.trace")
REFERENCE = "k80"
VARIANTS: dict[str, tuple[str, dict]] = {
    "max_min": ("max_min", {}),
    "gavel tenant 1-stage": ("max_min", {"level": "tenant"}),
    "gavel tenant 2-stage": ("max_min", {"level": "tenant", "stages": 2}),
    "oef coop": ("oef", {"mode": "cooperative"}),
    "oef non-coop": ("oef", {"mode": "non_cooperative"}),
    "oef coop capped": ("oef", {"mode": "cooperative", "demand_cap": True}),
    "oef coop fifo-in-tenant": ("oef", {"mode": "cooperative", "job_order": "arrival"}),
    "oef non-coop fifo-in-tenant": ("oef", {"mode": "non_cooperative",
                                            "job_order": "arrival"}),
    "oef coop span": ("oef", {"mode": "cooperative", "span_types": True}),
    "oef non-coop span": ("oef", {"mode": "non_cooperative", "span_types": True}),
    "gandiva_fair": ("gandiva_fair", {}),
    "gandiva_fair no trading": ("gandiva_fair", {"trading": False}),
}


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows[1:])])


def job_type_tenant(job: Job) -> str:
    return f"{job.model} bs{job.initial_batch_size}"


class TenantTagged:
    """The simulator seen with tenants (each job's tenant from ``tenant_of``), keeping a
    :class:`TenantLedger` of which job ran on which type for how long."""

    def __init__(self, sim: TraceSimulator, tenant_of: Callable[[Job], str]) -> None:
        self.sim = sim
        self.tenant_of = tenant_of
        types = tuple(dict.fromkeys(n.gpu_type for n in sim.nodes))
        self.capacity = {t: sum(n.gpus for n in sim.nodes if n.gpu_type == t) for t in types}
        self.ledger = TenantLedger(types, REFERENCE if REFERENCE in types else types[-1])
        self._state: ClusterState | None = None
        self._running: dict[str, str] = {}
        self._type_of = {g: n.gpu_type for n in sim.nodes for g in n.gpu_ids()}
        self._seen: dict[str, float] = {}
        #: job id -> (the simulator's record, it tagged with its tenant): a waiting job's
        #: record stands until it starts, so its tagged copy does too (copying every job at
        #: every event was a fifth of a 50-tenant simulation)
        self._tagged: dict[str, tuple[Job, Job]] = {}

    @property
    def finished(self) -> bool:
        return self.sim.finished

    @property
    def at_round_boundary(self) -> bool:
        return self.sim.at_round_boundary

    @property
    def changes(self) -> int:
        """The simulator's count of changes (arrivals, ends, actions): a round the runner
        skips because none happened since a settled plan leaves every job where the last
        snapshot saw it, so the ledger's credit of running jobs stays right."""
        return self.sim.changes

    def may_start_any(self) -> bool:
        """Always True: the runner then snapshots at every event. Skipping a fill-only event
        (what the plain simulator's answer allows) would leave the ledger crediting jobs that
        finished since the last snapshot with GPU time until the next one."""
        return True

    def snapshot(self) -> ClusterState:
        state = self.sim.snapshot()
        jobs = tuple(self._tag(j) for j in state.jobs)
        tenants = tuple(Tenant(t) for t in sorted({j.tenant for j in jobs}))
        self._state = replace(state, jobs=jobs, tenants=tenants)
        for j in jobs:
            done = j.progress.iterations_done
            self.ledger.add_progress(j, done - self._seen.get(j.id, 0.0))
            self._seen[j.id] = done
        self._running = {j.id: self._gang_type(j.id, j.gpus_held) for j in jobs if j.gpus_held}
        return self._state

    def _tag(self, job: Job) -> Job:
        kept = self._tagged.get(job.id)
        if kept is None or kept[0] is not job:
            kept = self._tagged[job.id] = (job, replace(job, tenant=self.tenant_of(job)))
        return kept[1]

    def _gang_type(self, job_id: str, gpus: Sequence[str]) -> str:
        """The type a gang's GPUs count as: its own, or for a gang spanning types the slowest
        for the job (the whole gang runs at that type's rate)."""
        kinds = {self._type_of[g] for g in gpus}
        if len(kinds) == 1 or self._state is None:
            return next(iter(kinds)) if len(kinds) == 1 else self._type_of[gpus[0]]
        job = next(j for j in self._state.jobs if j.id == job_id)
        return min(sorted(kinds), key=job.rate)

    def apply(self, actions: Sequence) -> list:
        results = self.sim.apply(actions)
        for r in results:
            if not r.ok:
                continue
            if isinstance(r.action, Preempt):
                self._running.pop(r.action.job_id, None)
            elif isinstance(r.action, Start | Resume | Migrate):
                self._running[r.action.job_id] = self._gang_type(r.action.job_id,
                                                                 r.action.gpu_ids)
        return results

    def advance(self) -> None:
        before = self.sim.now
        self.sim.advance()
        if self._state is not None:
            active = [j for j in self._state.jobs if j.state.active]
            self.ledger.add(self.sim.now - before, active, self._running, self.capacity)


def policy_for(variant: str) -> object | None:
    name, options = VARIANTS[variant]
    if name not in available_policies():
        return None
    return create_policy(name, PolicyConfig(round_s=ROUND_S, seed=0, options=options))


def run_variant(variant: str, trace: Sequence[TraceJob], throughputs: Throughputs,
                nodes: Sequence[Node], horizon_s: float | None, limit_s: float,
                tenant_of: Callable[[Job], str] = job_type_tenant) -> dict[str, Any] | None:
    policy = policy_for(variant)
    if policy is None:
        return None
    sim = TraceSimulator(trace, throughputs, nodes, CLEAN, ROUND_S)
    tagged = TenantTagged(sim, tenant_of)
    rounds = Round(policy)
    wall, cpu = time.perf_counter(), time.process_time()
    if horizon_s is None:
        done = run_to_end(tagged, rounds, deadline=wall + limit_s)
    else:
        while sim.now < horizon_s:
            result = rounds.run(tagged.snapshot(), preemptive=sim.at_round_boundary)
            if result.actions:
                tagged.apply(result.actions)
            tagged.advance()
        done = True
    out = tagged.ledger.summary()
    out["per_tenant"] = dict(tagged.ledger.got)   # each tenant's normalized work, for ratios
    view = getattr(policy, "view", None)
    if view is not None and len(view.tenants):   # OEF's own Σ W·x of the last round
        out["estimate"] = float(sum(np.dot(v.speedups, x)
                                    for v, x in zip(view.tenants, view.shares, strict=True)))
    metrics = sim.metrics()
    out.update(straggler_workers=sim.straggler_workers,
               straggler_idle_gpu_h=sim.straggler_idle_gpu_s / 3600, jobs=metrics.num_jobs,
               avg_jct_h=metrics.avg_jct_s / 3600,
               makespan_h=metrics.makespan_s / 3600, utilization=metrics.utilization,
               wall_s=time.perf_counter() - wall, cpu_s=time.process_time() - cpu,
               policy_s=rounds.policy_s, partial=not done)
    return out


def table(results: dict[str, dict[str, float]], steady: bool) -> str:
    base = results.get("max_min")
    header = ["policy", "alloc. thr.", "actual thr.", "vs max_min", "SI min", "SI viol.",
              "EF max", "EF viol. (pairs)"]
    if steady:
        header.insert(3, "OEF LP estimate")
    else:
        header[1:1] = ["jobs", "avg JCT (h)", "vs max_min", "makespan (h)", "util.",
                       "straggler workers", "straggler idle GPU-h"]
    header += ["policy s", "wall s"]
    rows = [header]
    for variant, r in results.items():
        gain = f"{r['actual'] / base['actual'] - 1:+.1%}" if base else "-"
        row = [variant + (" (partial)" if r["partial"] else ""), f"{r['throughput']:.2f}",
               f"{r['actual']:.2f}", gain,
               f"{r['si_min']:.2f}", f"{r['si_violations']:.0f}/{r['tenants']:.0f}",
               f"{r['ef_max']:.2f}", f"{r['ef_violations']:.0f}/{r['pairs']:.0f}"]
        if not steady:
            jct = f"{r['avg_jct_h'] / base['avg_jct_h'] - 1:+.1%}" if base else "-"
            row[1:1] = [f"{r['jobs']:.0f}", f"{r['avg_jct_h']:.2f}", jct,
                        f"{r['makespan_h']:.1f}", f"{r['utilization']:.3f}",
                        f"{r['straggler_workers']}", f"{r['straggler_idle_gpu_h']:.1f}"]
        if steady:
            row.insert(3, f"{r['estimate']:.2f}" if "estimate" in r else "-")
        row += [f"{r['policy_s']:.1f}", f"{r['wall_s']:.1f}"]
        rows.append(row)
    return markdown(rows)


def selected(args: argparse.Namespace) -> list[str]:
    """The variants ``--variants`` names (comma-separated; all when empty), max_min first: it
    is the base of every "vs" column."""
    if not args.variants:
        return list(VARIANTS)
    names = [v.strip() for v in args.variants.split(",")]
    return ["max_min", *(v for v in names if v != "max_min")]


def part_sim(args: argparse.Namespace) -> None:
    trace = load_trace(args.trace)
    if args.jobs:
        trace = trace[: args.jobs]
    throughputs = load_throughputs(data.path("gavel_simulator_throughputs.json"))
    nodes = parse_cluster_spec(args.cluster, "4")
    results = {}
    for variant in selected(args):
        r = run_variant(variant, trace, throughputs, nodes, None, args.time_limit)
        if r is not None:
            results[variant] = r
    print(f"\n## MSR trace {args.trace} ({len(trace)} lines) on {args.cluster} (4 GPUs/server),"
          f" {ROUND_S:g} s rounds, tenant = job type\n")
    print(table(results, steady=False))


def steady_trace(throughputs: Throughputs, tenants: int, per_tenant: int, seed: int,
                 ordered: bool = False) -> list[TraceJob]:
    """``per_tenant`` 1-GPU jobs of one job type for each of ``tenants`` job types drawn
    (``seed``) from those with a rate on every type; ``ordered``: only the types the OEF
    paper assumes (footnote 1: K80 ≤ P100 ≤ V100 for every job; Gavel's measurements break
    it for 8 job types), and at most as many tenants as there are such types."""
    rng = np.random.default_rng(seed)
    kinds = sorted(jt for (jt, sf) in throughputs.isolated[REFERENCE] if sf == 1
                   and all((throughputs.rate(t, jt, 1) or 0) > 0 for t in ("k80", "p100",
                                                                          "v100")))
    if ordered:
        kinds = [k for k in kinds if throughputs.rate("k80", k, 1) <=
                 throughputs.rate("p100", k, 1) <= throughputs.rate("v100", k, 1)]
        tenants = min(tenants, len(kinds))
    chosen = [kinds[i] for i in rng.choice(len(kinds), size=tenants, replace=False)]
    jobs = []
    for kind in chosen:
        steps = int(throughputs.rate("v100", kind, 1) * 10 * 86400)   # ~10 days alone
        for _ in range(per_tenant):
            jobs.append(TraceJob(index=len(jobs), job_type=kind, total_steps=steps,
                                 scale_factor=1, arrival_s=0.0, line=len(jobs) + 1,
                                 source="steady"))
    return jobs


def part_steady(args: argparse.Namespace) -> None:
    throughputs = load_throughputs(data.path("gavel_simulator_throughputs.json"))
    trace = steady_trace(throughputs, 20, args.per_tenant, seed=1)
    nodes = parse_cluster_spec(args.cluster, "4")
    results = {}
    for variant in VARIANTS:
        r = run_variant(variant, trace, throughputs, nodes, args.hours * 3600.0,
                        args.time_limit)
        if r is not None:
            results[variant] = r
    print(f"\n## Steady contention: 20 tenants x {args.per_tenant} one-GPU jobs of one type, "
          f"{args.cluster}, "
          f"{args.hours:g} h of {ROUND_S:g} s rounds\n")
    print(table(results, steady=True))
    print(f"\nno-fairness bound (each GPU to the job that gains most, eq. 4 with one GPU per "
          f"job): {efficiency_bound(trace, throughputs, nodes):.2f}")
    print(lp_estimates(trace, throughputs, nodes))


def compress_speedups(throughputs: Throughputs, alpha: float) -> Throughputs:
    """Every rate's speedup over the reference type raised to ``alpha`` (rate_t =
    rate_ref · (rate_t / rate_ref)^alpha): ``alpha`` < 1 narrows how differently jobs speed
    up on faster GPUs while keeping each job's order of types; the reference rates, and so
    the slowest-GPU units of normalized throughput, stay as measured."""
    reference = throughputs.isolated[REFERENCE]
    isolated = {t: {key: reference[key] * (r / reference[key]) ** alpha
                    if r > 0 and reference.get(key) else r for key, r in table.items()}
                for t, table in throughputs.isolated.items()}
    return replace(throughputs, isolated=isolated,
                   source=f"{throughputs.source} (speedups ^{alpha:.2f})")


def paper_range_alpha(throughputs: Throughputs, trace: Sequence[TraceJob],
                      top: float = 2.15) -> float:
    """The exponent that brings the trace's largest 1-GPU speedup over the reference type to
    ``top``: 2.15x, the largest speedup the OEF paper reports on its RTX 3070/3080/3090
    testbed (LSTM on a 3090, Fig. 1a; VGG 1.39x)."""
    largest = max(max(throughputs.rate(t, j.job_type, 1) or 0.0 for t in throughputs.isolated)
                  / throughputs.rate(REFERENCE, j.job_type, 1) for j in trace)
    return float(np.log(top) / np.log(largest))


def lp_estimates(trace: Sequence[TraceJob], throughputs: Throughputs,
                 nodes: Sequence[Node]) -> str:
    return "LP estimates (tenant level, fractional): " + ", ".join(
        f"{name} {value:.2f}" for name, value in lp_values(trace, throughputs, nodes).items())


def lp_values(trace: Sequence[TraceJob], throughputs: Throughputs,
              nodes: Sequence[Node]) -> dict[str, float]:
    """The fractional optima on the steady set, tenant level: OEF's two LPs and the paper's
    Gavel baseline as the spec reconstructs it (§5.4: max t, W_l·x_l >= t W_l·m/n, a tenant's
    share at most its jobs), which is what the paper's 'estimated' gains compare."""
    types = tuple(dict.fromkeys(n.gpu_type for n in nodes))
    m = np.array([sum(n.gpus for n in nodes if n.gpu_type == t) for t in types], float)
    kinds = list(dict.fromkeys(j.job_type for j in trace))
    demand = np.array([sum(j.job_type == kind for j in trace) for kind in kinds], float)
    w = np.array([[throughputs.rate(t, kind, 1) / throughputs.rate(REFERENCE, kind, 1)
                   for t in types] for kind in kinds])
    n, k = w.shape
    out = {}
    for mode in ("cooperative", "non_cooperative"):
        x = solve_oef(OefProblem(w, m, np.ones(n)), mode).x
        out[f"OEF {mode}"] = float(np.sum(w * x))
    # Gavel (spec §5.4): variables x (n*k) and t
    fair = w @ m / n
    rows = [np.concatenate([np.kron(np.ones(n), np.eye(k)[j]), [0.0]]) for j in range(k)]
    rhs = list(m)
    for t in range(n):
        row = np.zeros(n * k + 1)
        row[t * k:(t + 1) * k] = -w[t]
        row[-1] = fair[t]
        rows.append(row)
        rhs.append(0.0)
        cap = np.zeros(n * k + 1)
        cap[t * k:(t + 1) * k] = 1.0
        rows.append(cap)
        rhs.append(demand[t])
    c = np.zeros(n * k + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=np.array(rows), b_ub=rhs, bounds=(0, None), method="highs")
    x = res.x[:-1].reshape(n, k)
    out["Gavel (spec 5.4, tenant level)"] = float(np.sum(w * x))
    return out


def efficiency_bound(trace: Sequence[TraceJob], throughputs: Throughputs,
                     nodes: Sequence[Node]) -> float:
    """max Σ w x over 1-GPU jobs, Σ_t x_jt ≤ 1, Σ_j x_jt ≤ m_t: the most any policy gets."""
    types = tuple(dict.fromkeys(n.gpu_type for n in nodes))
    m = np.array([sum(n.gpus for n in nodes if n.gpu_type == t) for t in types], float)
    w = np.array([[throughputs.rate(t, j.job_type, 1) / throughputs.rate(REFERENCE,
                                                                       j.job_type, 1)
                   for t in types] for j in trace])
    n, k = w.shape
    a = np.vstack([np.kron(np.ones((1, n)), np.eye(k)), np.kron(np.eye(n), np.ones((1, k)))])
    res = linprog(-w.ravel(), A_ub=a, b_ub=np.concatenate([m, np.ones(n)]), bounds=(0, None),
                  method="highs")
    return float(-res.fun)


def random_speedups(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    return np.hstack([np.ones((n, 1)), np.cumprod(rng.uniform(1, 2, size=(n, k - 1)), axis=1)])


def timed(fn: Callable[[], object]) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def part_lp(args: argparse.Namespace) -> None:
    rows = [["tenants", "types", "mode", "solver", "LP solves", "wall s", "CPU s"]]
    rng = np.random.default_rng(0)
    for n in (50, 500, 5000):
        for k in (3, 8):
            w = random_speedups(rng, n, k)
            m = np.full(k, float(max(8, n // 4)))
            pi = rng.choice([1.0, 2.0, 4.0], size=n)
            p = OefProblem(w, m, pi)
            for mode in ("non_cooperative", "cooperative"):
                if mode == "cooperative" and n > args.max_coop_tenants:
                    rows.append([str(n), str(k), mode, "-", "-", "skipped", "(--max-coop)"])
                    continue
                sol, wall, cpu = timed(lambda p=p, mode=mode: solve_oef(
                    p, mode, SolveOptions(backend="auto")))
                rows.append([str(n), str(k), mode, sol.backend, str(sol.solves),
                             f"{wall:.3f}", f"{cpu:.3f}"])
                print(" | ".join(rows[-1]), flush=True)
            # ratio-ordered: each adjacent-type ratio sorted the same way over tenants
            steps = np.sort(w[:, 1:] / w[:, :-1], axis=0)
            ordered = OefProblem(np.hstack([np.ones((n, 1)), np.cumprod(steps, axis=1)]), m, pi)
            fast, wall, cpu = timed(lambda q=ordered: solve_non_cooperative_fast(q))
            assert fast is not None, "the ratio-ordered instance took no fast path"
            lp, lp_wall, lp_cpu = timed(lambda q=ordered: solve_oef(q, "non_cooperative"))
            rows.append([str(n), str(k), "non_cooperative", "fast path (ratio-ordered)",
                         "0", f"{wall:.3f}", f"{cpu:.3f}"])
            rows.append([str(n), str(k), "non_cooperative", f"{lp.backend}, same instance",
                         "1", f"{lp_wall:.3f}", f"{lp_cpu:.3f}"])
            print(" | ".join(rows[-2]), f"(t {fast.level:.9g} vs LP {lp.level:.9g})", flush=True)
    print("\n## OEF LP solve time (random speedups, weights 1/2/4)\n")
    print(markdown(rows))


def round_state(jobs: int, gpus: int, seed: int) -> ClusterState:
    """``jobs`` jobs of 12 kinds (a kind: one speedup profile, rates linear in the gang) in
    tenants of 10 jobs and two kinds each, on k80/p100/v100 servers of 8 GPUs."""
    rng = np.random.default_rng(seed)
    types = ("k80", "p100", "v100")
    nodes = tuple(Node(f"{types[i % 3]}-{i}", types[i % 3], 8) for i in range(gpus // 8))
    speed = np.hstack([np.ones((12, 1)), np.cumprod(rng.uniform(1, 2.5, size=(12, 2)), axis=1)])
    tenants = max(2, jobs // 10)
    out = []
    for i in range(jobs):
        tenant = i % tenants
        kind = (tenant, tenant * 5 + 3)[i // tenants % 2] % 12
        gang = int(rng.choice([1, 1, 1, 2, 4, 8]))
        rates = {(t, gang): float(gang * speed[kind, j]) for j, t in enumerate(types)}
        out.append(Job(id=f"j{i}", tenant=f"u{tenant}", gpus=gang, arrival_s=float(i),
                       throughput=ThroughputProfile(rates), state=JobState.PENDING))
    return ClusterState(0.0, nodes=nodes, jobs=tuple(out),
                        tenants=tuple(Tenant(f"u{t}", float(1 + t % 3)) for t in range(tenants)))


def part_round(args: argparse.Namespace) -> None:
    rows = [["jobs", "GPUs", "mode", "virtual tenants", "first call wall s", "CPU s",
             "next round wall s", "CPU s"]]
    for jobs, gpus in ((100, 64), (1000, 2048)):
        state = round_state(jobs, gpus, seed=jobs)
        for mode in ("non_cooperative", "cooperative"):
            policy = create_policy("oef", PolicyConfig(options={"mode": mode}))
            _, w1, c1 = timed(lambda p=policy, s=state: p.schedule(s, 0.0))
            _, w2, c2 = timed(lambda p=policy, s=state: p.schedule(s, ROUND_S))
            rows.append([str(jobs), str(state.gpu_count()), mode,
                         str(len(policy.view.tenants)), f"{w1:.3f}", f"{c1:.3f}",
                         f"{w2:.3f}", f"{c2:.3f}"])
            print(" | ".join(rows[-1]), flush=True)
    print("\n## OEF per-round time (3 GPU types, 10 jobs and 2 job kinds per tenant, gangs "
          "1-8)\n")
    print(markdown(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="sim,steady,lp,round")
    parser.add_argument("--trace", default=MSR_TRACE, help="an MSR (7-column) trace")
    parser.add_argument("--jobs", type=int, default=0,
                        help="simulate only the trace's first N lines (0: all)")
    parser.add_argument("--cluster", default="v100:8,p100:8,k80:8")
    parser.add_argument("--variants", default="",
                        help="simulate only these variants of the sim part (comma-separated)")
    parser.add_argument("--time-limit", type=float, default=900.0,
                        help="wall seconds per simulated policy (then partial)")
    parser.add_argument("--hours", type=float, default=12.0,
                        help="simulated hours of the steady part")
    parser.add_argument("--per-tenant", type=int, default=3,
                        help="jobs per tenant in the steady part")
    parser.add_argument("--max-coop-tenants", type=int, default=500,
                        help="skip cooperative LPs above this many tenants (n(n-1) envy rows)")
    args = parser.parse_args()
    unknown = [v.strip() for v in args.variants.split(",") if v.strip()
               and v.strip() not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; known: {', '.join(VARIANTS)}")
    parts = {"sim": part_sim, "steady": part_steady, "lp": part_lp, "round": part_round}
    for name in args.parts.split(","):
        parts[name](args)


if __name__ == "__main__":
    main()

"""Gandiva_fair's realisation gap (issue 36): why a user's simulated gain from trading differs
from what the trades' second prices entitle it to, measured by ablations.

    python bench/gandiva_fair_gap.py [--seed 0] [--hours 12] [--tiny]

The paper's experiment (``bench/paper_claims.py``'s Gandiva_fair rows: 4 users x 150 jobs of
1-, 2-, 4-GPU ResNet-50 and 1-GPU A3C at t = 0 on 64 K80 + 24 P100 + 12 V100) is run with
trading on and off, instrumented: per user and GPU type, the GPU-hours it held and the
GPU-hours its entitlement gave it (equal base shares moved by the trades standing at each
moment). A user's simulated gain then splits exactly into three factors:

    1 + gain = (1 + entitled gain over the run) x realised(on) / realised(off)

``realised`` being the value of what it held over the value of what it was entitled to (each
type weighted by the user's own per-GPU rate, as the gain is). Each variant changes one thing:

* **no trade migrations**: the policy before issue 36's fix, where a trade moved no job
  (``trade_migrations = false``);
* **paper**: the experiment as ``paper_claims`` runs it (defaults);
* **type moves unlimited**: any number of jobs move to another GPU type per quantum
  (``type_moves_per_quantum``; the paper moves one);
* **1-GPU jobs**: users 2 and 3 run 1-GPU jobs at their gangs' per-GPU rates (the same
  speedups, hence the same bids and prices; no gangs);
* **1-GPU jobs + moves unlimited**: both;
* **no finishes**: every job 100x longer, nothing ends in the horizon (fixed demand);
* **quantum = round**: a 300-s quantum, the simulator's round, instead of 60 s (a quantum
  then lasts until the next round; with 60 s each job's end starts a new one);
* **types ranked v100 > p100 > k80** (``gpu_rank``): the paper's fixed (fast, slow) pairs; by
  default the rank follows the active jobs' measured speeds, and the 4-GPU ResNet-50 runs
  faster on a P100 than on a V100 (0.75x), so the rank flips as the mix changes;
* **no load or type moves**: no balancing or heterogeneity move (a moved job joins at the
  least pass of its new server); a trade's own migrations stay.

"entitled (fixed point)" is ``paper_claims``'s row: ``trade_round`` to its fixed point on
unbounded demand.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bench_oef import ROUND_S, TenantTagged
from paper_claims import GANDIVA_FAIR_MEAN_K80_H, GANDIVA_FAIR_USERS, entitlement_gains
from scale import markdown

from gpufair import data
from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.generate import UserClass, generate_user_class_trace
from gpufair.adapters.simulator.semantics import CLEAN
from gpufair.adapters.simulator.throughputs import Throughputs, load_throughputs
from gpufair.core.round import Round
from gpufair.policy.base import PolicyConfig
from gpufair.policy.gandiva_fair.trading import base_entitlements
from gpufair.policy.registry import create_policy

#: variant -> (policy options, 1-GPU jobs only, length factor)
VARIANTS: dict[str, tuple[dict, bool, float]] = {
    "no trade migrations": ({"trade_migrations": False}, False, 1.0),
    "paper": ({}, False, 1.0),
    "type moves unlimited": ({"type_moves_per_quantum": 10_000}, False, 1.0),
    "1-GPU jobs": ({}, True, 1.0),
    "1-GPU jobs + moves unlimited": ({"type_moves_per_quantum": 10_000}, True, 1.0),
    "no finishes": ({}, False, 100.0),
    "quantum = round": ({"quantum_s": ROUND_S}, False, 1.0),
    "types ranked v100 > p100 > k80": ({"gpu_rank": ["v100", "p100", "k80"]}, False, 1.0),
    "no load or type moves": ({"type_moves_per_quantum": 0, "migrations_per_pool": 0},
                              False, 1.0),
}


@dataclass
class Instrumented:
    """One run's record: per (user, type) GPU-seconds held, entitled, and homed (demand)."""

    held: dict[tuple[str, str], float] = field(default_factory=dict)
    entitled: dict[tuple[str, str], float] = field(default_factory=dict)
    homed: dict[tuple[str, str], float] = field(default_factory=dict)
    #: GPU-seconds of jobs running although the round's plan did not pick them (a decision
    #: between round boundaries may start jobs but not stop them)
    unplanned: dict[tuple[str, str], float] = field(default_factory=dict)
    idle: dict[str, float] = field(default_factory=dict)
    got: dict[str, float] = field(default_factory=dict)
    trades: int = 0
    cpu_s: float = 0.0


def per_gpu_model(throughputs: Throughputs, job_type: str, gpus: int) -> tuple[Throughputs, str]:
    """A 1-GPU model running at ``job_type``'s per-GPU rate on a ``gpus`` gang: the same
    speedups (bids), no gang."""
    name = f"{job_type.split(' (')[0]} x{gpus} per GPU (batch size 16)"
    isolated = {t: {**rates, (name, 1): rates[(job_type, gpus)] / gpus}
                for t, rates in throughputs.isolated.items() if (job_type, gpus) in rates}
    return replace(throughputs, isolated=isolated), name


def instrumented_run(trace, owner: Sequence[str], throughputs: Throughputs, nodes,
                     horizon_s: float, options: dict) -> Instrumented:
    policy = create_policy("gandiva_fair", PolicyConfig(round_s=ROUND_S, seed=0,
                                                       options=options))
    sim = TraceSimulator(trace, throughputs, nodes, CLEAN, ROUND_S)
    tagged = TenantTagged(sim, lambda j: owner[int(j.id)])
    rounds = Round(policy)
    out = Instrumented()
    capacity = tagged.capacity
    cpu = time.process_time()
    while sim.now < horizon_s:
        result = rounds.run(tagged.snapshot(), preemptive=sim.at_round_boundary)
        if result.actions:
            tagged.apply(result.actions)
        state = tagged._state
        jobs = {j.id: j for j in state.jobs if j.state.active}
        users = sorted({j.tenant for j in jobs.values()})
        ent = base_entitlements({u: 1.0 for u in users}, capacity)
        for t in policy.trades:
            ent[t.buyer][t.fast] += 1
            ent[t.seller][t.fast] -= 1
            ent[t.buyer][t.slow] -= t.price
            ent[t.seller][t.slow] += t.price
        running = dict(tagged._running)
        planned = {a.job_id for a in result.plan.assignments}
        homed = [(jobs[j].tenant, h.pool, jobs[j].gpus) for j, h in policy.home.items()
                 if j in jobs]
        before = sim.now
        tagged.advance()
        dt = sim.now - before
        used = {t: 0.0 for t in capacity}
        for job_id, gpu_type in running.items():
            job = jobs.get(job_id)
            if job is None:
                continue
            key = (job.tenant, gpu_type)
            out.held[key] = out.held.get(key, 0.0) + dt * job.gpus
            if job_id not in planned:
                out.unplanned[key] = out.unplanned.get(key, 0.0) + dt * job.gpus
            used[gpu_type] += job.gpus
        for user, by_type in ent.items():
            for gpu_type, n in by_type.items():
                out.entitled[(user, gpu_type)] = out.entitled.get((user, gpu_type), 0.0) + dt * n
        for user, pool, gpus in homed:
            out.homed[(user, pool)] = out.homed.get((user, pool), 0.0) + dt * gpus
        for gpu_type, n in capacity.items():
            out.idle[gpu_type] = out.idle.get(gpu_type, 0.0) + dt * max(0.0, n - used[gpu_type])
    out.got = dict(tagged.ledger.got)
    out.trades = len([t for t in policy.trade_log if not t.undone])
    out.cpu_s = time.process_time() - cpu
    return out


def users_of(throughputs: Throughputs, single: bool
             ) -> tuple[Throughputs, tuple[tuple[str, int], ...]]:
    """The paper's four users, or (``single``) with users 2 and 3 on 1-GPU stand-ins."""
    if not single:
        return throughputs, GANDIVA_FAIR_USERS
    users = []
    for job_type, gpus in GANDIVA_FAIR_USERS:
        if gpus > 1:
            throughputs, job_type = per_gpu_model(throughputs, job_type, gpus)
        users.append((job_type, 1))
    return throughputs, tuple(users)


def value(record: dict[tuple[str, str], float], user: str, weight: dict[str, float]) -> float:
    return sum(record.get((user, t), 0.0) * w for t, w in weight.items())


def variant_rows(label: str, throughputs: Throughputs, cluster: str, per_user: int,
                 hours: float, seed: int) -> tuple[list[list[str]], list[list[str]], float]:
    """(gain rows, held-vs-entitled rows, CPU s) of one variant: trading on and off."""
    options, single, factor = VARIANTS[label]
    throughputs, users = users_of(throughputs, single)
    nodes = parse_cluster_spec(cluster, "4")
    classes = [UserClass(t, g, per_user, factor * throughputs.rate("k80", t, g)
                         * GANDIVA_FAIR_MEAN_K80_H * 3600) for t, g in users]
    trace, owner = generate_user_class_trace(classes, seed=seed)
    on = instrumented_run(trace, owner, throughputs, nodes, hours * 3600, options)
    off = instrumented_run(trace, owner, throughputs, nodes, hours * 3600,
                           {**options, "trading": False})
    types = sorted(on.idle)
    names = [f"user{u + 1}" for u in range(len(users))]
    weight = {u: {t: throughputs.rate(t, j, g) / throughputs.rate("k80", j, g) for t in types}
              for u, (j, g) in zip(names, users, strict=True)}
    gains, split = [label], [label]
    for u in names:
        gain = on.got[u] / off.got[u] - 1
        ent = value(on.entitled, u, weight[u]) / value(off.entitled, u, weight[u]) - 1
        real_on = value(on.held, u, weight[u]) / value(on.entitled, u, weight[u])
        real_off = value(off.held, u, weight[u]) / value(off.entitled, u, weight[u])
        gains.append(f"{gain:+.1%} (ent. {ent:+.1%}, real. {real_on:.2f}/{real_off:.2f})")
        hours_of = on.held.get
        split.append(" / ".join(f"{hours_of((u, t), 0.0) / 3600 / hours:.1f}"
                                f" ({on.unplanned.get((u, t), 0.0) / 3600 / hours:.1f}):"
                                f"{on.entitled.get((u, t), 0.0) / 3600 / hours:.1f}"
                                for t in types))
    gains.append(f"{on.trades}")
    idle = ", ".join(f"{t} {off.idle[t] / 3600 / hours:.1f}/{on.idle[t] / 3600 / hours:.1f}"
                     for t in types)
    split.append(idle)
    return [gains], [split], on.cpu_s + off.cpu_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="trace generator seed")
    parser.add_argument("--hours", type=float, default=12.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--tiny", action="store_true",
                        help="smoke sizes: every code path, figures meaningless")
    args = parser.parse_args()
    labels = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(labels) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (one of {', '.join(VARIANTS)})")
    cluster, per_user = ("k80:8,p100:4,v100:4", 4) if args.tiny else \
        ("k80:64,p100:24,v100:12", 150)
    hours = 0.5 if args.tiny else args.hours
    throughputs = load_throughputs(data.path("gavel_simulator_throughputs.json"))
    names = [f"user{u + 1}" for u in range(len(GANDIVA_FAIR_USERS))]
    gains = [["variant", *names, "trades"]]
    split = [["variant", *(f"{u} held (outside the plan):entitled "
                           f"({'/'.join(sorted(('k80', 'p100', 'v100')))})"
                           for u in names), "idle GPUs off/on"]]
    fixed = entitlement_gains(GANDIVA_FAIR_USERS, cluster, throughputs)
    gains.append(["entitled (fixed point)", *(f"{fixed[u]:+.1%}" for u in names), "-"])
    cpu = 0.0
    for label in labels:
        g, s, c = variant_rows(label, throughputs, cluster, per_user, hours, args.seed)
        gains += g
        split += s
        cpu += c
        print(".", end="", file=sys.stderr, flush=True)
    print(f"\n## Gandiva_fair's realisation gap: 4 users x {per_user} jobs at t = 0 "
          f"(seed {args.seed}), {cluster}, {hours:g} h\n")
    print("Gain with trading over without (entitled gain over the run; realised value "
          "held / entitled, trading on / off):\n")
    print(markdown(gains))
    print("\nGPUs held (of them, by jobs the round's plan did not pick: a decision between "
          "round boundaries starts jobs but stops none) : entitled, with trading, time "
          "averages per type; idle GPUs per type without / with trading:\n")
    print(markdown(split))
    print(f"\nsimulation CPU {cpu:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

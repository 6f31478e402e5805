"""Gandiva_fair: fidelity on the canonical trace, the heterogeneous Gavel setup, round cost.

    python bench/bench_gandiva_fair.py [--quick] [--time-limit S]

1. The canonical trace (120 jobs, 32 V100, R = 120 s, artifact semantics) next to the
   artifact's recorded ``gandiva_fair`` row: gpufair's default cadence (the quantum sized from
   the simulator's 20 s restart cost) and the artifact's (a quantum of one round).
2. Gavel's heterogeneous cluster (v100:8,p100:8,k80:8, 8-GPU servers, R = 360 s, clean
   semantics) on the MSR traces, next to ``max_min`` (and ``oef`` when installed).
3. One round at 100 jobs / 64 GPUs and 1,000 jobs / 2,048 GPUs (three types, 1-GPU servers):
   the first (cold: every job placed) and the next (warm), wall and CPU seconds.

The machine is shared: wall times are inflated, CPU seconds (``time.process_time``) less so.
``--quick`` runs only the bundled MSR trace. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from scale import busy_round, markdown
from shared_data import MSR_TRACES

from gpufair.core.simulation import SimulationSpec, simulate
from gpufair.data import artifact_results, resolve
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import available_policies, create_policy

MSR = MSR_TRACES


def canonical(limit: float) -> str:
    row = artifact_results()["canonical"]["rows"]["gandiva_fair"]
    keys = [("makespan (s)", "makespan_s", "{:.0f}"), ("avg JCT (s)", "avg_jct_s", "{:.0f}"),
            ("worst rho", "worst_rho", "{:.3f}"), ("mean rho", "mean_rho", "{:.3f}"),
            ("unfair >1.1 (%)", "unfair_1.1_pct", "{:.1f}"),
            ("utilization", "utilization", "{:.3f}"), ("rounds", "rounds", "{:d}")]
    columns = {"artifact (recorded)": {k: row[k] for _, k, _ in keys}}
    for label, options in (("gpufair default (quantum 400 s)", None),
                           ("gpufair, quantum = round", {"switch_cost_s": 0.0})):
        config = None if options is None else _options_file(options)
        cpu = time.process_time()
        r = simulate(SimulationSpec(trace=resolve("shockwave_120jobs_32gpus"),
                                    throughputs=resolve("tacc_throughputs"), cluster="v100:32",
                                    policy="gandiva_fair", round_s=120.0,
                                    semantics="artifact", config=config),
                     progress=False, time_limit_s=limit)
        m = r.metrics
        columns[label] = {"makespan_s": m.makespan_s, "avg_jct_s": m.avg_jct_s,
                          "worst_rho": m.worst_rho, "mean_rho": m.mean_rho,
                          "unfair_1.1_pct": 100 * m.unfair_fraction["1.1"],
                          "utilization": m.utilization, "rounds": r.rounds,
                          "_cpu": time.process_time() - cpu}
    rows = [["metric", *columns]]
    for label, key, fmt in keys:
        rows.append([label, *(fmt.format(c[key]) for c in columns.values())])
    rows.append(["CPU s", "-", *(f"{c['_cpu']:.2f}" for c in list(columns.values())[1:])])
    return markdown(rows)


def _options_file(options: dict[str, object]) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(options, file)
    return file.name


def heterogeneous(traces: list[str], limit: float) -> str:
    runs = [("gandiva_fair", "gandiva_fair", None),
            ("gandiva_fair (type_choice=job)", "gandiva_fair",
             _options_file({"type_choice": "job"}))]
    runs += [(p, p, None) for p in ("max_min", "oef") if p in available_policies()]
    rows = [["trace", "policy", "jobs", "avg JCT (s)", "p90 JCT (s)", "worst rho",
             "utilization", "policy s (wall)"]]
    for trace in traces:
        for label, name, config in runs:
            r = simulate(SimulationSpec(trace=resolve(trace),
                                        throughputs=resolve("gavel_simulator_throughputs"),
                                        cluster="v100:8,p100:8,k80:8", gpus_per_server="8",
                                        policy=name, round_s=360.0, config=config),
                         progress=False, time_limit_s=limit)
            m = r.metrics
            rows.append([Path(trace).stem, label, f"{m.num_jobs}" + (" partial" if r.partial
                                                                     else ""),
                         f"{m.avg_jct_s:.0f}", f"{m.p90_jct_s:.0f}", f"{m.worst_rho:.3f}",
                         f"{m.utilization:.3f}", f"{r.policy_s:.1f}"])
            print(".", end="", file=sys.stderr, flush=True)
    return markdown(rows)


def round_cost() -> str:
    rows = [["jobs / GPUs", "cold round wall s", "cold CPU s", "warm round wall s",
             "warm CPU s", "jobs run"]]
    for jobs, spec in ((100, "v100:32,p100:16,k80:16"), (1000, "v100:1024,p100:512,k80:512")):
        state = busy_round(jobs, spec)
        policy = create_policy("gandiva_fair", PolicyConfig(round_s=120.0))
        times = []
        plan = None
        for k in range(2):
            wall, cpu = time.perf_counter(), time.process_time()
            plan = policy.schedule(replace(state, time_s=state.time_s + 120.0 * k),
                                   state.time_s + 120.0 * k)
            times += [time.perf_counter() - wall, time.process_time() - cpu]
        gpus = sum(int(part.split(":")[1]) for part in spec.split(","))
        rows.append([f"{jobs} / {gpus}", *(f"{t:.3f}" for t in times),
                     f"{len(plan.assignments)}"])
    return markdown(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the bundled MSR trace")
    parser.add_argument("--time-limit", type=float, default=600.0, help="wall s per run")
    args = parser.parse_args()
    traces = ["gavel_msr_51b7ef"]
    if not args.quick:
        traces += [str(MSR / f"{name}.trace") for name in ("2869ce", "e13805")
                   if (MSR / f"{name}.trace").exists()]
    print("## Canonical trace, artifact semantics, 32 V100, R = 120 s\n")
    print(canonical(args.time_limit))
    print("\n## Heterogeneous: v100:8,p100:8,k80:8 (8-GPU servers), R = 360 s, clean\n")
    print(heterogeneous(traces, args.time_limit))
    print("\n## One round (1-GPU servers, three types)\n")
    print(round_cost())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

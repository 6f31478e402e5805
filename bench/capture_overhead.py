"""What ``--out`` costs a simulation: the capture (allocations, cluster and tenant series) and
the results directory's write, on the 900-job / 256-GPU cell of ``bench/scale.py``.

    python bench/capture_overhead.py [--policies fifo,las] [--repeat 3] [--size 900/256]

Each policy runs alternately without and with the capture, ``--repeat`` times each; the
least CPU of each is shown (a shared machine only ever slows a run down). The figures the
runs produce are checked equal. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import ROUND_S, THROUGHPUTS, markdown, trace_for

from gpufair import data
from gpufair.core.simulation import SimulationSpec, simulate
from gpufair.results.simulation import write_simulations

TIMED = ("wall_s", "policy_s", "solver_s")


def run(spec: SimulationSpec, capture: bool):
    cpu = time.process_time()
    report = simulate(spec, progress=False, capture=capture)
    return time.process_time() - cpu, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", default="fifo,las")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size", default="900/256")
    args = parser.parse_args()
    jobs, gpus = (int(x) for x in args.size.split("/"))
    rows = [["policy", "without (CPU s)", "with capture (CPU s)", "overhead",
             "write results dir (s)", "rows (allocations/cluster/tenants)", "dir size"]]
    with tempfile.TemporaryDirectory() as tmp:
        trace = trace_for(jobs, gpus, Path(tmp))
        for policy in args.policies.split(","):
            spec = SimulationSpec(trace=str(trace), throughputs=str(data.path(THROUGHPUTS)),
                                  cluster=f"v100:{gpus}", policy=policy, round_s=ROUND_S)
            simulate(spec, progress=False, time_limit_s=5.0)   # imports, solver start-up
            plain, captured = [], []
            for _ in range(args.repeat):
                plain.append(run(spec, False))
                captured.append(run(spec, True))
            base, with_ = min(c for c, _ in plain), min(c for c, _ in captured)
            report = captured[0][1]
            same = {json.dumps({k: v for k, v in r.as_dict().items() if k not in TIMED},
                               sort_keys=True) for _, r in plain + captured}
            assert len(same) == 1, "the capture changed a figure"
            started = time.perf_counter()
            out = write_simulations(Path(tmp) / policy, spec, [report], kind="simulate",
                                    command=["bench"])
            written = time.perf_counter() - started
            size = sum(p.stat().st_size for p in out.iterdir())
            c = report.capture
            rows.append([policy, f"{base:.2f}", f"{with_:.2f}",
                         f"{100 * (with_ - base) / base:+.1f} %", f"{written:.2f}",
                         f"{len(c.allocations)}/{len(c.cluster)}/{len(c.tenants)}",
                         f"{size / 1e6:.1f} MB"])
            print(".", end="", file=sys.stderr, flush=True)
    print(f"\n{jobs} jobs / {gpus} GPUs, clean semantics, R = {ROUND_S:g} s, least CPU of "
          f"{args.repeat}\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How big and how slow a report of a large results directory is: synthetic results of
``--jobs`` jobs × ``--runs`` runs (a year-long replay's size: 15,000 jobs, 11 runs — the
history ``as_run`` and ten policies), then ``gpufair report`` on them.

    python bench/report_size.py [--jobs 15000] [--runs 11] [--tenants 40] [--round 360]

The synthetic runs are shaped like real ones — Poisson arrivals over ``--days``, log-normal
run times, gangs of 1–8 GPUs on three GPU types, a few allocation intervals per job (moves
and preemptions), one cluster sample per round and type, one tenant sample per round and
tenant — with a fixed seed. Prints a markdown table: rows per table, the results directory's
size, the time to read it and render the report, and the report's size (the acceptance
bounds: < 30 s, < 20 MB).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from gpufair.report import render_report, write_report
from gpufair.results import AS_RUN, ResultsWriter, input_file, read_results

TYPES = {"v100": 128, "p100": 64, "k80": 64}


def synthetic(out: Path, jobs: int, runs: int, tenants: int, round_s: float, days: float,
              seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    history = out.parent / "history.csv"
    history.write_text(f"synthetic {jobs} jobs, seed {seed}\n")
    horizon = days * 86400
    submit = np.sort(rng.uniform(0, horizon * 0.9, jobs))
    ids = np.array([str(i) for i in range(jobs)], dtype=object)
    owner = np.array([f"tenant-{i:02d}" for i in rng.integers(0, tenants, jobs)], dtype=object)
    gpus = rng.choice([1, 1, 1, 2, 2, 4, 8], jobs)
    kinds = np.array(list(TYPES), dtype=object)
    names = [AS_RUN] + [f"policy_{i:02d}" for i in range(1, runs)]
    writer = ResultsWriter(out, kind="replay", command=["bench/report_size.py"],
                           inputs={"history": input_file(history), "round_s": round_s})
    rounds = np.arange(0, horizon, round_s)
    for r, run in enumerate(names):
        wait = rng.exponential(1800 * (1 + r % 4), jobs)
        runtime = rng.lognormal(8.5, 1.2, jobs)
        start, end = submit + wait, submit + wait + runtime
        rho = np.round(rng.lognormal(0, 0.3, jobs), 5)
        kind = rng.choice(kinds, jobs)
        writer.add_run(run, {"utilization": float(rng.uniform(0.5, 0.9))})
        writer.add_rows("jobs", pd.DataFrame({
            "run": run, "job_id": ids, "tenant": owner, "submit_s": submit, "start_s": start,
            "end_s": end, "wait_s": wait, "jct_s": end - submit, "gpus": gpus,
            "gpu_types": kind, "rho": rho, "outcome": "finished"}))
        # 1 to 4 intervals per job: the run split where it was preempted or moved
        pieces = rng.integers(1, 5, jobs)
        job_of = np.repeat(np.arange(jobs), pieces)
        part = np.concatenate([np.arange(p) for p in pieces])
        share = runtime[job_of] / pieces[job_of]
        a_start = start[job_of] + part * share
        writer.add_rows("allocations", pd.DataFrame({
            "run": run, "job_id": ids[job_of], "start_s": a_start, "end_s": a_start + share,
            "gpu_type": kind[job_of], "gpus": gpus[job_of]}))
        busy = (np.sin(rounds / 86400 * 2 * np.pi + r) + 1.2) / 2.2
        writer.add_rows("cluster", pd.DataFrame({
            "run": run, "t_s": np.repeat(rounds, len(TYPES)),
            "gpu_type": np.tile(kinds, len(rounds)),
            "total": np.tile(list(TYPES.values()), len(rounds)),
            "busy": (np.repeat(busy, len(TYPES)) * np.tile(list(TYPES.values()),
                                                            len(rounds))).astype(int),
            "queued_jobs": rng.poisson(20, len(rounds) * len(TYPES))}))
        held = rng.poisson(6, len(rounds) * tenants).astype(float)
        writer.add_rows("tenants", pd.DataFrame({
            "run": run, "t_s": np.repeat(rounds, tenants),
            "tenant": np.tile([f"tenant-{i:02d}" for i in range(tenants)], len(rounds)),
            "gpus": held, "fair_share_gpus": sum(TYPES.values()) / tenants}))
    return writer.commit()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=15_000)
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--tenants", type=int, default=40)
    parser.add_argument("--round", type=float, default=360.0, dest="round_s")
    parser.add_argument("--days", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        out = synthetic(Path(tmp) / "results", args.jobs, args.runs, args.tenants,
                        args.round_s, args.days)
        made = time.perf_counter() - started
        size = sum(p.stat().st_size for p in out.iterdir())
        started = time.perf_counter()
        results = read_results([out])
        read = time.perf_counter() - started
        started = time.perf_counter()
        render_report(results)
        rendered = time.perf_counter() - started
        started, cpu = time.perf_counter(), time.process_time()
        report = write_report([out], Path(tmp) / "report.html")
        whole, whole_cpu = time.perf_counter() - started, time.process_time() - cpu
        rows = {name: len(frame) for name, frame in results.tables.items() if len(frame)}
        report_size = report.stat().st_size
    print(f"\nsynthetic replay: {args.jobs} jobs × {args.runs} runs, {args.tenants} tenants, "
          f"{args.days:g} days at {args.round_s:g} s rounds (made in {made:.1f} s)\n")
    print("| " + " | ".join(["rows", *rows]) + " |")
    print("|" + "---|" * (len(rows) + 1))
    print("| " + " | ".join(["", *(f"{n:,}" for n in rows.values())]) + " |")
    print()
    print("| results dir | read | render | report end to end (read+render+write) |"
          " its CPU | report size |")
    print("|---|---|---|---|---|---|")
    print(f"| {size / 1e6:.1f} MB | {read:.1f} s | {rendered:.1f} s | {whole:.1f} s | "
          f"{whole_cpu:.1f} s | {report_size / 1e6:.2f} MB |")
    print("\n(wall seconds; CPU: this process's, which a loaded machine does not inflate)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

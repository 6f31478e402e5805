"""How fast ``gpufair replay`` reads, converts and replays histories (issue 31).

    python bench/replay_speed.py [--lines N] [--jobs N] [--policies a,b,...] [--time-limit S]

Two tables (markdown):

1. reading and converting a saved ``sacct --parsable2`` file of N lines (default 1,000,000;
   generated with a seed: the shape of ``sacct -X -D -o JobID,User,Account,QOS,Partition,
   Submit,Start,End,State,AllocTRES,ReqTRES,NNodes,JobName``, with arrays, requeues, jobs
   without GPUs and cancelled ones), each step's wall seconds and the peak RSS of the process
   that does it (a fresh subprocess, so nothing else is counted);
2. a history of N jobs (default the 15,000 of the Helios DIR-LAB cut in
   ``../shared/data/histories``, else the bundled 1,000) through each policy (default: every
   baseline; ``tenant_max_min`` is max_min with ``level = "tenant"``): wall and CPU seconds,
   rounds, whether the time limit cut it short. The issue's budgets: baselines < 60 s, Themis,
   OEF, Gandiva_fair and AFS < 5 min, Shockwave < 10 min.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_HELIOS = REPO.parents[1] / "shared" / "data" / "histories" / "helios_15k_dirlab.csv"
HEADER = ("JobID|User|Account|QOS|Partition|Submit|Start|End|State|AllocTRES|ReqTRES|NNodes|"
          "JobName")
BASELINES = ("fifo,srtf,las,max_min,max_sum_throughput,min_total_duration,slurm_backfill,"
             "tenant_max_min")
#: bench labels that are a policy with options: the label, the policy, its config section
VARIANTS = {"tenant_max_min": ("max_min", '[policies.max_min]\nlevel = "tenant"\n')}


def write_sacct(path: Path, lines: int, seed: int) -> None:
    """A sacct file of ``lines`` job lines (after the header), like a busy GPU site's month."""
    from datetime import datetime, timedelta
    rng = random.Random(seed)
    base = datetime(2026, 1, 1)
    t = 0.0
    with path.open("w", encoding="utf-8") as out:
        out.write(HEADER + "\n")
        for i in range(lines):
            t += rng.expovariate(1 / 2.5)
            submit = base + timedelta(seconds=int(t))
            wait = int(rng.expovariate(1 / 600))
            run = int(rng.lognormvariate(7, 1.5)) + 1
            start, end = submit + timedelta(seconds=wait), submit + timedelta(seconds=wait + run)
            gpus = rng.choice((0, 1, 1, 1, 2, 4, 8))
            kind = rng.random()
            state, s_text, e_text = "COMPLETED", start.isoformat(), end.isoformat()
            if kind < 0.05:
                state, s_text, alloc = "CANCELLED by 1000", "Unknown", ""
            job = f"{100000 + i}_{i % 7}" if kind > 0.9 else str(100000 + i)
            alloc = "" if s_text == "Unknown" else \
                f"billing={gpus * 4 or 1},cpu={gpus * 4 or 1},gres/gpu:a100={gpus}," \
                f"gres/gpu={gpus},mem=16G,node=1" if gpus else "cpu=4,mem=8G,node=1"
            req = f"cpu={gpus * 4 or 1},gres/gpu={gpus}" if gpus else "cpu=4"
            out.write(f"{job}|user{i % 97}|acct{i % 13}|normal|gpu|{submit.isoformat()}|"
                      f"{s_text}|{e_text}|{state}|{alloc}|{req}|1|train-{i % 1000}\n")


READ = """
import json, resource, sys, time
from gpufair.adapters.slurm.sacct_saved import read_sacct_text
from gpufair.adapters.history.convert import history_to_trace
began, cpu0 = time.perf_counter(), time.process_time()
history = read_sacct_text(sys.argv[1])
read, cpu1 = time.perf_counter(), time.process_time()
trace = history_to_trace(history)
done, cpu2 = time.perf_counter(), time.process_time()
print(json.dumps({"read_s": read - began, "convert_s": done - read, "jobs": len(history.jobs),
                  "read_cpu_s": cpu1 - cpu0, "convert_cpu_s": cpu2 - cpu1,
                  "excluded": history.excluded, "trace_jobs": len(trace.trace),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def bench_read(lines: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sacct.txt"
        began = time.perf_counter()
        write_sacct(path, lines, seed)
        written = time.perf_counter() - began
        out = subprocess.run([sys.executable, "-c", READ, str(path)], check=True,
                             capture_output=True, text=True).stdout
        result = json.loads(out)
        result["size_mb"] = path.stat().st_size / 2**20
        result["write_s"] = written
        return result


def bench_policies(history: str, jobs: int | None, policies: list[str],
                   time_limit: float, cluster: list[str]) -> list[dict]:
    from gpufair.data import resolve
    source = Path(resolve(history))
    if jobs is not None:   # the first N jobs: a smaller history of the same shape
        lines = source.read_text(encoding="utf-8").splitlines()[: jobs + 1]
        cut = Path(tempfile.mkdtemp()) / source.name
        cut.write_text("\n".join(lines) + "\n", encoding="utf-8")
        source = cut
    rows = []
    for label in policies:
        policy, options = VARIANTS.get(label, (label, None))
        config = []
        if options is not None:   # (tenant-level max_min: the OEF paper's Gavel)
            path = Path(tempfile.mkdtemp()) / "gpufair.toml"
            path.write_text(options, encoding="utf-8")
            config = ["--config", str(path)]
        began = time.perf_counter()
        cpu0 = _children_cpu()
        proc = subprocess.run([sys.executable, "-m", "gpufair", "replay", str(source),
                               "--policies", policy, "--json", "--time-limit",
                               str(time_limit), *cluster, *config],
                              capture_output=True, text=True)
        wall = time.perf_counter() - began
        cpu = _children_cpu() - cpu0
        reports = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        run = next((r for r in reports if r.get("policy") == policy), None)
        rows.append({"policy": label, "exit": proc.returncode, "wall_s": wall, "cpu_s": cpu,
                     "jobs": run["trace_jobs"] if run else None,
                     "finished": run["num_jobs"] if run else None,
                     "rounds": run["rounds"] if run else None,
                     "partial": run["partial"] if run else None,
                     "error": proc.stderr.strip()[-200:] if proc.returncode not in (0, 3)
                     else ""})
    return rows


def _children_cpu() -> float:
    """CPU seconds of the finished child processes (the machine may be shared: wall seconds
    then say more about the neighbours than about gpufair)."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--history", default=str(SHARED_HELIOS) if SHARED_HELIOS.exists()
                        else "helios_dirlab_1k")
    parser.add_argument("--jobs", type=int, help="replay only the first N jobs")
    parser.add_argument("--policies", default=BASELINES)
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--skip-read", action="store_true")
    parser.add_argument("--cluster", help="e.g. gpu:512 (default: inferred, no waits)")
    parser.add_argument("--gpus-per-server", default="8")
    args = parser.parse_args()
    if not args.skip_read:
        r = bench_read(args.lines, args.seed)
        print(f"sacct --parsable2, {args.lines:,} lines ({r['size_mb']:.0f} MB), seed "
              f"{args.seed}\n")
        print("| step | wall (s) | CPU (s) |\n|---|---|---|")
        print(f"| read (pandas) and apply the rules | {r['read_s']:.1f} | "
              f"{r['read_cpu_s']:.1f} |")
        print(f"| convert to the trace | {r['convert_s']:.1f} | {r['convert_cpu_s']:.1f} |")
        print(f"| total | {r['read_s'] + r['convert_s']:.1f} | "
              f"{r['read_cpu_s'] + r['convert_cpu_s']:.1f} |")
        print(f"\npeak RSS {r['peak_rss_mb']:.0f} MB; {r['jobs']:,} jobs replayable, "
              f"left out {r['excluded']}\n")
    cluster = [] if args.cluster is None else ["--cluster", args.cluster,
                                               "--gpus-per-server", args.gpus_per_server]
    rows = bench_policies(args.history, args.jobs, args.policies.split(","),
                          args.time_limit, cluster)
    print(f"history {args.history}" + (f", first {args.jobs:,} jobs" if args.jobs else "")
          + f", cluster {args.cluster or 'inferred'}, --time-limit {args.time_limit:g} s\n")
    print("| policy | jobs | finished | rounds | wall (s) | CPU (s) | partial |\n"
          "|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['policy']} | {row['jobs']} | {row['finished']} | {row['rounds']} | "
              f"{row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row['partial']} |"
              + (f" {row['error']}" if row["error"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

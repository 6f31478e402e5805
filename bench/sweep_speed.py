"""``gpufair sweep`` on this machine: the local pool's throughput against one process, and
what a cell costs beyond its simulation (process, reading the sweep, writing the results).

    python bench/sweep_speed.py [--cells 24] [--jobs 2]

Each run starts from an empty results directory. The cells are short simulations (the demo
trace: fifo, las and srtf, over seeds and round lengths), so the overhead shows. Prints one
table; the figures depend on how busy the machine is (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from gpufair.core.simulation import simulate
from gpufair.sweep.grid import load_sweep
from gpufair.sweep.run import claim_out, run_local


def sweep_file(folder: Path, cells: int) -> Path:
    policies = ["fifo", "las", "srtf"]
    seeds = max(1, cells // (len(policies) * 4))
    path = folder / "bench.toml"
    path.write_text(f'out = "results"\n[grid]\npolicy = {policies}\nseed = {list(range(seeds))}\n'
                    "round = [120, 240, 360, 480]\n".replace("'", '"'), encoding="utf-8")
    return path


def timed(path: Path, jobs: int) -> float:
    sweep = load_sweep(path)
    shutil.rmtree(sweep.out, ignore_errors=True)
    claim_out(sweep)
    started = time.perf_counter()
    outcomes = run_local(sweep, jobs=jobs)
    wall = time.perf_counter() - started
    assert len(outcomes) == len(sweep.cells) and not any(o.error for o in outcomes)
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=24, help="cells (a multiple of 12)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpufair-sweep-bench-") as tmp:
        path = sweep_file(Path(tmp), args.cells)
        sweep = load_sweep(path)
        started = time.perf_counter()
        for cell in sweep.cells:   # the simulations alone, in this process
            simulate(cell.spec(), progress=False)
        bare = time.perf_counter() - started
        one = timed(path, 1)
        many = timed(path, args.jobs)
    n = len(sweep.cells)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {n} cells")
    print("| run | wall s | cells/s | speed-up | per-cell overhead s |")
    print("|---|---|---|---|---|")
    print(f"| simulations alone | {bare:.2f} | {n / bare:.2f} | - | - |")
    print(f"| sweep, 1 process | {one:.2f} | {n / one:.2f} | 1.00x | {(one - bare) / n:.3f} |")
    print(f"| sweep, {args.jobs} processes | {many:.2f} | {n / many:.2f} | {one / many:.2f}x | "
          f"- |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

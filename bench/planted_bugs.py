"""Plant the bugs of issue 21's table one at a time and see which unit test catches each.

Each bug is a one-line change a reviewer could plausibly make. It is planted in a scratch copy
of the package (the working tree is never touched), then only the named unit test files run
against it, end-to-end tests left out (``-k "not canonical"``: the golden-number runs on the
canonical trace), so a "caught" here means a unit test caught it. The first failing test is
printed.

    python bench/planted_bugs.py              # every bug
    python bench/planted_bugs.py themis_filter_floor
    python bench/planted_bugs.py --list
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Bug:
    name: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


BUGS = (
    Bug("rho_themis_no_max1", "metrics.rho_themis: drop max(1, contention)",
        "gpufair/metrics.py", "max(1.0, o.avg_contention)", "o.avg_contention",
        ("tests/test_metrics.py", "tests/test_mutants_metrics.py")),
    Bug("p99_as_p95", "metrics.compute_metrics: p99 computed as p95",
        "gpufair/metrics.py", "[50, 90, 99]", "[50, 90, 95]",
        ("tests/test_metrics.py", "tests/test_mutants_metrics.py")),
    Bug("shockwave_fill_shortest", "Shockwave: idle GPUs handed to the shortest jobs",
        "gpufair/policy/shockwave/policy.py", "key=lambda v: -v.remaining_s)",
        "key=lambda v: v.remaining_s)",
        ("tests/test_shockwave.py", "tests/test_shockwave_fast.py",
         "tests/test_mutants_shockwave.py")),
    Bug("shockwave_rho_no_contention", "Shockwave ρ̂: drop the average-contention factor",
        "gpufair/policy/shockwave/policy.py",
        "(attained + waited + remaining * n_avg) / (predicted_total * n_avg)",
        "(attained + waited + remaining) / predicted_total",
        ("tests/test_shockwave.py", "tests/test_shockwave_fast.py",
         "tests/test_mutants_shockwave.py")),
    Bug("shockwave_utility_no_done", "Shockwave market utility: epochs already done left out",
        "gpufair/policy/shockwave/policy.py", "(done[:, None] + progress)", "(progress)",
        ("tests/test_shockwave.py", "tests/test_shockwave_fast.py",
         "tests/test_mutants_shockwave.py")),
    Bug("translate_no_suspend_time", "Slurm translate: ignore suspend_time",
        "gpufair/adapters/slurm/translate.py", "now - max(start, suspended)", "now - start",
        ("tests/test_slurm_translate.py", "tests/test_slurm_actions.py",
         "tests/test_mutants_translate.py")),
    Bug("translate_held_and", "Slurm translate: held-job rule `or` → `and`",
        "gpufair/adapters/slurm/translate.py",
        "reason in HELD_REASONS or (raw_state", "reason in HELD_REASONS and (raw_state",
        ("tests/test_slurm_translate.py", "tests/test_slurm_actions.py",
         "tests/test_mutants_translate.py")),
    Bug("translate_gpus_per_node_only", "Slurm translate: GPUs not multiplied by node count",
        "gpufair/adapters/slurm/translate.py",
        "sum(e.count for e in per_node) * count", "sum(e.count for e in per_node)",
        ("tests/test_slurm_translate.py", "tests/test_slurm_actions.py",
         "tests/test_mutants_translate.py")),
    Bug("summary_fresh_no_batch_filter", "profiler summary: no batch-size filter on fresh samples",
        "gpufair/profiler/summary.py",
        'if cur is not None and cur.cause in ("batch_size", "restart"):',
        "if False:",
        ("tests/test_profiler_model.py", "tests/test_profiler_summary_columns.py",
         "tests/test_profiler_dropped.py", "tests/test_mutants_profiler.py")),
    Bug("snapshot_no_finish_before_start", "snapshot validation: drop the finish < start check",
        "gpufair/model/snapshot.py", "elif start is not None and finish < start:",
        "elif False:",
        ("tests/test_snapshot.py", "tests/test_mutants_snapshot.py")),
    Bug("cap_ceil", "daemon preemption cap: floor → ceil",
        "gpufair/core/guards.py", "math.floor(share * state.gpu_count() + 1e-9)",
        "math.ceil(share * state.gpu_count() - 1e-9)",
        ("tests/test_core_mutants.py", "tests/test_core_round.py",
         "tests/test_mutants_guards.py")),
    Bug("themis_filter_floor", "Themis filter: ceil → floor",
        "gpufair/policy/themis/policy.py",
        "math.ceil((1.0 - self.settings.f) * len(views) - 1e-9)",
        "math.floor((1.0 - self.settings.f) * len(views) + 1e-9)",
        ("tests/test_themis_policy.py", "tests/test_mutants_themis.py")),
)
BY_NAME = {b.name: b for b in BUGS}


def plant(bug: Bug, root: Path) -> None:
    """Copy the package and tests to ``root`` and make the one change (it must match once)."""
    for part in ("gpufair", "tests", "etc", "docs", "scripts"):
        if (REPO / part).is_dir():
            shutil.copytree(REPO / part, root / part,
                            ignore=shutil.ignore_patterns("__pycache__", "integration"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / part, root / part)
    target = root / bug.path
    text = target.read_text(encoding="utf-8")
    if text.count(bug.old) != 1:
        raise SystemExit(f"{bug.name}: {bug.old!r} occurs {text.count(bug.old)} times in "
                         f"{bug.path}: the bug list is out of date")
    target.write_text(text.replace(bug.old, bug.new), encoding="utf-8")


def check(bug: Bug) -> tuple[bool, str, float]:
    """(caught, the first failing test or '', seconds)."""
    with tempfile.TemporaryDirectory(prefix=f"plant-{bug.name}-") as tmp:
        root = Path(tmp)
        plant(bug, root)
        tests = [t for t in bug.tests if (root / t).exists()]
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
             "-k", "not canonical", *tests],
            cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True,
            text=True, check=False)
        seconds = time.monotonic() - start
    failed = re.findall(r"^FAILED (\S+)", done.stdout, flags=re.M)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{bug.name}: pytest exited {done.returncode}:\n{done.stdout[-2000:]}")
    return done.returncode == 1, failed[0] if failed else "", seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bugs", nargs="*", metavar="BUG", help="bugs to plant (default: all)")
    parser.add_argument("--list", action="store_true", help="list the bugs")
    args = parser.parse_args(argv)
    unknown = [n for n in args.bugs if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown bug(s) {', '.join(unknown)}: choose from {', '.join(BY_NAME)}")
    chosen = [BY_NAME[n] for n in args.bugs] or list(BUGS)
    if args.list:
        for bug in chosen:
            print(f"{bug.name:<32} {bug.what}")
        return 0
    missed = 0
    print(f"{'bug':<32} {'caught':<6} {'s':>5}  first failing test", flush=True)
    for bug in chosen:
        caught, test, seconds = check(bug)
        missed += not caught
        print(f"{bug.name:<32} {'yes' if caught else 'NO':<6} {seconds:>5.0f}  {test}",
              flush=True)
    print(f"{len(chosen) - missed} of {len(chosen)} caught by unit tests")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

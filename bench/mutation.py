"""Mutation score of the modules where a wrong number misleads users, one module at a time.

mutmut (the ``mutation`` extra) plants one small bug at a time in a module and runs that
module's fast unit test files against it; a mutant the tests do not fail on "survived". The
machine is small and shared, so each module is measured on its own, against only the unit test
files that exercise it (never the integration tests, never the whole suite), with mutmut's
per-mutant timeout. Each module runs in its own scratch copy of the checkout, so runs never touch
the working tree and a module's results are cached there between runs.

    python bench/mutation.py                       # every module, in priority order
    python bench/mutation.py metrics guards        # chosen modules
    python bench/mutation.py --list                # the modules and their test files
    python bench/mutation.py metrics --survivors   # also list the surviving mutants

It prints one row per module: mutants, killed, survived, timeouts, score = (killed + timeout) /
(all mutants that ran), and the CPU seconds it took (wall time on a shared machine misleads).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTMUT = Path(sys.executable).with_name("mutmut")


@dataclass(frozen=True)
class Module:
    name: str
    source: str
    tests: tuple[str, ...]
    #: tests left out of the run: property tests that take ~40 s each time (the score can
    #: only be lower without them: a mutant they alone would kill counts as a survivor)
    deselect: tuple[str, ...] = ()


#: In priority order: the first ones are measured first when time is short.
MODULES = (
    Module("metrics", "gpufair/metrics.py",
           ("tests/test_metrics.py", "tests/test_mutants_metrics.py")),
    Module("guards", "gpufair/core/guards.py",
           ("tests/test_core_mutants.py", "tests/test_core_round.py",
            "tests/test_mutants_guards.py")),
    Module("snapshot", "gpufair/model/snapshot.py",
           ("tests/test_snapshot.py", "tests/test_mutants_snapshot.py"),
           ("tests/test_snapshot.py::test_round_trip_property",)),
    Module("translate", "gpufair/adapters/slurm/translate.py",
           ("tests/test_slurm_translate.py", "tests/test_mutants_translate.py"),
           ("tests/test_slurm_translate.py::test_translate_never_raises_and_keeps_untouched_jobs",
            )),
    Module("actions", "gpufair/core/actions.py",
           ("tests/test_core_mutants.py", "tests/test_mutants_actions.py")),
    Module("summary", "gpufair/profiler/summary.py",
           ("tests/test_profiler_model.py", "tests/test_profiler_summary_columns.py",
            "tests/test_profiler_dropped.py", "tests/test_mutants_profiler.py"),
           ("tests/test_profiler_summary_columns.py::test_columnar_add_equals_the_per_row_reference",
            "tests/test_profiler_summary_columns.py::test_observe_times_equals_observe_time",
            "tests/test_profiler_dropped.py::test_many_at_once_equals_one_at_a_time")),
    Module("robust", "gpufair/profiler/robust.py",
           ("tests/test_profiler_model.py", "tests/test_mutants_profiler.py")),
)
BY_NAME = {m.name: m for m in MODULES}


#: What the tests read besides the package (an example snapshot in etc/, the README's tour...).
COPIED = ("gpufair", "tests", "etc", "docs", "scripts", "README.md")


def scratch_copy(module: Module, workdir: Path) -> Path:
    """A copy of the package and the tests with a mutmut section that mutates one module and
    selects only its test files (mutmut reads its config from the current directory)."""
    root = workdir / module.name
    root.mkdir(parents=True, exist_ok=True)
    for part in COPIED:
        target = root / part
        if target.is_dir():
            shutil.rmtree(target)
        if (REPO / part).is_dir():
            shutil.copytree(REPO / part, target,
                            ignore=shutil.ignore_patterns("__pycache__", "*.so", "integration"))
        elif (REPO / part).exists():
            shutil.copy(REPO / part, target)
    tests = [t for t in module.tests if (REPO / t).exists()]
    project = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    config = {
        "source_paths": ["gpufair"],
        "only_mutate": [module.source],
        "also_copy": [p for p in COPIED if p not in ("gpufair", "tests") and (REPO / p).exists()],
        "pytest_add_cli_args": ["-q", "-p", "no:cacheprovider", "-x",
                                *(f"--deselect={t}" for t in module.deselect)],
        "pytest_add_cli_args_test_selection": tests,
        "timeout_multiplier": 5.0,     # CPU seconds (SIGXCPU): a shared machine does not
        "timeout_constant": 3.0,       # inflate them; a mutant that loops is cut short
        "use_git_change_detection": False,
        "use_setproctitle": False,
    }
    section = "\n[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in config.items())
    (root / "pyproject.toml").write_text(project + section, encoding="utf-8")
    return root


def statuses(root: Path, module: Module) -> dict[str, int | None]:
    """Mutant name → mutmut's exit code, from the results file mutmut keeps beside the copy."""
    meta = root / "mutants" / (module.source + ".meta")
    if not meta.exists():
        return {}
    return json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]


KILLED = {1, 3}
TIMEOUT = {36, 24, -24, 152, 255}


def run_module(module: Module, workdir: Path, children: int, keep: bool,
               survivors_only: bool) -> tuple[dict, float]:
    root = scratch_copy(module, workdir)
    names: list[str] = []
    if survivors_only:   # tests were only added since: a killed mutant stays killed
        names = [k for k, c in statuses(root, module).items() if c not in KILLED | TIMEOUT]
        if not names and statuses(root, module):
            return statuses(root, module), 0.0
        # mutmut re-copies the tests only into a fresh mutants/ tree: refresh them by hand
        shutil.rmtree(root / "mutants" / "tests", ignore_errors=True)
        shutil.copytree(root / "tests", root / "mutants" / "tests")
    elif not keep:   # mutmut's cache can keep verdicts from before a test changed
        shutil.rmtree(root / "mutants", ignore_errors=True)
    env = dict(os.environ, PYTHONPATH="", CI="")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(root / "mutmut.log", "w", encoding="utf-8") as log:
        subprocess.run([str(MUTMUT), "run", "--max-children", str(children), *names], cwd=root,
                       env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log = (root / "mutmut.log").read_text(encoding="utf-8", errors="replace")
    if "failed to collect stats" in log or "FAILED" in log.split("Running mutation testing")[0]:
        tail = log.replace("\r", "\n").splitlines()[-25:]
        print(f"{module.name}: the tests fail without any mutant (mutmut.log):", *tail,
              sep="\n", file=sys.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return statuses(root, module), cpu


def mutant_diff(root: Path, module: Module, key: str) -> list[str]:
    """The changed lines of one mutant, read from mutmut's mutated copy of the module (the
    original and each mutant are functions side by side there); ``mutmut show`` says the
    same but starts a process per mutant."""
    source = (root / "mutants" / module.source).read_text(encoding="utf-8")
    functions = _functions(source)
    name = key.rsplit(".", 1)[-1]
    orig = functions.get(name.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
    mutant = functions.get(name)
    if orig is None or mutant is None:
        return ["(source not found)"]
    diff = difflib.unified_diff(orig.splitlines()[1:], mutant.splitlines()[1:], lineterm="",
                                n=0)
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@functools.lru_cache(maxsize=4)
def _functions(source: str) -> dict[str, str]:
    lines = source.splitlines()
    return {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno])
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def score_row(name: str, codes: dict[str, int | None], cpu: float, wall: float) -> str:
    kinds = Counter("killed" if c in KILLED else "timeout" if c in TIMEOUT
                    else "survived" if c == 0 else "no tests" if c in (5, 33)
                    else "not run" if c is None else f"other({c})" for c in codes.values())
    ran = sum(n for k, n in kinds.items() if k != "not run")
    score = (kinds["killed"] + kinds["timeout"]) / ran if ran else float("nan")
    return (f"{name:<10} {len(codes):>7} {kinds['killed']:>6} {kinds['survived']:>8} "
            f"{kinds['no tests']:>8} {kinds['timeout']:>7} {score:>6.1%} {cpu:>8.0f} {wall:>7.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE",
                        help=f"modules to measure (default: all, in order): {', '.join(BY_NAME)}")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gpufair-mutation"),
                        help="scratch directory for the per-module copies and mutmut's cache")
    parser.add_argument("--children", type=int, default=1,
                        help="mutants tested in parallel (the machine is shared: default 1)")
    parser.add_argument("--keep", action="store_true",
                        help="reuse mutmut's cached verdicts from the last run (faster, but a "
                             "verdict may predate a test change)")
    parser.add_argument("--survivors-only", action="store_true",
                        help="test again only the mutants that survived the last run or were "
                             "not run (valid when tests were only added since; much faster)")
    parser.add_argument("--report", action="store_true",
                        help="run nothing: print the last run's results from the workdir")
    parser.add_argument("--survivors", action="store_true", help="list surviving mutants")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    args = parser.parse_args(argv)
    unknown = [n for n in args.modules if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}: choose from {', '.join(BY_NAME)}")
    chosen = [BY_NAME[n] for n in args.modules] or list(MODULES)
    if args.list:
        for m in chosen:
            print(f"{m.name:<10} {m.source:<40} {' '.join(m.tests)}")
        return 0
    if not MUTMUT.exists():
        print(f"mutmut not found beside {sys.executable}: pip install -e '.[mutation]'",
              file=sys.stderr)
        return 2
    print(f"{'module':<10} {'mutants':>7} {'killed':>6} {'survived':>8} {'no tests':>8} "
          f"{'timeout':>7} {'score':>6} {'CPU s':>8} {'wall s':>7}", flush=True)
    for module in chosen:
        start = time.monotonic()
        if args.report:
            codes, cpu = statuses(args.workdir / module.name, module), 0.0
        else:
            codes, cpu = run_module(module, args.workdir, args.children, args.keep,
                                    args.survivors_only)
        print(score_row(module.name, codes, cpu, time.monotonic() - start), flush=True)
        if args.survivors:
            for key, code in sorted(codes.items()):
                if code is not None and code not in KILLED | TIMEOUT:
                    print(f"    {key}: exit {code}")
                    for line in mutant_diff(args.workdir / module.name, module, key):
                        print(f"        {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

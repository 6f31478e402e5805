"""How well every gpufair command answers malformed input (issue 13): the bad-input corpus
(tests/bad_inputs/cases.toml) plus N generated cases, each run in-process and judged by the
contract of tests/bad_inputs/contract.py: exit 0 with a result, or exit 2 with one line
naming the input; no traceback, no hang, strict JSON.

    python bench/bad_inputs.py [--generated N] [--seed S] [--list]

Prints one markdown table (cases tried, met the contract, and each kind of failure) per
source and in total; ``--list`` adds every failing case with why. Exit 1 when a case fails.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bad_inputs import generate
from bad_inputs.contract import VERDICTS, Case, judge, load_cases, run

COLUMNS = {"ok": "met the contract", "traceback": "tracebacks",
           "wrong exit code": "wrong exit code", "hang": "hangs",
           "silent acceptance": "silent acceptances", "unclear message": "unclear messages",
           "non-strict JSON": "non-strict JSON"}


def generated(count: int, seed: int, scratch: Path) -> list[tuple[str, Case]]:
    rng = random.Random(seed)
    kinds = sorted(generate.MAKERS)
    return [(f"generated {kind}", generate.MAKERS[kind](rng, scratch / f"{i}"))
            for i, kind in ((i, kinds[i % len(kinds)]) for i in range(count))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generated", type=int, default=140, help="generated cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="list every failing case")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpufair-bad-inputs-") as tmp:
        scratch = Path(tmp)
        cases = [("corpus", c) for c in load_cases(str(scratch / "corpus"))]
        cases += generated(args.generated, args.seed, scratch / "generated")
        counts: dict[str, Counter[str]] = {}
        failures = []
        started = time.perf_counter()
        for source, case in cases:
            verdict, why = judge(case, run(case.argv, env=case.env))
            counts.setdefault(source, Counter())[verdict] += 1
            if verdict != "ok":
                failures.append((case.name, verdict, why, " ".join(case.argv)))
        wall = time.perf_counter() - started
    total: Counter[str] = sum(counts.values(), Counter())
    header = ["source", "cases tried", *(COLUMNS[v] for v in VERDICTS)]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for source, row in [*sorted(counts.items()), ("**total**", total)]:
        cells = [source, str(sum(row.values())), *(str(row[v]) for v in VERDICTS)]
        print("| " + " | ".join(cells) + " |")
    print(f"\n{sum(total.values())} cases in {wall:.1f} s (seed {args.seed}); "
          f"{len(failures)} broke the contract")
    if args.list:
        for name, verdict, why, argv in failures:
            print(f"- {name}: {verdict}: {why}\n  gpufair {argv}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

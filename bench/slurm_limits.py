"""Slurm limits read ahead (issue 29): what the parse of ``scontrol show assoc_mgr`` and the
admission of the waiting jobs cost a round at site scale.

    python bench/slurm_limits.py [--accounts 2750] [--jobs 5000] [--seed 0] [--repeat 5]

The text is 22.05's, built from the records the loopback Slurm printed
(``tests/data/slurm/assoc_mgr_tres_22.05.txt``): root, then per account one account record
and one user record (``--accounts`` of each: 2,750 make 5,500 associations), every other
account with a ``GrpTRES`` on GPUs, CPUs and a typed GPU, every third user with
``MaxTRESPerJob``, ``MaxWall`` and ``GrpTRESRunMins``; then the loopback's QOS records.
The waiting jobs (``--jobs``) ask 1-8 GPUs (a third of them typed), CPUs, memory and a time
limit, spread over the accounts. Each row is the median over ``--repeat`` runs of the
process CPU time (``time.process_time``: a shared machine's other work does not count) and
of the wall time, in milliseconds; the last column is how many jobs a limit kept out.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpufair.adapters.slurm.limits import Demand, admit, parse_assoc_mgr  # noqa: E402

REAL = ROOT / "tests" / "data" / "slurm" / "assoc_mgr_tres_22.05.txt"


def _records(text: str) -> tuple[str, str, str, str]:
    """(header and root's record, an account record, a user record, the QOS records) of the
    real text, as templates."""
    assoc, _, qos = text.partition("\nQOS Records\n")
    head, *records = re.split(r"(?m)^(?=ClusterName=)", assoc)
    root = next(r for r in records if "Account=root UserName= " in r)
    account = next(r for r in records if "Account=research UserName= " in r)
    user = next(r for r in records if "Account=vision UserName=root(0)" in r)
    return head + root, account, user, "\nQOS Records\n" + qos


def site_text(accounts: int) -> str:
    """assoc_mgr text of ``accounts`` accounts with one user each."""
    root, account, user, qos = _records(REAL.read_text())
    parts = [root]
    for n in range(accounts):
        name = f"acct{n}"
        rec = account.replace("Account=research ", f"Account={name} ")
        if n % 2:    # no limit: N(use)
            rec = re.sub(r"(cpu|mem|gres/gpu:k80)=\d+\(", r"\1=N(", rec)
        parts.append(rec)
        rec = user.replace("Account=vision ", f"Account={name} ")
        if n % 3:
            rec = re.sub(r"MaxTRES(PJ|PN|MinsPJ)=\S*", r"MaxTRES\1=", rec)
            rec = rec.replace("MaxWallPJ=90", "MaxWallPJ=")
        parts.append(rec)
    return "".join(parts) + qos


def site_jobs(accounts: int, jobs: int, seed: int) -> list[tuple[str, Demand, tuple]]:
    rng = random.Random(seed)
    out = []
    for n in range(jobs):
        gpus = rng.choice((1, 1, 2, 4, 8))
        tres = {"cpu": rng.choice((1, 2, 4, 8)), "mem": rng.choice((1000, 4000, 16000)),
                "node": 1, "billing": 1, "gres/gpu": gpus}
        if n % 3 == 0:
            tres[f"gres/gpu:{rng.choice(('k80', 'v100'))}"] = gpus
        who = (f"acct{rng.randrange(accounts)}", "root", 0, "gpu", "normal")
        out.append((str(n), Demand(tres, 1, float(rng.choice((10, 30, 60, 120)))), who))
    return out


def _timed(call, repeat: int) -> tuple[float, float, object]:
    cpu, wall, result = [], [], None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        result = call()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu) * 1e3, statistics.median(wall) * 1e3, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=2750)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    text = site_text(args.accounts)
    jobs = site_jobs(args.accounts, args.jobs, args.seed)
    parse_cpu, parse_wall, limits = _timed(lambda: parse_assoc_mgr(text), args.repeat)
    associations = len(limits.associations)
    admit_cpu, admit_wall, kept = _timed(lambda: admit(jobs, [], limits), args.repeat)
    print(f"assoc_mgr text: {len(text):,} bytes, {associations:,} associations; "
          f"{len(jobs):,} waiting jobs; median of {args.repeat}")
    print("| step | size | CPU ms | wall ms | kept out |")
    print("|---|---:|---:|---:|---:|")
    print(f"| parse | {associations:,} associations | {parse_cpu:.1f} | {parse_wall:.1f} | |")
    print(f"| admit | {len(jobs):,} jobs | {admit_cpu:.1f} | {admit_wall:.1f} | {len(kept):,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

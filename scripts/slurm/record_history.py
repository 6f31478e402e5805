#!/usr/bin/env python3
"""Make a real job history on an accounting loopback Slurm and save what sacct says of it.

Run on a cluster started with ``scripts/slurm/up.sh --accounting`` (SLURM_CONF pointing at it),
as root. It submits a seeded workload with what real sites' histories hold, waits until every
job has finished and slurmdbd has recorded it, then writes into ``--out``:

- ``sacct_parsable2.txt``: ``sacct --allusers --allocations --duplicates --parsable2`` with a
  header and the fields of :data:`gpufair.adapters.slurm.sacct.SACCT_FIELDS` (the exact command
  ``gpufair replay --sacct`` runs), saved as raw bytes (job names that are not UTF-8 stay so);
- ``sacct.json``: ``sacct --json`` of the same jobs and states (openapi dbv0.0.38 in 22.05);
- ``workload.json``: what was submitted (job id, user, account, GPUs, sleep, time limit, case).

The workload: a burst of FIFO + backfill jobs (1, 2, 4 GPUs on one node and 2x4 GPUs on two
nodes, typed and untyped GRES, seconds of work under minutes of time limit, three users in
three accounts), plus one of each special case: an array, a requeue (``scontrol requeue``), a
failure (exit 1), a time-out (``--time=1``, outlives it: the run takes about 1.5 minutes), a
cancellation before start, a cancellation while running, a job without GPUs, and a job name
that is not UTF-8. ``--quick`` leaves the time-out out and keeps burst jobs to 4-6 s (the
integration test's variant).

``--burst-only`` submits the burst alone with untyped GRES, for a cluster of one GPU type
(``SLURM_LO_NODES``): the history ``slurm_backfill``'s fidelity is measured on.

Usage: scripts/slurm/record_history.py [--out tests/data/sacct] [--seed 31] [--burst 30]
                                       [--quick] [--burst-only]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from gpufair.adapters.slurm.sacct import ALL_STATES, sacct_argv

#: (Unix user, account): root's default account is research (up.sh --accounting)
USERS = (("root", "research"), ("gpf-alice", "vision"), ("gpf-bob", "nlp"))
FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


@dataclass
class Submitted:
    job_id: str
    case: str
    user: str
    account: str
    gpus: str
    nodes: int
    sleep_s: float
    time_limit_min: int


def run(argv: list[str | bytes], *, timeout: float = 30.0) -> str:
    proc = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        sys.exit(f"record_history: {argv!r} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode(errors="replace")


def ensure_users() -> None:
    """Local Unix users for the other tenants, and their Slurm associations."""
    for user, account in USERS:
        try:
            pwd.getpwnam(user)
        except KeyError:
            run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", user])
        known = run(["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}",
                     f"account={account}", "format=user"])
        if not known.strip():
            run(["sacctmgr", "-i", "add", "user", user, f"Account={account}"])


def sbatch(case: str, user: str, account: str, *, gres: str | None, nodes: int = 1,
           sleep_s: float, limit_min: int, name: bytes | None = None,
           extra: tuple[str, ...] = (), script: str | None = None) -> Submitted:
    argv: list[str | bytes] = [] if user == "root" else ["runuser", "-u", user, "--"]
    argv += ["sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", f"--account={account}",
             f"--time={limit_min}", f"--nodes={nodes}", "--ntasks-per-node=1"]
    if gres:
        argv.append(f"--gres={gres}")
    argv += ["-J", name or case.encode()]
    argv += [*extra, "--wrap", script or f"sleep {sleep_s:g}"]
    job_id = run(argv).strip().split(";")[0]
    return Submitted(job_id, case, user, account, gres or "", nodes, sleep_s, limit_min)


def state_of(job_id: str) -> str:
    out = run(["squeue", "-h", "-j", job_id, "-o", "%T"])
    return out.strip().splitlines()[0] if out.strip() else "GONE"


def wait(what: str, predicate, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.5)
    sys.exit(f"record_history: timed out waiting for {what}")


def special_cases(quick: bool) -> list[Submitted]:
    jobs = []
    if not quick:   # first, so it starts at once: it runs until the time limit kills it
        jobs.append(sbatch("timeout", "gpf-bob", "nlp", gres="gpu:k80:1", sleep_s=600,
                           limit_min=1))
    jobs.append(sbatch("array", "gpf-alice", "vision", gres="gpu:1", sleep_s=3, limit_min=1,
                       extra=("--array=0-3",)))
    jobs.append(sbatch("fail", "root", "research", gres="gpu:1", sleep_s=2, limit_min=1,
                       script="sleep 2; exit 1"))
    jobs.append(sbatch("nongpu", "gpf-bob", "nlp", gres=None, sleep_s=2, limit_min=1))
    jobs.append(sbatch("name-not-utf8", "gpf-alice", "vision", gres="gpu:v100:1", sleep_s=2,
                       limit_min=1, name=b"caf\xe9-\xff\xfe-latin1"))
    held = sbatch("cancel-pending", "root", "vision", gres="gpu:2", sleep_s=5, limit_min=1,
                  extra=("--hold",))
    jobs.append(held)
    requeued = sbatch("requeue", "root", "research", gres="gpu:v100:2", sleep_s=8,
                      limit_min=2)
    jobs.append(requeued)
    killed = sbatch("cancel-running", "gpf-alice", "vision", gres="gpu:k80:2", sleep_s=300,
                    limit_min=10)
    jobs.append(killed)
    time.sleep(1.0)
    run(["scancel", held.job_id])
    wait("the job to requeue running", lambda: state_of(requeued.job_id) == "RUNNING", 60)
    wait("the job to cancel running", lambda: state_of(killed.job_id) == "RUNNING", 60)
    time.sleep(3.0)   # some attained time before the requeue and the cancel
    run(["scontrol", "requeue", requeued.job_id])
    run(["scancel", killed.job_id])
    # a requeued job waits ~120 s in BeginTime: eligible again at once
    wait("the requeue to settle", lambda: state_of(requeued.job_id) == "PENDING", 60)
    run(["scontrol", "update", f"JobId={requeued.job_id}", "StartTime=now"])
    return jobs


def burst(rng: random.Random, count: int, longest_s: int, *, typed: bool = True,
          one_node: bool = False) -> list[Submitted]:
    """FIFO + backfill: more GPUs asked than the 16 there are, limits well above run times.
    ``typed``: some jobs ask for V100s or K80s (the default cluster has both); ``one_node``:
    1 to 4 GPUs on one node, no multi-node jobs."""
    shapes = [("gpu:1", 1), ("gpu:2", 1), ("gpu:4", 1), ("gpu:4", 2), ("gpu:v100:2", 1),
              ("gpu:k80:4", 1), ("gpu:v100:4", 2), ("gpu:1", 1), ("gpu:2", 1)]
    if not typed:
        shapes = [(gres.replace("v100:", "").replace("k80:", ""), n) for gres, n in shapes]
    if one_node:
        shapes = [("gpu:1", 1), ("gpu:2", 1), ("gpu:3", 1), ("gpu:4", 1), ("gpu:1", 1)]
    jobs = []
    for i in range(count):
        gres, nodes = rng.choice(shapes)
        sleep_s = rng.randint(min(4, longest_s), longest_s)
        limit = rng.choice((1, 2, 3))
        user, account = USERS[i % len(USERS)]
        jobs.append(sbatch(f"burst-{i:02d}", user, account, gres=gres, nodes=nodes,
                           sleep_s=sleep_s, limit_min=limit))
        time.sleep(0.2)
    return jobs


def recorded(jobs: list[Submitted], start: str, end: str) -> bool:
    """slurmdbd writes asynchronously: every job's final record is there."""
    argv = [a for a in sacct_argv(start, end) if not a.startswith("--format=")]
    argv += ["--noheader", "--format=JobIDRaw,JobID,State"]
    rows = [line.split("|") for line in run(argv).splitlines() if line]
    final = {raw for raw, _jid, state in rows if state.split()[0] in FINAL}
    by_job = {jid.split("_")[0] for _raw, jid, state in rows if state.split()[0] in FINAL}
    return all(j.job_id in final or j.job_id in by_job for j in jobs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("tests/data/sacct"))
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--burst", type=int, default=30)
    parser.add_argument("--quick", action="store_true",
                        help="no time-out job, burst jobs of 4-6 s (the integration test's)")
    parser.add_argument("--burst-only", action="store_true",
                        help="the FIFO + backfill burst alone, untyped GRES (for a cluster of "
                        "one GPU type: SLURM_LO_NODES)")
    parser.add_argument("--one-node", action="store_true",
                        help="burst jobs of 1-4 GPUs on one node only")
    args = parser.parse_args()
    if "SLURM_CONF" not in os.environ:
        sys.exit("record_history: set SLURM_CONF to a cluster from up.sh --accounting")
    ensure_users()
    start = (datetime.now() - timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%S")
    rng = random.Random(args.seed)
    jobs = [] if args.burst_only else special_cases(args.quick)
    jobs += burst(rng, args.burst, 6 if args.quick else 30, typed=not args.burst_only,
                  one_node=args.one_node)
    wait("every job to finish", lambda: not run(["squeue", "-h", "-o", "%A"]).strip(), 900)
    end = (datetime.now() + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%S")
    wait("slurmdbd to record every job", lambda: recorded(jobs, start, end), 120)
    args.out.mkdir(parents=True, exist_ok=True)
    parsable = subprocess.run(sacct_argv(start, end), capture_output=True, timeout=60,
                              check=True).stdout
    (args.out / "sacct_parsable2.txt").write_bytes(parsable)
    as_json = subprocess.run(["sacct", "--json", "--allusers", "--duplicates",
                              f"--starttime={start}", f"--endtime={end}",
                              f"--state={ALL_STATES}"],
                             capture_output=True, timeout=60, check=True).stdout
    (args.out / "sacct.json").write_bytes(as_json)
    (args.out / "workload.json").write_text(json.dumps(
        {"seed": args.seed, "starttime": start, "endtime": end,
         "jobs": [asdict(j) for j in jobs]}, indent=1) + "\n")
    lines = len(parsable.splitlines()) - 1
    print(f"recorded {len(jobs)} submissions, {lines} sacct lines into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

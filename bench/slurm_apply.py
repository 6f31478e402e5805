"""Time and slurmctld RPCs to apply many starts, one at a time and together (issue 30 item 4).

    sudo .venv/bin/python bench/slurm_apply.py [--starts 1000] [--one-at-a-time 100]
        [--batch 100]

Brings up its own loopback Slurm in hard mode (``scripts/slurm/up.sh --hard``, 4 nodes of 4
GPUs, in a directory of its own on free ports; torn down at the end) and submits
``--starts`` + 2 x ``--one-at-a-time`` one-GPU jobs, which job_submit.lua holds for gpufair.
The Slurm adapter takes one snapshot of them all, then carries out a Start per job, each
pinned to one of the nodes in turn, in three blocks on the same queue: ``--one-at-a-time``
starts with :meth:`SlurmAdapter.apply_one` each (the way before issue 30 item 4, and
``[daemon] apply_batch = 1``), ``--starts`` with :meth:`SlurmAdapter.apply_many` in groups
of ``--batch`` (the daemon's default), and ``--one-at-a-time`` one at a time again, so load
on the shared machine hits both ways alike. The one-at-a-time figure per start is
extrapolated to ``--starts`` (at 0.4-0.8 s a start, 1,000 of them take minutes).

What is measured: wall time, this process's CPU time (gpufair), its children's CPU time
(the ``scontrol``/``squeue`` processes) and slurmctld's RPCs by message type (``sdiag``,
reset before each block; the sdiag calls themselves left out). Sixteen GPUs cannot run a
thousand jobs: once the plan is made, partition ``gpu`` is set DOWN, so the released jobs
stay pending (PartitionDown) and what is measured is the apply itself (pin, release,
checks), not slurmd launching jobs. Prints markdown tables. Needs root (``sdiag -r``).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from slurm_rpcs import markdown, reset, rpcs
from slurm_soak import Cluster

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.transport import CliTransport
from gpufair.model import Action, ActionResult, Start, gpu_id

NODES = ("gpu-v100-1", "gpu-v100-2", "gpu-k80-1", "gpu-k80-2")   # up.sh's default cluster


def submit(cluster: Cluster, count: int) -> list[str]:
    """``count`` held one-GPU jobs (four sbatch at a time: submitting is not measured)."""
    def one(_: int) -> str:
        done = cluster.run("sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1", "-o",
                           "/dev/null", "--wrap", "sleep 600")
        if done.returncode != 0:
            raise RuntimeError(f"sbatch failed: {done.stderr.strip()}")
        return done.stdout.strip().split(";")[0]
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(count)))


@dataclass(frozen=True)
class Block:
    """One block of starts as measured."""

    label: str
    starts: int
    done: int
    wall: float
    cpu: float          # this process (gpufair)
    child_cpu: float    # its scontrol/squeue processes
    rpcs: Counter[str]  # slurmctld's, by message type


def measure(label: str, apply: Callable[[list[Action]], list[ActionResult]],
            actions: list[Action]) -> Block:
    """One block of starts: wall, CPU (this process and its children), RPCs, outcomes."""
    reset()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, wall = time.process_time(), time.perf_counter()
    results = apply(actions)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    counts = rpcs()
    failed = [r.detail for r in results if not r.ok]
    if failed:
        print(f"({label}: {len(failed)} not done, e.g. {failed[0]})")
    return Block(label, len(actions), len(results) - len(failed), wall, cpu, child_cpu, counts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=1000, help="starts applied together")
    parser.add_argument("--one-at-a-time", type=int, default=100,
                        help="starts applied one by one, before and after (extrapolated)")
    parser.add_argument("--batch", type=int, default=100, help="starts per apply_many call")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpufair-apply-") as tmp:
        cluster = Cluster(Path(tmp) / "cluster", hard=True)
        try:
            cluster.up()
            os.environ["SLURM_CONF"] = cluster.conf   # for sdiag in slurm_rpcs
            total = args.starts + 2 * args.one_at_a_time
            started = time.perf_counter()
            ids = submit(cluster, total)
            print(f"{total} held jobs submitted in {time.perf_counter() - started:.0f} s")
            adapter = SlurmAdapter(CliTransport(env=cluster.env), SlurmSettings(), mode="hard")
            state = adapter.snapshot()
            held = {j.id for j in state.jobs}
            missing = [i for i in ids if i not in held]
            if missing:
                raise RuntimeError(f"{len(missing)} jobs not in the snapshot, e.g. {missing[0]}")
            cluster.run("scontrol", "update", "PartitionName=gpu", "State=DOWN")
            starts: list[Action] = [Start(job, (gpu_id(NODES[n % len(NODES)], 0),))
                                    for n, job in enumerate(ids)]
            k = args.one_at_a_time

            def one_by_one(actions: list[Action]) -> list[ActionResult]:
                return [adapter.apply_one(a) for a in actions]

            def together(actions: list[Action]) -> list[ActionResult]:
                return [r for first in range(0, len(actions), args.batch)
                        for r in adapter.apply_many(actions[first:first + args.batch])]

            blocks = [measure("one at a time (before)", one_by_one, starts[:k]),
                      measure(f"together, {args.batch} per call", together,
                              starts[k:k + args.starts]),
                      measure("one at a time (after)", one_by_one, starts[k + args.starts:])]
        finally:
            cluster.down(purge=True)
    print(f"\n{total} jobs in the queue; {args.starts} starts together, "
          f"{args.one_at_a_time} one at a time before and after them")
    rows = [["block", "starts (done)", "wall s", "wall s / start", "gpufair CPU s",
             "scontrol/squeue CPU s", "RPCs", "RPCs / start"]]
    rows += [[b.label, f"{b.starts} ({b.done})", f"{b.wall:.1f}", f"{b.wall / b.starts:.3f}",
              f"{b.cpu:.1f}", f"{b.child_cpu:.1f}", str(sum(b.rpcs.values())),
              f"{sum(b.rpcs.values()) / b.starts:.2f}"] for b in blocks]
    print(markdown(rows))
    kinds = sorted(set().union(*(b.rpcs for b in blocks)))
    rows = [["RPCs per start (sdiag)", *(b.label for b in blocks)]]
    rows += [[kind, *(f"{b.rpcs[kind] / b.starts:.2f}" for b in blocks)] for kind in kinds]
    print("\n" + markdown(rows))
    alone = [b.wall / b.starts * args.starts for b in (blocks[0], blocks[2])]
    print(f"\n{args.starts} starts: together {blocks[1].wall:.1f} s wall; one at a time "
          f"{min(alone):.0f}-{max(alone):.0f} s (extrapolated from {args.one_at_a_time} "
          "before and after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

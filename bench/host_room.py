"""What counting CPUs and memory costs a live round: one policy decision plus the round's
guards and fill, on the same busy state with and without node CPUs/memory and job requests.

    python bench/host_room.py [--jobs 1000] [--spec v100:1024,p100:512,k80:512]
                              [--policies fifo,las,max_min] [--repeat 3]

The state is ``bench/scale.py``'s busy round (jobs at random points of their lives); "with
requests" gives every node 64 CPUs and 512,000 MB and every job what a Slurm job asks (4 CPUs
per GPU, 30,000 MB per GPU: two 4-GPU jobs fill a node's memory), as the Slurm adapter reads
them. Prints a markdown table of the best wall time of ``--repeat`` runs (a shared machine
only ever slows a run down), and how many starts each variant sends.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scale import ROUND_S, busy_round, markdown

from gpufair.core.round import Round, RoundRules
from gpufair.model import ClusterState, HostRequest, Start
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

REQUEST = HostRequest(cpus_per_gpu=4, memory_per_gpu_mb=30_000)


def with_requests(state: ClusterState) -> ClusterState:
    """The same state as a Slurm site would show it: nodes count CPUs and memory, jobs ask."""
    nodes = tuple(replace(n, cpus=64, memory_mb=512_000) for n in state.nodes)
    jobs = tuple(replace(j, host=REQUEST) for j in state.jobs)
    return replace(state, nodes=nodes, jobs=jobs)


def timed(name: str, state: ClusterState, repeat: int) -> tuple[float, int]:
    """Best wall seconds of one daemon-like round (policy, guards, fill), and its starts."""
    best, starts = float("inf"), 0
    rules = RoundRules(fill_idle=True)
    for _ in range(repeat):
        policy = create_policy(name, PolicyConfig(round_s=ROUND_S))
        started = time.perf_counter()
        result = Round(policy, rules).run(state)
        best = min(best, time.perf_counter() - started)
        starts = sum(isinstance(a, Start) for a in result.actions)
    return best, starts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--spec", default="v100:1024,p100:512,k80:512")
    parser.add_argument("--policies", default="fifo,las,max_min")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    plain = busy_round(args.jobs, args.spec)
    asking = with_requests(plain)
    rows = [["policy", "GPUs only: s (starts)", "CPUs + memory: s (starts)", "ratio"]]
    for name in [p for p in args.policies.split(",") if p]:
        base, base_starts = timed(name, plain, args.repeat)
        host, host_starts = timed(name, asking, args.repeat)
        rows.append([name, f"{base:.3f} ({base_starts})", f"{host:.3f} ({host_starts})",
                     f"{host / base:.2f}x"])
    print(f"one round (policy + guards + fill), {args.jobs} jobs on {args.spec}, "
          f"best of {args.repeat}\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What gpufair costs slurmctld: RPCs per poll and per round, and seconds per start (issue 30).

    SLURM_CONF=… python bench/slurm_rpcs.py [--jobs 16] [--policy fifo]

Needs a running loopback Slurm in hard mode with slurmrestd (``SLURM_LO_BASE=/tmp/x
scripts/slurm/up.sh --hard --restd``; ``scripts/slurm/down.sh --purge`` after) and root
(``sdiag -r`` resets slurmctld's counters). It submits ``--jobs`` one-GPU jobs to partition
``gpu`` (job_submit.lua holds them for gpufair), then measures with ``sdiag``'s RPC
statistics by message type:

1. one *poll*: the snapshot the daemon takes every ``poll_s`` (``squeue --json`` and
   ``sinfo --json``), through the Slurm adapter;
2. one *quiet poll* over slurmrestd (``update_time``: nothing changed since the last read);
3. one *round* of the real daemon (``build_daemon`` from a config naming this cluster,
   policy ``--policy``), which starts the jobs that fit: its RPCs, its wall time, and the
   time per start.

Prints markdown tables. The cluster keeps the jobs; the script cancels them at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

_RPC = re.compile(r"^\s+(REQUEST_\w+|MESSAGE_\w+|RESPONSE_\w+)\s+\(\s*\d+\)\s+count:(\d+)")


def rpcs() -> Counter[str]:
    """slurmctld's RPC counts by message type since the last reset (the sdiag calls
    themselves, REQUEST_STATS_INFO, are left out)."""
    text = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    part = text.split("Remote Procedure Call statistics by message type")[1]
    part = part.split("Remote Procedure Call statistics by user")[0]
    counts: Counter[str] = Counter()
    for line in part.splitlines():
        match = _RPC.match(line)
        if match and match.group(1) != "REQUEST_STATS_INFO":
            counts[match.group(1)] = int(match.group(2))
    return counts


def reset() -> None:
    subprocess.run(["sdiag", "-r"], capture_output=True, check=True)


def quiet_poll(socket: Path) -> tuple[Counter[str], float]:
    """RPCs and this process's CPU seconds of one poll over slurmrestd on a cluster that did
    not change since the adapter's last read (the daemon's poll asks ``changed()`` first)."""
    from gpufair.adapters.slurm import RestTransport, SlurmAdapter
    from gpufair.adapters.slurm.adapter import CHANGE_MARGIN_S
    adapter = SlurmAdapter(RestTransport(f"unix:{socket}"))
    time.sleep(CHANGE_MARGIN_S + 3.0)   # the round's starts settle (prologs end, jobs run)
    adapter.snapshot()
    time.sleep(CHANGE_MARGIN_S + 1.5)   # past the margin: nothing changed since the read
    for _ in range(5):   # slurmd pings refresh node records every ~15 s: a quiet moment
        reset()
        cpu = time.process_time()
        changed = adapter.changed()
        cpu = time.process_time() - cpu
        if not changed:
            return rpcs(), cpu
        print("(nodes or jobs changed since the read: polled again)")
        adapter.snapshot()
        time.sleep(CHANGE_MARGIN_S + 1.5)
    return rpcs(), cpu


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows[1:])])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--policy", default="fifo")
    args = parser.parse_args()
    from gpufair.adapters.slurm import SlurmAdapter
    from gpufair.core.config import load_config
    from gpufair.plugin.service import build_daemon
    from gpufair.plugin.store import Store

    ids = [subprocess.run(["sbatch", "--parsable", "-p", "gpu", "--gres=gpu:1", "-o",
                           "/dev/null", "--wrap", "sleep 600"], capture_output=True,
                          text=True, check=True).stdout.strip() for _ in range(args.jobs)]
    try:
        with tempfile.TemporaryDirectory(prefix="gpufair-rpcs-") as tmp:
            config_path = Path(tmp) / "gpufair.toml"
            config_path.write_text(
                f'[daemon]\npolicy = "{args.policy}"\nhook_dir = "{tmp}/hooks"\n'
                f'[store]\npath = "{tmp}/state.db"\n[slurm]\nmanaged_partitions = ["gpu"]\n')
            config = load_config(str(config_path))
            adapter = SlurmAdapter.from_settings(config.slurm, mode="hard")
            store = Store(config.store.path)
            daemon = build_daemon(config, adapter, store)
            time.sleep(1.0)   # let the submissions settle (job_submit.lua, the first pass)
            reset()
            started = time.perf_counter()
            adapter.snapshot()
            poll_s = time.perf_counter() - started
            poll = rpcs()
            reset()
            started = time.perf_counter()
            round_id = daemon.run_round()
            round_s = time.perf_counter() - started
            per_round = rpcs()
            actions = store.journal(round_id) if round_id is not None else []
            done = sum(e.status == "done" for e in actions)
            store.close()
            quiet, quiet_cpu = quiet_poll(Path(os.environ["SLURM_CONF"]).parents[1] / "run"
                                          / "slurmrestd.sock")
    finally:
        subprocess.run(["scancel", *ids], capture_output=True, check=False)
    kinds = sorted(set(poll) | set(per_round) | set(quiet))
    rows = [["RPC (sdiag)", "one poll (CLI)", "one quiet poll (slurmrestd update_time)",
             f"one round ({len(actions)} actions, {done} done)"]]
    rows += [[k, str(poll[k]), str(quiet[k]), str(per_round[k])] for k in kinds]
    rows.append(["total", str(sum(poll.values())), str(sum(quiet.values())),
                 str(sum(per_round.values()))])
    print(f"{args.jobs} one-GPU jobs held for gpufair; policy {args.policy}")
    print(markdown(rows))
    print(f"\nquiet poll over slurmrestd: {1e3 * quiet_cpu:.1f} ms CPU in gpufair")
    per_action = round_s / max(1, len(actions))
    print(f"\npoll {poll_s:.3f} s wall; round {round_s:.2f} s wall, {per_action:.3f} s and "
          f"{sum(per_round.values()) / max(1, len(actions)):.1f} RPCs per action")
    return 0


if __name__ == "__main__":
    sys.exit(main())

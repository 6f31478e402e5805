"""How long a Slurm Prolog/Epilog waits on gpufair's hook, with the daemon up or stopped.

    python bench/hook_latency.py [--runs 200] [--kinds prolog,epilog]

Why: every job's start and end on every node runs the hook (``gpufair/deploy/gpufair-hook``
→ ``python3 -I -S gpufair/plugin/hooks.py KIND``), so its run time is added to each job's
launch and to each node's release. It must be small whether or not the daemon runs (a
stopped daemon must never make a hook wait: the hook writes one spool file and sends one
datagram without blocking, and gives up after 2 s by itself). The hook is installed as
``scripts/slurm/up.sh`` installs it, into a scratch hook directory; "daemon stopped" has no
wake socket, "daemon up" has a bound datagram socket that nobody reads (a daemon busy in a
round: the datagrams queue, then the socket is full). Prints a markdown table of p50, p99 and
the slowest run in ms. Figures, not a verdict: the loopback test checks only that the hooks
exit 0 and drain no node.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WRAPPER = REPO / "gpufair" / "deploy" / "gpufair-hook"
HOOK_PY = REPO / "gpufair" / "plugin" / "hooks.py"


def install(scratch: Path, kinds: list[str]) -> Path:
    """The wrapper under each kind's name, with its env file, as up.sh writes them."""
    scripts = scratch / "scripts"
    scripts.mkdir()
    for kind in kinds:
        shutil.copy(WRAPPER, scripts / kind)
        (scripts / kind).chmod(0o755)
    (scripts / "gpufair-hook.env").write_text(
        f"GPUFAIR_PYTHON={shutil.which('python3')}\nGPUFAIR_HOOK_PY={HOOK_PY}\n"
        f"GPUFAIR_HOOK_DIR={scratch / 'hooks'}\n")
    (scratch / "hooks").mkdir(mode=0o700)
    return scripts


def run_hooks(scripts: Path, kinds: list[str], runs: int) -> list[float]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_JOB_ID": "4242",
           "SLURMD_NODENAME": "gpu-k80-1", "SLURM_JOB_GPUS": "0,1", "SLURM_JOB_EXIT_CODE": "0",
           "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}
    times = []
    for i in range(runs):
        started = time.perf_counter()
        done = subprocess.run([str(scripts / kinds[i % len(kinds)])], env=env,
                              capture_output=True, timeout=10, check=False)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"hook exited {done.returncode}: {done.stderr[-500:]!r}")
    return sorted(times)


def row(label: str, times: list[float]) -> str:
    pick = lambda q: times[min(len(times) - 1, int(q * len(times)))] * 1000  # noqa: E731
    return f"| {label} | {len(times)} | {pick(0.5):.1f} | {pick(0.99):.1f} | " \
           f"{times[-1] * 1000:.1f} |"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--kinds", default="prolog,epilog")
    args = p.parse_args()
    kinds = args.kinds.split(",")
    print(f"machine load (1 min): {os.getloadavg()[0]:.1f}\n")
    print("| daemon | runs | p50 ms | p99 ms | slowest ms |\n|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="gpufair-hook-bench-") as tmp:
        scripts = install(Path(tmp), kinds)
        print(row("stopped (no wake socket)", run_hooks(scripts, kinds, args.runs)))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(Path(tmp) / "hooks" / "wake.sock"))
        try:
            print(row("up, not reading (busy in a round)", run_hooks(scripts, kinds,
                                                                   args.runs)))
        finally:
            sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

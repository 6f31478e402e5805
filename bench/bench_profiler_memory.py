"""Profiler memory benchmark: ``gpufair profile`` on logs of growing size.

    python bench/bench_profiler_memory.py [--sizes 10 50 200] [--dir DIR]

For each size (MB), a log is generated from the real ImageNet-example fixture
(``tests/fixtures/logs/pytorch_imagenet.log``: its iteration lines repeated with rising
iteration numbers, :func:`gpufair.profiler.synthetic.grow_log`), and ``gpufair profile
--json`` is run on it in a fresh process. The table gives the log's size, the wall time,
the process's peak RSS (``wait4``'s ``ru_maxrss`` of that one child) and the throughput;
the first row is the fixture itself, i.e. what the interpreter and imports cost. The target
of issue 13 (item 4) is read off, not enforced: a 200 MB log under 150 MB of RSS, and RSS
that does not grow with the log's size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpufair.profiler.synthetic import grow_log

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs" / \
    "pytorch_imagenet.log"


# The child reports its own high-water mark: ``VmHWM`` belongs to the address space exec
# created, whereas ``ru_maxrss`` (even a single child's, from ``wait4``) keeps the maximum of
# the pre-exec copy of the parent — under pytest that was the test process's 340 MB.
_CHILD = """
import sys
from gpufair.cli.main import main
code = main(["profile", "--json", sys.argv[1]])
sys.stdout.flush()
with open("/proc/self/status") as status:
    hwm = next(line for line in status if line.startswith("VmHWM:"))
sys.stderr.write(hwm)
raise SystemExit(code)
"""


def profile_once(path: str) -> tuple[float, float, dict]:
    """Wall seconds, peak RSS (MB, the child's own ``VmHWM``) and the JSON report of
    ``gpufair profile`` on ``path``."""
    cmd = [sys.executable, "-c", _CHILD, path]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, check=False)
    wall = time.perf_counter() - start
    err = done.stderr.decode("utf-8", "replace")
    if done.returncode:
        raise RuntimeError(f"gpufair profile failed ({done.returncode}): {err}")
    hwm_kb = int(err.strip().splitlines()[-1].split()[1])
    return wall, hwm_kb / 1024, json.loads(done.stdout)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200], metavar="MB")
    ap.add_argument("--dir", help="where to write the logs (default: a temporary directory)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(f"{'log':>8} {'bytes':>11} {'iters':>9} {'wall s':>7} {'peak RSS MB':>11} "
              f"{'MB/s':>6}")
        for label, mb in [("fixture", 0), *((f"{mb} MB", mb) for mb in args.sizes)]:
            path = FIXTURE
            if mb:
                path = Path(tmp) / f"imagenet_{mb}mb.log"
                grow_log(FIXTURE, path, mb << 20)
            size = path.stat().st_size
            wall, rss, report = profile_once(str(path))
            print(f"{label:>8} {size:>11} {report['iterations_done'] or 0:>9} {wall:>7.2f} "
                  f"{rss:>11.1f} {size / 2**20 / wall:>6.1f}", flush=True)
            if path != FIXTURE:
                path.unlink()   # at most one large log on disk at a time


if __name__ == "__main__":
    main()

"""Store overhead of one daemon round as finished jobs pile up (issue 12, item 15).

    python bench/bench_daemon_store.py [--finished 100000] [--active 200]

A round merges the job history of its snapshot and saves it back. Before, it read every row
ever stored; now it reads the rows of the snapshot's jobs, and pruning bounds the table.
Prints one table: rows kept, history read + merge + save per round (median of 7), prune time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from gpufair.core.history import merge_history
from gpufair.model import ClusterState, Job, JobState, Node
from gpufair.plugin.store import Store


def _fill(store: Store, finished: int, now: float) -> None:
    rows = [{"job_id": f"f{i}", "tenant": "t", "arrival_s": 0.0, "first_seen": 0.0,
             "state": "completed", "attained_s": 60.0, "waiting_s": 5.0, "restarts": 0,
             "last_seen": now - 9e5, "finished_at": now - 9e5, "exit_code": None}
            for i in range(finished)]
    for start in range(0, len(rows), 20000):
        store.save_jobs(rows[start:start + 20000])


def _round(store: Store, state: ClusterState, *, all_rows: bool) -> float:
    started = time.perf_counter()
    history = store.job_history(None if all_rows else [j.id for j in state.jobs])
    _, rows = merge_history(state, history)
    store.save_jobs(rows)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--finished", type=int, default=100_000)
    parser.add_argument("--active", type=int, default=200)
    args = parser.parse_args()
    now = 1_800_000_000.0
    nodes = tuple(Node(f"n{i}", "v100", 8) for i in range(64))
    jobs = tuple(Job(f"a{i}", state=JobState.PENDING, arrival_s=now - 100)
                 for i in range(args.active))
    state = ClusterState(now, nodes=nodes, jobs=jobs)
    table = [("store", "rows", "read+merge+save ms (median of 7)", "prune ms")]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "s.db")
        _fill(store, args.finished, now)
        _round(store, state, all_rows=False)
        for label, all_rows in (("all rows (before)", True), ("snapshot's rows (now)", False)):
            times = [_round(store, state, all_rows=all_rows) for _ in range(7)]
            table.append((label, str(len(store.job_history())),
                          f"{1000 * statistics.median(times):.1f}", "-"))
        started = time.perf_counter()
        store.prune(keep_finished_s=7 * 86400, keep_rounds_s=30 * 86400, now=now)
        pruned_ms = 1000 * (time.perf_counter() - started)
        times = [_round(store, state, all_rows=True) for _ in range(7)]
        table.append(("after pruning", str(len(store.job_history())),
                      f"{1000 * statistics.median(times):.1f}", f"{pruned_ms:.0f}"))
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

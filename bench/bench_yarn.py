"""What one YARN snapshot and one daemon round cost the adapter, against the emulator run in
a separate process (so the CPU column is gpufair's alone): requests per snapshot (nodes,
apps, and per running app its containers; the first snapshot also looks up each running
app's attempt, the next ones reuse it), wall and CPU seconds.

    python bench/bench_yarn.py [--apps 16 64 256] [--policy fifo]

Wall times include loopback HTTP and the emulator, and are inflated on a shared machine;
the CPU column (time.process_time of this process) is the adapter's and the round's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def serve(apps: int, queue: multiprocessing.Queue) -> None:
    from tests.yarn_emulator import Cluster, EmuNode, RMServer
    nodes = max(2, apps // 4)
    cluster = Cluster([EmuNode(f"gpu{i:03d}", 8) for i in range(nodes)],
                      {"root.a": (50, 50), "root.b": (50, 50), "root.rest": (0, 0)})
    server = RMServer(cluster)
    for i in range(apps):
        cluster.submit(f"u{i % 5}", "ab"[i % 2], 1 + i % 4)
    cluster.tick()
    queue.put(server.url)
    time.sleep(3600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--policy", default="fifo")
    args = parser.parse_args()
    from gpufair.adapters.yarn import YarnAdapter
    from gpufair.plugin.service import build_daemon
    from gpufair.plugin.store import Store
    from tests.yarn_setup import yarn_config
    print("| apps | running | requests (first / next snapshot) | snapshot wall s (first / "
          "next) | snapshot CPU s (first / next) | round wall s | round CPU s | actions |")
    print("|---|---|---|---|---|---|---|---|")
    for apps in args.apps:
        queue: multiprocessing.Queue = multiprocessing.Queue()
        child = multiprocessing.Process(target=serve, args=(apps, queue), daemon=True)
        child.start()
        url = queue.get(timeout=60)

        class Server:
            pass
        server = Server()
        server.url = url
        with tempfile.TemporaryDirectory() as tmp:
            config = yarn_config(Path(tmp), server, policy=args.policy)
            adapter = YarnAdapter.from_settings(config.yarn)
            before = adapter.client.requests
            wall, cpu = time.perf_counter(), time.process_time()
            state = adapter.snapshot()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            requests = adapter.client.requests - before
            before = adapter.client.requests
            warm_wall, warm_cpu = time.perf_counter(), time.process_time()
            adapter.snapshot()
            warm_wall = time.perf_counter() - warm_wall
            warm_cpu = time.process_time() - warm_cpu
            warm = adapter.client.requests - before
            store = Store(config.store.path)
            daemon = build_daemon(config, adapter, store)
            rwall, rcpu = time.perf_counter(), time.process_time()
            daemon.run_round()
            rwall, rcpu = time.perf_counter() - rwall, time.process_time() - rcpu
            running = sum(1 for j in state.jobs if j.gpus_held)
            print(f"| {apps} | {running} | {requests} / {warm} | {wall:.3f} / {warm_wall:.3f} | "
                  f"{cpu:.3f} / {warm_cpu:.3f} | "
                  f"{rwall:.3f} | {rcpu:.3f} | {len(daemon.last.actions)} |")
            store.close()
        child.terminate()
        child.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

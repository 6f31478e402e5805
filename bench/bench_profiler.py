"""Profiler benchmark: parsing MB/s per family, and one round over 10,000 job logs.

    python bench/bench_profiler.py [--quick] [--logs 10000]

Table 1: for each parser family, MB/s through ``LogStream.feed`` (clean, scan, templates,
columns) and through the whole path (plus the summary), on ~16 MB of that family's lines
fed in 1 MB chunks (``--quick``: 4 MB). Table 2: a profiling round over N job logs that
each gained 1 KB since the last round (the steady state of a daemon), every line converted,
with exact reports (``gpufair profile``) and with lazy window estimates
(``Profiler(exact_reports=False)``, a daemon's setting): the median and slowest
wall time and the median CPU time of five such rounds of ``Profiler.round``, including the
offset store's write, and peak memory — Python's traced
peak (tracemalloc, in a second run, since tracing slows the round) and the process's max RSS.
Tables, not assertions: the targets (50 MB/s on common formats, a 10,000-log round in under
2 s) are read off, not enforced.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from gpufair.profiler import JobLog, Profiler, scan
from gpufair.profiler.store import JsonOffsetStore
from gpufair.profiler.stream import LogStream
from gpufair.profiler.summary import Accumulator

BAR = "█" * 5 + " " * 5


def _imagenet(i: int) -> str:
    return (f"Epoch: [{i // 5000}][{i % 5000:4d}/5000]\tTime  0.{i % 900 + 100:03d} ( 0.150)\t"
            f"Data  0.001 ( 0.002)\tLoss 2.{i % 9000:04d}e+00 (2.3000e+00)\t"
            f"Acc@1  12.50 ( 10.00)\tAcc@5  50.00 ( 48.00)\n")


FAMILIES: dict[str, Callable[[int], str]] = {
    "pytorch (imagenet)": _imagenet,
    "pytorch (plain)": lambda i: f"step {i}/10000000 loss 2.{i % 9000:04d} time 45.{i % 90}ms\n",
    "lightning (tqdm)": lambda i: (f"Epoch {i // 1000}:  50%|{BAR}| {i % 1000 + 1}/1000 "
                                   f"[00:10<00:10, 30.{i % 90:02d}it/s, v_num=0, "
                                   f"train_loss=2.{i % 900:03d}]\n"),
    "hf_trainer (tqdm)": lambda i: (f" 50%|{BAR}| {i + 1}/10000000 [01:00<01:00,  "
                                    f"9.{i % 90:02d}it/s]\n"),
    "keras": lambda i: (f"{i % 1000 + 1}/1000 ━━━━━━━━━━━━━━━━━━━━ 1s "
                        f"{100 + i % 9}ms/step - loss: 2.{i % 9000:04d}\n"),
    "tensorflow (estimator)": lambda i: (f"INFO:tensorflow:loss = 0.{i % 9000:04d}, "
                                         f"step = {i * 100} (2.{i % 900:03d} sec)\n"),
    "deepspeed": lambda i: (f"[2024-05-01 10:00:10,001] [INFO] [timer.py:260:stop] epoch=0/"
                            f"micro_step={i}/global_step={i}, RunningAvgSamplesPerSec=120.51,"
                            f" CurrSamplesPerSec=128.{i % 90:02d}, MemAllocated=1.2GB, "
                            f"MaxMemAllocated=2.3GB\n"),
    "megatron": lambda i: (f" [2024-05-01 10:00:10] iteration {i:8d}/10000000 | consumed "
                           f"samples: {i * 64:12d} | elapsed time per iteration (ms): "
                           f"{1000 + i % 90}.4 | learning rate: 1.500E-04 | global batch "
                           f"size:    64 | lm loss: 1.043210E+01 | loss scale: 4096.0 | "
                           f"grad norm: 5.123 | number of skipped iterations:   0 | number of"
                           f" nan iterations:   0 |\n"),
    "reporter (jsonl)": lambda i: (f'{{"gpufair": 1, "iteration": {i}, "iter_time_s": '
                                   f'0.{i % 900 + 100:03d}, "batch_size": 64}}\n'),
}


def _corpus(make: Callable[[int], str], size: int) -> list[bytes]:
    """~``size`` bytes of a family's lines, as 1 MB chunks of complete lines."""
    chunks, lines, total, n, i = [], [], 0, 0, 1
    while total < size:
        line = make(i)
        lines.append(line)
        n += len(line.encode())
        total += len(line.encode())
        i += 1
        if n >= 1 << 20:
            chunks.append("".join(lines).encode())
            lines, n = [], 0
    if lines:
        chunks.append("".join(lines).encode())
    return chunks


def parse_table(size: int) -> list[list[str]]:
    rows = [["family", "MB", "parse MB/s", "parse+summary MB/s", "(CPU-time MB/s)", "samples",
             "malformed"]]
    for name, make in FAMILIES.items():
        chunks = _corpus(make, size)
        mb = sum(map(len, chunks)) / 1e6
        stream = LogStream()
        start = time.perf_counter()
        count = sum(len(stream.feed(c)) for c in chunks)
        parse_s = time.perf_counter() - start
        stream2, acc = LogStream(), Accumulator()
        start, cpu = time.perf_counter(), time.process_time()
        for c in chunks:
            acc.add(stream2.feed(c))
        acc.report(stream2.family)
        full_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
        rows.append([name, f"{mb:.1f}", f"{mb / parse_s:.0f}", f"{mb / full_s:.0f}",
                     f"{mb / cpu_s:.0f}",
                     str(count), str(stream.stats.malformed)])
    return rows


def _write_logs(root: Path, n: int, kb: int, start: int) -> list[JobLog]:
    logs = []
    mix = list(FAMILIES.values())
    for j in range(n):
        path = root / f"job{j}.out"
        make = mix[j % len(mix)]
        text, i = [], start
        size = 0
        while size < kb * 1024:
            line = make(i)
            text.append(line)
            size += len(line)
            i += 1
        with path.open("a", encoding="utf-8") as fh:
            fh.write("".join(text))
        logs.append(JobLog(f"job{j}", str(path), gpu_type="v100", gpus=1 + j % 4))
    return logs


def round_table(n: int) -> list[list[str]]:
    rows = [["logs", "new bytes/log", "reports", "round s (median of 5)", "slowest s",
             "round CPU s", "per log us",
             "traced peak MB", "max RSS MB"]]
    for exact in (True, False):
        rows.append(_one_round(n, exact))
    return rows


def _one_round(n: int, exact: bool, rounds: int = 5) -> list[str]:
    """``rounds`` steady-state rounds (each log gained 1 KB); median and slowest wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        logs = _write_logs(root, n, 1, 1)
        store = JsonOffsetStore(root / "offsets.json")
        profiler = Profiler(store, exact_reports=exact)
        profiler.round(logs)  # first sight: detection; the steady state is measured below
        walls, cpus = [], []
        for r in range(1, rounds + 1):
            _write_logs(root, n, 1, 100_000 * r)
            gc.collect()
            start, cpu = time.perf_counter(), time.process_time()
            changed = profiler.round(logs)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
            assert len(changed) == n, len(changed)
        _write_logs(root, n, 1, 100_000 * (rounds + 1))
        gc.collect()
        tracemalloc.start()
        profiler.round(logs)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        wall = statistics.median(walls)
        return [str(n), "1 KB", "exact" if exact else "lazy", f"{wall:.2f}", f"{max(walls):.2f}",
                f"{statistics.median(cpus):.2f}", f"{1e6 * wall / n:.0f}",
                f"{peak / 1e6:.1f}", f"{rss:.0f}"]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (other work slows "
          "wall times; CPU times are less affected); line scanner: "
          f"{'C' if scan.NATIVE else 'pure Python (the C extension is not built)'}")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--logs", type=int, default=10_000)
    args = parser.parse_args()
    print(table(parse_table((4 if args.quick else 16) << 20)))
    print()
    print(table(round_table(args.logs)))


if __name__ == "__main__":
    main()

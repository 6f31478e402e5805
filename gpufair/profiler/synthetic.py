"""The whole path in simulation: synthetic job logs in, measured speeds into the policy.

``SyntheticLogWriter`` plays the jobs' side: after each simulator step it appends, for every
running job, the lines that job would have printed for the iterations it just made, in a
chosen format (Megatron's ``training_log``, plain PyTorch ``step`` lines, or the reporter's
JSON lines), at the iteration time the simulator runs it at. ``ProfiledAdapter`` plays the
daemon's side for any adapter: each snapshot's jobs lose the speeds the resource manager (or
trace) declared and get what the profiler measured from their logs instead — so a policy
run through it schedules on measurements only, as it would on a real cluster.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from gpufair.model import Action, ActionResult, ClusterState, Job, ThroughputProfile
from gpufair.profiler.profiler import JobLog, Profiler

LINES_PER_STEP = 20


def _megatron(step: int, total: int | None, seconds: float, batch: int | None) -> str:
    return (f" iteration {step:8d}/{total or 0:8d} | consumed samples: {step * (batch or 1):12d}"
            f" | elapsed time per iteration (ms): {seconds * 1000:.1f} | learning rate: "
            f"1.000E-04 | global batch size: {batch or 0:5d} | lm loss: 2.000000E+00 |\n")


def _pytorch(step: int, total: int | None, seconds: float, batch: int | None) -> str:
    size = f" batch_size {batch}" if batch else ""
    return f"step {step}/{total or 0} loss 2.0000{size} time {seconds * 1000:.3f}ms\n"


def _reporter(step: int, total: int | None, seconds: float, batch: int | None) -> str:
    import json
    record = {"gpufair": 1, "iteration": step, "iter_time_s": seconds}
    if total:
        record["total_iterations"] = total
    if batch:
        record["batch_size"] = batch
    return json.dumps(record) + "\n"


FORMATS: dict[str, Callable[[int, int | None, float, int | None], str]] = {
    "megatron": _megatron, "pytorch": _pytorch, "reporter": _reporter}


# an ImageNet-example iteration line's counter: ``Epoch: [e][ i/n]``
_IMAGENET_STEP = re.compile(r"Epoch: \[\d+\]\[\s*\d+/\s*(\d+)\]")


def grow_log(real_log: str | os.PathLike[str], dest: str | os.PathLike[str],
             size_bytes: int, block: int = 1 << 20) -> int:
    """Write a log of about ``size_bytes`` to ``dest`` from a real PyTorch ImageNet-example
    log: its training lines (``Epoch: [e][ i/n] Time ...``) repeated in turn, renumbered so
    the iterations keep rising (i runs over 0..n-1, then the epoch goes up).

    Why: the profiler's memory and speed on a multi-hundred-MB log are measured on a real
    line format without shipping such a file (``bench/bench_profiler_memory.py``, and the
    memory test). Returns the bytes written (at least ``size_bytes``; whole lines only).
    """
    with open(real_log, encoding="utf-8") as fh:
        lines = [line if line.endswith("\n") else line + "\n"
                 for line in fh if _IMAGENET_STEP.search(line)]
    if not lines:
        raise ValueError(f"{real_log}: no ImageNet-example iteration line to repeat")
    per_epoch = int(_IMAGENET_STEP.search(lines[0]).group(1))  # type: ignore[union-attr]
    width = len(str(per_epoch))
    # each line around its counter, which is rewritten
    parts = [(line[:m.start()], line[m.end():])
             for line in lines if (m := _IMAGENET_STEP.search(line)) is not None]
    written = step = 0
    with open(dest, "w", encoding="utf-8") as out:
        while written < size_bytes:
            chunk = []
            size = 0
            while size < block and written + size < size_bytes:
                before, after = parts[step % len(parts)]
                epoch, i = divmod(step, per_epoch)
                text = f"{before}Epoch: [{epoch}][{i:>{width}}/{per_epoch}]{after}"
                chunk.append(text)
                size += len(text)
                step += 1
            out.write("".join(chunk))
            written += size
    return written


class SyntheticLogWriter:
    """Appends each running job's new iterations to ``directory/JOB.log``."""

    def __init__(self, directory: str | os.PathLike[str], fmt: str = "megatron") -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown synthetic log format {fmt!r}; one of {sorted(FORMATS)}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.line = FORMATS[fmt]
        self._done: dict[str, int] = {}

    def path(self, job_id: str) -> Path:
        return self.directory / f"{job_id}.log"

    def write(self, state: ClusterState) -> list[JobLog]:
        """Lines for the iterations each running job made since the last call; its JobLog."""
        type_of = state.gpu_type_of()
        logs = []
        for job in state.jobs:
            if not job.gpus_held:
                continue
            gpu_type = type_of.get(job.gpus_held[0])
            if gpu_type is None:
                continue
            count = len(job.gpus_held)
            rate = job.rate(gpu_type, count)
            done = int(job.progress.iterations_done)
            last = self._done.get(job.id, 0)
            if rate > 0 and done > last:
                total = (int(job.progress.iterations_total)
                         if job.progress.iterations_total else None)
                every = max(1, (done - last) // LINES_PER_STEP)
                with self.path(job.id).open("a", encoding="utf-8") as fh:
                    fh.writelines(self.line(step, total, 1.0 / rate, job.batch_size)
                                  for step in range(last + every, done + 1, every))
                self._done[job.id] = done - (done - last) % every
            logs.append(JobLog(job.id, str(self.path(job.id)), gpu_type=gpu_type,
                               gpus=count, model=job.model))
        return logs


class ProfiledAdapter:
    """An adapter whose snapshots carry measured speeds and progress, not declared ones.

    ``logs`` turns a raw snapshot into the job logs to read this round (for the simulator,
    a :class:`SyntheticLogWriter`'s ``write``; for a real cluster, the jobs' stdout paths).
    """

    def __init__(self, inner, profiler: Profiler,
                 logs: Callable[[ClusterState], Sequence[JobLog]]) -> None:
        self.inner = inner
        self.profiler = profiler
        self.logs = logs

    def snapshot(self) -> ClusterState:
        state = self.inner.snapshot()
        self.profiler.round(self.logs(state))
        types = state.gpu_type_names()
        counts = sorted({j.gpus for j in state.jobs})
        return state.with_jobs(self._measured(j, types, counts) for j in state.jobs)

    def _measured(self, job: Job, types: Sequence[str], counts: Sequence[int]) -> Job:
        blank = dataclasses.replace(job, throughput=ThroughputProfile(), batch_rates=())
        return self.profiler.apply(blank, types, counts)

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        return self.inner.apply(actions)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

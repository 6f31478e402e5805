"""Shared by the profiler tests: fixture paths and the script-measured truth of each run."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"

# fixture -> (family, iterations done) for the logs real runs produced
REAL = {
    "pytorch_imagenet.log": ("pytorch", 24),
    "pytorch_wordlm.log": ("pytorch", 35),
    "pytorch_plain_batch_switch.log": ("pytorch", 30),
    "lightning_tqdm.log": ("lightning", 40),
    "lightning_rich.log": ("lightning", 40),
    "keras3.log": ("keras", 24),
    "hf_trainer.log": ("hf_trainer", 30),
    "tensorboard.tfevents": ("tensorboard", 30),
}


def measured_iter_time(name: str, basis: str) -> float:
    """The training script's own mean iteration time, over what the estimate covers.

    ``window`` estimates leave out warm-up (the first iteration of each epoch) and cover the
    current batch-size regime; ``whole_run`` ones are the job's own average over every
    iteration.
    """
    stem = name.split(".")[0]
    data = json.loads((LOGS / f"{stem}.times.json").read_text())
    times, epochs = data["iter_times_s"], data["epochs"]
    if basis == "whole_run":
        return statistics.fmean(times)
    batches = data.get("batch_sizes")
    if batches:
        idx = [i for i, b in enumerate(batches) if b == batches[-1]]
        return statistics.fmean(times[i] for i in idx[1:])
    return statistics.fmean(t for i, t in enumerate(times) if i and epochs[i] == epochs[i - 1])

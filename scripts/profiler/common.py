"""Shared bits of the fixture training scripts: a tiny model, random data, a side-file timer.

Each script trains for real (CPU) and prints progress exactly as the library or the
official example it imitates does; the side file holds the wall-clock time of every
iteration as the script itself measured it, which is what the profiler's extracted
iteration times are checked against.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def side_path() -> Path | None:
    """The side file named by ``--times PATH`` on the command line, if any."""
    if "--times" in sys.argv:
        return Path(sys.argv[sys.argv.index("--times") + 1])
    return None


class IterTimer:
    """Records per-iteration wall-clock seconds and writes them as JSON at the end."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.times: list[float] = []
        self.epochs: list[int] = []
        self._last: float | None = None

    def start(self) -> None:
        self._last = time.perf_counter()

    def tick(self, epoch: int = 0) -> float:
        now = time.perf_counter()
        assert self._last is not None, "start() first"
        dt = now - self._last
        self._last = now
        self.times.append(dt)
        self.epochs.append(epoch)
        return dt

    def write(self, **extra: object) -> None:
        path = side_path()
        if path is not None:
            data = {"iter_times_s": [round(t, 6) for t in self.times], "epochs": self.epochs,
                    "batch_size": self.batch_size, **extra}
            path.write_text(json.dumps(data))


def tiny_convnet():  # torch imported lazily: only the scripts that train need it
    import torch
    from torch import nn
    torch.manual_seed(0)
    torch.set_num_threads(1)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 10))


def random_images(n: int, seed: int = 0):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g)

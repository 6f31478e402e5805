"""A hand-rolled PyTorch loop printing plain ``step N/M loss ... time ...`` lines.

``--iters N`` sets the length; ``--batch-schedule 16:10,32:10`` switches the batch size
mid-run (Accordion/GNS-style adaptation) so regime detection sees a real change.
"""

from __future__ import annotations

import sys

import torch
from common import IterTimer, random_images, tiny_convnet
from torch import nn


def _arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> None:
    schedule = [tuple(int(v) for v in part.split(":"))
                for part in _arg("--batch-schedule", "32:30").split(",")]
    total = sum(n for _, n in schedule)
    model, crit = tiny_convnet(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = random_images(max(b for b, _ in schedule) * 4)
    timer = IterTimer(schedule[0][0])
    batches: list[int] = []
    step = 0
    timer.start()
    for bsz, n in schedule:
        for _ in range(n):
            k = step % 4
            loss = crit(model(x[k * bsz:(k + 1) * bsz]), y[k * bsz:(k + 1) * bsz])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            # the logged time is the whole iteration, tick to tick (the previous line's print
            # included), as the script's own clock counts it: a compute-only time left the
            # printing out, and a slow disk made the two differ by 6.5 % in CI
            dt = timer.tick()
            batches.append(bsz)
            print(f"step {step}/{total} loss {loss.item():.4f} batch_size {bsz} "
                  f"time {dt * 1000:.2f}ms", flush=True)
    timer.write(style="plain", batch_sizes=batches)


if __name__ == "__main__":
    main()

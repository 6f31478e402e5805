"""PyTorch training writing TensorBoard scalars (steps/sec, batch size, loss) with SummaryWriter.

``--logdir DIR`` is where the event file goes. The batch size doubles halfway (adaptation).
"""

from __future__ import annotations

import sys
import time

import torch
from common import IterTimer, random_images, tiny_convnet
from torch import nn
from torch.utils.tensorboard import SummaryWriter


def main() -> None:
    logdir = sys.argv[sys.argv.index("--logdir") + 1]
    model, crit = tiny_convnet(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = random_images(64 * 4)
    writer = SummaryWriter(logdir)
    timer = IterTimer(32)
    batches: list[int] = []
    timer.start()
    for step in range(1, 31):
        bsz = 32 if step <= 15 else 64
        t0 = time.perf_counter()
        k = step % 4
        loss = crit(model(x[k * bsz:(k + 1) * bsz]), y[k * bsz:(k + 1) * bsz])
        opt.zero_grad()
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        timer.tick()
        batches.append(bsz)
        writer.add_scalar("train/loss", loss.item(), step)
        writer.add_scalar("train/steps_per_sec", 1.0 / dt, step)
        writer.add_scalar("train/batch_size", bsz, step)
    writer.close()
    timer.write(style="tensorboard", batch_sizes=batches)


if __name__ == "__main__":
    main()

"""PyTorch training printing exactly like pytorch/examples imagenet/main.py (ProgressMeter)."""

from __future__ import annotations

import time

import torch
from common import IterTimer, random_images, tiny_convnet
from torch import nn


class AverageMeter:
    """As in the official example: ``{name} {val:fmt} ({avg:fmt})``."""

    def __init__(self, name: str, fmt: str = ":f") -> None:
        self.name, self.fmt = name, fmt
        self.val = self.avg = self.sum = 0.0
        self.count = 0

    def update(self, val: float, n: int = 1) -> None:
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self) -> str:
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)


class ProgressMeter:
    def __init__(self, num_batches: int, meters: list[AverageMeter], prefix: str = "") -> None:
        num_digits = len(str(num_batches // 1))
        fmt = "{:" + str(num_digits) + "d}"
        self.batch_fmtstr = "[" + fmt + "/" + fmt.format(num_batches) + "]"
        self.meters, self.prefix = meters, prefix

    def display(self, batch: int) -> None:
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print("\t".join(entries), flush=True)


def main() -> None:
    batch, batches, epochs = 32, 12, 2
    model, crit = tiny_convnet(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = random_images(batch * batches)
    timer = IterTimer(batch)
    for epoch in range(epochs):
        batch_time, data_time = AverageMeter("Time", ":6.3f"), AverageMeter("Data", ":6.3f")
        losses = AverageMeter("Loss", ":.4e")
        progress = ProgressMeter(batches, [batch_time, data_time, losses],
                                 prefix=f"Epoch: [{epoch}]")
        end = time.time()
        timer.start()
        for i in range(batches):
            xb, yb = x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]
            data_time.update(time.time() - end)
            loss = crit(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.update(loss.item(), batch)
            batch_time.update(time.time() - end)
            end = time.time()
            timer.tick(epoch)
            progress.display(i)
        test_time = AverageMeter("Time", ":6.3f")
        test = ProgressMeter(3, [test_time], prefix="Test: ")
        end = time.time()
        with torch.no_grad():
            for i in range(3):
                model(x[i * batch:(i + 1) * batch])
                test_time.update(time.time() - end)
                end = time.time()
                test.display(i)
        print(" * Acc@1 10.000 Acc@5 50.000", flush=True)
    timer.write(style="imagenet")


if __name__ == "__main__":
    main()

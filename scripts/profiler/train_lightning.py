"""PyTorch Lightning training with its progress bar and the CSV logger.

``--csv-dir DIR`` puts the CSV logger's metrics.csv there; ``--bar tqdm`` forces the TQDM
bar (Lightning picks the Rich bar by default when ``rich`` is installed).
"""

from __future__ import annotations

import sys
import time
import warnings

import pytorch_lightning as pl
import torch
from common import IterTimer, random_images, tiny_convnet
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = tiny_convnet()

    def training_step(self, batch, _):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Timing(pl.Callback):
    """Per-batch wall clock between consecutive batch ends, as the script measures it."""

    def __init__(self, timer: IterTimer) -> None:
        self.timer = timer

    def on_train_epoch_start(self, trainer, module) -> None:
        self.timer.start()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.timer.tick(trainer.current_epoch)


def main() -> None:
    warnings.filterwarnings("ignore")
    csv_dir = sys.argv[sys.argv.index("--csv-dir") + 1] if "--csv-dir" in sys.argv else "."
    batch = 32
    x, y = random_images(batch * 20)
    train = DataLoader(TensorDataset(x, y), batch_size=batch)
    val = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=batch)
    timer = IterTimer(batch)
    callbacks: list[pl.Callback] = [Timing(timer)]
    if "--bar" in sys.argv and sys.argv[sys.argv.index("--bar") + 1] == "tqdm":
        callbacks.append(pl.callbacks.TQDMProgressBar())
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", devices=1, log_every_n_steps=5,
                         logger=pl.loggers.CSVLogger(csv_dir, name="", version=""),
                         callbacks=callbacks, enable_checkpointing=False,
                         enable_model_summary=False)
    start = time.perf_counter()
    trainer.fit(Net(), train, val)
    timer.write(style="lightning", fit_s=time.perf_counter() - start)


if __name__ == "__main__":
    main()

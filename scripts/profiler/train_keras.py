"""Keras 3 ``model.fit`` (torch backend: TensorFlow is not installable everywhere)."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras
import numpy as np
from common import IterTimer


class Timing(keras.callbacks.Callback):
    def __init__(self, timer: IterTimer) -> None:
        super().__init__()
        self.timer = timer
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None) -> None:
        self.epoch = epoch
        self.timer.start()

    def on_train_batch_end(self, batch, logs=None) -> None:
        self.timer.tick(self.epoch)


def main() -> None:
    import torch
    torch.set_num_threads(1)
    keras.utils.set_random_seed(0)
    batch = 32
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch * 12, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, batch * 12)
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Conv2D(64, 3, padding="same",
                                                         activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = IterTimer(batch)
    model.fit(x, y, batch_size=batch, epochs=2, verbose=1, callbacks=[Timing(timer)])
    timer.write(style="keras")


if __name__ == "__main__":
    main()

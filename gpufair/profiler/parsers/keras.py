"""Keras progress bars (Keras 3 and the tf.keras 2 style) and ``Epoch 3/10`` headers.

- Keras 3: `` 5/20 ━━━━━━━━━━━━━━━━━━━━ 1s 116ms/step - loss: 2.4176``;
- tf.keras 2: ``123/500 [===>..........] - ETA: 1s - loss: 0.3`` and, at the end of the
  epoch, ``500/500 [==============================] - 3s 6ms/step - loss: 0.2``.
The ``ms/step`` figure is Keras' average since the start of the epoch, so these samples are
cumulative: over steps 2..i in Keras 3 (its Progbar leaves the first step out), over 1..i
in tf.keras 2. The ANSI colours and backspaces Keras writes are removed by the reader.

A log written to a file (no TTY) has only the end-of-epoch line ``500/500 [====] - 45s
90ms/step - loss: ...`` (or, before Keras 2.1, ``- 484s - loss``): nothing to difference
it with, so in a log with no in-epoch bar lines each such line is the epoch's mean,
a windowed sample -- from the epoch time over its steps when that is the more precise
figure (``1873s 2s/step``: 1.873 s, not 2 s), else from the per-step figure.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser

_EPOCH = r"Epoch (?P<ep>\d+)/(?P<eps>\d+)[^\S\n\r]*$"
_BAR = (r"(?P<i>\d+)/(?P<n>\d+) (?:(?P<k3>\S*━\S*)|\[[=>.]*\])(?: - ETA: [^-\n\r]*)?"
        r"(?: -)? (?:(?P<tot>\d+)s |\d+\w* )?(?:(?P<t>[\d.]+)(?P<unit>s|ms|us)/step)?"
        r"(?:.*?loss: (?P<loss>[-+\d.eE]+|nan|inf))?")


class KerasParser(Parser):
    family = "keras"
    signature = re.compile(r"^\s*\d+/\d+ (?:━|\[[=>.]+\] - )|^Epoch \d+/\d+\s*$")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_EPOCH}|{_BAR})")
    numbers = frozenset({"ep", "eps", "i", "n", "t", "loss", "tot"})
    texts = frozenset({"unit"})
    keywords = ("/step",)

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        header = f.has("ep")
        epoch = np.nan_to_num(f.carry(f.num("ep") - 1, "epoch"), nan=0.0)
        epochs = f.carry(f.num("eps"), "epochs")
        i, per_epoch, unit = f.num("i"), f.num("n"), f.text("unit")
        f.bad |= ~header & (per_epoch == 0)
        scale = np.where(unit == "ms", 1e-3, np.where(unit == "s", 1.0,
                                                      np.where(unit == "us", 1e-6, np.nan)))
        t, tot = f.num("t"), f.num("tot")
        bar = ~header & (i < per_epoch)
        # an epoch's end in a log that never showed a bar in progress: the epoch's mean
        alone = ~header & (i == per_epoch) & np.isnan(
            f.carry(np.where(bar, 1.0, np.nan), "bars"))
        precise = np.isnan(t) | (tot > t)  # 0.5 / tot < 0.5 / t: the epoch time is finer
        epoch_mean = np.where(precise & (tot > 0), tot / per_epoch, t * scale)
        samples = Samples.build(
            f.n, cumulative=~alone, step=epoch * per_epoch + i, epoch=epoch + i / per_epoch,
            total_epochs=epochs, total_steps=per_epoch * epochs,
            iter_time_s=np.where(alone, epoch_mean, t * scale),
            loss=f.num("loss"), period_n=np.where(f.has("k3"), i - 1, i))
        return samples, ~header

"""Keras progress bars (Keras 3 and the tf.keras 2 style) and ``Epoch 3/10`` headers.

- Keras 3: `` 5/20 ━━━━━━━━━━━━━━━━━━━━ 1s 116ms/step - loss: 2.4176``;
- tf.keras 2: ``123/500 [===>..........] - ETA: 1s - loss: 0.3`` and, at the end of the
  epoch, ``500/500 [==============================] - 3s 6ms/step - loss: 0.2``.
The ``ms/step`` figure is Keras' average since the start of the epoch, so these samples are
cumulative: over steps 2..i in Keras 3 (its Progbar leaves the first step out), over 1..i
in tf.keras 2. The ANSI colours and backspaces Keras writes are removed by the reader.
"""

from __future__ import annotations

import re

from gpufair.profiler.events import Sample
from gpufair.profiler.parsers.base import Parser

_EPOCH = r"Epoch (?P<ep>\d+)/(?P<eps>\d+)[^\S\n\r]*$"
_BAR = (r"(?P<i>\d+)/(?P<n>\d+) (?:(?P<k3>\S*━\S*)|\[[=>.]*\])(?: - ETA: [^-\n\r]*)?"
        r"(?: -)? (?:\d+\w* )?(?:(?P<t>[\d.]+)(?P<unit>s|ms|us)/step)?"
        r"(?:.*?loss: (?P<loss>[-+\d.eE]+|nan|inf))?")
_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


class KerasParser(Parser):
    family = "keras"
    signature = re.compile(r"^\s*\d+/\d+ (?:━|\[[=>.]+\] - )|^Epoch \d+/\d+\s*$")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_EPOCH}|{_BAR})", re.M)
    keywords = ("/step",)
    context_pattern = re.compile(r"^Epoch \d+/\d+[^\S\n\r]*$", re.M)

    def convert(self, m: re.Match[str]) -> Sample | None:
        # one group() call per line fetches every field (group lookups add up at 10^5 lines)
        ep, eps, i, n, k3, t, unit, loss = m.group("ep", "eps", "i", "n", "k3", "t", "unit",
                                                   "loss")
        context = self.context
        if ep is not None:
            context["epoch"] = int(ep) - 1
            context["epochs"] = int(eps)
            return None
        i, n = int(i), int(n)
        epoch = int(context.get("epoch", 0))
        epochs = context.get("epochs")
        return Sample(step=epoch * n + i, epoch=epoch + i / n,
                      total_epochs=epochs,
                      total_steps=n * context["epochs"] if "epochs" in context else None,
                      iter_time_s=None if t is None else float(t) * _SCALE[unit],
                      loss=None if loss is None else float(loss), cumulative=True,
                      period_n=i - 1 if k3 is not None else i)

"""PyTorch Lightning: its TQDM and Rich progress bars, and its CSV logger's ``metrics.csv``.

- TQDM: ``Epoch 3:  45%|####5     | 45/100 [00:01<00:01, 30.12it/s, v_num=0, loss=0.1]``;
  ``Validation DataLoader 0:`` / ``Sanity Checking`` bars are evaluation.
- Rich (the default when ``rich`` is installed): ``Epoch 1/9 ━━━━ 20/20 0:00:01 • 0:00:00
  13.01it/s train_loss: 2.262``.
- CSV logger: a header naming ``epoch`` and ``step``, then rows; progress only (it has no
  timing unless the job logs one, e.g. a ``steps_per_sec`` or ``iter_time`` column).
"""

from __future__ import annotations

import re

from gpufair.profiler.events import EVAL, Sample
from gpufair.profiler.parsers.base import Parser
from gpufair.profiler.parsers.tqdm import BAR, rate_to_seconds

_TQDM = (rf"(?:Epoch (?P<ep>\d+)|(?P<val>Validation|Sanity Checking|Testing)[^:\n\r]*):"
         rf"[^|\n\r]*\|[^|\n\r]*\|\s*{BAR}")
_RICH = (r"(?:Epoch (?P<rep>\d+)(?:/(?P<rtot>\d+))?|(?P<rval>Validation|Sanity Checking)\S*)"
         r"\s+\S*\s+(?P<rn>\d+)/(?P<rt>\d+) [\d:]+ \S+ [\d:-]+ (?P<rrate>[\d.]+)"
         r"(?P<runit>it/s|s/it)")
_CSV_HEAD = r"(?P<head>(?:[\w/.\-]+,)*epoch,(?:[\w/.\-]+,)*step\b[\w/.,\-]*)"
_CSV_ROW = r"(?P<row>[-+\d.eE]*(?:,[-+\d.eE]*)+)[^\S\n\r]*$"

_TIME_COLUMNS = {"iter_time": 1.0, "step_time": 1.0, "iter_time_ms": 1e-3, "step_time_ms": 1e-3}
_RATE_COLUMNS = ("steps_per_sec", "steps_per_second", "it_per_sec")


class LightningParser(Parser):
    family = "lightning"
    signature = re.compile(rf"^Epoch \d+:[^|]*\|[^|]*\|\s*{BAR}|^Epoch \d+/\d+\s+\S+\s+\d+/\d+ "
                           r"[\d:]+ \S+ [\d:-]+ [\d.]+(?:it/s|s/it)|^epoch,(?:[\w/.]+,)*step\b")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_TQDM}|{_RICH}|{_CSV_HEAD}|{_CSV_ROW})", re.M)
    context_pattern = re.compile(rf"^{_CSV_HEAD}.*$", re.M)

    def convert(self, m: re.Match[str]) -> Sample | None:
        n, total, rate, unit, val, ep = m.group("n", "total", "rate", "unit", "val", "ep")
        if n is not None:
            n, total = int(n), int(total)
            if n == 0:
                return None  # a bar (re)drawn empty: no step done, no rate yet
            spi = rate_to_seconds(rate, unit)
            if val is not None:
                return Sample(step=n, total_steps=total, phase=EVAL, iter_time_s=spi)
            return self._train(int(ep), n, total, spi, None)
        if m.group("rn") is not None:
            n, total = int(m.group("rn")), int(m.group("rt"))
            spi = rate_to_seconds(m.group("rrate"), m.group("runit"))
            if m.group("rval") is not None:
                return Sample(step=n, total_steps=total, phase=EVAL, iter_time_s=spi)
            epochs = m.group("rtot")
            return self._train(int(m.group("rep")), n, total, spi,
                               None if epochs is None else int(epochs) + 1)
        if m.group("head") is not None:
            self.context["columns"] = m.group("head").split(",")
            return None
        return self._csv_row(m.group("row"))

    def _train(self, epoch: int, n: int, per_epoch: int, spi: float | None,
               total_epochs: int | None) -> Sample:
        """tqdm's rate is a moving average over recent iterations: a windowed measure."""
        return Sample(step=epoch * per_epoch + n, epoch=epoch + n / per_epoch,
                      total_epochs=total_epochs, iter_time_s=spi)

    def _csv_row(self, row: str) -> Sample | None:
        columns = self.context.get("columns")
        if not columns:
            return None
        values = dict(zip(columns, row.split(","), strict=False))
        step = values.get("step", "")
        if not step:
            return None
        sample = Sample(step=int(float(step)) + 1)
        if values.get("epoch"):
            sample.epoch = float(values["epoch"])
        for name, scale in _TIME_COLUMNS.items():
            if values.get(name):
                sample.iter_time_s = float(values[name]) * scale
        for name in _RATE_COLUMNS:
            if values.get(name):
                sample.steps_per_s = float(values[name])
        if values.get("batch_size"):
            sample.batch_size = int(float(values["batch_size"]))
        return sample

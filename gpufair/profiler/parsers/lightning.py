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

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser
from gpufair.profiler.parsers.tqdm import BAR, seconds_per_iter

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
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_TQDM}|{_RICH}|{_CSV_HEAD}|{_CSV_ROW})")
    numbers = frozenset({"ep", "n", "total", "rate", "rep", "rtot", "rn", "rt", "rrate"})
    texts = frozenset({"unit", "runit", "head", "row"})
    lenient = frozenset({"rate"})  # tqdm prints "?" before its first rate

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        tqdm, rich = f.has("n"), f.has("rn")
        done = np.where(tqdm, f.num("n"), f.num("rn"))
        per_epoch = np.where(tqdm, f.num("total"), f.num("rt"))
        evaluating = f.has("val") | f.has("rval")
        train = (tqdm | rich) & ~evaluating
        f.bad |= train & (rich | (done > 0)) & (per_epoch == 0)
        epoch = np.where(tqdm, f.num("ep"), f.num("rep"))
        # tqdm's rate is a moving average over recent iterations: a windowed measure
        spi = np.where(tqdm, seconds_per_iter(f.num("rate"), f.text("unit")),
                       seconds_per_iter(f.num("rrate"), f.text("runit")))
        samples = Samples.build(
            f.n, eval=evaluating,
            step=np.where(train, epoch * per_epoch + done, done),
            total_steps=np.where(evaluating, per_epoch, np.nan),
            epoch=np.where(train, epoch + done / per_epoch, np.nan),
            total_epochs=f.num("rtot") + 1, iter_time_s=spi)
        # a tqdm bar (re)drawn empty: no step done, no rate yet
        keep = (tqdm & (done != 0)) | rich
        csv = np.flatnonzero(f.has("head") | f.has("row"))
        if len(csv):
            cls._csv(f, csv, samples, keep)
        return samples, keep

    @classmethod
    def _csv(cls, f: Fields, rows: np.ndarray, samples: Samples, keep: np.ndarray) -> None:
        """CSV logger rows, one by one: their columns are whatever the header named."""
        heads, values = f.text("head"), f.text("row")
        for r in rows.tolist():
            context = f.contexts[f.segment[r]]
            if heads[r] is not None:
                context["columns"] = heads[r].split(",")
                continue
            try:
                keep[r] = cls._csv_row(context.get("columns"), values[r], samples, r)
            except (ValueError, OverflowError):
                f.bad[r] = True

    @staticmethod
    def _csv_row(columns: list[str] | None, row: str, samples: Samples, r: int) -> bool:
        if not columns:
            return False
        values = dict(zip(columns, row.split(","), strict=False))
        step = values.get("step", "")
        if not step:
            return False
        samples.step[r] = int(float(step)) + 1
        if values.get("epoch"):
            samples.epoch[r] = float(values["epoch"])
        for name, scale in _TIME_COLUMNS.items():
            if values.get(name):
                samples.iter_time_s[r] = float(values[name]) * scale
        for name in _RATE_COLUMNS:
            if values.get(name):
                samples.steps_per_s[r] = float(values[name])
        if values.get("batch_size"):
            samples.batch_size[r] = int(float(values["batch_size"]))
        return True

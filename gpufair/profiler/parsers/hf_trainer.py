"""Hugging Face ``Trainer``: its tqdm bar and the metric dicts it prints.

- ``{'loss': 0.69, 'grad_norm': 0.6, 'learning_rate': 4e-05, 'epoch': 0.33}`` (transformers 5
  quotes the values: ``{'loss': '0.695', ...}``), every ``logging_steps``;
- the closing ``{'train_runtime': 2.3, 'train_samples_per_second': 210.8,
  'train_steps_per_second': 13.17, ...}`` — a whole-run average, so cumulative;
- the tqdm bar `` 50%|#####     | 15/30 [00:01<00:01, 13.02it/s]``. Evaluation runs its own
  bar with another total, and prints ``{'eval_loss': ...}``; both count as evaluation.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import Parser
from gpufair.profiler.parsers.tqdm import BAR, seconds_per_iter

_DICT = r"(?P<dict>\{'(?:loss|train_runtime|eval_loss|eval_runtime)'[^\n\r]*\})"
_TQDM = rf"\s*\d+%\|[^|\n\r]*\|\s*{BAR}"
_ITEM = re.compile(r"'(?P<key>\w+)': '?(?P<value>[-+\d.eE]+|nan|inf)'?")
_KNOWN = ("@loss", "@epoch", "@eval_loss", "@eval_runtime", "@train_runtime",
          "@train_steps_per_second")


class HfTrainerParser(Parser):
    family = "hf_trainer"
    # a bare tqdm bar (no "Epoch N:" prefix, which is Lightning's) is the Trainer's too: its
    # first metric dict may come only after logging_steps (500 by default)
    signature = re.compile(r"^\{'(?:loss|train_runtime|eval_loss)': |train_steps_per_second|"
                           r"^\s*\d+%\|[^|]*\|\s*\d+/\d+ \[")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_DICT}|{_TQDM})")
    numbers = frozenset({"n", "total", "rate", "@loss", "@epoch", "@eval_loss",
                         "@train_steps_per_second", "@train_samples_per_second"})
    texts = frozenset({"unit"})
    items = _ITEM
    items_in = "dict"
    lenient = frozenset({"rate"})  # tqdm prints "?" before its first rate

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        metrics, bar = f.has("dict"), f.has("n")
        known = np.zeros(f.n, dtype=bool)
        for name in _KNOWN:
            known |= f.has(name)
        f.bad |= metrics & ~known  # a metric dict without a number in it
        evaluating = metrics & (f.has("@eval_loss") | f.has("@eval_runtime"))
        steps, rate = f.num("@train_steps_per_second"), f.num("@train_samples_per_second")
        closing = metrics & ~evaluating & f.has("@train_steps_per_second")
        done, total = f.num("n"), f.num("total")
        drawn = bar & (done != 0)  # a bar (re)drawn empty: no step done, no rate yet
        # evaluation runs its own bar, with another total than training's first one
        evaluating |= drawn & (total != f.first(np.where(drawn, total, np.nan), "total"))
        batch = np.where((steps != 0) & (rate != 0), np.round(rate / steps), np.nan)
        samples = Samples.build(
            f.n, eval=evaluating, cumulative=closing, step=done,
            total_steps=np.where(bar, total, np.nan), epoch=f.num("@epoch"),
            iter_time_s=seconds_per_iter(f.num("rate"), f.text("unit")),
            steps_per_s=np.where(closing, steps, np.nan),
            samples_per_s=np.where(closing, rate, np.nan),
            batch_size=np.where(closing, batch, np.nan),
            loss=np.where(evaluating, f.num("@eval_loss"), f.num("@loss")))
        return samples, metrics | drawn

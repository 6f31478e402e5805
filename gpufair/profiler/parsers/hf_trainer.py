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

from gpufair.profiler.events import EVAL, Sample
from gpufair.profiler.parsers.base import Parser
from gpufair.profiler.parsers.tqdm import BAR, rate_to_seconds

_DICT = r"(?P<dict>\{'(?:loss|train_runtime|eval_loss|eval_runtime)'[^\n\r]*\})"
_TQDM = rf"\s*\d+%\|[^|\n\r]*\|\s*{BAR}"
_ITEM = re.compile(r"'(\w+)': '?([-+\d.eE]+|nan|inf)'?")


class HfTrainerParser(Parser):
    family = "hf_trainer"
    # a bare tqdm bar (no "Epoch N:" prefix, which is Lightning's) is the Trainer's too: its
    # first metric dict may come only after logging_steps (500 by default)
    signature = re.compile(r"^\{'(?:loss|train_runtime|eval_loss)': |train_steps_per_second|"
                           r"^\s*\d+%\|[^|]*\|\s*\d+/\d+ \[")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_DICT}|{_TQDM})", re.M)

    def convert(self, m: re.Match[str]) -> Sample | None:
        text, n, total, rate, unit = m.group("dict", "n", "total", "rate", "unit")
        if text is not None:
            return self._dict(text)
        n, total = int(n), int(total)
        if n == 0:
            return None
        train_total = self.context.setdefault("total", total)
        spi = rate_to_seconds(rate, unit)
        if total != train_total:
            return Sample(step=n, total_steps=total, phase=EVAL, iter_time_s=spi)
        return Sample(step=n, total_steps=total, iter_time_s=spi)

    def _dict(self, text: str) -> Sample | None:
        values = {k: float(v) for k, v in _ITEM.findall(text)}
        if not values:
            raise ValueError("metric dict without numbers")
        epoch = values.get("epoch")
        if "eval_loss" in values or "eval_runtime" in values:
            return Sample(epoch=epoch, phase=EVAL, loss=values.get("eval_loss"))
        if "train_steps_per_second" in values:
            steps, samples = values["train_steps_per_second"], values.get(
                "train_samples_per_second")
            batch = round(samples / steps) if samples and steps else None
            return Sample(epoch=epoch, steps_per_s=steps, samples_per_s=samples,
                          batch_size=batch, cumulative=True)
        return Sample(epoch=epoch, loss=values.get("loss"))

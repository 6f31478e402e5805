"""fairseq's progress lines, in its three printed forms.

- ``simple``/``tqdm`` progress: ``| epoch 001:    450 / 1891 loss=11.521, ..., wps=52922,
  ups=0.5, wpb=104928, bsz=5325, num_updates=445, ..., wall=882, train_wall=756`` (newer
  versions put ``2020-... | INFO | train_inner |`` before ``epoch``);
- the oldest form, ``| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962, wpb=908, ...``;
- JSON progress: ``| INFO | train_inner | {"epoch": 1, "update": 0.5, ..., "ups": "2.1",
  "num_updates": "100", "wall": "60"}`` and the per-epoch ``| train | {"train_ups": ...,
  "train_num_updates": "643", "train_wall": "2448"}``; ``| valid |`` and ``valid on``
  lines are evaluation.

The time of an update is iterations / wall time: the difference of ``wall`` (the
cumulative wall clock) over the difference of ``num_updates`` between two lines. An
interval that spans a validation run is not timed (a pause that is not training). Without
a wall clock: words per batch / words per second, else 1 / ``ups`` (printed to one
decimal, the least precise).
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import NUM, Parser

_PROGRESS = r"[^\n\r]*?\bepoch (?P<ep>\d+):?\s+(?P<i>\d+) / (?P<n>\d+) "
_JSON = r"[^\n\r]*?\| (?P<kind>train_inner|train|valid) \| \{"
_VALID = r"[^\n\r]*?\bepoch (?P<vep>\d+) \| valid on "
_ITEM = re.compile(rf"\b\"?(?P<key>(?:train_)?(?:wps|ups|wpb|num_updates|wall|loss))\"?"
                   rf"(?:=|: )\"?(?P<value>{NUM})")


class FairseqParser(Parser):
    family = "fairseq"
    signature = re.compile(r"\bepoch \d+:?\s+\d+ / \d+ loss=|\| (?:train_inner|train) \| \{"
                           r"\"epoch\"|\bnum_updates=\d+")
    pattern = re.compile(rf"^(?:{_PROGRESS}|{_JSON}|{_VALID})")
    numbers = frozenset({"ep", "i", "n", "vep", "@wps", "@ups", "@wpb", "@num_updates",
                         "@wall", "@loss", "@train_wps", "@train_ups", "@train_wpb",
                         "@train_num_updates", "@train_wall", "@train_loss"})
    texts = frozenset({"kind"})
    items = _ITEM
    lenient = frozenset({"@loss", "@train_loss"})
    hints = ("wps=", "ups=", "num_updates")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        kind = f.text("kind")
        evaluating = f.has("vep") | (kind == "valid")
        summary = kind == "train"   # per-epoch averages, keys prefixed with train_

        def pick(key: str) -> np.ndarray:
            return np.where(summary, f.num("@train_" + key), f.num("@" + key))

        # a per-epoch summary's "train_wall" is the run's wall clock ("train_train_wall" is
        # training only); a progress line's is "wall"
        updates, wall = pick("num_updates"), np.where(summary, f.num("@train_wall"),
                                                      f.num("@wall"))
        ep, i, n = f.num("ep"), f.num("i"), f.num("n")
        step = np.where(np.isnan(updates), (ep - 1) * n + i, updates)
        rate = np.where(pick("wps") > 0, pick("wpb") / pick("wps"), np.nan)
        ups = pick("ups")
        fallback = np.where(np.isnan(rate), np.where(ups > 0, 1.0 / ups, np.nan), rate)
        clocked = cls._clocked(f, np.where(evaluating, np.nan, step),
                               np.where(evaluating, np.nan, wall), ~np.isnan(wall) | evaluating)
        samples = Samples.build(
            f.n, eval=evaluating, step=np.where(evaluating, np.nan, step),
            iter_time_s=np.where(np.isnan(wall), fallback, clocked),
            loss=np.where(summary, f.num("@train_loss"), f.num("@loss")))
        return samples, ~np.isnan(step) | evaluating

    @staticmethod
    def _clocked(f: Fields, step: np.ndarray, wall: np.ndarray, rows: np.ndarray
                 ) -> np.ndarray:
        """Seconds per update between each clocked row and the one before it (NaN after a
        validation row, which holds NaN: its interval is a pause)."""
        times = np.full(f.n, np.nan)
        at = np.flatnonzero(rows)
        if len(at):
            before_wall = f.previous(at, wall, "wall")
            before_step = f.previous(at, step, "updates")
            done = step[at] - before_step
            times[at] = np.where(done > 0, (wall[at] - before_wall) / done, np.nan)
        return times

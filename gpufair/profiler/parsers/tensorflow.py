"""TensorFlow outside Keras: Estimator, tf_cnn_benchmarks and Horovod's synthetic benchmarks.

- Estimator: ``INFO:tensorflow:global_step/sec: 12.3456`` and
  ``INFO:tensorflow:loss = 0.12, step = 100 (8.101 sec)``;
- tf_cnn_benchmarks: ``Batch size: 64 global`` once, then
  ``10\\timages/sec: 182.5 +/- 0.4 (jitter = 1.2)\\t7.764``, and ``total images/sec: 182.16``;
- Horovod: ``Batch size: 32``, then ``Iter #3: 170.3 img/sec per GPU`` and
  ``Img/sec per GPU: 170.3 +-1.2``;
- the Object Detection API: ``Step 100 per-step time 0.813s loss=1.396``, printed twice
  (absl's ``I0912 11:40:27.956218 ... model_lib_v2.py:652]`` and ``INFO:tensorflow:``);
  the second copy is a duplicate of the same step and loss, dropped by the summary.
Lines may carry a logging prefix (glog/absl, ``INFO:tensorflow:``, ``INFO|...|...|``).
Image rates become iteration times through the batch size printed in the header.
"""

from __future__ import annotations

import re

import numpy as np

from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Fields
from gpufair.profiler.parsers.base import LOG_PREFIX, NUM, Parser

_GSPS = r"(?:INFO:tensorflow:)?global_step/sec: (?P<gsps>[\d.eE+-]+)"
_LOSS_STEP = (r"(?:INFO:tensorflow:)?loss = (?P<eloss>[-+\d.eE]+|nan|inf), step = (?P<estep>\d+)"
              r"(?: \((?P<esec>[\d.]+) sec\))?")
_BATCH = r"Batch size:\s*(?P<batch>\d+)(?P<glob> global)?"
_CNN = (r"(?P<cstep>\d+)\timages/sec: (?P<cips>[\d.]+) \+/- [\d.]+ \(jitter = [\d.]+\)"
        r"(?:\t(?P<closs>[-+\d.eE]+|nan|inf))?")
_CNN_TOTAL = r"total images/sec: (?P<ctotal>[\d.]+)"
_HVD = r"Iter #(?P<hstep>\d+): (?P<hips>[\d.]+) img/sec per GPU"
_HVD_TOTAL = r"Img/sec per GPU: (?P<htotal>[\d.]+)"
# the Object Detection API (model_lib_v2): the time of the step it logs, every 100 steps
_OD = rf"Step (?P<odstep>\d+) per-step time (?P<odt>{NUM})s(?: loss=(?P<odloss>{NUM}))?"


class TensorFlowParser(Parser):
    family = "tensorflow"
    signature = re.compile(r"global_step/sec: |loss = \S+, step = \d+|images/sec: [\d.]+ \+/-|"
                           r"Iter #\d+: [\d.]+ img/sec per GPU|Step \d+ per-step time ")
    pattern = re.compile(rf"^[^\S\n\r]*{LOG_PREFIX}(?:{_GSPS}|{_LOSS_STEP}|{_BATCH}|{_CNN}|"
                         rf"{_CNN_TOTAL}|{_HVD}|{_HVD_TOTAL}|{_OD})")
    numbers = frozenset({"gsps", "eloss", "estep", "esec", "batch", "cstep", "cips", "closs",
                         "ctotal", "hstep", "hips", "htotal", "odstep", "odt", "odloss"})
    keywords = ("global_step/sec:", "images/sec:", "img/sec per GPU")

    @classmethod
    def convert(cls, f: Fields) -> tuple[Samples, np.ndarray]:
        batch = f.carry(f.num("batch"), "batch")
        estimator, cnn, hvd, od = f.has("estep"), f.has("cstep"), f.has("hstep"), f.has("odstep")
        total = np.where(f.has("ctotal"), f.num("ctotal"), f.num("htotal"))
        closing = ~np.isnan(total)
        step = np.where(estimator, f.num("estep"), np.where(
            cnn, f.num("cstep"), np.where(od, f.num("odstep"), f.num("hstep") + 1)))
        samples = Samples.build(
            f.n, cumulative=closing, step=step, steps_per_s=f.num("gsps"),
            iter_time_s=np.where(od, f.num("odt"), cls._estimator_times(f, estimator)),
            loss=np.where(estimator, f.num("eloss"), np.where(od, f.num("odloss"),
                                                              f.num("closs"))),
            samples_per_s=np.where(cnn, f.num("cips"), np.where(hvd, f.num("hips"), total)),
            batch_size=np.where(cnn | hvd | closing, batch, np.nan))
        return samples, ~f.has("batch")

    @staticmethod
    def _estimator_times(f: Fields, estimator: np.ndarray) -> np.ndarray:
        """The Estimator's ``(N sec)`` covers the steps since its previous loss line."""
        times = np.full(f.n, np.nan)
        rows = np.flatnonzero(estimator)
        if len(rows):
            steps = f.num("estep")
            every = steps[rows] - f.previous(rows, steps, "step")
            times[rows] = np.where(every > 0, f.num("esec")[rows] / every, np.nan)
        return times

"""TensorFlow outside Keras: Estimator, tf_cnn_benchmarks and Horovod's synthetic benchmarks.

- Estimator: ``INFO:tensorflow:global_step/sec: 12.3456`` and
  ``INFO:tensorflow:loss = 0.12, step = 100 (8.101 sec)``;
- tf_cnn_benchmarks: ``Batch size: 64 global`` once, then
  ``10\\timages/sec: 182.5 +/- 0.4 (jitter = 1.2)\\t7.764``, and ``total images/sec: 182.16``;
- Horovod: ``Batch size: 32``, then ``Iter #3: 170.3 img/sec per GPU`` and
  ``Img/sec per GPU: 170.3 +-1.2``.
Image rates become iteration times through the batch size printed in the header.
"""

from __future__ import annotations

import re

from gpufair.profiler.events import Sample
from gpufair.profiler.parsers.base import Parser

_GSPS = r"(?:INFO:tensorflow:)?global_step/sec: (?P<gsps>[\d.eE+-]+)"
_LOSS_STEP = (r"(?:INFO:tensorflow:)?loss = (?P<eloss>[-+\d.eE]+|nan|inf), step = (?P<estep>\d+)"
              r"(?: \((?P<esec>[\d.]+) sec\))?")
_BATCH = r"Batch size:\s*(?P<batch>\d+)(?P<glob> global)?"
_CNN = (r"(?P<cstep>\d+)\timages/sec: (?P<cips>[\d.]+) \+/- [\d.]+ \(jitter = [\d.]+\)"
        r"(?:\t(?P<closs>[-+\d.eE]+|nan|inf))?")
_CNN_TOTAL = r"total images/sec: (?P<ctotal>[\d.]+)"
_HVD = r"Iter #(?P<hstep>\d+): (?P<hips>[\d.]+) img/sec per GPU"
_HVD_TOTAL = r"Img/sec per GPU: (?P<htotal>[\d.]+)"


class TensorFlowParser(Parser):
    family = "tensorflow"
    signature = re.compile(r"global_step/sec: |loss = \S+, step = \d+|images/sec: [\d.]+ \+/-|"
                           r"Iter #\d+: [\d.]+ img/sec per GPU")
    pattern = re.compile(rf"^[^\S\n\r]*(?:{_GSPS}|{_LOSS_STEP}|{_BATCH}|{_CNN}|{_CNN_TOTAL}|"
                         rf"{_HVD}|{_HVD_TOTAL})", re.M)
    keywords = ("global_step/sec:", "images/sec:", "img/sec per GPU")
    context_pattern = re.compile(r"^[^\S\n\r]*Batch size:[^\n\r]*$", re.M)

    def skip(self, head: str) -> None:
        super().skip(head)
        # the Estimator's "(N sec)" covers the steps since the previous loss line, which
        # was passed over: the first line after the gap must not be timed against it
        self.context.pop("step", None)

    def convert(self, m: re.Match[str]) -> Sample | None:
        group = m.group
        # one group() call fetches the common fields (group lookups add up at 10^5 lines)
        gsps, estep, sec, eloss = group("gsps", "estep", "esec", "eloss")
        if gsps is not None:
            # a rate over the steps since the last report: no step of its own
            return Sample(steps_per_s=float(gsps))
        if estep is not None:
            step = int(estep)
            every = step - self.context.get("step", step)
            self.context["step"] = step
            spi = float(sec) / every if sec is not None and every > 0 else None
            return Sample(step=step, loss=float(eloss), iter_time_s=spi)
        if group("batch") is not None:
            self.context["batch"] = int(group("batch"))
            return None
        batch = self.context.get("batch")
        if group("cstep") is not None:
            return Sample(step=int(group("cstep")), samples_per_s=float(group("cips")),
                          batch_size=batch, loss=_opt(group("closs")))
        if group("hstep") is not None:
            # one Horovod "iter" is num_batches_per_iter batches; the rate is per GPU
            return Sample(step=int(group("hstep")) + 1, samples_per_s=float(group("hips")),
                          batch_size=batch)
        total = group("ctotal") or group("htotal")
        return Sample(samples_per_s=float(total), batch_size=batch, cumulative=True)


def _opt(text: str | None) -> float | None:
    return None if text is None else float(text)

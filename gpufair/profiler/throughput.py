"""The throughput model: what the policies ask about a job's speed, from measurements only.

Per (job, GPU type, GPU count) it keeps the recent measured iteration times and answers with
a robust estimate (MAD rejection, then a mean) and a confidence. Between and beyond measured
counts it uses an Amdahl-style scaling curve ``t(n) = t1 · (s + (1 − s) / n)``, fitted by
least squares when the job has run at two or more counts, otherwise with the serial fraction
``s`` of the job's model family (a prior, stated in ``SERIAL_PRIOR``). Speedups across GPU
types come from the job's own measurements on both types, else from the median ratio over
other jobs measured on both. Spread placements (a gang across servers) cost a factor,
measured when a job has run both packed and spread at a count, else ``SPREAD_PRIOR``.

Nothing a user declares enters here: the papers' strategy-proofness depends on it.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpufair.model import ThroughputProfile
from gpufair.profiler.robust import robust_mean

HISTORY = 32
SPREAD_PRIOR = 1.10
DEFAULT_SERIAL = 0.10
SERIAL_PRIOR = {  # communication-bound share of an iteration, by model family (a prior only)
    "resnet": 0.05, "vgg": 0.15, "inception": 0.06, "bert": 0.10, "transformer": 0.10,
    "gpt": 0.10, "lstm": 0.20, "lm": 0.20, "recommendation": 0.25, "cyclegan": 0.05,
}
PACKED, SPREAD = "packed", "spread"


@dataclass(frozen=True, slots=True)
class Answer:
    """An iteration time and where it came from (``measured``, ``scaled``, ``type_ratio``)."""

    iter_time_s: float
    confidence: float
    source: str


def serial_prior(model: str | None) -> float:
    name = (model or "").lower()
    for key, value in SERIAL_PRIOR.items():
        if key in name:
            return value
    return DEFAULT_SERIAL


class ThroughputModel:
    def __init__(self) -> None:
        self._obs: dict[tuple[str, str, int, str], deque[float]] = {}
        self._model: dict[str, str | None] = {}

    # -- feeding -----------------------------------------------------------------------------
    def observe(self, job_id: str, gpu_type: str, count: int, iter_time_s: float, *,
                placement: str = PACKED, model: str | None = None) -> None:
        if not (math.isfinite(iter_time_s) and iter_time_s > 0 and count > 0):
            return
        key = (job_id, gpu_type, int(count), placement)
        self._obs.setdefault(key, deque(maxlen=HISTORY)).append(float(iter_time_s))
        if model is not None or job_id not in self._model:
            self._model[job_id] = model

    def forget(self, job_id: str) -> None:
        for key in [k for k in self._obs if k[0] == job_id]:
            del self._obs[key]
        self._model.pop(job_id, None)

    # -- questions ---------------------------------------------------------------------------
    def measured(self, job_id: str, gpu_type: str, count: int, placement: str = PACKED
                 ) -> Answer | None:
        values = self._obs.get((job_id, gpu_type, count, placement))
        est = robust_mean(list(values)) if values else None
        return None if est is None else Answer(est.value, est.confidence, "measured")

    def iter_time(self, job_id: str, gpu_type: str, count: int, placement: str = PACKED
                  ) -> Answer | None:
        """Seconds per iteration of the whole job on ``count`` GPUs of ``gpu_type``."""
        direct = self.measured(job_id, gpu_type, count, placement)
        if direct is not None:
            return direct
        if placement == SPREAD and count > 1:
            packed = self.iter_time(job_id, gpu_type, count, PACKED)
            if packed is None:
                return None
            factor = self._spread_factor(job_id)
            return Answer(packed.iter_time_s * factor, packed.confidence * 0.8, packed.source)
        curve = self._curve(job_id, gpu_type)
        if curve is not None:
            t1, serial, conf = curve
            return Answer(t1 * (serial + (1 - serial) / count), conf, "scaled")
        for other in self._types(job_id):
            if other == gpu_type or not self._points(job_id, other):
                continue  # only types with packed measurements: no recursion back here
            ratio = self.speedup(job_id, gpu_type, other)
            base = self.iter_time(job_id, other, count, placement) if ratio else None
            if base is not None and ratio:
                return Answer(base.iter_time_s / ratio, base.confidence * 0.5, "type_ratio")
        return None

    def speedup(self, job_id: str, gpu_type: str, than: str) -> float | None:
        """How many times faster ``gpu_type`` runs this job than ``than`` (same GPU count)."""
        own = self._own_ratio(job_id, gpu_type, than)
        if own is not None:
            return own
        ratios = [r for j in {k[0] for k in self._obs} if j != job_id
                  if (r := self._own_ratio(j, gpu_type, than)) is not None]
        return statistics.median(ratios) if ratios else None

    def remaining_time(self, job_id: str, iterations_left: float, gpu_type: str, count: int,
                       placement: str = PACKED) -> float | None:
        answer = self.iter_time(job_id, gpu_type, count, placement)
        return None if answer is None else max(0.0, iterations_left) * answer.iter_time_s

    def profile(self, job_id: str, gpu_types: Iterable[str], counts: Iterable[int]
                ) -> ThroughputProfile:
        """Iterations per second of the job for every (type, count) the model can answer."""
        rates: dict[tuple[str, int], float] = {}
        for gpu_type in gpu_types:
            for count in counts:
                answer = self.iter_time(job_id, gpu_type, count)
                if answer is not None:
                    rates[(gpu_type, count)] = 1.0 / answer.iter_time_s
        return ThroughputProfile(rates)

    # -- internals ---------------------------------------------------------------------------
    def _types(self, job_id: str) -> list[str]:
        return sorted({k[1] for k in self._obs if k[0] == job_id})

    def _points(self, job_id: str, gpu_type: str) -> dict[int, float]:
        out = {}
        for (j, t, n, p), values in self._obs.items():
            if j == job_id and t == gpu_type and p == PACKED and values:
                est = robust_mean(list(values))
                if est is not None:
                    out[n] = est.value
        return out

    def _own_ratio(self, job_id: str, gpu_type: str, than: str) -> float | None:
        a, b = self._points(job_id, gpu_type), self._points(job_id, than)
        common = sorted(set(a) & set(b))
        if not common:
            return None
        return statistics.median(b[n] / a[n] for n in common)

    def _curve(self, job_id: str, gpu_type: str) -> tuple[float, float, float] | None:
        """(t1, serial fraction, confidence) of the Amdahl fit on this type."""
        points = self._points(job_id, gpu_type)
        if not points:
            return None
        if len(points) == 1:
            (n, t), = points.items()
            s = serial_prior(self._model.get(job_id))
            return t / (s + (1 - s) / n), s, 0.3
        # t(n) = a + b / n with a = t1·s, b = t1·(1 − s): linear least squares in 1/n
        xs = [1.0 / n for n in points]
        ys = list(points.values())
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
        a = my - b * mx
        b = max(b, 0.0)
        a = max(a, 0.0)
        t1 = a + b
        if t1 <= 0:
            return None
        return t1, a / t1, 0.7

    def _spread_factor(self, job_id: str) -> float:
        factors = []
        for (j, t, n, p), values in self._obs.items():
            if j == job_id and p == SPREAD and values:
                packed = self.measured(job_id, t, n, PACKED)
                spread = robust_mean(list(values))
                if packed is not None and spread is not None:
                    factors.append(spread.value / packed.iter_time_s)
        return statistics.median(factors) if factors else SPREAD_PRIOR

    # -- persistence -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"observations": [[*key, list(values)] for key, values in self._obs.items()],
                "models": self._model}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ThroughputModel:
        model = cls()
        for job, gpu_type, count, placement, values in data.get("observations", []):
            model._obs[(job, gpu_type, int(count), placement)] = deque(
                (float(v) for v in values), maxlen=HISTORY)
        model._model.update(data.get("models", {}))
        return model

"""TensorBoard event files, read through TensorBoard's own maintained loader (optional extra).

``pip install 'gpufair[profiler-tensorboard]'``. No protobuf is decoded by hand: records come
from ``tensorboard.backend.event_processing.event_file_loader.EventFileLoader``. Scalars are
mapped by tag: ``steps_per_sec`` / ``global_step/sec`` / ``it/s`` → step rate,
``samples_per_sec`` / ``examples/sec`` → sample rate, ``batch_size`` → batch size,
``iter_time`` / ``step_time`` (``_ms`` for milliseconds) → time, ``loss`` → loss. Incremental
reading keeps the loader's position in memory; across restarts the last step consumed is
persisted, and events at or before it are skipped.
"""

from __future__ import annotations

import re
from typing import Any

from gpufair.profiler.events import LineStats, Sample

_RATE = re.compile(r"steps?_per_sec|global_step/sec|it/s|steps_per_second")
_SAMPLES = re.compile(r"samples?_per_sec|examples?/sec|examples_per_second|images?/sec")
_TIME = re.compile(r"iter(?:ation)?_time|step_time|time_per_iter")


def available() -> bool:
    try:
        from tensorboard.backend.event_processing import event_file_loader  # noqa: F401
    except ImportError:
        return False
    return True


def is_event_file(path: str) -> bool:
    return "tfevents" in path.rsplit("/", 1)[-1]


class EventFileSource:
    family = "tensorboard"

    def __init__(self, path: str, context: dict[str, Any] | None = None) -> None:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
        self._loader = EventFileLoader(path)
        self._to_array = tensor_util.make_ndarray
        self.context: dict[str, Any] = dict(context or {})
        self.stats = LineStats()

    def read(self) -> list[Sample]:
        done = int(self.context.get("step", -1))
        by_step: dict[int, Sample] = {}
        try:
            events = list(self._loader.Load())
        except Exception:  # a corrupt record must not stop the round
            self.stats.malformed += 1
            events = []
        for event in events:
            self.stats.lines += 1
            if not event.HasField("summary"):
                self.stats.ignored += 1
                continue
            if event.step <= done:
                continue
            for value in event.summary.value:
                number = self._scalar(value)
                if number is None:
                    continue
                sample = by_step.setdefault(event.step, Sample(step=int(event.step)))
                self._assign(sample, value.tag.lower(), number)
        samples = [by_step[s] for s in sorted(by_step)]
        self.stats.parsed += len(samples)
        if samples:
            self.context["step"] = samples[-1].step
        return samples

    def _scalar(self, value: Any) -> float | None:
        if value.HasField("simple_value"):
            return float(value.simple_value)
        if value.HasField("tensor"):
            try:
                array = self._to_array(value.tensor)
            except (ValueError, TypeError):
                self.stats.malformed += 1
                return None
            if array.size == 1 and array.dtype.kind in "fiu":
                return float(array.reshape(()))
        return None

    @staticmethod
    def _assign(sample: Sample, tag: str, number: float) -> None:
        if "batch_size" in tag:
            sample.batch_size = int(number)
        elif _SAMPLES.search(tag):
            sample.samples_per_s = number
        elif _RATE.search(tag):
            sample.steps_per_s = number
        elif _TIME.search(tag):
            sample.iter_time_s = number / 1000.0 if tag.endswith("_ms") else number
        elif "loss" in tag:
            sample.loss = number

    def state(self) -> dict[str, Any]:
        return {"family": self.family, "context": dict(self.context)}

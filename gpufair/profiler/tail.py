"""Read only the bytes a log gained since the last round, safely under truncation and rotation.

A position is (device, inode, offset, fingerprint of the first bytes). Each read:

- new inode at the path → the log was rotated: the rest of the old file is read from its
  rotated name (``path.1``, logrotate's default) when it is still there, then the new file
  from the start;
- same inode, size below the offset → truncated in place (``copytruncate``): from the start;
- same inode, first bytes changed → rewritten in place: from the start;
- otherwise from the offset, up to ``max_bytes``, ending at the last complete line (a partial
  last line is read next round, once finished). A line longer than ``max_bytes`` is
  skipped, counted, and never blocks the tail.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

HEAD_BYTES = 64
MAX_BYTES = 8 << 20


@dataclass(slots=True)
class Position:
    dev: int = 0
    ino: int = 0
    offset: int = 0
    head: str = ""
    head_len: int = 0

    def as_dict(self) -> dict[str, int | str]:
        return {"dev": self.dev, "ino": self.ino, "offset": self.offset, "head": self.head,
                "head_len": self.head_len}

    @classmethod
    def from_dict(cls, data: dict) -> Position:
        return cls(**{k: data[k] for k in ("dev", "ino", "offset", "head", "head_len")
                      if k in data})


@dataclass(slots=True)
class Read:
    data: bytes
    position: Position
    event: str = ""          # "", "missing", "rotated", "truncated", "rewritten"
    skipped_bytes: int = 0   # an over-long line given up on


def _fingerprint(fd: int, length: int) -> tuple[str, int]:
    head = os.pread(fd, length, 0)
    return hashlib.blake2b(head, digest_size=8).hexdigest(), len(head)


def _complete(chunk: bytes, at_eof_limit: bool) -> tuple[bytes, int]:
    """The prefix of ``chunk`` that ends at a line end, and how many bytes to skip."""
    end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
    if end >= 0:
        return chunk[:end + 1], 0
    return b"", len(chunk) if at_eof_limit else 0


def read_new(path: str, pos: Position | None, max_bytes: int = MAX_BYTES) -> Read:
    # a copy: the caller's position stays as it was if anything below fails
    pos = Position() if pos is None else Position(pos.dev, pos.ino, pos.offset, pos.head,
                                                  pos.head_len)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return Read(b"", pos, "missing")
    try:
        st = os.fstat(fd)
        event = ""
        prefix = b""
        if pos.ino and (st.st_dev, st.st_ino) != (pos.dev, pos.ino):
            prefix = _rest_of_rotated(path, pos, max_bytes)
            event, pos.offset = "rotated", 0
        elif st.st_size < pos.offset:
            event, pos.offset = "truncated", 0
        elif pos.offset and pos.head_len and _fingerprint(fd, pos.head_len)[0] != pos.head:
            event, pos.offset = "rewritten", 0
        if event:
            pos.head, pos.head_len = "", 0
        pos.dev, pos.ino = st.st_dev, st.st_ino
        if pos.head_len < HEAD_BYTES and st.st_size > pos.head_len:
            pos.head, pos.head_len = _fingerprint(fd, HEAD_BYTES)
        want = min(st.st_size - pos.offset, max_bytes)
        if want <= 0:
            return Read(prefix, pos, event)
        chunk = os.pread(fd, want, pos.offset)
        data, skipped = _complete(chunk, len(chunk) >= max_bytes)
        pos.offset += len(data) + skipped
        return Read(prefix + data, pos, event, skipped)
    finally:
        os.close(fd)


def _rest_of_rotated(path: str, pos: Position, max_bytes: int) -> bytes:
    """Lines the old file gained after our last read, if logrotate left it at ``path.1``."""
    old = path + ".1"
    try:
        fd = os.open(old, os.O_RDONLY)
    except OSError:
        return b""
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (pos.dev, pos.ino) or st.st_size <= pos.offset:
            return b""
        chunk = os.pread(fd, min(st.st_size - pos.offset, max_bytes), pos.offset)
        data = chunk if chunk.endswith((b"\n", b"\r")) else chunk + b"\n"
        return data
    finally:
        os.close(fd)

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

The last line of a file without a newline: a log that is still being written may be in the
middle of it, so by default it is *not* consumed (the daemon's rounds: the offset stays at
its start, and the whole line is read once its newline arrives). A caller that knows the
file is finished (``final=True``: ``gpufair profile``, a job that has ended) gets it, as a
line, once a read reaches the end of the file. ``Read.more`` says whether the file held more
than ``max_bytes`` let this read take: a caller reading a whole file reads until it is False.

Files are opened by :func:`gpufair.profiler.files.open_log`: regular files only, no symlink
as the last component, and (given the job's owner) only what that user could read; a
refused file reads as nothing, with event ``"refused"`` and the reason. At most
``max_bytes`` are read per call (the rest of a rotated file included), with ``pread`` on a
regular file: no call waits on a writer (a hung NFS mount aside, see ``files``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection
from dataclasses import dataclass

from gpufair.profiler.files import Refused, open_log

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
    event: str = ""          # "", "missing", "refused", "rotated", "truncated", "rewritten"
    skipped_bytes: int = 0   # an over-long line given up on
    reason: str = ""         # why a file was refused (``files``' reasons)
    more: bool = False       # the file held more than this read's budget let it take


def _fingerprint(fd: int, length: int) -> tuple[str, int]:
    head = os.pread(fd, length, 0)
    return hashlib.blake2b(head, digest_size=8).hexdigest(), len(head)


def _complete(chunk: bytes, at_eof_limit: bool) -> tuple[bytes, int]:
    """The prefix of ``chunk`` that ends at a line end, and how many bytes to skip."""
    end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
    if end >= 0:
        return chunk[:end + 1], 0
    return b"", len(chunk) if at_eof_limit else 0


def read_new(path: str, pos: Position | None, max_bytes: int = MAX_BYTES,
             owner_uid: int | None = None, owner_gids: Collection[int] | None = None,
             final: bool = False) -> Read:
    """What ``path`` gained since ``pos``; ``owner_uid``/``owner_gids``: the job's owner,
    whose read permission the file must grant (None: not checked, see ``files``).
    ``final``: the file is finished, so a last line without a newline is read too (once
    this read reaches the end of the file) instead of being left for a later read."""
    # a copy: the caller's position stays as it was if anything below fails
    pos = Position() if pos is None else Position(pos.dev, pos.ino, pos.offset, pos.head,
                                                  pos.head_len)
    try:
        fd, st = open_log(path, owner_uid, owner_gids)
    except Refused as refused:
        return Read(b"", pos, "refused", reason=refused.reason)
    except OSError:
        return Read(b"", pos, "missing")
    try:
        event = ""
        prefix = b""
        if pos.ino and (st.st_dev, st.st_ino) != (pos.dev, pos.ino):
            prefix = _rest_of_rotated(path, pos, max_bytes, owner_uid, owner_gids)
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
        # the rest of a rotated file counts against the same budget
        want = min(st.st_size - pos.offset, max_bytes - len(prefix))
        if want <= 0:
            return Read(prefix, pos, event, more=st.st_size > pos.offset)
        chunk = os.pread(fd, want, pos.offset)
        cut = pos.offset + len(chunk) < st.st_size
        if final and not cut:
            data, skipped = chunk, 0   # the file is finished: its last line is complete
        else:
            data, skipped = _complete(chunk, len(chunk) >= max_bytes)
        pos.offset += len(data) + skipped
        # more only if this read moved on: a caller looping on it always ends
        return Read(prefix + data, pos, event, skipped, more=cut and bool(data or skipped))
    finally:
        os.close(fd)


def _rest_of_rotated(path: str, pos: Position, max_bytes: int, owner_uid: int | None,
                     owner_gids: Collection[int] | None) -> bytes:
    """Lines the old file gained after our last read, if logrotate left it at ``path.1``
    (and it may still be read: the same checks as the log itself)."""
    old = path + ".1"
    try:
        fd, st = open_log(old, owner_uid, owner_gids)
    except (Refused, OSError):
        return b""
    try:
        if (st.st_dev, st.st_ino) != (pos.dev, pos.ino) or st.st_size <= pos.offset:
            return b""
        chunk = os.pread(fd, min(st.st_size - pos.offset, max_bytes), pos.offset)
        data = chunk if chunk.endswith((b"\n", b"\r")) else chunk + b"\n"
        return data
    finally:
        os.close(fd)

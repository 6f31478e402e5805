"""Opening a job's log as root without being fooled by the job's owner.

The daemon runs as root and opens the log of every running job at a path the job's owner
chose (Slurm's ``StdOut``). :func:`open_log` opens it only if it is safe to read:

- **no blocking open**: the path is first opened with ``O_PATH | O_NOFOLLOW``, which opens
  nothing for I/O (a FIFO without a writer cannot block it, a device's driver is not called:
  no watchdog armed, no tape rewound); the descriptor is ``fstat``-ed and anything but a
  regular file is refused *before* any real open. Only then is the very same inode opened
  for reading through ``/proc/self/fd/N`` (``O_RDONLY | O_NONBLOCK | O_NOCTTY |
  O_CLOEXEC``) and ``fstat``-ed again: the checks are on descriptors, never on a separate
  ``stat`` of the path, so swapping the file between check and open changes nothing.
  Without ``/proc`` the path is opened directly with ``O_RDONLY | O_NONBLOCK | O_NOFOLLOW |
  O_NOCTTY | O_CLOEXEC`` and the opened descriptor checked (a non-blocking open of a FIFO
  returns at once; a device could then be opened, though never read).
- **no symlink** as the last component of the path (``O_NOFOLLOW``).
- **never a file the job's owner could not read** (when the owner is known): the opened
  file's owner and mode are checked as the kernel would for that user — the owner bits if
  the user owns the file, else the group bits if the file's group is one of the user's
  groups, else the "other" bits. So a symlinked *directory* in the path (``~/logs ->
  /root``) yields only files the user could read anyway were they in a directory the user
  can reach: a root-only file is refused ("owner mismatch"). ``os.access`` would not do —
  the daemon is root, and root may read anything. A root job (uid 0) may read anything.

Known limits, left on purpose: search permission on the *directories* of the path is not
checked (a world-readable file inside a directory the user cannot enter, reached through a
symlinked directory, is read — the file is readable by everyone who can reach it); POSIX
ACLs are not consulted (the mode's group bits are the ACL mask, so at worst an ACL that
grants a user more than the mode is ignored and the log refused); without ``owner_gids``
the group bits never grant. A regular file on a hung NFS mount can still block the
``open``/``fstat``/``pread`` calls: non-blocking flags do not apply to regular files, and
this module does not work around it with threads.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection

# reasons a log is refused (what the profiler reports)
SYMLINK = "symlink"
NOT_REGULAR = "not a regular file"
OWNER_MISMATCH = "owner mismatch"
NOT_READABLE = "not readable by the job's owner"
DENIED = "permission denied"

_O_PATH = getattr(os, "O_PATH", 0)     # Linux only; elsewhere the direct open below
_PATH_FLAGS = _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_REOPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_READ_FLAGS = _REOPEN_FLAGS | os.O_NOFOLLOW
_PROC_FD = bool(_O_PATH) and os.path.isdir("/proc/self/fd")


class Refused(Exception):
    """A log that exists but must not be read; ``reason`` is one of this module's reasons."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def check(st: os.stat_result, owner_uid: int | None = None,
          owner_gids: Collection[int] | None = None) -> str | None:
    """Why a file with this status must not be read for this owner (None: it may be)."""
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        return SYMLINK
    if not stat.S_ISREG(mode):
        return NOT_REGULAR
    if owner_uid is None or owner_uid == 0:
        return None
    if st.st_uid == owner_uid:
        return None if mode & stat.S_IRUSR else NOT_READABLE
    if owner_gids and st.st_gid in owner_gids:
        return None if mode & stat.S_IRGRP else OWNER_MISMATCH
    return None if mode & stat.S_IROTH else OWNER_MISMATCH


def open_log(path: str, owner_uid: int | None = None,
             owner_gids: Collection[int] | None = None) -> tuple[int, os.stat_result]:
    """A descriptor open for reading on ``path`` and its ``fstat``; the caller closes it.

    Raises :class:`Refused` for a file that exists but must not be read, ``OSError`` (e.g.
    ``FileNotFoundError``) for one that cannot be opened. Never blocks on a FIFO."""
    if not _PROC_FD:
        return _open_direct(path, owner_uid, owner_gids)
    try:
        pfd = os.open(path, _PATH_FLAGS)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    try:
        first = os.fstat(pfd)
        reason = check(first, owner_uid, owner_gids)
        if reason is not None:
            raise Refused(path, reason)
        try:
            fd = os.open(f"/proc/self/fd/{pfd}", _REOPEN_FLAGS)
        except OSError as exc:
            raise _refusal(path, exc) from exc
    finally:
        os.close(pfd)
    return _vetted(path, fd, owner_uid, owner_gids, (first.st_dev, first.st_ino))


def _open_direct(path: str, owner_uid: int | None, owner_gids: Collection[int] | None
                 ) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    return _vetted(path, fd, owner_uid, owner_gids, None)


def _vetted(path: str, fd: int, owner_uid: int | None, owner_gids: Collection[int] | None,
            inode: tuple[int, int] | None) -> tuple[int, os.stat_result]:
    """``fd`` and its status if the opened file passes the checks; closed and refused if
    not (the decisive check: on the descriptor that will be read)."""
    try:
        st = os.fstat(fd)
        reason = check(st, owner_uid, owner_gids)
        if reason is None and inode is not None and (st.st_dev, st.st_ino) != inode:
            reason = NOT_REGULAR   # cannot happen through /proc/self/fd; refuse if it does
        if reason is not None:
            raise Refused(path, reason)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _refusal(path: str, exc: OSError) -> Refused | OSError:
    """The error to raise for a failed open: a refusal for what exists but is refused."""
    if exc.errno == errno.ELOOP:
        return Refused(path, SYMLINK)        # O_NOFOLLOW on a symlink (or a loop of them)
    if exc.errno == errno.ENXIO:
        return Refused(path, NOT_REGULAR)    # a UNIX socket
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Refused(path, DENIED)         # e.g. root squashed on NFS
    return exc

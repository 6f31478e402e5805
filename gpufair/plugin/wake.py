"""The daemon's wake socket: hooks say "something changed", the daemon runs a fill-only round.

A unix datagram socket in the hook directory. The hooks run as root (Prolog/Epilog) or as
SlurmUser (PrologSlurmctld/EpilogSlurmctld). One ownership model serves a root and a non-root
SlurmUser alike: **everything in the hook directory belongs to the directory's owner**, which
is SlurmUser (tmpfiles.d creates it so, 0700; docs/deploy.md). The daemon runs as that user
(the unit does) or as root; a root daemon hands the socket and the ``spool/`` and ``bad/``
directories it creates to the owner, and root hooks hand their spool files to it
(``hooks.py``), so neither side ever meets a file it cannot read. A directory the daemon
has to create itself is its own user's, 0700.

The socket is 0600, or 0660 with a group (``[daemon] wake_group``). Permissions alone are not
trusted: the socket asks the kernel for each sender's credentials (``SO_PASSCRED``) and
counts a datagram only from root, the daemon's own user, the hook directory's owner, or a
member of the wake group. Anything else is dropped and counted, so a user who can reach the
socket (a misconfigured mode) cannot make the daemon spin.
"""

from __future__ import annotations

import errno
import grp
import logging
import os
import pwd
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from gpufair.errors import RefusedToStart

log = logging.getLogger("gpufair.daemon")

WAKE_SOCKET = "wake.sock"
_CREDS = struct.Struct("3i")   # struct ucred: pid, uid, gid


@dataclass
class WakeCounts:
    accepted: int = 0
    rejected: int = 0


class WakeSocket:
    def __init__(self, hook_dir: str | Path, *, group: str | None = None) -> None:
        directory = Path(hook_dir)
        self.owner = prepare_hook_dir(directory)
        self.path = directory / WAKE_SOCKET
        self.path.unlink(missing_ok=True)
        self.gid: int | None = None
        self.members: frozenset[int] = frozenset()
        if group is not None:
            try:
                entry = grp.getgrnam(group)
            except KeyError:
                raise ValueError(f"wake_group {group!r} does not exist") from None
            self.gid = entry.gr_gid
            self.members = frozenset(_uid(name) for name in entry.gr_mem) - {None}
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        old = os.umask(0o077)
        try:
            self.sock.bind(str(self.path))
        finally:
            os.umask(old)
        _give(self.path, self.owner, self.gid)
        os.chmod(self.path, 0o660 if self.gid is not None else 0o600)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.setblocking(False)
        self.counts = WakeCounts()

    def fileno(self) -> int:
        return self.sock.fileno()

    def allowed(self, uid: int, gid: int) -> bool:
        return uid in (0, os.geteuid(), self.owner[0]) or (self.gid is not None and (
            gid == self.gid or uid in self.members))

    def drain(self) -> int:
        """Read every waiting datagram; return how many came from an allowed sender."""
        accepted = 0
        while True:
            try:
                _, ancillary, _, _ = self.sock.recvmsg(512, socket.CMSG_SPACE(_CREDS.size))
            except (BlockingIOError, InterruptedError):
                break
            creds = next((data for level, kind, data in ancillary
                          if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS
                          and len(data) >= _CREDS.size), None)
            if creds is not None and self.allowed(*_CREDS.unpack(creds[:_CREDS.size])[1:]):
                accepted += 1
            else:
                self.counts.rejected += 1
        self.counts.accepted += accepted
        return accepted

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


def prepare_hook_dir(directory: Path) -> tuple[int, int]:
    """Make the hook directory ready before any hook needs it: the directory (0700, this
    process's, when missing) and its ``spool/`` and ``bad/`` (0700, the directory owner's).
    Returns the owner (uid, gid)."""
    try:
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            directory.chmod(0o700)
            if os.geteuid() == 0:
                log.warning("created the hook directory %s as root: a non-root SlurmUser's "
                            "PrologSlurmctld/EpilogSlurmctld cannot write there; create it "
                            "owned by SlurmUser (the tmpfiles.d line of `gpufair admin "
                            "write-files`)", directory,
                            extra={"fields": {"event": "hook_dir_created_as_root"}})
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, f"not writable by uid {os.geteuid()}")
        info = directory.stat()
        owner = (info.st_uid, info.st_gid)
        for name in ("spool", "bad"):
            sub = directory / name
            if not sub.is_dir():
                sub.mkdir(mode=0o700, exist_ok=True)
                _give(sub, owner)
    except OSError as exc:
        raise RefusedToStart(
            f"hook directory {directory}: {exc.strerror or exc}; create it owned by SlurmUser, "
            "mode 0700 (the tmpfiles.d file of `gpufair admin write-files` does)") from exc
    return owner


def _give(path: Path, owner: tuple[int, int], group: int | None = None) -> None:
    """Hand ``path`` to the hook directory's owner (only root can, and only root needs to:
    any other daemon runs as that owner), and to ``group`` when one is set."""
    uid, gid = owner if os.geteuid() == 0 else (-1, -1)
    if group is not None:
        gid = group
    if (uid, gid) != (-1, -1):
        os.chown(path, uid, gid)


def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None

"""The daemon's wake socket: hooks say "something changed", the daemon runs a fill-only round.

A unix datagram socket in the hook directory. The hooks run as root (Prolog/Epilog on the
nodes) or as SlurmUser (PrologSlurmctld/EpilogSlurmctld), so the socket belongs to the
daemon's user and, when configured, to a group (``[daemon] wake_group``, e.g. SlurmUser's
group) with mode 0660; without a group it is 0600. Permissions alone are not trusted: the
socket asks the kernel for each sender's credentials (``SO_PASSCRED``) and counts a datagram
only from root, the daemon's own user, or a member of the wake group. Anything else is
dropped and counted, so a user who can reach the socket (a misconfigured mode) cannot make
the daemon spin.
"""

from __future__ import annotations

import grp
import os
import pwd
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

WAKE_SOCKET = "wake.sock"
_CREDS = struct.Struct("3i")   # struct ucred: pid, uid, gid


@dataclass
class WakeCounts:
    accepted: int = 0
    rejected: int = 0


class WakeSocket:
    def __init__(self, hook_dir: str | Path, *, group: str | None = None) -> None:
        directory = Path(hook_dir)
        directory.mkdir(parents=True, exist_ok=True)
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
        if self.gid is not None:
            os.chown(self.path, -1, self.gid)
        os.chmod(self.path, 0o660 if self.gid is not None else 0o600)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.setblocking(False)
        self.counts = WakeCounts()

    def fileno(self) -> int:
        return self.sock.fileno()

    def allowed(self, uid: int, gid: int) -> bool:
        return uid in (0, os.geteuid()) or (self.gid is not None and (
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


def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None

"""One daemon per state store: two daemons on one cluster would each preempt for their own plan.

``serve`` takes an exclusive ``flock`` on ``<store>.lock`` for its whole life and writes its pid
there; a second ``serve`` on the same store refuses to start and names the holder. The lock
goes with the process (a SIGKILLed daemon leaves no stale lock behind: the kernel drops it).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from gpufair.errors import RefusedToStart


class InstanceLock:
    def __init__(self, store_path: str | Path) -> None:
        self.path = Path(f"{store_path}.lock")
        self.fd: int | None = None

    def acquire(self) -> InstanceLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise RefusedToStart(f"another gpufair daemon (pid {holder}) holds {self.path}; "
                                 "one daemon per state store") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> InstanceLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

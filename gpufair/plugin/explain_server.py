"""The daemon's explain socket: a user asks why their job waits, without root.

``gpufair explain JOBID`` connects to a unix stream socket the daemon serves
(``[daemon] explain_socket``), sends one JSON line ``{"job": "123"}`` and reads one JSON line
back: the job's decisions from the store, oldest first, and when the next timer round is due.

Who may read what: the socket is 0666 (anyone on the host may ask), and every connection is
judged by the kernel's word for who is on the other end (``SO_PEERCRED``), never by what the
client says. Admins — root, the daemon's own user, the hook directory's owner (SlurmUser) and
members of ``[daemon] admin_group`` — read any job; anybody else only the jobs whose owner
uid (as the resource manager reported it) is theirs. A job that is not theirs gets the very
answer an unknown job gets, so the socket tells nobody which job ids exist.

Why a socket rather than a readable store: the store holds every user's jobs, history and
the journal, so it stays the daemon's (0600); the socket hands out exactly one job's story
to exactly the people allowed to see it. It is served by one thread of its own with its own
read-only connection to the store (SQLite WAL: readers never block the daemon's writes), one
request at a time with a short timeout: a slow or hostile client delays other explains, never
a round.
"""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
import socket
import sqlite3
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpufair.plugin.store import read_decisions

log = logging.getLogger("gpufair.daemon")

_CREDS = struct.Struct("3i")   # struct ucred: pid, uid, gid
MAX_REQUEST = 4096
TIMEOUT_S = 2.0
UNKNOWN = "unknown"            # the error of an unknown job, and of somebody else's


def admins(group: str | None, extra: tuple[int, ...] = ()) -> tuple[frozenset[int], int | None]:
    """(uids that read every job, the admin group's gid): root, this process's user and
    ``extra`` (the hook directory's owner), plus the group's members."""
    uids = {0, os.geteuid(), *extra}
    gid = None
    if group is not None:
        try:
            entry = grp.getgrnam(group)
        except KeyError:
            raise ValueError(f"admin_group {group!r} does not exist") from None
        gid = entry.gr_gid
        for name in entry.gr_mem:
            try:
                uids.add(pwd.getpwnam(name).pw_uid)
            except KeyError:
                continue
    return frozenset(uids), gid


class ExplainServer:
    """One thread answering ``gpufair explain`` on a unix socket."""

    def __init__(self, path: str | Path, store_path: str, *,
                 admin_uids: frozenset[int], admin_gid: int | None,
                 next_round: Callable[[], float | None]) -> None:
        self.path = Path(path)
        self.store_path = store_path
        self.admin_uids = admin_uids
        self.admin_gid = admin_gid
        self.next_round = next_round
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        os.chmod(self.path, 0o666)   # anyone may ask; the peer's uid decides what they get
        self.sock.listen(16)
        self.sock.settimeout(0.5)
        self.stopping = False
        self.served = 0
        self.thread = threading.Thread(target=self._loop, name="gpufair-explain", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stopping = True
        self.thread.join(timeout=5.0)
        self.sock.close()
        self.path.unlink(missing_ok=True)

    def _loop(self) -> None:
        db = sqlite3.connect(f"file:{self.store_path}?mode=ro", uri=True, timeout=5.0,
                             check_same_thread=False)
        try:
            while not self.stopping:
                try:
                    conn, _ = self.sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                with conn:
                    try:
                        self._answer(conn, db)
                    except (OSError, ValueError, sqlite3.Error) as exc:
                        log.warning("explain request failed: %s", exc,
                                    extra={"fields": {"event": "explain_failed"}})
        finally:
            db.close()

    def _answer(self, conn: socket.socket, db: sqlite3.Connection) -> None:
        conn.settimeout(TIMEOUT_S)
        _, uid, gid = _CREDS.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                    _CREDS.size))
        data = b""
        while b"\n" not in data and len(data) < MAX_REQUEST:
            chunk = conn.recv(MAX_REQUEST)
            if not chunk:
                break
            data += chunk
        try:
            request = json.loads(data.split(b"\n")[0] or b"null")
            job_id = request["job"]
            if not isinstance(job_id, str) or not job_id or len(job_id) > 200:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            conn.sendall(_line({"error": "bad request", "detail": 'send {"job": "ID"}'}))
            return
        rows = read_decisions(db, job_id)
        admin = uid in self.admin_uids or (self.admin_gid is not None and gid == self.admin_gid)
        owners = {r["owner_uid"] for r in rows}
        self.served += 1
        if not rows or not (admin or owners == {uid}):
            conn.sendall(_line({"error": UNKNOWN, "job": job_id}))
            return
        conn.sendall(_line({"job": job_id, "decisions": rows,
                            "next_round_at": self.next_round()}))


def _line(reply: dict[str, Any]) -> bytes:
    return json.dumps(reply, sort_keys=True).encode() + b"\n"


class Unavailable(Exception):
    """No daemon answers on the socket."""


def ask(path: str | Path, job_id: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """The daemon's reply about ``job_id`` (raises :class:`Unavailable` if none answers)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(path))
            sock.sendall(_line({"job": job_id}))
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            raise Unavailable(f"{path}: {exc.strerror or exc}") from exc
    if not data:
        raise Unavailable(f"{path}: no answer")
    reply = json.loads(data)
    if not isinstance(reply, dict):
        raise Unavailable(f"{path}: not a gpufair explain reply")
    return reply

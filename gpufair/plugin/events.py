"""Hook events from other hosts: a UDP listener for what the compute nodes' Prolog/Epilog send.

On a real cluster the Prolog and Epilog run on the compute nodes, where the daemon's spool and
wake socket are not. Their hooks (``gpufair/plugin/hooks.py``, with ``GPUFAIR_EVENT_ADDR`` and
``GPUFAIR_EVENT_KEY``) send each event as one datagram ``gpufair1 <hmac> <json>``; this
listener (``[daemon] event_listen``, ``event_key_file``) accepts a datagram only when

- its HMAC-SHA256 under the shared key matches (the key is readable by root/SlurmUser only,
  like munge's; users on the nodes cannot forge events),
- its timestamp is within ``MAX_SKEW_S`` of the daemon's clock, and
- its nonce was not seen before (a captured datagram cannot be replayed).

Accepted events go to the store like spooled ones and wake the daemon; everything else is
counted and dropped. Events only wake the daemon and record exit codes; no decision trusts
their content.
"""

from __future__ import annotations

import hmac
import json
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufair.errors import InputError

MAGIC = b"gpufair1"
MAX_SKEW_S = 300.0
_NONCES = 65536


@dataclass
class EventCounts:
    accepted: int = 0
    rejected: int = 0


def read_key(path: str) -> bytes:
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise InputError(path, f"cannot read the event key: {exc.strerror}",
                         field="daemon.event_key_file") from exc
    if len(key) < 16:
        raise InputError(path, "the event key is shorter than 16 bytes",
                         field="daemon.event_key_file")
    return key


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:   # 0: any free port
        raise InputError("config", "expected HOST:PORT", field="daemon.event_listen",
                         value=text)
    return host.strip("[]"), int(port)


class EventListener:
    def __init__(self, address: str, key: bytes, *, clock: Any = time.time) -> None:
        host, port = parse_address(address)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.sock.setblocking(False)
        self.key = key
        self.clock = clock
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.counts = EventCounts()

    @property
    def address(self) -> tuple[str, int]:
        return self.sock.getsockname()[:2]

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self) -> list[dict[str, Any]]:
        events = []
        while True:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return events
            event = self.verify(data)
            if event is None:
                self.counts.rejected += 1
            else:
                self.counts.accepted += 1
                events.append(event)

    def verify(self, data: bytes) -> dict[str, Any] | None:
        magic, _, rest = data.partition(b" ")
        mac, _, body = rest.partition(b" ")
        if magic != MAGIC or not body:
            return None
        expected = hmac.new(self.key, body, "sha256").hexdigest().encode()
        if not hmac.compare_digest(mac, expected):
            return None
        try:
            event = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        if not isinstance(event, dict):
            return None
        nonce, ts = event.get("nonce"), event.get("ts")
        if not isinstance(nonce, str) or not isinstance(ts, (int, float)):
            return None
        if abs(self.clock() - ts) > MAX_SKEW_S or nonce in self.seen:
            return None
        self.seen[nonce] = None
        while len(self.seen) > _NONCES:
            self.seen.popitem(last=False)
        return event

    def close(self) -> None:
        self.sock.close()

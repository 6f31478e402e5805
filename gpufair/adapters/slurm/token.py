"""The slurmrestd JWT: read when it changes, renewed before it expires, never silently stale.

A token from ``scontrol token`` lives ``lifespan`` seconds (1,800 by default). Read once at
start, every round after that fails with HTTP 401 and is skipped. So the daemon:

- re-reads ``token_file`` whenever the file changes (an admin's cron job may renew it), and
- when ``token_renew`` is on (the daemon runs as root or SlurmUser, who may mint tokens for
  ``user``), asks ``scontrol token username=USER lifespan=L`` for a new one once 80 % of the
  current token's life has passed, or at once after a 401, and writes it to ``token_file``
  (0600, atomic rename) so a restarted daemon starts with a good one.

The expiry comes from the token's own ``exp`` claim (its payload is plain base64 JSON; the
signature is slurmrestd's business). Renewals and failures are logged and counted, and the
expiry is exposed, so an alert can fire before rounds start to fail.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("gpufair.slurm")
RENEW_AT = 0.8   # of the token's life


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (seconds since the epoch), or None if it has none."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, UnicodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def _clean(text: str) -> str:
    return text.strip().removeprefix("SLURM_JWT=").strip()


@dataclass
class TokenSource:
    token_file: str | None = None
    user: str = "root"
    renew: bool = False
    lifespan_s: int = 3600
    clock: Callable[[], float] = time.time
    run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]] = field(
        default=lambda argv: subprocess.run(list(argv), capture_output=True, text=True,
                                            timeout=15, check=False))
    token: str | None = None
    issued: float = 0.0
    expires: float | None = None
    renewals: int = 0
    failures: int = 0
    _mtime: float | None = None

    def current(self) -> str | None:
        """The token to send now: the file's if it changed, a fresh one if due."""
        self._read_file()
        if self.renew and self._due():
            self.refresh()
        return self.token

    def rejected(self) -> str | None:
        """slurmrestd said 401: the token is no good whatever its claims say."""
        self._mtime = None
        self._read_file()
        if self.renew:
            self.refresh()
        return self.token

    def expired(self, *, margin_s: float = 0.0) -> bool:
        """Past its ``exp`` claim (a token without one is never known to have expired)."""
        return self.expires is not None and self.clock() >= self.expires - margin_s

    def _due(self) -> bool:
        if self.token is None:
            return True
        if self.expires is None:
            return False
        life = max(1.0, self.expires - self.issued)
        return self.clock() >= self.issued + RENEW_AT * life

    def _read_file(self) -> None:
        if not self.token_file:
            return
        try:
            mtime = os.stat(self.token_file).st_mtime
        except OSError:
            return
        if mtime == self._mtime:
            return
        try:
            text = Path(self.token_file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        self._mtime = mtime
        self._adopt(_clean(text), issued=mtime)

    def _adopt(self, token: str, *, issued: float) -> None:
        if not token:
            return
        self.token = token
        self.expires = token_expiry(token)
        self.issued = min(issued, self.clock())

    def refresh(self) -> bool:
        argv = ["scontrol", "token", f"username={self.user}", f"lifespan={self.lifespan_s}"]
        try:
            proc = self.run(argv)
        except (OSError, subprocess.TimeoutExpired) as exc:
            proc = None
            detail = str(exc)
        else:
            detail = (proc.stderr or "").strip()[:200]
        token = _clean(proc.stdout) if proc is not None and proc.returncode == 0 else ""
        if not token:
            self.failures += 1
            log.error("slurmrestd token not renewed: %s", detail or "no token in the reply",
                      extra={"fields": {"event": "token_renewal_failed"}})
            return False
        self._adopt(token, issued=self.clock())
        self.renewals += 1
        if self.token_file:
            self._write(token)
        log.info("slurmrestd token renewed; expires in %.0f s",
                 (self.expires or self.clock()) - self.clock(),
                 extra={"fields": {"event": "token_renewed", "expires": self.expires}})
        return True

    def _write(self, token: str) -> None:
        assert self.token_file is not None
        target = Path(self.token_file)
        try:
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".token-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(token + "\n")
            os.replace(tmp, target)
            self._mtime = os.stat(target).st_mtime
        except OSError as exc:
            log.warning("renewed token not saved to %s: %s", target, exc)

"""A small ResourceManager REST client on ``requests``: HA, retries, auth, honest errors.

Why its own client (specs/yarn_rm_rest.md §8): the Python packages for the RM are either
unmaintained thin wrappers whose HA check is wrong (a standby's 307 is followed, so every RM
"passes") or need a JVM. What this one does:

- **HA**: the active RM is found with ``GET /ws/v1/cluster/info`` (the one path a standby
  serves itself) and ``haState``; redirects are never followed blindly — a 307 with a
  ``Location`` on one of the configured RMs makes that RM the active one, a 307 without one,
  or a 200 plain-text "no active RM" body, means "failover in progress": back off and look
  again. After a switch, authentication starts over on the new host (cookies are per host).
- **retries** with exponential backoff, only where repeating is harmless: reads, and the
  writes the RM treats as idempotent (kill, move, priority, timeout, scheduler-conf PUT all
  set a value). A request whose answer was lost may have been applied: the caller checks.
- **errors**: a non-2xx answer becomes :class:`RMError` with the RemoteException's class and
  message, or the plain text several write endpoints return instead (§1.3).
- **auth**: none (the RM's static user), simple (``user.name``; the ``hadoop.auth`` cookie is
  kept per host by the session), Kerberos/SPNEGO (optional ``requests-gssapi``), delegation
  token header; HTTPS with a CA bundle and an optional client certificate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from gpufair.adapters.base import Unavailable
from gpufair.adapters.yarn.decode import loads
from gpufair.errors import InputError

log = logging.getLogger("gpufair.yarn")

BASE = "/ws/v1/cluster"
AUTH_MODES = ("none", "simple", "kerberos", "token")


class RMUnavailable(Unavailable):
    """No ResourceManager answered usefully after the retries (down, or failing over)."""


class RMReplyError(RMUnavailable):
    """The RM answered, in a shape this adapter cannot read (a GPU field it does not know, a
    node record in no known shape). For the daemon it is like an RM that is down — no usable
    answer, the round is skipped — but a one-off command reports it as bad input (exit 2):
    waiting will not fix it."""


class RMError(RuntimeError):
    """The RM answered and refused: status, the exception class (or None for a plain-text
    answer), and its message."""

    def __init__(self, status: int, exception: str | None, message: str) -> None:
        super().__init__(f"HTTP {status}" + (f" {exception}" if exception else "")
                         + f": {message}")
        self.status = status
        self.exception = exception
        self.message = message


@dataclass(frozen=True)
class Reply:
    status: int
    data: Any            # decoded JSON, or the text of a non-JSON body
    location: str | None = None


def rm_error(status: int, body: str, source: str) -> RMError:
    """A RemoteException body, or the plain text a write endpoint answered with."""
    try:
        doc = loads(body, source)
    except InputError:
        doc = None
    if isinstance(doc, Mapping) and isinstance(doc.get("RemoteException"), Mapping):
        remote = doc["RemoteException"]
        return RMError(status, str(remote.get("exception") or "RemoteException"),
                       str(remote.get("message")))
    return RMError(status, None, body.strip()[:500] or "(empty body)")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class RMClient:
    """Requests to whichever configured RM is active."""

    def __init__(self, urls: Sequence[str], *, timeout_s: float = 10.0, retries: int = 3,
                 backoff_s: float = 0.5, auth: str = "none", user: str | None = None,
                 token: str | None = None, verify: bool | str = True,
                 cert: str | None = None, sleep: Callable[[float], None] = time.sleep,
                 session: requests.Session | None = None) -> None:
        if not urls:
            raise InputError("yarn", "no ResourceManager URL given", field="yarn.urls")
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise InputError("yarn", "expected http(s)://host:port", field="yarn.urls",
                                 value=url)
        if auth not in AUTH_MODES:
            raise InputError("yarn", f"auth must be one of {', '.join(AUTH_MODES)}",
                             field="yarn.auth", value=auth)
        if auth == "simple" and not user:
            raise InputError("yarn", "simple auth needs a user", field="yarn.user")
        if auth == "token" and not token:
            raise InputError("yarn", "token auth needs a delegation token",
                             field="yarn.token_file")
        self.urls = [u.rstrip("/") for u in urls]
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.auth = auth
        self.user = user
        self.sleep = sleep
        self.session = session or requests.Session()
        self.session.headers.update({"Accept": "application/json"})
        # passed with every request: a session-level path loses to REQUESTS_CA_BUNDLE
        self.verify = verify
        if cert:
            self.session.cert = cert
        if auth == "token":
            self.session.headers["X-Hadoop-Delegation-Token"] = str(token)
        if auth == "kerberos":
            try:
                from requests_gssapi import HTTPSPNEGOAuth  # type: ignore[import-not-found]
            except ImportError as exc:
                raise InputError("yarn", "Kerberos/SPNEGO needs the requests-gssapi package"
                                 " (pip install requests-gssapi)", field="yarn.auth") from exc
            self.session.auth = HTTPSPNEGOAuth()
        self.active: str | None = None
        self.failovers = 0
        self.requests = 0

    # ---- finding the active RM ------------------------------------------------------------
    def locate(self) -> str:
        """The active RM: the first (current one first) whose /info says ACTIVE (an RM
        without HA has no haState and is taken as active)."""
        order = ([self.active] if self.active else []) + \
            [u for u in self.urls if u != self.active]
        for url in order:
            try:
                response = self._send("GET", url, f"{BASE}/info", None, None)
            except requests.RequestException as exc:
                log.info("RM %s not reachable: %s", url, exc)
                continue
            if response.status_code in (401, 403):   # it answers, but not to us
                raise rm_error(response.status_code, response.text, f"GET {url}{BASE}/info")
            if response.status_code != 200:
                continue
            try:
                info = loads(response.content, f"{url}{BASE}/info")
            except InputError:
                continue
            cluster = info.get("clusterInfo") if isinstance(info, Mapping) else None
            if isinstance(cluster, Mapping) and cluster.get("haState", "ACTIVE") == "ACTIVE":
                if self.active is not None and url != self.active:
                    self.failovers += 1
                    log.warning("ResourceManager failover: %s is now active", url)
                self.active = url
                return url
        self.active = None
        raise RMUnavailable(f"no active ResourceManager among {', '.join(self.urls)}")

    def _send(self, method: str, url: str, path: str, params: Mapping[str, Any] | None,
              body: Any) -> requests.Response:
        query = dict(params or {})
        if self.auth == "simple":
            query["user.name"] = self.user
        self.requests += 1
        return self.session.request(method, url + path, params=query or None, json=body,
                                    timeout=self.timeout_s, allow_redirects=False,
                                    verify=self.verify)

    # ---- one request ----------------------------------------------------------------------
    def call(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             body: Any = None, idempotent: bool = True) -> Reply:
        """``method`` on the active RM, failing over and retrying; raises RMUnavailable when
        no RM answers, RMError when the active one refuses."""
        source = f"{method} {path}"
        last = "no attempt"
        for attempt in range(self.retries):
            if attempt:
                self.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                url = self.active or self.locate()
                response = self._send(method, url, path, params, body)
            except RMUnavailable as exc:
                last = str(exc)
                continue
            except requests.ConnectionError as exc:
                last = f"{self.active}: {exc}"
                self.active = None        # refused or reset: look for the active RM again
                continue
            except requests.Timeout as exc:
                self.active = None
                if not idempotent:
                    raise RMUnavailable(f"{source}: no answer in {self.timeout_s:g} s (it may"
                                        " have been applied)") from exc
                last = f"timeout after {self.timeout_s:g} s"
                continue
            except requests.RequestException as exc:
                raise RMUnavailable(f"{source}: {exc}") from exc
            status = response.status_code
            text = response.text
            if status == 307:
                location = response.headers.get("Location")
                target = _origin(location) if location else None
                known = next((u for u in self.urls if _origin(u) == target), None)
                if known is not None and known != self.active:
                    self.failovers += 1
                    log.warning("ResourceManager failover: %s redirects to %s", self.active,
                                known)
                self.active = known      # a known RM: use it; otherwise discover again
                last = f"standby RM redirected to {location}" if location else \
                    f"standby RM knows no active RM: {text.strip()[:120]}"
                continue
            if status in (502, 503, 504):
                self.active = None
                last = f"HTTP {status}"
                continue
            if status >= 400:
                raise rm_error(status, text, source)
            if not text.strip():
                return Reply(status, None, response.headers.get("Location"))
            try:
                data = loads(response.content, f"{self.active}{path}")
            except InputError:
                if "no active RM" in text or "This is standby RM" in text:
                    # 200 text/plain from a standby that lost track of the active RM
                    self.active = None
                    last = f"not an RM reply: {text.strip()[:120]}"
                    continue
                data = text          # several write endpoints answer in plain text (§1.3)
            return Reply(status, data, response.headers.get("Location"))
        raise RMUnavailable(f"{source}: {last} (after {self.retries} attempts)")

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", BASE + path, params=params or None).data

    def put(self, path: str, body: Any) -> Reply:
        return self.call("PUT", BASE + path, body=body)

    def post(self, path: str, body: Any, *, idempotent: bool = False) -> Reply:
        return self.call("POST", BASE + path, body=body, idempotent=idempotent)

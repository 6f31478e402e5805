"""A page as a person's browser shows it: the Debian ``chromium`` package, headless, opens an
HTML file and gives back its DOM after scripts ran, a screenshot, what the page wrote to the
console, and every network request it tried.

Requests are caught by a trap: Chromium is told to send all http(s) traffic through a proxy
on 127.0.0.1 that this process runs, which writes down each request line and answers nothing.
So a page that would fetch anything (a CDN script, a web font, an image) is seen doing it,
and nothing leaves the machine. Nothing here downloads a browser.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
         "--disable-features=NetworkTimeServiceQuerying"]
#: What Chromium itself asks for whatever the page (its updater's and its Google account
#: service's endpoints, which no flag of Chromium 156 silences): exact hosts, so that a
#: page's own request to any other host — a CDN, a web font — still counts. They reach only
#: the trap.
BROWSER_OWN = {"update.googleapis.com", "accounts.google.com", "clients2.google.com"}


@dataclass
class Page:
    dom: str
    screenshot: Path
    console: list[str]
    requests: list[str] = field(default_factory=list)


class RequestTrap:
    """A proxy that answers no one: it records the first line of every connection
    (``GET http://host/path`` or ``CONNECT host:443``) and closes it."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0]
                except OSError:
                    first = b"(no request line)"
                self.seen.append(first.decode("latin-1"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()


def chromium_available() -> bool:
    return os.access(CHROMIUM, os.X_OK)


def open_page(html: Path, tmp: Path, *, width: int = 1280, height: int = 2400,
              timeout_s: float = 180.0) -> Page:
    """Load ``html`` (a local file) in headless Chromium; skip if there is no Chromium
    (CI installs Debian's, and fails on a skip)."""
    if not chromium_available():
        pytest.skip("no chromium (Debian package `chromium`; .ci/run installs it)")
    trap = RequestTrap()
    shot = tmp / f"{html.stem}.png"
    try:
        done = subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}",
             f"--proxy-server=http://127.0.0.1:{trap.port}", "--proxy-bypass-list=<-loopback>",
             f"--window-size={width},{height}", f"--screenshot={shot}", "--dump-dom",
             html.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout_s, check=False, cwd=tmp)
    finally:
        trap.close()
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    requests = [r for r in trap.seen if request_host(r) not in BROWSER_OWN]
    return Page(dom=done.stdout, screenshot=shot, console=console, requests=requests)


def request_host(line: str) -> str:
    """The host of a proxy request line: ``GET http://host:80/path HTTP/1.1`` or
    ``CONNECT host:443 HTTP/1.1``."""
    parts = line.split()
    if len(parts) < 2:
        return ""
    target = parts[1].split("://", 1)[-1]
    return target.split("/", 1)[0].rsplit(":", 1)[0].lower()


def ink_fraction(png: Path) -> float:
    """The share of the screenshot's pixels that are not (near) white: 0 for a blank page."""
    from PIL import Image
    with Image.open(png) as image:
        grey = image.convert("L")
        histogram = grey.histogram()
    return sum(histogram[:235]) / max(sum(histogram), 1)

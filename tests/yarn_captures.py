"""Real ResourceManager replies (tests/data/yarn) served as they were captured, over real HTTP:
a static RM for the captures that hold no app list (Hadoop-AI's), so ``gpufair snapshot
--yarn`` and the daemon read them exactly as they would read the RM that produced them."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).parent / "data" / "yarn"
BASE = "/ws/v1/cluster"
#: the documented reply of an RM with no active app (specs/yarn_rm_rest.md §1.2)
NO_APPS = b'{"apps":null}'


@contextmanager
def serve_capture(replies: Mapping[str, Path | bytes]) -> Iterator[str]:
    """An RM answering ``GET /ws/v1/cluster<path>`` with the file (or bytes) given for that
    path, 404 for anything else; yields its URL. ``/info`` defaults to Hadoop 2.7's published
    cluster info (no HA: taken as the active RM)."""
    table = {"/info": DATA / "hadoop-2.7" / "cluster_info.json", **replies}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            reply = table.get(self.path.partition("?")[0].removeprefix(BASE))
            if reply is None:
                self.send_error(404)
                return
            data = reply if isinstance(reply, bytes) else reply.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

"""Prometheus text-format metrics of the daemon, served over HTTP (``GET /metrics``).

No client library: the exposition format is a few lines of text, and the daemon should not
need another dependency to be observable.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROUND_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Thread-safe counters and gauges the daemon updates and the HTTP thread reads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rounds: dict[str, int] = {}
        self.round_sum = 0.0
        self.round_count = 0
        self.round_buckets = [0] * len(ROUND_BUCKETS)
        self.actions: dict[tuple[str, str], int] = {}
        self.tenant_gpus: dict[str, int] = {}
        self.job_rho: dict[str, float] = {}
        self.capped_preemptions = 0

    def observe_round(self, status: str, seconds: float | None) -> None:
        with self.lock:
            self.rounds[status] = self.rounds.get(status, 0) + 1
            if seconds is not None:
                self.round_sum += seconds
                self.round_count += 1
                for i, bound in enumerate(ROUND_BUCKETS):
                    if seconds <= bound:
                        self.round_buckets[i] += 1

    def count_action(self, kind: str, outcome: str) -> None:
        with self.lock:
            key = (kind, outcome)
            self.actions[key] = self.actions.get(key, 0) + 1

    def set_allocation(self, tenant_gpus: Mapping[str, int], job_rho: Mapping[str, float]
                       ) -> None:
        with self.lock:
            self.tenant_gpus = dict(tenant_gpus)
            self.job_rho = dict(job_rho)

    def render(self) -> str:
        with self.lock:
            out = ["# HELP gpufair_rounds_total Rounds by outcome.",
                   "# TYPE gpufair_rounds_total counter"]
            out += [f'gpufair_rounds_total{{status="{_label(s)}"}} {n}'
                    for s, n in sorted(self.rounds.items())]
            out += ["# HELP gpufair_round_seconds Snapshot-to-last-action latency of a round.",
                    "# TYPE gpufair_round_seconds histogram"]
            out += [f'gpufair_round_seconds_bucket{{le="{b}"}} {n}'
                    for b, n in zip(ROUND_BUCKETS, self.round_buckets, strict=True)]
            out += [f'gpufair_round_seconds_bucket{{le="+Inf"}} {self.round_count}',
                    f"gpufair_round_seconds_sum {self.round_sum:.6f}",
                    f"gpufair_round_seconds_count {self.round_count}",
                    "# HELP gpufair_actions_total Actions sent to the resource manager.",
                    "# TYPE gpufair_actions_total counter"]
            out += [f'gpufair_actions_total{{kind="{_label(k)}",outcome="{_label(o)}"}} {n}'
                    for (k, o), n in sorted(self.actions.items())]
            out += ["# HELP gpufair_preemptions_capped_total Preemptions dropped by the cap.",
                    "# TYPE gpufair_preemptions_capped_total counter",
                    f"gpufair_preemptions_capped_total {self.capped_preemptions}",
                    "# HELP gpufair_tenant_gpus GPUs held per tenant after the last round.",
                    "# TYPE gpufair_tenant_gpus gauge"]
            out += [f'gpufair_tenant_gpus{{tenant="{_label(t)}"}} {n}'
                    for t, n in sorted(self.tenant_gpus.items())]
            out += ["# HELP gpufair_job_rho Finish-time fairness estimate: time in the system "
                    "over GPU time received (1 = as if alone).",
                    "# TYPE gpufair_job_rho gauge"]
            out += [f'gpufair_job_rho{{job="{_label(j)}"}} {r:.6g}'
                    for j, r in sorted(self.job_rho.items())]
            return "\n".join(out) + "\n"


def serve_metrics(metrics: Metrics, host: str, port: int) -> ThreadingHTTPServer:
    """Start the endpoint in a daemon thread; port 0 picks a free port (see server_address)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = metrics.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server

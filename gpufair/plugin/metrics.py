"""Prometheus metrics of the daemon, served over HTTP (``GET /metrics``).

Built on ``prometheus_client`` rather than hand-written text so that escaping, number
formatting and content negotiation follow the exposition format as the library keeps it.
Each ``Metrics`` owns its registry: the global default one would make two daemons (or two
tests) in one process share counters and clash on metric names.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from http.server import ThreadingHTTPServer
from urllib.parse import urlparse

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import MetricsHandler
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

ROUND_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_TENANT_HELP = "GPUs held per tenant after the last round."
_RHO_HELP = ("Finish-time fairness estimate: time in the system over GPU time received "
             "(1 = as if alone).")


class _Allocation(Collector):
    """The last round's per-tenant GPUs and per-job rho, replaced as one snapshot.

    A labelled ``Gauge`` would keep every tenant and job ever seen unless cleared, and
    clearing then refilling it lets a scrape in between see half an allocation. Swapping one
    tuple is atomic, so a scrape sees either the previous round or the new one.
    """

    def __init__(self) -> None:
        self.snapshot: tuple[dict[str, int], dict[str, float]] = ({}, {})

    def describe(self) -> list[Metric]:
        # Lets the registry reject a clashing name at registration instead of at scrape time.
        return [GaugeMetricFamily("gpufair_tenant_gpus", _TENANT_HELP, labels=["tenant"]),
                GaugeMetricFamily("gpufair_job_rho", _RHO_HELP, labels=["job"])]

    def collect(self) -> Iterator[Metric]:
        tenant_gpus, job_rho = self.snapshot
        tenants = GaugeMetricFamily("gpufair_tenant_gpus", _TENANT_HELP, labels=["tenant"])
        for tenant, gpus in sorted(tenant_gpus.items()):
            tenants.add_metric([tenant], gpus)
        yield tenants
        rho = GaugeMetricFamily("gpufair_job_rho", _RHO_HELP, labels=["job"])
        for job, value in sorted(job_rho.items()):
            rho.add_metric([job], value)
        yield rho


class Metrics:
    """What the daemon records; the HTTP thread reads it through ``registry``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._rounds = Counter("gpufair_rounds_total", "Rounds by outcome.", ["status"],
                               registry=self.registry)
        self._round_seconds = Histogram(
            "gpufair_round_seconds", "Snapshot-to-last-action latency of a round.",
            buckets=ROUND_BUCKETS, registry=self.registry)
        self._last_round = Gauge(
            "gpufair_last_round_timestamp_seconds",
            "Unix time of the last round, whatever its outcome; alert when it stops moving.",
            registry=self.registry)
        self._actions = Counter("gpufair_actions_total", "Actions sent to the resource manager.",
                                ["kind", "outcome"], registry=self.registry)
        self._capped = Counter("gpufair_preemptions_capped_total",
                               "Preemptions, migrations and resizes held back by the "
                               "preemption cap.", registry=self.registry)
        self._adapter = Gauge("gpufair_adapter_status", "What the resource-manager adapter "
                              "reports of its own health (Slurm: slurm_token_expires_at, "
                              "slurm_token_renewals, slurm_token_failures; YARN: "
                              "yarn_rm_failovers, yarn_rm_requests, yarn_leases, "
                              "yarn_lease_renewals, yarn_lease_failures, "
                              "yarn_lease_expires_at).", ["key"], registry=self.registry)
        self._bypasses = Counter("gpufair_bypasses_total", "Jobs found requeued or started "
                                 "outside gpufair and brought back under its control.",
                                 registry=self.registry)
        self._allocation = _Allocation()
        self.registry.register(self._allocation)

    def observe_round(self, status: str, seconds: float | None) -> None:
        """Count the round; ``seconds`` is None when it never got far enough to be timed."""
        self._rounds.labels(status).inc()
        if seconds is not None:
            self._round_seconds.observe(seconds)
        self._last_round.set_to_current_time()

    def count_action(self, kind: str, outcome: str) -> None:
        self._actions.labels(kind, outcome).inc()

    def count_capped(self, n: int) -> None:
        """A method rather than ``+=`` on an attribute: a counter may only go up."""
        self._capped.inc(n)

    @property
    def capped_preemptions(self) -> int:
        """Read-only, so a leftover ``capped_preemptions += n`` fails instead of being lost."""
        return int(self.registry.get_sample_value("gpufair_preemptions_capped_total") or 0)

    def set_allocation(self, tenant_gpus: Mapping[str, int], job_rho: Mapping[str, float]
                       ) -> None:
        """Replace the previous round's values: tenants and jobs now absent stop being exported,
        rather than lingering at their last value as if they still held GPUs."""
        self._allocation.snapshot = (dict(tenant_gpus), dict(job_rho))

    def count_bypass(self) -> None:
        self._bypasses.inc()

    def set_adapter_status(self, status: Mapping[str, float]) -> None:
        for key, value in status.items():
            self._adapter.labels(key=key).set(value)

    def render(self) -> str:
        return generate_latest(self.registry).decode("utf-8")


def serve_metrics(metrics: Metrics, host: str, port: int) -> ThreadingHTTPServer:
    """Start the endpoint in a daemon thread; port 0 picks a free port (see server_address).

    Not ``prometheus_client.start_http_server``: the versions the package allows differ in
    what it returns, and callers need the server itself to read the port and shut it down.
    """

    class Handler(MetricsHandler):
        registry = metrics.registry

        def do_GET(self) -> None:
            # Only /metrics, so a typo in a scrape config shows as a 404, not as a healthy target.
            if urlparse(self.path).path != "/metrics":
                self.send_error(404)
                return
            super().do_GET()

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server

"""The daemon's /metrics exposition, read back the way a scraper would.

The oracle is prometheus_client's text parser and a plain HTTP GET, never the module's own
rendering helpers, so a wrong label, bucket or escape shows up as a value the parser reads
differently from what the test wrote in.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufair.plugin.metrics import Metrics, serve_metrics

# Written out here rather than imported: the test states what admins' dashboards rely on.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

HOSTILE = ['plain', 'quo"te', 'back\\slash', 'new\nline', 'ünïcödé 日本', 'all "\\\n" of them',
           '', 'trailing\\', '{brace="x"}', 'comma,and space']


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, keyed by its name and sorted labels."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def family_types(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def series(samples: dict, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def one_label(samples: dict, name: str, label: str) -> dict[str, float]:
    out = {}
    for labels, value in series(samples, name).items():
        assert [k for k, _ in labels] == [label], labels
        out[labels[0][1]] = value
    return out


def test_hostile_tenant_and_job_names_survive_the_exposition():
    m = Metrics()
    tenants = {name: i for i, name in enumerate(HOSTILE)}
    jobs = {f"job {name}": 1.0 + i / 4 for i, name in enumerate(HOSTILE)}
    m.set_allocation(tenants, jobs)
    samples = parse(m.render())
    assert one_label(samples, "gpufair_tenant_gpus", "tenant") == tenants
    assert one_label(samples, "gpufair_job_rho", "job") == jobs
    types = family_types(m.render())
    assert types["gpufair_tenant_gpus"] == types["gpufair_job_rho"] == "gauge"


def test_escapes_follow_the_text_format_by_hand():
    # A second oracle beside the parser: the text format escapes exactly \\, \" and \n.
    m = Metrics()
    m.set_allocation({'a"b\\c\nd é': 3}, {})
    lines = m.render().splitlines()
    assert 'gpufair_tenant_gpus{tenant="a\\"b\\\\c\\nd é"} 3.0' in lines
    assert all(line.startswith(("#", "gpufair_")) for line in lines if line)


def test_set_allocation_replaces_the_previous_round_wholesale():
    m = Metrics()
    m.set_allocation({"alice": 4, "bob": 2, 'ev"e': 1}, {"j1": 1.5, "j2": 3.0})
    m.set_allocation({"bob": 6, "carol": 0}, {"j3": 2.25})
    samples = parse(m.render())
    assert one_label(samples, "gpufair_tenant_gpus", "tenant") == {"bob": 6, "carol": 0}
    assert one_label(samples, "gpufair_job_rho", "job") == {"j3": 2.25}
    m.set_allocation({}, {})
    samples = parse(m.render())
    assert series(samples, "gpufair_tenant_gpus") == {}
    assert series(samples, "gpufair_job_rho") == {}
    # the families stay declared, so dashboards see "no tenants", not "no such metric"
    assert {"gpufair_tenant_gpus", "gpufair_job_rho"} <= set(family_types(m.render()))


def test_set_allocation_copies_its_arguments():
    m = Metrics()
    tenants = {"alice": 1}
    m.set_allocation(tenants, {})
    tenants["mallory"] = 9
    assert one_label(parse(m.render()), "gpufair_tenant_gpus", "tenant") == {"alice": 1}


def test_round_histogram_buckets_are_cumulative_and_inclusive():
    m = Metrics()
    latencies = [0.0, 0.05, 0.0500001, 0.07, 0.25, 0.9, 1.0, 4.2, 30.0, 59.9, 60.0, 61.0, 500.0]
    for s in latencies:
        m.observe_round("done", s)
    m.observe_round("skipped", None)        # counted as a round, never as a latency
    text = m.render()
    assert family_types(text)["gpufair_round_seconds"] == "histogram"
    samples = parse(text)
    buckets = one_label(samples, "gpufair_round_seconds_bucket", "le")
    expected = {repr(float(b)): sum(s <= b for s in latencies) for b in BUCKETS}
    expected["+Inf"] = len(latencies)
    assert buckets == expected
    assert samples[("gpufair_round_seconds_count", ())] == len(latencies)
    assert samples[("gpufair_round_seconds_sum", ())] == pytest.approx(sum(latencies))


def test_rounds_by_status_and_the_last_round_timestamp():
    m = Metrics()
    samples = parse(m.render())
    assert series(samples, "gpufair_rounds_total") == {}
    assert samples[("gpufair_last_round_timestamp_seconds", ())] == 0
    before = time.time()
    for status in ["done", "done", "dry-run", 'sk"ip\n']:
        m.observe_round(status, 0.1)
    m.observe_round("skipped", None)
    after = time.time()
    samples = parse(m.render())
    assert one_label(samples, "gpufair_rounds_total", "status") == {
        "done": 2, "dry-run": 1, 'sk"ip\n': 1, "skipped": 1}
    assert before <= samples[("gpufair_last_round_timestamp_seconds", ())] <= after
    assert family_types(m.render())["gpufair_last_round_timestamp_seconds"] == "gauge"


def test_timestamp_moves_on_a_round_without_latency():
    m = Metrics()
    m.observe_round("done", 0.1)
    first = parse(m.render())[("gpufair_last_round_timestamp_seconds", ())]
    time.sleep(0.01)
    m.observe_round("skipped", None)
    assert parse(m.render())[("gpufair_last_round_timestamp_seconds", ())] > first


def test_actions_by_kind_and_outcome():
    m = Metrics()
    for kind, outcome in [("Preempt", "ok"), ("Preempt", "ok"), ("Start", "ok"),
                          ("Start", "failed"), ('Sta"rt', "fa\\il")]:
        m.count_action(kind, outcome)
    text = m.render()
    assert family_types(text)["gpufair_actions"] == "counter"
    got = {tuple(dict(labels)[k] for k in ("kind", "outcome")): v
           for labels, v in series(parse(text), "gpufair_actions_total").items()}
    assert got == {("Preempt", "ok"): 2, ("Start", "ok"): 1, ("Start", "failed"): 1,
                   ('Sta"rt', "fa\\il"): 1}
    assert all(sorted(dict(labels)) == ["kind", "outcome"]
               for labels in series(parse(text), "gpufair_actions_total"))
    # the live Slurm test greps for this exact series
    assert 'gpufair_actions_total{kind="Preempt",outcome="ok"} 2.0' in text.splitlines()


def test_capped_preemptions_only_go_up():
    m = Metrics()
    assert parse(m.render())[("gpufair_preemptions_capped_total", ())] == 0
    m.count_capped(2)
    m.count_capped(0)
    m.count_capped(3)
    assert parse(m.render())[("gpufair_preemptions_capped_total", ())] == 5
    assert m.capped_preemptions == 5
    with pytest.raises(AttributeError):
        m.capped_preemptions += 1      # the old spelling must fail, not be silently lost
    with pytest.raises(ValueError):
        m.count_capped(-1)
    assert m.capped_preemptions == 5


def test_instances_do_not_share_a_registry():
    a, b = Metrics(), Metrics()          # a shared registry would refuse the second one
    a.observe_round("done", 0.1)
    a.count_action("Start", "ok")
    a.count_capped(1)
    a.set_allocation({"alice": 1}, {"j": 2.0})
    samples = parse(b.render())
    assert series(samples, "gpufair_rounds_total") == {}
    assert series(samples, "gpufair_actions_total") == {}
    assert series(samples, "gpufair_tenant_gpus") == {}
    assert samples[("gpufair_preemptions_capped_total", ())] == 0
    assert samples[("gpufair_round_seconds_count", ())] == 0


def test_no_stray_metric_names():
    text = Metrics().render()
    names = {f.name for f in text_string_to_metric_families(text)}
    names -= {n for n in names if n.endswith("_created")}    # the library's reset markers
    assert names == {"gpufair_rounds", "gpufair_round_seconds",
                     "gpufair_last_round_timestamp_seconds", "gpufair_actions",
                     "gpufair_preemptions_capped", "gpufair_tenant_gpus", "gpufair_job_rho",
                     "gpufair_adapter_status", "gpufair_bypasses"}


def test_adapter_status_is_exported():
    m = Metrics()
    m.set_adapter_status({"slurm_token_expires_at": 1.8e9, "slurm_token_renewals": 3.0})
    samples = {s.labels["key"]: s.value for f in text_string_to_metric_families(m.render())
               if f.name == "gpufair_adapter_status" for s in f.samples}
    assert samples == {"slurm_token_expires_at": 1.8e9, "slurm_token_renewals": 3.0}


@pytest.fixture
def served():
    m = Metrics()
    server = serve_metrics(m, "127.0.0.1", 0)
    host, port = server.server_address[:2]
    yield m, f"http://{host}:{port}"
    server.shutdown()
    server.server_close()


def get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        ctype = resp.headers.get("Content-Type", "")
        charset = resp.headers.get_content_charset() or "utf-8"
        return resp.status, ctype, resp.read().decode(charset)


def test_http_endpoint_serves_the_same_samples(served):
    m, base = served
    tenants = {name: i + 1 for i, name in enumerate(HOSTILE)}
    m.set_allocation(tenants, {"j": 1.25})
    m.observe_round("done", 0.3)
    m.count_action("Preempt", "ok")
    m.count_capped(2)
    status, ctype, body = get(base + "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain")
    samples = parse(body)
    assert one_label(samples, "gpufair_tenant_gpus", "tenant") == tenants
    assert one_label(samples, "gpufair_job_rho", "job") == {"j": 1.25}
    assert one_label(samples, "gpufair_rounds_total", "status") == {"done": 1}
    assert samples[("gpufair_round_seconds_bucket", (("le", "0.5"),))] == 1
    assert samples[("gpufair_round_seconds_bucket", (("le", "0.25"),))] == 0
    assert samples[("gpufair_preemptions_capped_total", ())] == 2
    # a later round is visible to the next scrape, and the old tenants are gone from it
    m.set_allocation({"new": 8}, {})
    assert one_label(parse(get(base + "/metrics")[2]), "gpufair_tenant_gpus", "tenant") \
        == {"new": 8}
    # query strings (Prometheus' name[] filter, cache busters) are still /metrics
    assert get(base + "/metrics?x=1")[0] == 200


def test_http_endpoint_answers_only_metrics(served):
    _, base = served
    for path in ("/", "/metric", "/metrics/extra", "/favicon.ico"):
        with pytest.raises(urllib.error.HTTPError) as err:
            get(base + path)
        assert err.value.code == 404, path


def test_http_server_runs_on_a_daemon_thread(served):
    # a non-daemon thread would keep `gpufair serve` alive after SIGTERM
    threads = [t for t in threading.enumerate() if t.name == "metrics"]
    assert threads and all(t.daemon for t in threads)

"""The YARN adapter against the emulator over real HTTP: snapshot, each action, the refusals
the RM's configuration calls for, RM HA, injected failures, and the daemon's round end to end
(a plan's tenant shares become queue capacities and the RM's allocation converges to them,
a failover in the middle of a round losing nothing)."""

from __future__ import annotations

import pytest
import requests

from gpufair.adapters.base import Effect, Unavailable
from gpufair.adapters.yarn import YarnAdapter, YarnSettings
from gpufair.errors import InputError
from gpufair.model import JobState, Migrate, Preempt, Resize, SetPriority, Start
from gpufair.plugin.service import build_daemon
from gpufair.plugin.store import DONE, Store
from gpufair.settings import parse_settings
from tests.yarn_emulator import SHAPES, RMServer
from tests.yarn_setup import gpu_cluster, yarn_config, yarn_settings


def adapter_for(*servers: RMServer, **extra) -> YarnAdapter:
    settings = parse_settings(YarnSettings, yarn_settings(*servers, **extra), source="t",
                              section="yarn")
    return YarnAdapter.from_settings(settings)


@pytest.fixture()
def rm():
    cluster = gpu_cluster()
    server = RMServer(cluster)
    yield cluster, server
    server.close()


def caps(cluster) -> dict[str, float]:
    return {q.name: q.max_capacity for p, q in cluster.queues.items() if p != "root"}


@pytest.mark.parametrize("shape", SHAPES)
def test_snapshot_of_a_gpu_cluster(shape) -> None:
    cluster = gpu_cluster(shape=shape)
    server = RMServer(cluster)
    try:
        _snapshot_of_a_gpu_cluster(cluster, server)
    finally:
        server.close()


def _snapshot_of_a_gpu_cluster(cluster, server) -> None:
    a1 = cluster.submit("alice", "a", 2)                          # placed: gpu01:0-1
    b1 = cluster.submit("bob", "b", 2, gpus_per_container=2)      # 4 GPUs > b's 4? = fits
    a2 = cluster.submit("alice", "a", 3)                          # a: 2 + 3 > 4: waits
    cluster.tick()
    state = adapter_for(server).snapshot()
    jobs = {j.id: j for j in state.jobs}
    assert (jobs[a1].state, jobs[a1].gpus, jobs[a1].tenant) == (JobState.RUNNING, 2, "a")
    assert (jobs[b1].state, len(jobs[b1].gpus_held)) == (JobState.RUNNING, 4)
    assert (jobs[a2].state, jobs[a2].gpus, jobs[a2].gpus_held) == (JobState.PENDING, 3, ())
    assert state.gpu_count() == 8 and {n.name for n in state.nodes} == {"gpu01", "gpu02"}
    held = [g for j in state.jobs for g in j.gpus_held]
    assert len(held) == len(set(held)) == 6


def test_start_grows_the_tenants_queue_and_the_rm_places_the_app(rm) -> None:
    cluster, server = rm
    a1 = cluster.submit("alice", "a", 4)
    a2 = cluster.submit("alice", "a", 2, priority=0)
    a3 = cluster.submit("alice", "a", 2, priority=0)
    cluster.tick()
    adapter = adapter_for(server)
    adapter.snapshot()
    result = adapter.apply_one(Start(a3, ("gpu02:0", "gpu02:1")))  # a3, not the older a2
    assert result.ok, result.detail
    assert caps(cluster) == {"a": 75.0, "b": 0.0, "rest": 25.0}
    cluster.tick()
    apps = cluster.apps
    assert (apps[a1].held_gpus, apps[a3].held_gpus, apps[a2].held_gpus) == (4, 2, 0)
    assert apps[a3].priority == 10
    assert adapter.check(Start(a3, ())) is Effect.IN_EFFECT


def test_preempt_kills_and_shrinks_the_queue(rm) -> None:
    cluster, server = rm
    a1 = cluster.submit("alice", "a", 2)
    b1 = cluster.submit("bob", "b", 3)
    cluster.tick()
    adapter = adapter_for(server)
    adapter.snapshot()
    result = adapter.apply_one(Preempt(b1))
    assert result.ok and result.detail.startswith("killed"), result.detail
    assert cluster.apps[b1].state == "KILLED"
    assert "preempted by gpufair" in cluster.apps[b1].diagnostics
    assert caps(cluster) == {"a": 25.0, "b": 0.0, "rest": 75.0}
    assert cluster.apps[a1].held_gpus == 2
    assert adapter.check(Preempt(b1)) is Effect.IN_EFFECT


def test_what_yarn_cannot_do_is_refused_clearly(rm) -> None:
    cluster, server = rm
    a1 = cluster.submit("alice", "a", 2)
    cluster.tick()
    adapter = adapter_for(server, allow_kill=False)
    adapter.snapshot()
    for action in (Resize(a1, ("gpu01:0",)), Migrate(a1, ("gpu02:0", "gpu02:1"))):
        result = adapter.apply_one(action)
        assert not result.ok and "YARN cannot" in result.detail and not result.retry
    killed = adapter.apply_one(Preempt(a1))
    assert not killed.ok and "allow_kill is off" in killed.detail
    assert cluster.apps[a1].state == "RUNNING"


def test_capacity_enforcement_needs_a_mutable_store() -> None:
    cluster = gpu_cluster(mutable_conf=False)
    server = RMServer(cluster)
    try:
        app = cluster.submit("alice", "a", 1, priority=0)
        cluster.queues["root.a"].max_capacity = 0.0       # nothing fits: it waits
        adapter = adapter_for(server)
        adapter.snapshot()
        result = adapter.apply_one(Start(app, ("gpu01:0",)))
        assert not result.ok and "mutable configuration store" in result.detail
        assert "MutableConfScheduler" in result.detail
    finally:
        server.close()


def test_priority_is_clamped_and_said(rm) -> None:
    cluster, server = rm
    app = cluster.submit("alice", "a", 8)                 # more than a's 4: waits
    adapter = adapter_for(server)
    adapter.snapshot()
    result = adapter.apply_one(SetPriority(app, 50))
    assert result.ok and result.detail == f"priority {cluster.max_priority}"
    assert adapter.check(SetPriority(app, cluster.max_priority)) is Effect.IN_EFFECT


def test_lease_is_an_rm_enforced_lifetime() -> None:
    now = [1000.0]
    cluster = gpu_cluster(clock=lambda: now[0])
    server = RMServer(cluster)
    try:
        cluster.queues["root.a"].max_capacity = 0.0
        app = cluster.submit("alice", "a", 2)
        adapter = adapter_for(server, lease_s=600)
        adapter.clock = lambda: now[0]
        adapter.snapshot()
        assert adapter.apply_one(Start(app, ("gpu01:0", "gpu01:1"))).ok
        cluster.tick()
        assert cluster.apps[app].state == "RUNNING"
        assert cluster.apps[app].expiry_ms == 1_600_000
        now[0] = 1601.0
        cluster.tick()
        assert cluster.apps[app].state == "KILLED" and "timed out" in \
            cluster.apps[app].diagnostics
    finally:
        server.close()


def test_failures_are_retried_and_unavailability_is_unavailable(rm) -> None:
    cluster, server = rm
    cluster.submit("alice", "a", 2)
    adapter = adapter_for(server)
    cluster.inject("/apps", "status", status=503, times=2)
    cluster.inject("/nodes", "drop", times=1)
    assert len(adapter.snapshot().jobs) == 1
    cluster.inject("/nodes", "status", status=503, times=10)
    with pytest.raises(Unavailable, match="HTTP 503"):
        adapter.snapshot()


def test_simple_auth_and_refused_reads() -> None:
    cluster = gpu_cluster(auth="simple")
    server = RMServer(cluster)
    try:
        cluster.submit("alice", "a", 1)
        with pytest.raises(Unavailable, match="401"):
            adapter_for(server).snapshot()
        assert len(adapter_for(server, auth="simple", user="gpufair").snapshot().jobs) == 1
        with pytest.raises(InputError, match="simple auth needs a user"):
            adapter_for(server, auth="simple")
    finally:
        server.close()


def test_ha_follows_the_active_rm() -> None:
    cluster = gpu_cluster()
    rm1, rm2 = RMServer(cluster, "rm1"), RMServer(cluster, "rm2")
    try:
        cluster.submit("alice", "a", 2)
        cluster.failover("rm2")
        adapter = adapter_for(rm1, rm2)                  # rm1 listed first, rm2 is active
        assert len(adapter.snapshot().jobs) == 1
        assert adapter.client.active == rm2.url
        cluster.failover("rm1")                          # rm2 now standby: 307 to rm1
        assert len(adapter.snapshot().jobs) == 1
        assert adapter.client.active == rm1.url and adapter.status()["yarn_rm_failovers"] >= 1
        cluster.failover(None)                           # nobody active
        with pytest.raises(Unavailable):
            adapter.snapshot()
    finally:
        rm1.close()
        rm2.close()


# ---- the daemon's round, end to end -----------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
def test_plan_becomes_capacities_and_allocation_converges(tmp_path, shape) -> None:
    """FIFO over 8 GPUs: a1 (4) and a2 (2) of tenant a, b1 (2) and b2 (2) of tenant b, in
    that order. The RM's start (a: 50 %, b: 50 %) runs a1, b1, b2 and leaves a2 waiting; FIFO
    wants a1, a2, b1 and b2 waiting. By hand: b2 is killed, capacities become a 75 %,
    b 25 %, and the RM then runs a2: a holds 6, b holds 2. The same on an RM that answers in
    Hadoop-AI's shape."""
    cluster = gpu_cluster(shape=shape)
    server = RMServer(cluster)
    try:
        a1 = cluster.submit("alice", "a", 4)
        a2 = cluster.submit("alice", "a", 2)
        b1 = cluster.submit("bob", "b", 2)
        b2 = cluster.submit("bob", "b", 2)
        cluster.tick()
        assert cluster.gpus_by_queue() == {"a": 4, "b": 4, "rest": 0}
        config = yarn_config(tmp_path, server)
        store = Store(config.store.path)
        adapter = YarnAdapter.from_settings(config.yarn)
        daemon = build_daemon(config, adapter, store)
        daemon.run_round()
        plan = daemon.last.plan
        assert {a.job_id for a in plan.assignments} == {a1, a2, b1}
        assert all(e.status == DONE for e in store.journal()), store.journal()
        cluster.tick()
        assert caps(cluster) == {"a": 75.0, "b": 25.0, "rest": 0.0}
        assert cluster.gpus_by_queue() == {"a": 6, "b": 2, "rest": 0}
        assert cluster.apps[b2].state == "KILLED"
        daemon.run_round()                                # nothing left to change
        assert daemon.last.actions == []
        store.close()
    finally:
        server.close()


def test_failover_in_the_middle_of_a_round_loses_nothing(tmp_path) -> None:
    """The same round, but the active RM changes right after the kill (rm1 → nobody → rm2
    a moment later): the start that follows reaches rm2, every action is done, and the
    cluster converges as without the failover."""
    cluster = gpu_cluster()
    rm1, rm2 = RMServer(cluster, "rm1"), RMServer(cluster, "rm2")
    try:
        cluster.submit("alice", "a", 4)
        a2 = cluster.submit("alice", "a", 2)
        cluster.submit("bob", "b", 2)
        b2 = cluster.submit("bob", "b", 2)
        cluster.tick()
        cluster.inject(f"/apps/{b2}/state", "failover", to=None, method="PUT",
                       then_to="rm2", then_after_s=0.3)
        config = yarn_config(tmp_path, rm1, rm2, retries=8)
        store = Store(config.store.path)
        daemon = build_daemon(config, YarnAdapter.from_settings(config.yarn), store)
        daemon.run_round()
        journal = store.journal()
        assert [e.status for e in journal] == [DONE] * len(journal) and len(journal) == 2, \
            [e.detail for e in journal]
        assert daemon.adapter.client.active == rm2.url
        cluster.tick()
        assert cluster.gpus_by_queue() == {"a": 6, "b": 2, "rest": 0}
        assert cluster.apps[b2].state == "KILLED" and cluster.apps[a2].held_gpus == 2
        store.close()
    finally:
        rm1.close()
        rm2.close()


def test_auth_options_are_checked(tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("MgASY2xpZW50\n")
    client = adapter_for(_Url("http://127.0.0.1:9"), auth="token",
                         token_file=str(token)).client
    assert client.session.headers["X-Hadoop-Delegation-Token"] == "MgASY2xpZW50"
    with pytest.raises(InputError, match="cannot read token"):
        adapter_for(_Url("http://127.0.0.1:9"), auth="token",
                    token_file=str(tmp_path / "missing"))
    try:
        import requests_gssapi  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match="requests-gssapi"):
            adapter_for(_Url("http://127.0.0.1:9"), auth="kerberos")
    with pytest.raises(InputError, match="expected http"):
        adapter_for(_Url("rm:8088"))


class _Url:
    """A stand-in server: only its URL is used."""

    def __init__(self, url: str) -> None:
        self.url = url


@pytest.mark.parametrize(("extra", "scheduler", "message"), [
    ({"managed_queues": ["a", "nope"]}, "capacity", "root.nope: not leaf queues under root"),
    ({"rest_queue": "root.a.x", "parent_queue": "root.a"}, "capacity",
     "parent_queue root.a is not a parent queue"),
    ({}, "fair", "this RM runs the fairScheduler"),
])
def test_wrong_queue_layout_or_scheduler_is_refused_before_any_write(extra, scheduler,
                                                                      message) -> None:
    cluster = gpu_cluster(scheduler=scheduler)
    server = RMServer(cluster)
    try:
        cluster.queues["root.a"].max_capacity = 0.0
        app = cluster.submit("alice", "a", 1)
        adapter = adapter_for(server, **extra)
        adapter.snapshot()
        result = adapter.apply_one(Start(app, ("gpu01:0",)))
        assert not result.ok and message in result.detail, result.detail
        assert cluster.conf_log == []
    finally:
        server.close()


@pytest.mark.parametrize("body", ['<html>Service Unavailable</html>', '{"nodes": [1, 2]}',
                                  '{"unexpected": {}}', "[" * 100000])
def test_malformed_replies_make_the_rm_unavailable_not_a_crash(rm, body) -> None:
    cluster, server = rm
    cluster.submit("alice", "a", 1)
    adapter = adapter_for(server, retries=1)
    cluster.inject("/nodes", "body", body=body)
    with pytest.raises(Unavailable):
        adapter.snapshot()
    assert len(adapter.snapshot().jobs) == 1          # and the next round reads again


def test_simple_auth_across_a_failover() -> None:
    """user.name goes with every request: the new active RM, which does not know the old
    one's hadoop.auth cookie, authenticates it again."""
    cluster = gpu_cluster(auth="simple")
    rm1, rm2 = RMServer(cluster, "rm1"), RMServer(cluster, "rm2")
    try:
        app = cluster.submit("alice", "a", 8)
        adapter = adapter_for(rm1, rm2, auth="simple", user="gpufair")
        adapter.snapshot()
        assert any(c.name == "hadoop.auth" for c in adapter.client.session.cookies)
        cluster.failover("rm2")
        assert adapter.apply_one(SetPriority(app, 3)).ok
        assert adapter.client.active == rm2.url and cluster.apps[app].priority == 3
    finally:
        rm1.close()
        rm2.close()


def test_https_with_a_ca_bundle(tmp_path) -> None:
    """The RM behind TLS (yarn.http.policy = HTTPS_ONLY): trusted through ca_bundle; an
    untrusted certificate is no answer, never a silent downgrade."""
    import shutil
    import ssl
    import subprocess
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl to make a certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    cluster = gpu_cluster()
    server = RMServer(cluster)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    server.url = server.url.replace("http://", "https://")
    try:
        cluster.submit("alice", "a", 1)
        assert len(adapter_for(server, ca_bundle=str(cert)).snapshot().jobs) == 1
        with pytest.raises(Unavailable):
            adapter_for(server, retries=1).snapshot()
    finally:
        server.close()


def test_tenants_by_user_are_moved_into_their_queue() -> None:
    """tenant_from = user: apps submitted to a shared queue (capacity 0) are moved into
    their user's queue when started, and that queue gets the app's GPUs."""
    from tests.yarn_emulator import Cluster, EmuNode
    cluster = Cluster([EmuNode("gpu01", 4), EmuNode("gpu02", 4)],
                      {"root.shared": (0, 0), "root.alice": (0, 0), "root.bob": (0, 0),
                       "root.rest": (100, 100)})
    server = RMServer(cluster)
    try:
        app = cluster.submit("alice", "shared", 2)
        cluster.tick()
        adapter = adapter_for(server, tenant_from="user", allow_move=True,
                              managed_queues=["shared", "alice", "bob"])
        state = adapter.snapshot()
        assert [(j.tenant, j.state) for j in state.jobs] == [("alice", JobState.PENDING)]
        result = adapter.apply_one(Start(app, ("gpu01:0", "gpu01:1")))
        assert result.ok and "moved to alice" in result.detail, result.detail
        cluster.tick()
        assert cluster.apps[app].queue == "alice" and cluster.apps[app].held_gpus == 2
        assert caps(cluster) == {"shared": 0.0, "alice": 25.0, "bob": 0.0, "rest": 75.0}
    finally:
        server.close()


def test_soft_mode_round_sets_priorities_only(tmp_path) -> None:
    cluster = gpu_cluster()
    server = RMServer(cluster)
    try:
        cluster.submit("alice", "a", 4)
        waiting = [cluster.submit("bob", "b", 8), cluster.submit("alice", "a", 8)]
        cluster.tick()
        config = yarn_config(tmp_path, server, daemon={"mode": "soft"})
        store = Store(config.store.path)
        daemon = build_daemon(config, YarnAdapter.from_settings(config.yarn, mode="soft"),
                              store)
        daemon.run_round()
        assert {type(a).__name__ for a in daemon.last.actions} == {"SetPriority"}
        assert all(e.status == DONE for e in store.journal())
        wanted = {a.job_id: round(a.priority) for a in daemon.last.actions}
        assert {w: cluster.apps[w].priority for w in waiting} == {
            w: min(wanted[w], cluster.max_priority) for w in waiting}
        assert cluster.conf_log == []                     # no queue was touched
        store.close()
    finally:
        server.close()


def test_capacities_are_reasserted_before_each_round(tmp_path) -> None:
    """The queues start at 50/50 while a holds 2 GPUs and b none, and nothing waits: FIFO
    plans no change, yet before the round the adapter sets the capacities to what runs
    (a 25 %, b 0 %, rest 75 %), so no queue grows into GPUs the plan gave nobody. An
    admin's later edit is undone the same way. A dry run writes nothing."""
    from gpufair.adapters.recording import RecordingAdapter
    cluster = gpu_cluster()
    server = RMServer(cluster)
    try:
        cluster.submit("alice", "a", 2)
        cluster.tick()
        config = yarn_config(tmp_path, server)
        adapter = YarnAdapter.from_settings(config.yarn)
        dry = build_daemon(config, RecordingAdapter(adapter), Store(tmp_path / "dry.db"),
                           dry_run=True)
        dry.run_round()
        assert cluster.conf_log == []
        store = Store(config.store.path)
        daemon = build_daemon(config, adapter, store)
        daemon.run_round()
        assert daemon.last.actions == []
        assert caps(cluster) == {"a": 25.0, "b": 0.0, "rest": 75.0}
        daemon.run_round()
        assert len(cluster.conf_log) == 1                  # nothing changed: nothing written
        requests.put(server.url + "/ws/v1/cluster/scheduler-conf", timeout=5, json={
            "update-queue": [{"queue-name": q, "params": {"entry": [
                {"key": "capacity", "value": v}, {"key": "maximum-capacity", "value": v}]}}
                for q, v in (("root.a", "50"), ("root.b", "50"), ("root.rest", "0"))]})
        late = cluster.submit("bob", "b", 2)
        cluster.tick()
        assert cluster.apps[late].held_gpus == 2           # the edit let b grow
        daemon.run_round()
        assert caps(cluster)["a"] == 25.0
        store.close()
    finally:
        server.close()

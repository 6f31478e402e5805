"""The emulator checked against real ResourceManager replies (tests/data/yarn).

For each endpoint, the emulator's reply must carry every field the published reply of the
newest generation carries, with the same JSON type (numbers as numbers, or as strings in the
mapped DAOs), and the same wrapper shape; its error bodies must be the published ones. A test
of the adapter against the emulator only means something if the emulator speaks like an RM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.yarn_emulator import Cluster, EmuNode, RMServer

DATA = Path(__file__).parent / "data" / "yarn"
BASE = "/ws/v1/cluster"


def kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if value is None:
        return "null"
    return "object"


def same_shape(real: Any, emulated: Any, where: str = "$", skip: frozenset[str] = frozenset()
               ) -> list[str]:
    """Where ``emulated`` lacks a field ``real`` has, or has it with another JSON type
    (recursively through objects and the first element of lists)."""
    out = []
    if isinstance(real, dict):
        if not isinstance(emulated, dict):
            return [f"{where}: object expected, got {kind(emulated)}"]
        for key, value in real.items():
            if key in skip:
                continue
            if key not in emulated:
                out.append(f"{where}.{key}: missing")
                continue
            out += same_shape(value, emulated[key], f"{where}.{key}", skip)
    elif isinstance(real, list):
        if not isinstance(emulated, list):
            return [f"{where}: list expected, got {kind(emulated)}"]
        if real and emulated:
            out += same_shape(real[0], emulated[0], f"{where}[0]", skip)
    elif kind(real) != kind(emulated):
        out.append(f"{where}: {kind(real)} expected, got {kind(emulated)} ({emulated!r})")
    return out


@pytest.fixture()
def rm():
    cluster = Cluster([EmuNode("gpu01", 4), EmuNode("gpu02", 4, label="v100")],
                      {"root.a": (50, 50), "root.b": (50, 50)}, kill_ticks=1)
    server = RMServer(cluster)
    running = cluster.submit("alice", "a", 2, tags=("Exp-1",))
    pending = cluster.submit("bob", "b", 4, gpus_per_container=2)
    cluster.tick()
    done = cluster.submit("carol", "a", 1)
    cluster.tick()
    cluster.finish(done)
    yield cluster, server, running, pending, done
    server.close()


def get(server: RMServer, path: str) -> Any:
    response = requests.get(server.url + BASE + path, timeout=5)
    assert response.status_code == 200, response.text
    return response.json()


def real(rel: str) -> Any:
    return json.loads((DATA / rel).read_text())


def test_cluster_info_and_metrics(rm) -> None:
    _, server, *_ = rm
    assert same_shape(real("hadoop-2.7/cluster_info.json"), get(server, "/info")) == []
    assert same_shape(real("hadoop-3.4/metrics.json"), get(server, "/metrics")) == []


def test_node_like_the_published_node(rm) -> None:
    _, server, *_ = rm
    published = real("hadoop-3.4/node.json")["node"]
    emulated = get(server, "/nodes")["nodes"]["node"][0]
    assert same_shape(published, emulated) == []
    one = requests.get(server.url + BASE + "/nodes?states=RUNNING,bogus", timeout=5)
    assert one.status_code == 400 and one.json()["RemoteException"]["exception"] == \
        "IllegalArgumentException"


def test_app_like_the_published_app(rm) -> None:
    _, server, running, _, done = rm
    published = real("hadoop-2.8/app.json")["app"]
    # 2.8 fields are all still in 3.x AppInfo; the finished app shows -1 allocations like it
    finished = get(server, f"/apps/{done}")["app"]
    assert same_shape(published, finished) == []
    assert (finished["allocatedMB"], finished["allocatedVCores"],
            finished["runningContainers"]) == (-1, -1, -1)
    apps = get(server, "/apps")["apps"]["app"]
    published_list = real("hadoop-3.4/apps.json")["apps"]["app"][0]
    assert same_shape(published_list, apps[0], skip=frozenset({"resourceRequests"})) == []
    assert get(server, f"/apps/{running}")["app"]["applicationTags"] == "exp-1"  # lower-cased


def test_empty_lists_are_null(rm) -> None:
    _, server, *_ = rm
    assert get(server, "/apps?states=NEW_SAVING") == {"apps": None}
    assert get(server, "/nodes?states=LOST") == {"nodes": None}


def test_resource_seconds_map_repeats_entry_keys(rm) -> None:
    _, server, running, *_ = rm
    text = requests.get(server.url + BASE + f"/apps/{running}", timeout=5).text
    block = text[text.index('"resourceSecondsMap"'):]
    block = block[:block.index("}}") + 2]
    assert block.count('"entry":') == 3


def test_containers_like_the_published_containers(rm) -> None:
    _, server, running, *_ = rm
    published = real("hadoop-3.4/containers.json")["containers"]["container"][0]
    attempt = get(server, f"/apps/{running}/appattempts")["appAttempts"]["appAttempt"][0]
    emulated = get(server, f"/apps/{running}/appattempts/{attempt['appAttemptId']}/containers")
    first = emulated["containers"]["container"][0]
    assert same_shape(published, first) == []
    assert all(isinstance(v, str) for k, v in first.items() if k != "allocatedResources")


def test_scheduler_like_the_published_capacity_scheduler(rm) -> None:
    _, server, *_ = rm
    published = real("hadoop-3.4/scheduler_capacity_trimmed.json")
    assert same_shape(published, get(server, "/scheduler"),
                      skip=frozenset({"attributes"})) == []


def test_scheduler_like_the_rms_own_test_output(rm) -> None:
    """Hadoop's own web-service test output (trunk, MockRM): every leaf field it has, the
    emulator has, with its type — except ``users``, which trunk writes ``{}`` when empty and
    Jersey 1 (3.1–3.4, the emulator's baseline) ``null``; the adapter reads both."""
    from gpufair.adapters.yarn.decode import as_list
    published = real("hadoop-trunk-mockrm/scheduler-response-PercentageMode_trimmed.json")
    emulated = get(rm[1], "/scheduler")
    assert same_shape(published, emulated, skip=frozenset({"users"})) == []
    leaf = published["scheduler"]["schedulerInfo"]["queues"]["queue"][0]
    assert as_list(leaf["users"]) == [] and as_list(None) == []


def test_kill_is_202_then_200_and_errors_are_the_published_ones(rm) -> None:
    _, server, running, pending, _ = rm
    url = server.url + BASE + f"/apps/{running}/state"
    waiting = server.url + BASE + f"/apps/{pending}/state"
    assert requests.get(waiting, timeout=5).json() == real("hadoop-2.7/app_state_get.json")
    same = requests.put(url, json={"state": "RUNNING"}, timeout=5)   # already: a no-op
    assert (same.status_code, same.json()) == (200, {"state": "RUNNING"})
    bad = requests.put(waiting, json={"state": "RUNNING"}, timeout=5)
    published = "java.lang.Exception: Only 'KILLED' is allowed as a target state."
    assert bad.status_code == 400 and bad.json()["RemoteException"]["message"] == published
    first = requests.put(url, json={"state": "KILLED"}, timeout=5)
    assert first.status_code == 202 and first.headers["Location"].endswith(running)
    assert set(first.json()) == set(real("hadoop-2.7/app_state_put_202.json"))
    second = requests.put(url, json={"state": "KILLED"}, timeout=5)
    assert second.status_code == 200 and second.json() == real(
        "hadoop-2.7/app_state_put_200.json")
    moved = requests.put(server.url + BASE + f"/apps/{running}/queue", json={"queue": "b"},
                         timeout=5)
    assert moved.status_code == 400 and moved.text == "App in KILLED state cannot be moved."


def test_queue_and_priority_replies_like_published(rm) -> None:
    cluster, server, _, pending, _ = rm
    moved = requests.put(server.url + BASE + f"/apps/{pending}/queue", json={"queue": "a"},
                         timeout=5)
    assert set(moved.json()) == set(real("hadoop-2.7/app_queue_put.json"))
    prio = requests.put(server.url + BASE + f"/apps/{pending}/priority",
                        json={"priority": 99}, timeout=5)
    assert set(prio.json()) == set(real("hadoop-2.7/app_priority_put.json"))
    assert prio.json()["priority"] == cluster.max_priority         # clamped, echoed


def test_ha_standby_redirects_like_rm_web_app_filter(rm) -> None:
    cluster, active, *_ = rm
    standby = RMServer(cluster, "rm2")
    try:
        info = requests.get(standby.url + BASE + "/info", timeout=5)
        assert info.json()["clusterInfo"]["haState"] == "STANDBY"
        r = requests.get(standby.url + BASE + "/apps?states=RUNNING", timeout=5,
                         allow_redirects=False)
        assert r.status_code == 307
        assert r.headers["Location"] == active.url + BASE + "/apps?states=RUNNING"
        assert r.text.startswith("This is standby RM. The redirect url is: ")
        assert requests.get(standby.url + "/isActive", timeout=5).status_code == 405
        cluster.failover(None)
        lost = requests.get(standby.url + BASE + "/apps", timeout=5, allow_redirects=False)
        assert lost.status_code == 307 and "Location" not in lost.headers
        assert lost.text.startswith("Can not find any active RM.")
    finally:
        standby.close()


def test_scheduler_conf_validation_and_mutation(rm) -> None:
    cluster, server, *_ = rm
    url = server.url + BASE + "/scheduler-conf"
    bad = {"update-queue": [{"queue-name": "root.a", "params": {"entry": [
        {"key": "capacity", "value": "60"}, {"key": "maximum-capacity", "value": "60"}]}}]}
    v = requests.post(url + "/validate", json=bad, timeout=5)
    assert v.status_code == 400 and v.text.startswith(
        "CapacityScheduler configuration validation failed:")
    good = {"update-queue": [
        {"queue-name": "root.a", "params": {"entry": [{"key": "capacity", "value": "25"}]}},
        {"queue-name": "root.b", "params": {"entry": [{"key": "capacity", "value": "75"},
                                                      {"key": "maximum-capacity",
                                                       "value": "75"}]}}]}
    assert requests.post(url + "/validate", json=good, timeout=5).status_code == 200
    assert cluster.queues["root.a"].capacity == 50           # validation changes nothing
    put = requests.put(url, json=good, timeout=5)
    assert (put.status_code, put.text) == (200, "Configuration change successfully applied.")
    props = {p["name"]: p["value"] for p in requests.get(url, timeout=5).json()["property"]}
    assert props["yarn.scheduler.capacity.root.a.capacity"] == "25"
    cluster.mutable_conf = False
    refused = requests.get(url, timeout=5)
    assert refused.status_code == 400 and "not an instance of MutableConfScheduler" in \
        refused.text


def test_fair_scheduler_like_the_published_one() -> None:
    cluster = Cluster([EmuNode("gpu01", 4)], {"root.default": (50, 100),
                                              "root.sample_queue": (50, 100),
                                              "root.sample_queue.sub": (100, 100)},
                      scheduler="fair")
    server = RMServer(cluster)
    try:
        app = cluster.submit("alice", "sub", 1)
        published = real("hadoop-3.4/scheduler_fair.json")
        assert same_shape(published, get(server, "/scheduler"),
                          skip=frozenset({"resourceInformations"})) == []
        assert get(server, f"/apps/{app}")["app"]["queue"] == "root.sample_queue.sub"
    finally:
        server.close()


def test_hadoop_ai_shape_like_the_captured_replies() -> None:
    """In Hadoop-AI's shape, with a dedicated-VC partition, the emulator's nodes and
    scheduler carry every field of the replies captured on OpenPAI clusters (tests/data/yarn/
    hadoop-ai), with their JSON types: GPUs as counts and a bitmask, resources with GPUs,
    capacities and usage per partition."""
    cluster = Cluster([EmuNode("10.0.0.1", 4), EmuNode("10.0.0.2", 4, label="test_vc")],
                      {"root.default": (100, 100), "root.test_vc": (0, 100)},
                      partitions={"root.test_vc": {"test_vc": (100, 100)}},
                      default_labels={"root.test_vc": "test_vc"},
                      accessible={"root.test_vc": ("test_vc",)}, shape="hadoop-ai")
    server = RMServer(cluster)
    try:
        cluster.submit("alice", "default", 1)
        cluster.submit("vera", "test_vc", 2)
        cluster.tick()
        nodes = get(server, "/nodes")["nodes"]["node"]
        labelled, plain = real("hadoop-ai/nodes_with_label.json")["nodes"]["node"]
        assert same_shape(labelled, nodes[1]) == [] and same_shape(plain, nodes[0]) == []
        assert same_shape(real("hadoop-ai/nodes.json")["nodes"]["node"][0], nodes[0]) == []
        assert (nodes[0]["usedGPUs"], nodes[0]["availableGPUAttribute"]) == (1, 0b1110)
        scheduler = get(server, "/scheduler")
        for rel in ("hadoop-ai/scheduler.json", "hadoop-ai/scheduler_with_label.json"):
            assert same_shape(real(rel), scheduler, skip=frozenset({"operationsInfo"})) == []
    finally:
        server.close()

"""The YARN decoder and translator on real ResourceManager replies (tests/data/yarn) and on
hand-written replies whose model is computed by hand below.

The published replies carry no GPUs (see tests/data/yarn/README.md), so on them the checks are
that every reply is read without error, that each documented quirk is read as the document
means it, and that a cluster without ``yarn.io/gpu`` becomes a model without GPU nodes or GPU
jobs — not a crash, not invented GPUs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.adapters.yarn.client import rm_error
from gpufair.adapters.yarn.decode import (
    GPU,
    Repeated,
    as_bool,
    as_float,
    as_int,
    as_list,
    entries,
    items,
    loads,
    resource_amount,
)
from gpufair.adapters.yarn.translate import container_gpus, translate
from gpufair.errors import InputError
from gpufair.model import JobState, NodeState

DATA = Path(__file__).parent / "data" / "yarn"
VALID = sorted(p for p in DATA.rglob("*.json") if p.name != "scheduler_fair.json"
               or p.parent.name != "hadoop-2.7")


def read(rel: str):
    path = DATA / rel
    return loads(path.read_bytes(), str(path))


@pytest.mark.parametrize("path", VALID, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_published_reply_decodes(path: Path) -> None:
    assert isinstance(loads(path.read_bytes(), str(path)), dict)


def test_published_invalid_json_is_a_clear_error() -> None:
    """Hadoop 2.7's FairScheduler example has a trailing comma: refused, with where."""
    path = DATA / "hadoop-2.7" / "scheduler_fair.json"
    with pytest.raises(InputError, match=r"scheduler_fair.json: not valid JSON .*line 93"):
        loads(path.read_bytes(), str(path))


@pytest.mark.parametrize("rel", ["hadoop-2.7/nodes.json", "hadoop-3.4/nodes.json"])
def test_nodes_without_gpus_give_no_gpu_nodes(rel: str) -> None:
    doc = read(rel)
    assert len(items(doc, "nodes", "node", rel)) == 2
    view = translate(doc, {"apps": None}, {}, now=0.0)
    assert view.state.nodes == () and view.state.jobs == () and view.problems == ()


def test_node_total_resource_read_from_top_level_fields() -> None:
    node = read("hadoop-3.4/node.json")["node"]
    assert resource_amount(node["totalResource"], "memory-mb") == 2048
    assert resource_amount(node["totalResource"], "vcores") == 5
    assert resource_amount(node["totalResource"], GPU) == 0


@pytest.mark.parametrize("rel", ["hadoop-2.7/apps.json", "hadoop-3.4/apps.json"])
def test_finished_apps_are_not_jobs(rel: str) -> None:
    doc = read(rel)
    records = items(doc, "apps", "app", rel)
    assert [r["state"] for r in records] == ["FINISHED", "FINISHED"]
    assert translate({"nodes": None}, doc, {}, now=0.0).state.jobs == ()


def test_apps_quirks_as_published() -> None:
    apps = items(read("hadoop-2.7/apps.json"), "apps", "app", "2.7")
    assert as_bool(apps[0]["unmanagedApplication"], True) is False     # "false", a string
    assert apps[1]["applicationTags"] == "tag1"
    app = read("hadoop-2.8/app.json")["app"]
    assert (app["allocatedMB"], app["runningContainers"], app["priority"]) == (-1, -1, -1)
    # 2.x-style asks inside a 3.x document: virtualCores, priority as an object
    ask = items(read("hadoop-3.4/apps.json"), "apps", "app", "3.4")[0]["resourceRequests"][0]
    assert resource_amount(ask["capability"], "vcores") == 1
    assert resource_amount(ask["capability"], "memory-mb") == 4096
    assert resource_amount(ask["capability"], GPU) == 0


def test_active_published_app_would_be_translated() -> None:
    """The published FINISHED app made RUNNING with its asks: no GPU asked → not a GPU job;
    its 2.x asks do not break the reader."""
    doc = read("hadoop-3.4/apps.json")
    doc["apps"]["app"][0]["state"] = "RUNNING"
    view = translate({"nodes": None}, doc, {}, now=0.0)
    assert view.state.jobs == () and view.problems == ()


def test_containers_are_mapped_json_with_string_numbers() -> None:
    container = items(read("hadoop-3.4/containers.json"), "containers", "container", "c")[0]
    assert entries(container["allocatedResources"]) == {"memory-mb": "1536", "vcores": "1"}
    assert as_int(container["allocatedMB"]) == 1536 and as_int(container["startedTime"]) \
        == 1531405909444
    assert container_gpus(container) == 0


def test_fifo_nan_string_and_fair_tree() -> None:
    fifo = read("hadoop-3.4/scheduler_fifo.json")["scheduler"]["schedulerInfo"]
    assert as_float(fifo["usedCapacity"], -1.0) == -1.0          # "NaN": no usable number
    fair = read("hadoop-3.4/scheduler_fair.json")["scheduler"]["schedulerInfo"]["rootQueue"]
    children = as_list(fair["childQueues"]["queue"])
    assert [q["queueName"] for q in children] == ["root.default", "root.sample_queue"]
    sub = as_list(children[1]["childQueues"]["queue"])[0]
    assert resource_amount(sub["minResources"], "memory-mb") == 5000


def test_capacity_scheduler_resource_informations() -> None:
    info = read("hadoop-3.4/scheduler_capacity_trimmed.json")["scheduler"]["schedulerInfo"]
    leaf = as_list(info["queues"]["queue"])[0]
    assert leaf["queuePath"] == "root.a" and leaf["capacity"] == 12.5
    configured = leaf["capacities"]["queueCapacitiesByPartition"][0]["configuredMinResource"]
    assert resource_amount(configured, "memory-mb") == 0
    assert resource_amount(leaf["resourcesUsed"], "vcores") == 0


def test_published_remote_exception_and_plain_text_errors() -> None:
    xml = (DATA / "hadoop-2.7" / "app_state_put_400.xml").read_text()
    assert "Only 'KILLED' is allowed" in rm_error(400, xml, "x").message   # kept as text
    body = ('{"RemoteException":{"exception":"BadRequestException","message":"java.lang.'
            'Exception: Only \'KILLED\' is allowed as a target state.","javaClassName":'
            '"org.apache.hadoop.yarn.webapp.BadRequestException"}}')
    err = rm_error(400, body, "x")
    assert (err.exception, err.message) == ("BadRequestException", "java.lang.Exception: Only "
                                            "'KILLED' is allowed as a target state.")
    plain = rm_error(403, "Unauthorized attempt to kill appid a by remote user u", "x")
    assert plain.exception is None and plain.message.startswith("Unauthorized")


# ---- the quirks of the contract, on hand-written replies ------------------------------------
def test_repeated_entry_keys_are_all_kept() -> None:
    text = ('{"resourceSecondsMap":{"entry":{"key":"memory-mb","value":"2523131"},'
            '"entry":{"key":"vcores","value":"1232"},"entry":{"key":"yarn.io/gpu",'
            '"value":"246"}}}')
    doc = loads(text, "t")
    assert isinstance(doc["resourceSecondsMap"]["entry"], Repeated)
    assert entries(doc["resourceSecondsMap"]) == {"memory-mb": "2523131", "vcores": "1232",
                                                  GPU: "246"}
    for empty in ({}, "", None, {"entry": []}):
        assert entries(empty) == {}
    assert entries({"entry": {"key": "vcores", "value": "1335"}}) == {"vcores": "1335"}


def test_null_and_single_object_lists() -> None:
    assert items({"apps": None}, "apps", "app", "t") == []
    assert items({"apps": {"app": {"id": "x"}}}, "apps", "app", "t") == [{"id": "x"}]
    with pytest.raises(InputError, match="expected an object with 'nodes'"):
        items({"node": []}, "nodes", "node", "t")


def _res(mem: int, vc: int, gpus: int) -> dict:
    return {"memory": mem, "vCores": vc, "resourceInformations": {"resourceInformation": [
        {"name": "memory-mb", "value": mem}, {"name": "vcores", "value": vc},
        {"name": GPU, "value": gpus}]}}


def test_gpu_cluster_translated_by_hand() -> None:
    """Two GPU nodes, one CPU node; a managed running app with 2 GPUs on gpu01, an unmanaged
    app with 1 GPU on gpu01, a managed pending app asking 2×2 GPUs, a finished app.

    By hand: gpu01 has 4 GPUs, indices 0-1 are the managed app's, index 2 the unmanaged
    app's (unavailable); gpu02 (state DECOMMISSIONING → drain) has 8 and nothing used; the
    pending app is a 4-GPU job of tenant 'b'; the CPU node is no GPU node."""
    nodes = {"nodes": {"node": [
        {"id": "gpu01:45454", "nodeHostName": "gpu01", "state": "RUNNING", "rack": "/r1",
         "totalResource": _res(100, 10, 4), "usedResource": _res(10, 3, 3),
         "nodeAttributesInfo": {"nodeAttributeInfo": {"name": "gpu_type", "value": "A100"}}},
        {"id": "gpu02:45454", "nodeHostName": "gpu02", "state": "DECOMMISSIONING",
         "totalResource": _res(100, 10, 8), "nodeLabels": ["v100"]},
        {"id": "cpu01:45454", "nodeHostName": "cpu01", "state": "RUNNING",
         "totalResource": {"memory": 100, "vCores": 10}}]}}
    apps = {"apps": {"app": [
        {"id": "application_1_0002", "state": "RUNNING", "queue": "a", "user": "u1",
         "startedTime": 1000, "launchTime": 3000, "applicationTags": "exp-7,x"},
        {"id": "application_1_0001", "state": "RUNNING", "queue": "other", "user": "u2"},
        {"id": "application_1_0003", "state": "ACCEPTED", "queue": "root.b", "user": "u3",
         "priority": 4, "resourceRequests": [
             {"resourceName": "*", "numContainers": 2, "capability": _res(1, 1, 2)},
             {"resourceName": "gpu01", "numContainers": 2, "capability": _res(1, 1, 2)}]},
        {"id": "application_1_0004", "state": "FINISHED", "queue": "a"}]}}
    containers = {
        "application_1_0002": [
            {"assignedNodeId": "gpu01:45454", "containerState": "RUNNING",
             "allocatedResources": [{"key": GPU, "value": "1"}]},
            {"assignedNodeId": "gpu01:45454",
             "allocatedResources": [{"key": GPU, "value": "1"}]},
            {"assignedNodeId": "gpu01:45454", "containerState": "COMPLETE",
             "allocatedResources": [{"key": GPU, "value": "1"}]}],
        "application_1_0001": [{"assignedNodeId": "gpu01:45454",
                                "allocatedResources": [{"key": GPU, "value": "1"}]}]}
    view = translate(nodes, apps, containers, now=50.0, managed_queues=("a", "b"))
    state = view.state
    by_name = {n.name: n for n in state.nodes}
    assert set(by_name) == {"gpu01", "gpu02"}
    assert (by_name["gpu01"].gpus, by_name["gpu01"].gpu_type, by_name["gpu01"].unavailable,
            by_name["gpu01"].rack) == (4, "A100", (2,), "/r1")
    assert (by_name["gpu02"].gpus, by_name["gpu02"].gpu_type, by_name["gpu02"].state) == \
        (8, "v100", NodeState.DRAIN)
    jobs = {j.id: j for j in state.jobs}
    assert set(jobs) == {"application_1_0002", "application_1_0003"}
    running = jobs["application_1_0002"]
    assert (running.tenant, running.state, running.gpus, running.gpus_held, running.app,
            running.arrival_s, running.start_s) == \
        ("a", JobState.RUNNING, 2, ("gpu01:0", "gpu01:1"), "exp-7", 1.0, 3.0)
    pending = jobs["application_1_0003"]
    assert (pending.tenant, pending.state, pending.gpus, pending.gpus_held) == \
        ("b", JobState.PENDING, 4, ())
    assert view.apps["application_1_0003"].priority == 4
    assert [t.name for t in state.tenants] == ["a", "b"]
    by_user = translate(nodes, apps, containers, now=50.0, managed_queues=("a", "b"),
                        tenant_from="user")
    assert sorted(j.tenant for j in by_user.state.jobs) == ["u1", "u3"]


def test_a_broken_record_is_a_problem_not_a_crash() -> None:
    nodes = {"nodes": {"node": [{"id": "g:1", "nodeHostName": "g", "state": "RUNNING",
                                 "totalResource": _res(1, 1, 2)},
                                {"id": "g:1", "nodeHostName": "g", "state": "RUNNING",
                                 "totalResource": _res(1, 1, 2)}]}}
    apps = {"apps": {"app": [{"id": "application_1_0001", "state": "ACCEPTED",
                              "resourceRequests": [{"numContainers": "x",
                                                    "capability": _res(1, 1, 1)}]},
                             {"id": "application_1_0002", "state": "RUNNING",
                              "startedTime": {"bad": 1}, "resourceRequests": [
                                  {"numContainers": 1, "capability": _res(1, 1, 1)}]}]}}
    view = translate(nodes, apps, {}, now=0.0)
    assert [n.name for n in view.state.nodes] == ["g"]
    assert any("duplicate node" in p for p in view.problems)
    assert [j.id for j in view.state.jobs] == ["application_1_0002"]   # "x" asks: 0 GPUs


def test_queue_trees_of_the_published_schedulers() -> None:
    from gpufair.adapters.yarn.queues import queue_tree
    cs = queue_tree(read("hadoop-3.4/scheduler_capacity_trimmed.json"))
    assert cs.scheduler == "capacityScheduler"
    assert {p: (q.absolute_capacity, q.children) for p, q in cs.queues.items()} == {
        "root": (100.0, ("root.a",)), "root.a": (12.5, ())}
    fs = queue_tree(read("hadoop-3.4/scheduler_fair.json"))
    assert fs.scheduler == "fairScheduler"
    assert fs.queues["root"].children == ("root.default", "root.sample_queue")
    assert fs.queues["root.sample_queue"].children == ("root.sample_queue.sample_sub_queue",)
    assert fs.queues["root.sample_queue.sample_sub_queue"].leaf
    assert queue_tree(read("hadoop-3.4/scheduler_fifo.json")).queues == {}


def test_an_app_id_that_is_not_one_is_skipped() -> None:
    """App ids go into URL paths of writes: only ``application_<digits>_<digits>``."""
    apps = {"apps": {"app": [{"id": "application_1_0001/../../scheduler-conf",
                              "state": "ACCEPTED", "queue": "a",
                              "resourceRequests": [{"numContainers": 1,
                                                    "capability": _res(1, 1, 1)}]}]}}
    view = translate({"nodes": None}, apps, {}, now=0.0)
    assert view.state.jobs == () and "not an application id" in view.problems[0]

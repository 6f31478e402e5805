"""GPU nodes in node-label partitions (Hadoop-AI's dedicated virtual clusters): capacities and
usage read per partition, apps kept to their partition's nodes, and shares enforced as the
queues' capacities on the partition that holds the GPUs — in the real capture's queue tree
and against the emulator over real HTTP."""

from __future__ import annotations

import pytest

from gpufair.adapters.yarn import YarnAdapter
from gpufair.adapters.yarn.decode import loads
from gpufair.adapters.yarn.queues import queue_tree
from gpufair.model import JobState, Start
from gpufair.plugin.service import build_daemon
from gpufair.plugin.store import DONE, Store
from tests.test_yarn_adapter import adapter_for
from tests.yarn_captures import DATA
from tests.yarn_emulator import SHAPES, Cluster, EmuNode, RMServer
from tests.yarn_setup import yarn_config


def test_the_captures_queue_capacities_and_usage_per_partition() -> None:
    """scheduler_with_label.json by hand: the dedicated VC test_vc has 0 % of the default
    partition and 100 % of its own; vc_a 10 % of the default one and 0 % of test_vc, where it
    may still run; default uses 1 GPU, of the default partition."""
    path = DATA / "hadoop-ai" / "scheduler_with_label.json"
    tree = queue_tree(loads(path.read_bytes(), str(path)))
    vc, vc_a, default = (tree.queues[f"root.{q}"] for q in ("test_vc", "vc_a", "default"))
    assert (vc.share(""), vc.share("test_vc"), vc.default_label) == (0.0, 100.0, "test_vc")
    assert (vc_a.share(""), vc_a.share("test_vc"), vc_a.can_use("test_vc")) == (10.0, 0.0, True)
    assert not tree.queues["root.label_ex"].can_use("test_vc")
    assert default.used_gpus == {"": 1, "label_ex": 0, "label_non": 0, "test_vc": 0}
    assert tree.queues["root"].share("test_vc") == 100.0
    # an unset label expression as some RMs print it is the default partition
    doc = {"scheduler": {"schedulerInfo": {"type": "capacityScheduler", "queues": {"queue": [
        {"queueName": "x", "absoluteCapacity": 100,
         "defaultNodeLabelExpression": "<DEFAULT_PARTITION>"}]}}}}
    assert queue_tree(doc).queues["root.x"].default_label == ""


def partitioned(shape: str = "hadoop-3", rest_labels: bool = True) -> Cluster:
    """gpu01 (4 GPUs, default partition) and vc01 (4 GPUs, label vc). Tenant a runs on the
    default partition; v is a dedicated VC: 0 % of the default partition, its apps run on vc
    (where it starts with 0 %); rest takes the remainder of both."""
    return Cluster([EmuNode("gpu01", 4), EmuNode("vc01", 4, label="vc")],
                   {"root.a": (0, 0), "root.v": (0, 0), "root.rest": (100, 100)},
                   partitions={"root.v": {"vc": (0, 0)},
                               **({"root.rest": {"vc": (100, 100)}} if rest_labels else {})},
                   default_labels={"root.v": "vc"}, shape=shape,
                   accessible={"root.v": ("vc",), "root.a": ("",),
                               **({} if rest_labels else {"root.rest": ("",)})})


@pytest.mark.parametrize("shape", SHAPES)
def test_a_dedicated_vc_gets_its_share_on_its_own_partition(tmp_path, shape) -> None:
    """FIFO starts a1 (2 GPUs, tenant a) and v1 (2 GPUs, tenant v). By hand: v1 may only go
    to vc01 (its partition), so its start names vc01's GPUs; capacities become, on the
    default partition (4 GPUs), a 50 %, v 0 %, rest 50 %; on vc (4 GPUs), v 50 %, rest 50 %
    (a may not use vc: no capacity there). The RM then runs a1 on gpu01 and v1 on vc01."""
    cluster = partitioned(shape)
    server = RMServer(cluster)
    try:
        a1 = cluster.submit("alice", "a", 2)
        v1 = cluster.submit("vera", "v", 2)
        cluster.tick()
        config = yarn_config(tmp_path, server, managed_queues=["a", "v"])
        store = Store(config.store.path)
        daemon = build_daemon(config, YarnAdapter.from_settings(config.yarn), store)
        daemon.run_round()
        starts = {a.job_id: a.gpu_ids for a in daemon.last.actions if isinstance(a, Start)}
        assert {n.rpartition(":")[0] for n in starts[v1]} == {"vc01"}
        assert all(e.status == DONE for e in store.journal()), store.journal()
        cluster.tick()
        q = cluster.queues
        assert (q["root.a"].capacity, q["root.v"].capacity, q["root.rest"].capacity) == \
            (50.0, 0.0, 50.0)
        assert (q["root.v"].labels, q["root.rest"].labels) == \
            ({"vc": [50.0, 50.0]}, {"vc": [50.0, 50.0]})
        assert {c.node for c in cluster.apps[v1].placed} == {"vc01:45454"}
        assert {c.node for c in cluster.apps[a1].placed} == {"gpu01:45454"}
        state = daemon.adapter.snapshot()
        jobs = {j.id: j for j in state.jobs}
        assert jobs[v1].state is JobState.RUNNING and jobs[v1].allowed_nodes == ("vc01",)
        daemon.run_round()
        assert daemon.last.actions == []
        store.close()
    finally:
        server.close()


def test_a_rest_queue_that_cannot_use_the_partition_is_refused_before_any_write() -> None:
    cluster = partitioned(rest_labels=False)
    server = RMServer(cluster)
    try:
        v1 = cluster.submit("vera", "v", 2)
        adapter = adapter_for(server, managed_queues=["a", "v"])
        adapter.snapshot()
        result = adapter.apply_one(Start(v1, ("vc01:0", "vc01:1")))
        assert not result.ok and "rest_queue root.rest may not use partition 'vc'" in \
            result.detail, result.detail
        assert cluster.conf_log == []
    finally:
        server.close()


def test_a_started_app_yarn_has_yet_to_place_is_shown_on_its_own_partition() -> None:
    """Heartbeats mode: before v1's start is applied, the RM placed r1 (queue rest, whose
    apps run on vc) on vc01:0-1, the GPUs the plan gave v1. Until YARN places v1, it is shown
    running on the free GPUs of its partition, vc01:2-3 — not on gpu01's free GPUs, which its
    apps can never get."""
    cluster = Cluster([EmuNode("gpu01", 4), EmuNode("vc01", 4, label="vc")],
                      {"root.a": (0, 0), "root.v": (0, 0), "root.rest": (100, 100)},
                      partitions={"root.v": {"vc": (0, 0)}, "root.rest": {"vc": (100, 100)}},
                      default_labels={"root.v": "vc", "root.rest": "vc"},
                      accessible={"root.v": ("vc",), "root.a": ("",)}, heartbeats=True)
    server = RMServer(cluster)
    try:
        v1 = cluster.submit("vera", "v", 2)
        adapter = adapter_for(server, managed_queues=["a", "v"])
        adapter.snapshot()                       # the plan's view: every GPU free
        cluster.submit("rita", "rest", 2)
        cluster.heartbeat()                      # rest: vc01:0-1
        assert adapter.apply_one(Start(v1, ("vc01:0", "vc01:1"))).ok
        jobs = {j.id: j for j in adapter.snapshot().jobs}
        assert (jobs[v1].state, jobs[v1].gpus_held) == (JobState.RUNNING,
                                                        ("vc01:2", "vc01:3"))
        cluster.heartbeat()
        assert {c.node for c in cluster.apps[v1].placed} == {"vc01:45454"}
    finally:
        server.close()


def test_an_app_may_stay_where_a_non_exclusive_label_let_it_run() -> None:
    """translate() on hand-written replies: gpu01 in the default partition, vc01 labelled
    vc. a1 (queue a, default partition) holds a container on vc01 (a non-exclusive label lends
    idle nodes); a2 (queue a) waits; v1 (queue v, default label vc) waits. By hand: a1 may
    use gpu01 and vc01 (where it runs), a2 only gpu01, v1 only vc01."""
    from gpufair.adapters.yarn.translate import translate

    def node(host: str, label: str | None) -> dict:
        gpus = {"resourceInformations": {"resourceInformation": [
            {"name": "yarn.io/gpu", "value": 4}]}}
        return {"id": f"{host}:8041", "nodeHostName": host, "state": "RUNNING",
                "nodeLabels": [label] if label else None, "totalResource": gpus,
                "usedResource": {}}

    def app(seq: int, queue: str, asks: int) -> dict:
        ask = {"resourceName": "*", "numContainers": asks, "capability": {
            "resourceInformations": {"resourceInformation": [
                {"name": "yarn.io/gpu", "value": 1}]}}}
        return {"id": f"application_1_{seq:04d}", "queue": queue, "user": "u",
                "state": "RUNNING" if seq == 1 else "ACCEPTED",
                "resourceRequests": [ask] if asks else None}

    nodes = {"nodes": {"node": [node("gpu01", None), node("vc01", "vc")]}}
    apps = {"apps": {"app": [app(1, "a", 0), app(2, "a", 1), app(3, "v", 2)]}}
    held = {"application_1_0001": [{"assignedNodeId": "vc01:8041", "allocatedResources": [
        {"key": "yarn.io/gpu", "value": "1"}]}]}
    view = translate(nodes, apps, held, now=0.0, queue_labels={"a": "", "v": "vc"})
    allowed = {j.id[-1]: j.allowed_nodes for j in view.state.jobs}
    assert allowed == {"1": ("gpu01", "vc01"), "2": ("gpu01",), "3": ("vc01",)}
    assert view.partition_of == {"gpu01": "", "vc01": "vc"}


def test_gpus_lent_by_a_non_exclusive_label_do_not_stop_enforcement(caplog) -> None:
    """a1 (queue a, which may not use vc) holds 1 GPU of vc01, lent by a non-exclusive label;
    v1 (queue v) holds 2 there. By hand, vc's capacities (4 GPUs): v 50 %, rest 50 % — a's GPU
    is left out, with a warning, instead of refusing to enforce anything; the default
    partition (gpu01, 4 GPUs): a 0 %, v 0 %, rest 100 %."""
    from gpufair.adapters.yarn.translate import translate

    def res(gpus: int) -> dict:
        return {"resourceInformations": {"resourceInformation": [
            {"name": "yarn.io/gpu", "value": gpus}]}}

    def container(gpus: int) -> dict:
        return {"assignedNodeId": "vc01:8041",
                "allocatedResources": [{"key": "yarn.io/gpu", "value": str(gpus)}]}

    nodes = {"nodes": {"node": [
        {"id": "gpu01:8041", "nodeHostName": "gpu01", "state": "RUNNING",
         "totalResource": res(4)},
        {"id": "vc01:8041", "nodeHostName": "vc01", "state": "RUNNING", "nodeLabels": ["vc"],
         "totalResource": res(4), "usedResource": res(3)}]}}
    apps = {"apps": {"app": [{"id": "application_1_0001", "queue": "a", "state": "RUNNING"},
                             {"id": "application_1_0002", "queue": "v", "state": "RUNNING"}]}}
    held = {"application_1_0001": [container(1)], "application_1_0002": [container(2)]}

    def queue(name: str, labels: list[str], caps: dict[str, float]) -> dict:
        return {"queueName": name, "absoluteCapacity": caps.get("", 0.0), "nodeLabels": labels,
                "capacities": {"queueCapacitiesByPartition": [
                    {"partitionName": p, "absoluteCapacity": c} for p, c in caps.items()]}}

    tree = queue_tree({"scheduler": {"schedulerInfo": {"type": "capacityScheduler",
                                                       "queues": {"queue": [
        queue("a", [""], {"": 0.0}), queue("v", ["vc"], {"": 0.0, "vc": 0.0}),
        queue("rest", ["*"], {"": 100.0, "vc": 100.0})]}}}})
    adapter = adapter_for(_Url("http://127.0.0.1:9"), managed_queues=["a", "v"])
    adapter.last_view = translate(nodes, apps, held, now=0.0, managed_queues=("a", "v"),
                                  queue_labels={"a": "", "v": "vc"})
    adapter._tree = tree
    assert adapter._capacities() == {
        "": {"root.a": "0", "root.v": "0", "root.rest": "100"},
        "vc": {"root.v": "50", "root.rest": "50"}}
    assert "queues of a hold GPUs of partition 'vc'" in caplog.text


class _Url:
    def __init__(self, url: str) -> None:
        self.url = url

"""GPU clusters as real ResourceManagers publish them: Hadoop-AI (OpenPAI's GPU fork of 2.9)
captures served over HTTP to ``gpufair snapshot --yarn`` and ``gpufair dry-run``, checked
against numbers worked out by hand from the files; the emulator answering in Hadoop-AI's
shape; and replies in a shape not known here refused with the field named."""

from __future__ import annotations

import json

import pytest

from gpufair.adapters.yarn import RMReplyError
from gpufair.cli.main import main
from gpufair.model import JobState
from tests.test_yarn_adapter import adapter_for
from tests.yarn_captures import DATA, NO_APPS, serve_capture
from tests.yarn_emulator import Cluster, EmuNode, RMServer

AI = DATA / "hadoop-ai"

# By hand, from the files (GPUs = usedGPUs + availableGPUs; the free GPUs' indices are the
# set bits of availableGPUAttribute, the others are in use):
#   nodes.json: 10.151.40.4 — 1 + 3 = 4 GPUs; 14 = 0b1110: 1, 2, 3 free, 0 in use.
#   nodes_with_label.json: 10.151.40.132 (label test_vc) — 0 + 4 = 4; 15 = 0b1111: all free.
#                          10.151.40.131 (no label) — 1 + 3 = 4; 14 = 0b1110: 0 in use.
#   empty_nodes.json: {"nodes":null} — no node.
# No capture holds an apps reply (served as {"apps":null}): the GPU in use (scheduler.json:
# queue default, 1 app, resourcesUsed.GPUs 1) belongs to an app gpufair cannot see, so it is
# unavailable, and there are no jobs.
CAPTURES = {
    "single-node": ("nodes.json", "scheduler.json",
                    [("10.151.40.4", "gpu", 4, [0])]),
    "labelled": ("nodes_with_label.json", "scheduler_with_label.json",
                 [("10.151.40.132", "test_vc", 4, []), ("10.151.40.131", "gpu", 4, [0])]),
    "empty": ("empty_nodes.json", "scheduler.json", []),
}


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_snapshot_and_dry_run_of_a_hadoop_ai_capture(name, tmp_path, capsys) -> None:
    nodes, scheduler, expected = CAPTURES[name]
    with serve_capture({"/nodes": AI / nodes, "/scheduler": AI / scheduler,
                        "/apps": NO_APPS}) as url:
        assert main(["snapshot", "--yarn", url]) == 0
    out = capsys.readouterr()
    snap = json.loads(out.out)
    assert [(n["name"], n["gpu_type"], n["gpus"], n["unavailable"]) for n in snap["nodes"]] \
        == expected
    assert snap["jobs"] == [] and "warning" not in out.err
    path = tmp_path / "snap.json"
    path.write_text(out.out)
    assert main(["dry-run", str(path), "--json"]) == 0
    decided = json.loads(capsys.readouterr().out)     # the GPUs it may plan: the free ones
    assert decided["gpus"] == sum(e[2] - len(e[3]) for e in expected)
    assert decided["actions"] == []


@pytest.mark.parametrize(("record", "field"), [
    ({"id": "n1:8041", "state": "RUNNING", "gpuCount": 4}, "totalResource"),
    ({"id": "n1:8041", "state": "RUNNING", "usedGPUs": 1, "availableGPUs": 3,
      "availableGPUAttribute": 15}, "availableGPUAttribute"),       # 4 free bits, 3 free
    ({"id": "n1:8041", "state": "RUNNING", "usedGPUs": "one", "availableGPUs": 3},
     "usedGPUs"),
    ({"id": "n1:8041", "state": "RUNNING", "usedGPUs": 1.5, "availableGPUs": 3}, "usedGPUs"),
])
def test_a_node_in_an_unknown_shape_is_an_error_naming_the_field(record, field,
                                                                   capsys) -> None:
    body = json.dumps({"nodes": {"node": [record]}}).encode()
    with serve_capture({"/nodes": body, "/apps": NO_APPS}) as url:
        assert main(["snapshot", "--yarn", url]) == 2
        with pytest.raises(RMReplyError, match=f"field '{field}'"):
            adapter_for(_Url(url), retries=1).snapshot()
    err = capsys.readouterr().err
    assert f"field '{field}'" in err and "n1:8041" in err and "Traceback" not in err


def test_gpu_indices_with_gaps_are_counted_not_placed() -> None:
    """A node whose free-GPU bitmask names an index beyond its count (a GPU left out of the
    device list): the counts still hold, which GPU is busy is not guessed from the bits."""
    body = json.dumps({"nodes": {"node": [{"id": "n1:8041", "nodeHostName": "n1",
                                           "state": "RUNNING", "usedGPUs": 1,
                                           "availableGPUs": 2,
                                           "availableGPUAttribute": 0b1010}]}}).encode()
    with serve_capture({"/nodes": body, "/apps": NO_APPS}) as url:
        state = adapter_for(_Url(url), retries=1).snapshot()
    assert [(n.name, n.gpus, n.unavailable) for n in state.nodes] == [("n1", 3, (0,))]


class _Url:
    def __init__(self, url: str) -> None:
        self.url = url


# ---- the emulator in Hadoop-AI's shape ------------------------------------------------------
def test_the_free_gpus_are_the_ones_the_bitmask_shows_free_across_rounds() -> None:
    """gpu01 (4 GPUs): bob's b1 (2 GPUs, queue b, not managed) is placed on GPUs 0-1, then
    alice's a1 (1 GPU) on GPU 2. The bitmask says which GPUs are busy, not whose: a1 is given
    the first busy one, the other busy ones are unavailable, and GPU 3 — the one free — is
    the one the model shows free. By hand: a1 on gpu01:0, unavailable 1-2. b1 ends: only
    GPU 2 is busy, so a1 is on gpu01:2 and nothing is unavailable (counting in container
    order would show GPU 2 free and GPU 0 held). b2 (1 GPU) then takes GPU 0: busy 0 and 2,
    a1 on gpu01:0, unavailable [2]; in every round exactly the RM's free GPUs are free."""
    cluster = Cluster([EmuNode("gpu01", 4)],
                      {"root.a": (50, 100), "root.b": (50, 100), "root.rest": (0, 0)},
                      shape="hadoop-ai")
    server = RMServer(cluster)
    try:
        b1 = cluster.submit("bob", "b", 2)
        cluster.tick()
        a1 = cluster.submit("alice", "a", 1)
        a2 = cluster.submit("alice", "a", 1, gpus_per_container=4)     # waits: 4 > 1 free
        cluster.tick()
        adapter = adapter_for(server, managed_queues=["a"])
        raw = adapter.client.get("/nodes")["nodes"]["node"][0]
        assert "totalResource" not in raw and raw["availableGPUAttribute"] == 0b1000

        def seen() -> tuple:
            state = adapter.snapshot()
            jobs = {j.id: j for j in state.jobs}
            return (jobs[a1].gpus_held, jobs[a2].state, jobs[a2].gpus,
                    state.nodes[0].unavailable)

        assert seen() == (("gpu01:0",), JobState.PENDING, 4, (1, 2))
        cluster.finish(b1)
        cluster.tick()
        assert seen() == (("gpu01:2",), JobState.PENDING, 4, ())
        cluster.submit("bob", "b", 1)
        cluster.tick()
        assert seen() == (("gpu01:0",), JobState.PENDING, 4, (2,))
    finally:
        server.close()


def test_edges_of_the_hadoop_ai_node_shape() -> None:
    """By hand: n0 has 0 + 0 GPUs (no GPUs: not a GPU node); n2 counts 2 + 2 with no bitmask
    (4 GPUs; which 2 are busy is not said: the lowest, as for upstream's counts); n1 comes
    twice, out of order (the second is reported and skipped); n1's 15 = 0b1111 on 4 free
    GPUs: all free."""
    def node(name: str, used: int, free: int, mask: int | None = None) -> dict:
        out = {"id": f"{name}:8041", "nodeHostName": name, "state": "RUNNING",
               "usedGPUs": used, "availableGPUs": free}
        return out if mask is None else {**out, "availableGPUAttribute": mask}

    body = json.dumps({"nodes": {"node": [
        node("n2", 2, 2), node("n0", 0, 0, 0), node("n1", 0, 4, 15), node("n1", 1, 3, 14),
    ]}}).encode()
    with serve_capture({"/nodes": body, "/apps": NO_APPS}) as url:
        adapter = adapter_for(_Url(url), retries=1)
        state = adapter.snapshot()
    assert [(n.name, n.gpus, n.unavailable) for n in state.nodes] == [
        ("n2", 4, (0, 1)), ("n1", 4, ())]
    assert [p.split(": ")[1:] for p in adapter.last_view.problems] == [
        ["node n1:8041", "skipped", "duplicate node"]]


def test_gpus_of_the_pluggable_device_framework() -> None:
    """Hadoop 3.3+'s NVIDIA device plugin publishes GPUs as ``nvidia.com/gpu`` (hand-written
    replies in the 3.x shape). By hand: n1 has 4, the running app holds 1 there (index 0)
    and asks 2 × 1 more: a 3-GPU job; the other app's 1 GPU is unavailable (index 1)."""
    from gpufair.adapters.yarn.translate import translate

    def res(gpus: int) -> dict:
        return {"memory": 1, "vCores": 1, "resourceInformations": {"resourceInformation": [
            {"name": "memory-mb", "value": 1}, {"name": "nvidia.com/gpu", "value": gpus}]}}

    nodes = {"nodes": {"node": [{"id": "n1:8041", "nodeHostName": "n1", "state": "RUNNING",
                                 "totalResource": res(4), "usedResource": res(2)}]}}
    ask = {"resourceName": "*", "numContainers": 2, "capability": res(1)}
    apps = {"apps": {"app": [
        {"id": "application_1_0001", "queue": "a", "state": "RUNNING",
         "resourceRequests": [ask]},
        {"id": "application_1_0002", "queue": "other", "state": "RUNNING"}]}}
    held = [{"assignedNodeId": "n1:8041", "allocatedResources": [
        {"key": "memory-mb", "value": "1"}, {"key": "nvidia.com/gpu", "value": "1"}]}]
    view = translate(nodes, apps, {"application_1_0001": held, "application_1_0002": held},
                     now=0.0, managed_queues=("a",))
    assert [(n.name, n.gpus, n.unavailable) for n in view.state.nodes] == [("n1", 4, (1,))]
    assert [(j.gpus, j.gpus_held) for j in view.state.jobs] == [(3, ("n1:0",))]

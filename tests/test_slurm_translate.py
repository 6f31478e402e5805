"""Slurm JSON → model, on real 22.05 outputs and on broken variants of them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpufair.adapters.slurm.gres import parse_gpu_entries
from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.translate import fix_nice, translate
from gpufair.model import JobState, NodeState

DATA = Path(__file__).parent / "data" / "slurm"
NOW = 1795305510.0


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.fixture()
def docs() -> tuple[dict, dict]:
    return _load("squeue.json"), _load("sinfo.json")


def test_sample_jobs_and_nodes(docs):
    view = translate(*docs, now=NOW)
    jobs = {j.id: j for j in view.state.jobs}
    assert [j.id for j in view.state.jobs] == ["1", "2", "3", "4", "5"]
    assert jobs["1"].state is JobState.RUNNING
    assert jobs["1"].gpus_held == ("gpu-k80-1:0", "gpu-k80-1:1")
    assert jobs["2"].gpus == 8 and jobs["2"].gpus_held[-1] == "gpu-v100-2:3"
    assert jobs["3"].state is JobState.SUSPENDED and len(jobs["3"].gpus_held) == 3
    assert jobs["4"].gpus == 4 and jobs["4"].gpus_held == ()
    assert jobs["1"].attained_s == pytest.approx(NOW - 1795305502)
    assert view.jobs["3"].gres_field == "TresPerJob"
    assert view.jobs["4"].nice == 10 and view.jobs["2"].nice == 0   # null nice is 0
    assert view.jobs["5"].held and view.jobs["5"].reason == "JobHeldUser"
    assert {n.name: (n.gpu_type, n.gpus) for n in view.state.nodes}["gpu-k80-2"] == ("k80", 4)
    assert view.problems == ()


def test_rest_documents_translate_like_the_cli():
    cli = translate(_load("squeue.json"), _load("sinfo.json"), now=NOW)
    for name in ("rest_v0.0.38_jobs.json", "rest_v0.0.37_jobs.json"):
        rest = translate(_load(name), _load("rest_v0.0.38_nodes.json"), now=NOW)
        assert {j.id: (j.state, j.gpus) for j in rest.state.jobs} == \
            {j.id: (j.state, j.gpus) for j in cli.state.jobs if j.id in
             {r.id for r in rest.state.jobs}}


def test_negative_nice_unsigned_wrap():
    assert fix_nice(4294967276) == -20
    assert fix_nice(None) == 0
    assert fix_nice(7) == 7


def test_unknown_state_is_reported_and_skipped(docs):
    jobs, nodes = copy.deepcopy(docs)
    jobs["jobs"][3]["job_state"] = "WIBBLING"
    view = translate(jobs, nodes, now=NOW)
    assert "4" not in {j.id for j in view.state.jobs}
    assert any("job 4" in p and "WIBBLING" in p for p in view.problems)


def test_unreadable_running_job_blocks_its_nodes(docs):
    jobs, nodes = copy.deepcopy(docs)
    jobs["jobs"][0]["gres_detail"] = ["gpu:k80:two(IDX:0-1)"]
    view = translate(jobs, nodes, now=NOW)
    assert any("job 1" in p and "gpu:k80:two" in p for p in view.problems)
    node = {n.name: n for n in view.state.nodes}["gpu-k80-1"]
    assert node.state is NodeState.DRAIN   # its GPUs must not look free to the policy


def test_missing_field_names_the_job(docs):
    jobs, nodes = copy.deepcopy(docs)
    del jobs["jobs"][1]["job_state"]
    view = translate(jobs, nodes, now=NOW)
    assert any("job 2" in p and "job_state" in p for p in view.problems)


def test_bad_node_gres_and_flags(docs):
    jobs, nodes = copy.deepcopy(docs)
    nodes["nodes"][0]["gres"] = "gpu:k80:lots"
    nodes["nodes"][1]["state_flags"] = ["DRAIN"]
    view = translate(jobs, nodes, now=NOW)
    names = {n.name: n for n in view.state.nodes}
    assert "gpu-k80-1" not in names
    assert names["gpu-k80-2"].state is NodeState.DRAIN
    assert any("node gpu-k80-1" in p for p in view.problems)


def test_managed_partitions_filter(docs):
    view = translate(*docs, now=NOW, managed_partitions=("urgent",))
    assert view.state.jobs == ()
    assert len(view.state.nodes) == 4


def test_completing_job_keeps_nodes_busy(docs):
    jobs, nodes = copy.deepcopy(docs)
    jobs["jobs"][1]["job_state"] = "COMPLETING"
    view = translate(jobs, nodes, now=NOW)
    assert view.settling == ("2",)
    assert all(n.state is NodeState.DRAIN for n in view.state.nodes if "v100" in n.name)


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu:v100:4(IDX:0-3)", [("v100", 4, (0, 1, 2, 3))]),
    ("gpu:k80:0(IDX:N/A)", [("k80", 0, ())]),
    ("gres:gpu:2", [(None, 2, None)]),
    ("gres/gpu:v100:1", [("v100", 1, None)]),
    ("gpu:v100:4(S:0-1),gpu:k80:2(IDX:0,2),mps:100", [("v100", 4, None), ("k80", 2, (0, 2))]),
    ("(null)", []),
])
def test_gres_strings(text, expected):
    got = [(e.gpu_type, e.count, e.indices) for e in parse_gpu_entries(text)]
    assert got == expected


@pytest.mark.parametrize("text", ["gpu:v100:x", "gpu:k80:2(IDX:0-a)"])
def test_bad_gres_strings_raise_naming_them(text):
    with pytest.raises(ValueError, match="gpu:"):
        parse_gpu_entries(text)


def test_hostlists():
    assert expand_hostlist("gpu-v100-[1-2],gpu-k80-1") == ["gpu-v100-1", "gpu-v100-2",
                                                           "gpu-k80-1"]
    assert expand_hostlist("n[01-02,7]x") == ["n01x", "n02x", "n7x"]
    assert expand_hostlist("") == []
    with pytest.raises(ValueError, match="n\\[3-1\\]"):
        expand_hostlist("n[3-1]")

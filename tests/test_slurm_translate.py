"""Slurm JSON → model, on real 22.05 outputs and on broken variants of them."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufair.adapters.slurm.gres import parse_gpu_entries
from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.translate import (
    SlurmView,
    dependency_never_met,
    fix_nice,
    gpu_use_disagrees,
    slurm_output_path,
    translate,
)
from gpufair.adapters.slurm.transport import CliTransport
from gpufair.core.guards import job_constraints
from gpufair.model import JobState, Migrate, NodeState
from gpufair.model.snapshot import state_to_dict, validate_snapshot

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


# ---- bytes that are not UTF-8 ---------------------------------------------------------------

def _fake_slurm(tmp_path: Path, name: str, body: bytes, *, exit_code: int = 0,
                stderr: bytes = b"") -> dict[str, str]:
    """A ``name`` on PATH that prints ``body`` (and ``stderr``) byte for byte."""
    (tmp_path / f"{name}.out").write_bytes(body)
    (tmp_path / f"{name}.err").write_bytes(stderr)
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\ncat '{tmp_path}/{name}.out'\ncat '{tmp_path}/{name}.err' >&2\n"
                      f"exit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return dict(os.environ, PATH=f"{tmp_path}:{os.environ.get('PATH', '')}")


def test_cli_transport_reads_fields_that_are_not_utf8(tmp_path):
    """squeue prints a job's comment, name, account and paths byte for byte (22.05 wrote
    ``"comment": "\\xff"`` raw); one such job used to raise UnicodeDecodeError every round."""
    squeue = _load("squeue.json")
    squeue["jobs"][0]["comment"] = "@COMMENT@"
    squeue["jobs"][1]["name"] = "@NAME@"
    raw = json.dumps(squeue).encode()
    raw = raw.replace(b"@COMMENT@", b"\xff\xfe\x01").replace(b"@NAME@", b"bad\xc3\x28name")
    env = _fake_slurm(tmp_path, "squeue", raw)
    doc = CliTransport(env=env).read_jobs()
    assert doc["jobs"][0]["comment"] == "\ufffd\ufffd\x01"
    assert doc["jobs"][1]["name"] == "bad\ufffd(name"
    view = translate(doc, _load("sinfo.json"), now=NOW)
    assert [j.id for j in view.state.jobs] == ["1", "2", "3", "4", "5"]
    assert view.problems == ()


def test_cli_transport_control_output_that_is_not_utf8(tmp_path):
    env = _fake_slurm(tmp_path, "scontrol", b"", exit_code=1,
                      stderr=b"scontrol: error: job \xff\xfe: Invalid job id\n")
    result = CliTransport(env=env).control("hold", "7")
    assert not result.ok and not result.unavailable
    assert "job \ufffd\ufffd: Invalid" in result.detail


def test_raw_control_characters_in_a_string_do_not_lose_the_document(tmp_path):
    squeue = _load("squeue.json")
    squeue["jobs"][0]["comment"] = "@C@"
    raw = json.dumps(squeue).encode().replace(b"@C@", b"tab\there\x1b[31m")
    doc = CliTransport(env=_fake_slurm(tmp_path, "squeue", raw)).read_jobs()
    assert doc["jobs"][0]["comment"] == "tab\there\x1b[31m"


# ---- one malformed record never stops a round -----------------------------------------------

SQUEUE = _load("squeue.json")
SINFO = _load("sinfo.json")
BASE = translate(SQUEUE, SINFO, now=NOW)
_LIVE = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING"}

#: values close enough to Slurm's to get past the first checks and reach the later ones
_PLAUSIBLE = [
    "", "(null)", "RUNNING", "PENDING", "COMPLETING", "SUSPENDED", "WIBBLING", ["RUNNING"], [],
    "gpu", "gpu,urgent", "gpu-k80-1", "gpu-v100-[1-2]", "gpu-k80-[1-2],gpu-v100-1", "n[3-1]",
    "gpu-k80-[0-99999999]", "gpu-k80-[1-2", "gres:gpu:2", "gres:gpu:k80:3", "gres:gpu:4000000",
    "gpu:k80:lots", "gpu:k80:2(IDX:0-1)", "gpu:k80:2(IDX:2-3)", "gpu:v100:4(IDX:0-3)",
    "gpu:k80:9(IDX:0-8)", "gpu:k80:2(IDX:0-99999999999)", "gpu:k80:2", "gpu:k80:0(IDX:N/A)",
    ["gpu:k80:2(IDX:0-1)"], ["gpu:k80:2(IDX:0-1)", "gpu:k80:2(IDX:0-1)"], ["gpu:v100:4(S:0)"],
    ["gpu:k80:2(IDX:2-3)"], "%N-%j.out", "/dev/null", "rel/%x-%4j.out", "/abs/%u/%A_%a.out",
    "%b", "\\", "JobHeldUser", "gpufair:managed", "idle", "down", "mixed", ["DRAIN"], ["gpu"],
    {"set": True, "infinite": False, "number": 5}, {"set": False}, {"infinite": True},
    {"set": True, "number": "x"}, 4294967276, 4294967294, 4294967295, 4294967296, 2, 3, 6,
    -1, 0, 1.5, 1795305502, True,
]
_ODD_TEXT = st.one_of(
    st.text(max_size=12),
    st.binary(max_size=12).map(lambda b: b.decode("utf-8", "replace")),   # as the transport
    st.sampled_from(["\ud800", "x\udcff", "\x00", "\x1b[2J", "a\nb", "\ufffd", "ẞ" * 300]),
)
_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(),
    st.integers(min_value=1 << 53, max_value=1 << 80), st.integers(max_value=-(1 << 53)),
    st.sampled_from([5000, -400]).map(lambda n: 10 ** n if n > 0 else -(10 ** -n)),
    st.floats(allow_nan=True, allow_infinity=True), _ODD_TEXT, st.sampled_from(_PLAUSIBLE),
)
_JUNK = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)
_JOB_KEYS = ["job_id", "job_state", "partition", "nodes", "tres_per_node", "tres_per_job",
             "gres_detail", "submit_time", "start_time", "suspend_time", "array_job_id",
             "array_task_id", "account", "user_name", "user_id", "state_reason", "restart_cnt",
             "admin_comment", "priority", "nice", "node_count", "required_nodes",
             "standard_output", "current_working_directory", "name", "batch_host"]
_NODE_KEYS = ["name", "partitions", "gres", "state", "state_flags", "hostname"]


def _mutate(data: st.DataObject, records: list[Any], i: int, keys: list[str]) -> None:
    """One change to ``records[i]``: drop a key, change a value or its type, wrap it in
    junk nesting, or replace the whole record."""
    record = records[i]
    if not isinstance(record, dict):
        records[i] = data.draw(_JUNK, label="record")
        return
    op = data.draw(st.sampled_from(["drop", "set", "set", "retype", "nest", "record"]),
                   label="op")
    # mostly the fields translate() reads; sometimes any other (it must not care)
    key = data.draw(st.sampled_from(keys * 8 + sorted(set(record) - set(keys))), label="key")
    if op == "drop":
        record.pop(key, None)
    elif op == "set":
        record[key] = data.draw(st.one_of(_JUNK, st.sampled_from(_PLAUSIBLE)), label="value")
    elif op == "retype":
        value = record.get(key)
        try:
            text = str(value)
        except ValueError:   # an int too long to print (sys.get_int_max_str_digits)
            text = "9" * 5000
        record[key] = data.draw(st.sampled_from(
            [text, [value], {"number": value}, text.encode().decode("latin-1"),
             value if not isinstance(value, (int, float)) else -value]), label="retyped")
    elif op == "nest":
        record[key] = {"set": True, "number": record.get(key), "junk": data.draw(_JUNK)}
    else:
        records[i] = data.draw(_JUNK, label="record")


def _problem_names(view: SlurmView, job_id: str) -> list[str]:
    return [p for p in view.problems if re.search(rf"\bjob {re.escape(job_id)}\b", p)]


def _assert_well_formed(view: SlurmView) -> None:
    state = view.state
    data = state_to_dict(state, source={"adapter": "test"})
    # the project's own snapshot rules: schema, unique names, GPUs held on known nodes, ...
    # Allowed: a job kept on nodes outside the managed set (reported), and start_s before
    # arrival_s: both are Slurm's own times, passed through (the actions compare start_s
    # with Slurm's start_time to tell incarnations apart, so it must not be adjusted).
    outside = any("outside the managed set" in p for p in view.problems)
    bad = [m for m in validate_snapshot(data, "translate")
           if not (outside and "no node named" in m) and "must be >= arrival_s" not in m]
    assert bad == []
    # and it goes on into SQLite and JSON logs: finite numbers, text that encodes as UTF-8
    json.dumps(data, allow_nan=False, ensure_ascii=False).encode("utf-8")
    assert set(view.jobs) == {j.id for j in state.jobs}
    for job in state.jobs:
        info = view.jobs[job.id]
        assert job.id.isdigit() and 0 < int(job.id) < 1 << 32 and info.job_id == job.id
        assert isinstance(job.gpus, int) and 1 <= job.gpus <= 1 << 20
        assert all(math.isfinite(x) and x >= 0 for x in (job.arrival_s, job.attained_s))
        assert job.start_s is None or (math.isfinite(job.start_s) and job.start_s >= 0)
        assert isinstance(job.restarts, int) and job.restarts >= 0
        assert job.log_path is None or (job.log_path.startswith("/") and
                                        not set(job.log_path) & {"\x00", "\ufffd"})
        assert all(isinstance(n, str) for n in info.nodes + info.pinned)
        assert isinstance(info.nice, int) and isinstance(info.node_count, int)
        assert info.priority is None or math.isfinite(info.priority)
    for node in state.nodes:
        assert isinstance(node.gpus, int) and 0 <= node.gpus <= 1 << 12
    for problem in view.problems:
        assert problem.startswith(("slurm: job ", "slurm: node ", "slurm: the ")), problem
        assert len(problem) < 700 and "\n" not in problem


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_translate_never_raises_and_keeps_untouched_jobs(data):
    """Mutations of the real recorded documents: translate() returns, the state it returns
    passes the snapshot validator, the broken record is skipped and named, and every other
    job comes through exactly as from the pristine documents (unless it is named in a problem
    as sharing its id, or a GPU, with the broken record: then nobody can tell which is right).
    """
    jobs, nodes = copy.deepcopy(SQUEUE), copy.deepcopy(SINFO)
    kind = data.draw(st.sampled_from(["jobs", "nodes"]), label="document")
    records = jobs["jobs"] if kind == "jobs" else nodes["nodes"]
    i = data.draw(st.integers(0, len(records) - 1), label="record")
    original = copy.deepcopy(records[i])
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        _mutate(data, records, i, _JOB_KEYS if kind == "jobs" else _NODE_KEYS)
    if data.draw(st.booleans(), label="duplicate"):
        records.append(copy.deepcopy(records[i]))

    view = translate(jobs, nodes, now=NOW)

    _assert_well_formed(view)
    after = {j.id: j for j in view.state.jobs}
    if kind == "jobs":
        touched = {str(original["job_id"])}
        affected: set[str] = set()
    else:
        touched = set()
        affected = {original["name"]}
        if isinstance(records[i], dict) and isinstance(records[i].get("name"), str):
            affected.add(records[i]["name"])
    for job in BASE.state.jobs:
        if job.id in touched:
            continue
        info = BASE.jobs[job.id]
        if job.id in after:
            # the nodes a pending job may use follow the nodes document: a node that was
            # mutated away is no longer allowed; everything else of the job is untouched
            got = after[job.id]
            if got.allowed_nodes is not None:
                assert set(got.allowed_nodes) <= {n.name for n in view.state.nodes} | affected
            if kind == "nodes" and job.allowed_nodes is not None:
                got = dataclasses.replace(got, allowed_nodes=job.allowed_nodes)
            assert got == job and view.jobs[job.id] == info
            continue
        named = _problem_names(view, job.id)
        assert named, f"job {job.id} vanished silently: {view.problems}"
        if kind == "jobs":
            assert all("listed" in p or "also held by job" in p for p in named), named
        else:
            assert affected & set(info.nodes), named


def test_whole_documents_of_the_wrong_shape():
    view = translate({"jobs": {"1": {}}}, SINFO, now=NOW)
    assert view.state.jobs == ()
    assert all(n.state is not NodeState.UP for n in view.state.nodes)   # nothing looks free
    assert any("no 'jobs' list" in p for p in view.problems)
    view = translate(SQUEUE, {"nodes": "gpu-k80-1"}, now=NOW)
    assert view.state.nodes == () and any("no 'nodes' list" in p for p in view.problems)
    view = translate([], None, now=NOW)   # type: ignore[arg-type]
    assert view.state.jobs == () and len(view.problems) == 2


@pytest.mark.parametrize(("key", "value", "message"), [
    pytest.param("submit_time", 10 ** 400, "'submit_time' out of range", id="huge-submit"),
    ("submit_time", float("nan"), "'submit_time' out of range"),
    ("restart_cnt", "3", "'restart_cnt' is text, not a number"),
    ("account", {"name": "a"}, "'account' is an object, not text"),
    ("nodes", "gpu-k80-[1-99999999]", "more than 65536 names; its nodes cannot be told"),
    ("gres_detail", ["gpu:k80:2(IDX:0-99999999999)"], "too large"),
    ("gres_detail", ["gpu:k80:2(IDX:3-4)"], "holds GPU gpu-k80-1:4 but node gpu-k80-1 has 4"),
    ("job_state", ["RUNNING", {"x": 1}], None),
    ("nice", 1.5, "'nice' is not a whole number"),
])
def test_malformed_job_field_is_named_and_its_nodes_held_back(key, value, message):
    jobs = copy.deepcopy(SQUEUE)
    jobs["jobs"][0][key] = value   # job 1, running on gpu-k80-1
    view = translate(jobs, SINFO, now=NOW)
    ids = [j.id for j in view.state.jobs]
    if message is None:   # a list of flags: the first is the state
        assert "1" in ids
        return
    assert ids == ["2", "3", "4", "5"]
    [problem] = view.problems
    assert problem.startswith("slurm: job 1: skipped:") and message in problem, problem
    node = {n.name: n for n in view.state.nodes}["gpu-k80-1"]
    assert node.state is NodeState.DRAIN


def test_one_gpu_held_by_two_jobs_skips_both():
    jobs = copy.deepcopy(SQUEUE)
    jobs["jobs"][0].update(nodes="gpu-v100-1", gres_detail=["gpu:v100:2(IDX:1-2)"])
    view = translate(jobs, SINFO, now=NOW)   # job 2 holds gpu-v100-1:0-3
    assert [j.id for j in view.state.jobs] == ["3", "4", "5"]
    assert any("GPU gpu-v100-1:1 also held by job 2" in p for p in _problem_names(view, "1"))
    assert any("also held by job 1" in p for p in _problem_names(view, "2"))
    drained = {n.name for n in view.state.nodes if n.state is NodeState.DRAIN}
    assert {"gpu-v100-1", "gpu-v100-2"} <= drained


def test_same_job_id_twice_skips_both():
    jobs = copy.deepcopy(SQUEUE)
    jobs["jobs"].append(copy.deepcopy(jobs["jobs"][1]))
    view = translate(jobs, SINFO, now=NOW)
    assert "2" not in {j.id for j in view.state.jobs}
    assert sum("job 2: skipped: job id listed 2 times" in p for p in view.problems) == 2


def test_text_fields_stay_text_and_encode_as_utf8():
    jobs = copy.deepcopy(SQUEUE)
    jobs["jobs"][0]["account"] = "acc\ufffd\x1b[31m\udcff"
    view = translate(jobs, SINFO, now=NOW)
    tenant = {j.id: j for j in view.state.jobs}["1"].tenant
    assert tenant == "acc\ufffd\x1b[31m\ufffd"
    tenant.encode("utf-8")


# ---- where a job's output goes ----------------------------------------------------------------

PATHS = _load("output_paths_22.05.json")
#: cases where the answer is "cannot tell" on purpose: a conversion 22.05 does not know or a
#: width with no conversion (written as-is or mangled by 22.05, changed in later versions)
UNTOLD = {"unknown %5b", "unknown %b", "trailing %3"}


def _utf8(path: str | None) -> str | None:
    """The path as squeue's text can name it: None if the file name is not UTF-8."""
    if path is None:
        return None
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return path


@pytest.mark.parametrize("rec", PATHS["jobs"], ids=lambda r: f"{r['job_id']}-{r['case']}")
def test_output_path_is_the_file_slurm_22_05_wrote(rec):
    """The expectation is independent: jobs run on the loopback Slurm 22.05 with each
    pattern, and ``written`` is the file each job's marker line was found in."""
    got = slurm_output_path(
        rec["standard_output"] or ("slurm-%j.out" if rec["array_task_id"] is None
                                   else "slurm-%A_%a.out"),
        cwd=rec["current_working_directory"], job_id=rec["job_id"],
        array_job_id=rec["array_job_id"], array_task_id=rec["array_task_id"],
        user=rec["user_name"], job_name=rec["name"], host=PATHS["short_hostname"])
    expected = None if rec["case"] in UNTOLD else _utf8(rec["written"])
    assert got == expected


@pytest.mark.parametrize("rec", PATHS["jobs"], ids=lambda r: f"{r['job_id']}-{r['case']}")
def test_translate_sets_log_path_to_the_written_file(rec):
    """Through translate(): the recorded fields on a GPU job of the sample. On the loopback
    cluster NodeHostname (localhost) is not the node name, so %N cannot be told."""
    jobs = copy.deepcopy(SQUEUE)
    job = jobs["jobs"][0]
    job.update({k: rec[k] for k in ("job_id", "array_job_id", "array_task_id", "name",
                                    "user_name", "standard_output",
                                    "current_working_directory", "batch_host")})
    jobs["jobs"] = [job]
    view = translate(jobs, SINFO, now=NOW)
    [translated] = view.state.jobs
    untold = rec["case"] in UNTOLD or "%N" in rec["standard_output"] or "%5N" in \
        rec["standard_output"]
    assert translated.log_path == (None if untold else _utf8(rec["written"]))


def test_percent_n_is_the_node_name_when_slurm_host_names_are_node_names():
    jobs, nodes = copy.deepcopy(SQUEUE), copy.deepcopy(SINFO)
    for node in nodes["nodes"]:
        node["hostname"] = f"{node['name']}.cluster.example"
    jobs["jobs"][0].update(standard_output="/logs/%N/%j.out", batch_host="gpu-k80-1")
    jobs["jobs"][3].update(standard_output="/logs/%N/%j.out", batch_host="")   # pending
    view = translate(jobs, nodes, now=NOW)
    paths = {j.id: j.log_path for j in view.state.jobs}
    assert paths["1"] == "/logs/gpu-k80-1/1.out"
    assert paths["4"] is None


@pytest.mark.parametrize(("pattern", "fields", "expected"), [
    ("/o/%j.out", {"job_id": 7}, "/o/7.out"),
    ("o-%j.out", {"job_id": 7, "cwd": "/w/"}, "/w/o-7.out"),            # no double slash
    ("o-%j.out", {"job_id": 7, "cwd": ""}, None),                        # nowhere to anchor
    ("/o/%999999999999999999999j", {"job_id": 7}, "/o/0000000007"),      # width capped at 10
    ("/o/%x", {"job_id": 7, "job_name": None}, None),
    ("/o/%u", {"job_id": 7, "user": None}, None),
    ("/o/%N", {"job_id": 7, "host": None}, None),
    ("/dev/null", {"job_id": 7}, None),
    ("/o/%x", {"job_id": 7, "job_name": "a\x00b"}, None),
    ("/o/%x", {"job_id": 7, "job_name": "a\ud800"}, None),
    ("/o/%A_%a", {"job_id": 9, "array_job_id": 7, "array_task_id": 2}, "/o/7_2"),
])
def test_output_path_rules(pattern, fields, expected):
    fields = {"cwd": "/w", **fields}
    assert slurm_output_path(pattern, **fields) == expected


def test_array_record_standing_for_several_tasks_has_no_log_path():
    jobs = copy.deepcopy(SQUEUE)
    jobs["jobs"][3].update(array_job_id=4, array_task_id=None, array_task_string="0-3")
    view = translate(jobs, SINFO, now=NOW)
    # (the record is the job of its lowest task, 4_0, to gpufair: tests/test_slurm_array_tasks.py)
    assert {j.id: j.log_path for j in view.state.jobs}["4_0"] is None


@pytest.mark.parametrize(("text", "met"), [
    ("afterok:22(unfulfilled)", True), ("afterok:23", False), ("afternotok:23", True),
    ("after:24", True), ("afterany:24", False), ("afterok:22,afterany:24", False),
    ("afterok:23?afterok:22", True), ("singleton", False), ("afterok:99", False),
    ("afterok:22:23", False), ("afterany:22:23", True), ("aftercorr:22", False),
])
def test_dependencies_are_read_from_the_parents_states(text, met):
    from gpufair.adapters.slurm.translate import dependency_met
    states = {"22": "COMPLETED", "23": "FAILED", "24": "RUNNING"}
    assert dependency_met(text, states) is met


def test_placement_constraints_come_from_what_the_job_asked():
    jobs = copy.deepcopy(SQUEUE)
    pending = next(j for j in jobs["jobs"] if j["job_state"] == "PENDING")
    pending.update(features="k80", excluded_nodes="gpu-k80-1", tres_per_node="gres:gpu:k80:1",
                   node_count=1, admin_comment="gpufair:managed")
    view = translate(jobs, SINFO, now=NOW)
    job = next(j for j in view.state.jobs if j.id == str(pending["job_id"]))
    assert job.allowed_nodes == ("gpu-k80-2",) and job.nodes == 1 and job.gpu_types == ("k80",)
    pending.update(features="k80|v100")
    view = translate(jobs, SINFO, now=NOW)
    assert str(pending["job_id"]) not in {j.id for j in view.state.jobs}
    assert any("more than a list of features" in p for p in view.problems)
    pending.update(features="", excluded_nodes="",
                   admin_comment="gpufair:managed nodelist=gpu-v100-[1-2]")
    job = next(j for j in translate(jobs, SINFO, now=NOW).state.jobs
               if j.id == str(pending["job_id"]))
    assert job.allowed_nodes == ("gpu-v100-1", "gpu-v100-2")


def test_a_running_job_keeps_what_it_asked_so_no_move_breaks_it():
    """A typed job gpufair started had no constraints once RUNNING, so LAS moved a v100 job
    onto k80 GPUs: Slurm refused it (BadConstraints) and held it itself (JobHeldAdmin), and
    it never ran again (issue 29's soak, seed 2). Now its type and nodes stay known, and the
    guard keeps such a move from being sent."""
    jobs = copy.deepcopy(SQUEUE)
    running = next(j for j in jobs["jobs"] if j["job_id"] == 1)
    running.update(tres_per_node="gres:gpu:k80:2", excluded_nodes="gpu-k80-2",
                   admin_comment="gpufair:managed")
    view = translate(jobs, SINFO, now=NOW)
    job = next(j for j in view.state.jobs if j.id == "1")
    assert job.state is JobState.RUNNING and job.gpu_types == ("k80",)
    assert job.allowed_nodes is not None and "gpu-k80-2" not in job.allowed_nodes
    moves = [Migrate("1", ("gpu-v100-1:0", "gpu-v100-1:1")),
             Migrate("1", ("gpu-k80-2:0", "gpu-k80-2:1"))]
    for move in moves:
        kept, held = job_constraints(view.state, [move])
        assert kept == [] and [d.action for d in held] == [move]
    running.update(features="k80|v100")    # unmodelled: not to be moved at all, still seen
    job = next(j for j in translate(jobs, SINFO, now=NOW).state.jobs if j.id == "1")
    assert job.allowed_nodes == ("gpu-k80-1",)


def test_a_job_that_fixed_its_node_count_keeps_it_so_no_move_breaks_it():
    """Issue 29 soak: a running ``-N 1`` two-GPU job was moved onto one GPU on each of two
    nodes. Slurm refused the update ("Node count specification invalid") after applying
    half of it (the node list stayed, NumCPUs doubled: measured on loopback 22.05), so the
    job was BadConstraints however it was pinned again, and never ran again. A job whose
    record fixes its count (``max_nodes`` = ``node_count``) keeps it, running or waiting;
    one without ``-N`` (``max_nodes`` 0: Slurm spreads it, tasks and all) stays free."""
    jobs = copy.deepcopy(SQUEUE)
    running = next(j for j in jobs["jobs"] if j["job_id"] == 1)
    running.update(tres_per_node="gres:gpu:2", max_nodes=1, node_count=1,
                   admin_comment="gpufair:managed")
    view = translate(jobs, SINFO, now=NOW)
    job = next(j for j in view.state.jobs if j.id == "1")
    assert job.state is JobState.RUNNING and job.nodes == 1
    split = Migrate("1", ("gpu-v100-1:0", "gpu-v100-2:3"))
    whole = Migrate("1", ("gpu-v100-1:0", "gpu-v100-1:1"))
    assert job_constraints(view.state, [split])[0] == []
    assert job_constraints(view.state, [whole])[0] == [whole]
    # running, 22.05 reads max_nodes 0 whether or not it had -N 1 (measured): it keeps its
    # node count all the same (soak seed 1 again: the pending-only check let the move through)
    running.update(max_nodes=0)
    view = translate(jobs, SINFO, now=NOW)
    assert next(j for j in view.state.jobs if j.id == "1").nodes == 1
    assert job_constraints(view.state, [split])[0] == []
    running.update(tres_per_node="", tres_per_job="gres:gpu:2")   # --gpus=2: may spread
    job = next(j for j in translate(jobs, SINFO, now=NOW).state.jobs if j.id == "1")
    assert job.nodes is None
    waiting = next(j for j in jobs["jobs"] if j["job_state"] == "PENDING")
    waiting.update(tres_per_node="", tres_per_job="gres:gpu:4", node_count=2, max_nodes=2,
                   admin_comment="gpufair:managed", features="", excluded_nodes="")
    job = next(j for j in translate(jobs, SINFO, now=NOW).state.jobs
               if j.id == str(waiting["job_id"]))
    assert job.nodes == 2                          # --gpus=4 -N 2: two nodes, not one


def test_jobs_of_one_partition_with_different_constraints_keep_their_own_nodes():
    """The allowed nodes are computed once per combination of partitions, features, excluded
    nodes and node list (issue 30), so jobs differing in any one of them, read one after
    the other in either order, must each keep their own set; equal ones share one tuple."""
    base = copy.deepcopy(next(j for j in SQUEUE["jobs"] if j["job_state"] == "PENDING"))
    base.update(tres_per_node="gres:gpu:1", node_count=1, admin_comment="gpufair:managed",
                features="", excluded_nodes="", partition="gpu")
    variants = {"plain": {}, "excluded": {"excluded_nodes": "gpu-k80-1"},
                "feature": {"features": "v100"},
                "own list": {"admin_comment": "gpufair:managed nodelist=gpu-k80-[1-2]"},
                "plain again": {}}
    every = sorted(n["name"] for n in SINFO["nodes"] if "gpu" in n["partitions"]
                   and n["gres"])
    expected = {"plain": every, "excluded": [n for n in every if n != "gpu-k80-1"],
                "feature": [n for n in every if "v100" in n],
                "own list": ["gpu-k80-1", "gpu-k80-2"], "plain again": every}
    for order in (list(variants), list(reversed(variants))):
        records = []
        for k, name in enumerate(order):
            record = {**copy.deepcopy(base), **variants[name], "job_id": 900 + k,
                      "submit_time": base["submit_time"] + k}
            records.append(record)
        view = translate({**SQUEUE, "jobs": records}, SINFO, now=NOW)
        by_id = {j.id: j for j in view.state.jobs}
        allowed = {name: by_id[str(900 + k)].allowed_nodes for k, name in enumerate(order)}
        assert {name: list(a) for name, a in allowed.items()} == expected, view.problems
        assert allowed["plain"] is allowed["plain again"]


def test_squeue_and_sinfo_read_at_different_moments_disagree_on_the_gpus_in_use():
    """A job that started after squeue (pending there, its GPUs in use to sinfo), or ended
    after it (running there, its GPUs free to sinfo): the nodes where the two reads differ.
    A completing job's node is left out (held back anyway); unreadable records agree."""
    assert gpu_use_disagrees(SQUEUE, SINFO) == []
    started = copy.deepcopy(SQUEUE)
    started["jobs"][0].update(job_state="PENDING", nodes="", gres_detail=[])
    assert gpu_use_disagrees(started, SINFO) == ["gpu-k80-1"]
    ended = copy.deepcopy(SINFO)
    ended["nodes"][2]["gres_used"] = "gpu:v100:0(IDX:N/A)"
    assert gpu_use_disagrees(SQUEUE, ended) == ["gpu-v100-1"]
    completing = copy.deepcopy(started)
    completing["jobs"][0].update(job_state="COMPLETING", nodes="gpu-k80-1")
    assert gpu_use_disagrees(completing, SINFO) == []
    broken = copy.deepcopy(SQUEUE)
    broken["jobs"][1]["gres_detail"] = "x"
    broken["nodes"] = None
    assert gpu_use_disagrees(broken, {"nodes": [7, {"name": "n"}]}) == []


@pytest.mark.parametrize("text, never", [
    ("afterok:12(unfulfilled)", "afterok:12"),             # 12 failed
    ("afterok:14", None),                                   # 14 still runs
    ("afterok:13", None),                                   # 13 completed: met
    ("afternotok:13", "afternotok:13"),                     # 13 completed: never fails now
    ("afterany:12", None), ("after:12", None), ("singleton", None),
    ("afterok:14,afterok:12", "afterok:12"),                # all of: one part decides
    ("afterok:12?afternotok:13", "afterok:12?afternotok:13"),   # any of: every part
    ("afterok:12?afterok:14", None),
    ("afterok:99", None),                                   # a parent not seen: not judged
    ("afterok:14:12", "afterok:14:12"), ("afterok:12_3", "afterok:12_3"),
])
def test_a_dependency_that_can_never_be_met(text, never):
    states = {"12": "FAILED", "13": "COMPLETED", "14": "RUNNING"}
    assert dependency_never_met(text, states) == never


def test_node_features_that_are_not_text_neither_raise_nor_match():
    """Hypothesis found a node's ``active_features`` of 10**5000 raising ValueError (str()
    of a huge int) out of the translation. Not text: no features (a ``--constraint`` job is
    not placed there); a list of names (newer documents): those names; and an action's
    lookup of records tolerates a job id too long to print."""
    from gpufair.adapters.slurm.adapter import JobIndex

    jobs, nodes = copy.deepcopy(SQUEUE), copy.deepcopy(SINFO)
    gpu_nodes = [n for n in nodes["nodes"] if n.get("gres")]
    gpu_nodes[0]["active_features"] = 10 ** 5000
    gpu_nodes[1]["active_features"] = ["v100", 7]
    view = translate(jobs, nodes, now=NOW)
    _assert_well_formed(view)
    jobs["jobs"][0]["job_id"] = 10 ** 5000
    index = JobIndex(jobs)
    assert index.find(str(jobs["jobs"][1]["job_id"])) is jobs["jobs"][1]


@pytest.mark.parametrize("job_id", [10 ** 5000, -(10 ** 5000), 2 ** 32],
                         ids=["huge", "-huge", "2**32"])
def test_a_job_id_too_large_to_print_is_named_not_raised(job_id):
    """Python refuses str() of an int over 4,300 digits (ValueError, not Malformed): a record
    carrying one is skipped and named like any other bad job id, and the rest come through
    (hypothesis found the dependency table and the hold scan printing it unchecked)."""
    jobs, nodes = copy.deepcopy(SQUEUE), copy.deepcopy(SINFO)
    original = str(jobs["jobs"][0]["job_id"])
    jobs["jobs"][0]["job_id"] = job_id
    view = translate(jobs, nodes, now=NOW)
    _assert_well_formed(view)
    assert any("field 'job_id' is not a job id" in p for p in view.problems)
    assert {j.id for j in view.state.jobs} == {j.id for j in BASE.state.jobs} - {original}

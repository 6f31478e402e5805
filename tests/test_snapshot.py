"""The JSON snapshot format: exact round trips, the shipped example, and admin-readable errors."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from gpufair.errors import InputError
from gpufair.model.records import (
    Adaptation,
    ClusterState,
    GpuType,
    Job,
    JobState,
    Node,
    NodeState,
    Progress,
    Tenant,
    ThroughputProfile,
)
from gpufair.model.snapshot import (
    SNAPSHOT_VERSION,
    check_snapshot,
    dump_snapshot,
    load_snapshot,
    snapshot_schema,
    state_from_dict,
    state_to_dict,
    validate_snapshot,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "gpufair" / "deploy" / "snapshot.example.json"


def example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


def full_state() -> ClusterState:
    """Every field of every record set to something other than its default."""
    return ClusterState(
        time_s=3600.5,
        gpu_types=(GpuType("v100", 16.0), GpuType("k80")),
        nodes=(Node("n1", "v100", 4, rack="r1", switch="s1", state=NodeState.DRAIN),
               Node("n2", "k80", 2)),
        tenants=(Tenant("a", 2.5), Tenant("b")),
        jobs=(
            Job(id="j1", tenant="a", app="train.py", gpus=2, min_gpus=1, max_gpus=4,
                state=JobState.SUSPENDED, arrival_s=1.5, start_s=2.0, finish_s=None,
                progress=Progress(10.5, 100.0, 1, 10),
                throughput=ThroughputProfile({("v100", 2): 3.25, ("k80", 1): 0.5}),
                model="résnet-50", batch_size=64, initial_batch_size=32,
                samples_per_epoch=50_000, max_batch_size=256,
                batch_rates=((32, 42.5), (256, 80.25)),
                adaptation=Adaptation.ACCORDION, weight=0.5, attained_s=12.25, restarts=3,
                gpus_held=("n1:3", "n1:0", "n2:1"), log_path="/logs/j1.out",
                time_limit_s=7200.0),
            Job(id="j2", tenant="b", state=JobState.COMPLETED, arrival_s=0.0, start_s=1.0,
                finish_s=99.0),
        ),
    )


# ------------------------------------------------------------------------------ round trips


def test_round_trip_every_field() -> None:
    state = full_state()
    data = state_to_dict(state)
    assert state_from_dict(data) == state
    assert state_from_dict(json.loads(json.dumps(data, allow_nan=False))) == state
    assert validate_snapshot(data, "s") == []


def test_round_trip_keeps_python_types() -> None:
    """Equality alone would accept 3.0 for an int count; policies index with these."""
    state = full_state()
    loaded = state_from_dict(json.loads(json.dumps(state_to_dict(state))))
    pairs = [(state, loaded), *zip(state.jobs, loaded.jobs, strict=True),
             (state.jobs[0].progress, loaded.jobs[0].progress),
             *zip(state.nodes, loaded.nodes, strict=True),
             *zip(state.tenants, loaded.tenants, strict=True),
             *zip(state.gpu_types, loaded.gpu_types, strict=True)]
    for original, copied in pairs:
        for f in dataclasses.fields(original):
            want, got = getattr(original, f.name), getattr(copied, f.name)
            assert type(got) is type(want), (type(original).__name__, f.name)
    rates = loaded.jobs[0].throughput.rates
    assert all(type(c) is int and type(r) is float for (_, c), r in rates.items())


def test_to_dict_is_plain_json() -> None:
    data = state_to_dict(full_state())
    job = data["jobs"][0]
    assert data["format"] == "gpufair-snapshot"
    assert data["version"] == SNAPSHOT_VERSION == 1
    assert type(job["state"]) is str and job["state"] == "suspended"
    assert type(job["adaptation"]) is str and type(data["nodes"][0]["state"]) is str
    assert job["gpus_held"] == ["n1:3", "n1:0", "n2:1"]  # order kept, tuple -> list
    assert job["throughput"] == [  # sorted by (type, count) so files diff cleanly
        {"gpu_type": "k80", "gpus": 1, "iterations_per_s": 0.5},
        {"gpu_type": "v100", "gpus": 2, "iterations_per_s": 3.25},
    ]
    assert job["progress"] == {"iterations_done": 10.5, "iterations_total": 100.0,
                               "epochs_done": 1, "epochs_total": 10}
    assert "source" not in data
    assert state_to_dict(full_state(), source={"adapter": "yarn"})["source"] == {"adapter": "yarn"}


def test_dump_and_load(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    dump_snapshot(full_state(), path, adapter="slurm")
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert "résnet" in text  # UTF-8, not \u escapes
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert data["source"]["adapter"] == "slurm"
    assert data["source"]["taken_at"].endswith("+00:00")
    assert load_snapshot(path) == full_state()
    assert [p.name for p in tmp_path.iterdir()] == ["snap.json"]  # no temp file left


def test_dump_refuses_non_finite(tmp_path: Path) -> None:
    state = full_state()
    bad = state.with_jobs([dataclasses.replace(state.jobs[0], attained_s=math.inf)])
    with pytest.raises(InputError, match=r"field 'jobs\[0\]\.attained_s' = inf"):
        dump_snapshot(bad, tmp_path / "s.json")
    assert not (tmp_path / "s.json").exists()


def test_omitted_fields_take_record_defaults_and_numbers_are_normalised() -> None:
    state = state_from_dict({
        "format": "gpufair-snapshot", "version": 1, "time_s": 5,
        "nodes": [{"name": "n1", "gpu_type": "v100", "gpus": 2.0}],
        "jobs": [{"id": "j1", "arrival_s": 3, "progress": {"iterations_done": 7}}],
    })
    assert state == ClusterState(time_s=5.0, nodes=(Node("n1", "v100", 2),),
                                 jobs=(Job(id="j1", arrival_s=3.0,
                                           progress=Progress(iterations_done=7.0)),))
    assert type(state.time_s) is float and type(state.nodes[0].gpus) is int
    assert type(state.jobs[0].arrival_s) is float
    assert type(state.jobs[0].progress.iterations_done) is float


names = st.text(string.ascii_lowercase + string.digits + "-_.", min_size=1, max_size=6)
node_names = st.text(string.ascii_lowercase + string.digits + "-:", min_size=1, max_size=6)
amounts = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=0, max_value=1e6, exclude_min=True, allow_nan=False,
                     allow_infinity=False)
maybe_text = st.none() | st.text(max_size=10)


@st.composite
def valid_states(draw: st.DrawFn) -> ClusterState:
    """Arbitrary states that satisfy every snapshot rule (so state_from_dict accepts them)."""
    type_names = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    gpu_types = tuple(GpuType(n, draw(st.none() | positive)) for n in type_names)
    nodes = tuple(
        Node(n, draw(st.sampled_from(type_names)), draw(st.integers(0, 6)),
             rack=draw(st.none() | names), switch=draw(st.none() | names),
             state=draw(st.sampled_from(NodeState)))
        for n in draw(st.lists(node_names, max_size=4, unique=True)))
    free = [g for n in nodes for g in n.gpu_ids()]
    tenant_names = draw(st.lists(names, max_size=3, unique=True))
    tenants = tuple(Tenant(n, draw(positive)) for n in tenant_names)
    jobs = []
    for job_id in draw(st.lists(names, max_size=5, unique=True)):
        state = draw(st.sampled_from(JobState))
        gpus = draw(st.integers(1, 4))
        lo = draw(st.none() | st.integers(1, gpus))
        hi = draw(st.none() | st.integers(gpus, 8))
        elastic = lo is not None and hi is not None and lo != hi
        held: list[str] = []
        if state.value in ("running", "suspended") and draw(st.booleans()):
            count = draw(st.integers(lo, hi)) if elastic else gpus
            if count <= len(free):
                held = draw(st.lists(st.sampled_from(free), min_size=count, max_size=count,
                                     unique=True))
                free = [g for g in free if g not in held]
        arrival = draw(amounts)
        start = draw(st.none() | st.floats(min_value=arrival, max_value=arrival + 1e6))
        finish = draw(st.none() | st.floats(min_value=start if start is not None else arrival,
                                            max_value=arrival + 2e6))
        total = draw(st.none() | amounts)
        epochs_total = draw(st.none() | st.integers(0, 500))
        progress = Progress(
            iterations_done=draw(st.floats(0, total if total is not None else 1e9)),
            iterations_total=total,
            epochs_done=draw(st.integers(0, epochs_total if epochs_total is not None else 500)),
            epochs_total=epochs_total)
        rates = draw(st.dictionaries(st.tuples(names, st.integers(1, 8)), amounts, max_size=4))
        jobs.append(Job(
            id=job_id,
            tenant=draw(st.sampled_from(tenant_names)) if tenant_names else draw(names),
            app=draw(maybe_text), gpus=gpus, min_gpus=lo, max_gpus=hi, state=state,
            arrival_s=arrival, start_s=start, finish_s=finish, progress=progress,
            throughput=ThroughputProfile(rates), model=draw(maybe_text),
            batch_size=draw(st.none() | st.integers(1, 4096)),
            initial_batch_size=draw(st.none() | st.integers(1, 4096)),
            samples_per_epoch=draw(st.none() | st.integers(1, 10**7)),
            max_batch_size=draw(st.none() | st.integers(1, 4096)),
            batch_rates=tuple(draw(st.lists(st.tuples(st.integers(1, 4096), amounts),
                                            max_size=3))),
            adaptation=draw(st.sampled_from(Adaptation)), weight=draw(positive),
            attained_s=draw(amounts), restarts=draw(st.integers(0, 50)),
            gpus_held=tuple(held), log_path=draw(maybe_text)))
    return ClusterState(time_s=draw(amounts), nodes=nodes, jobs=tuple(jobs), tenants=tenants,
                        gpu_types=gpu_types)


@settings(deadline=None, max_examples=150)
@given(valid_states())
def test_round_trip_property(state: ClusterState) -> None:
    data = state_to_dict(state)
    assert validate_snapshot(data, "s") == []
    text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    assert state_from_dict(json.loads(text)) == state


# ------------------------------------------------------------------------- schema and example


def test_schema_is_valid_and_matches_the_records() -> None:
    """A field added to records.py must be added to the schema too, or snapshots drop it."""
    schema = snapshot_schema()
    Draft202012Validator.check_schema(schema)
    defs = schema["$defs"]
    for name, cls in (("gpu_type", GpuType), ("node", Node), ("tenant", Tenant),
                      ("progress", Progress), ("job", Job)):
        assert set(defs[name]["properties"]) == {f.name for f in dataclasses.fields(cls)}, name
    state_fields = {f.name for f in dataclasses.fields(ClusterState)}
    assert set(schema["properties"]) == state_fields | {"format", "version", "source"}
    assert defs["job"]["properties"]["state"]["enum"] == [s.value for s in JobState]
    assert defs["job"]["properties"]["adaptation"]["enum"] == [a.value for a in Adaptation]
    assert defs["node"]["properties"]["state"]["enum"] == [s.value for s in NodeState]


def test_example_loads() -> None:
    state = load_snapshot(EXAMPLE)
    assert validate_snapshot(example(), str(EXAMPLE)) == []
    assert [(n.gpu_type, n.gpus, n.rack) for n in state.nodes] == [
        ("v100", 4, "r1"), ("v100", 4, "r1"), ("k80", 4, "r2")]
    assert {t.name: t.weight for t in state.tenants} == {"vision": 2.0, "nlp": 1.0}
    assert len(state.jobs) == 5
    assert {j.state for j in state.jobs} >= {JobState.RUNNING, JobState.PENDING}
    assert any(j.elastic for j in state.jobs)
    assert any(j.state is JobState.RUNNING and j.gpus_held for j in state.jobs)
    assert all(j.throughput.rates for j in state.jobs)
    assert state.job("41023").rate("v100") == 10.8
    assert state.job("41023").progress.iterations_left == 55000.0
    assert state_from_dict(state_to_dict(state)) == state


# ------------------------------------------------------------------------------ bad inputs


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Mutator that sets ``a.b.0.c`` in the example document (``-`` deletes the key)."""
    def apply(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = doc
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        key: Any = int(last) if last.isdigit() else last
        if value == "-":
            del target[key]
        else:
            target[key] = value
    return apply


def _append(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        target: Any = doc
        for p in path.split("."):
            target = target[int(p)] if p.isdigit() else target[p]
        target.append(copy.deepcopy(value))
    return apply


def _late_arrival_of_job_4(doc: dict[str, Any]) -> None:
    """Job 4 finished at 5400; make it arrive at 6000 (and drop start_s, checked separately)."""
    doc["jobs"][4]["arrival_s"] = 6000.0
    del doc["jobs"][4]["start_s"]


NODE_0 = {"name": "gpu-r1-01", "gpu_type": "v100", "gpus": 4}
FIVE = ["gpu-r1-02:0", "gpu-r1-02:1", "gpu-r1-02:2", "gpu-r1-02:3", "gpu-r2-01:3"]

# (mutation, expected text in the one message it must produce)
BAD = {
    "negative gpus": (_set("jobs.3.gpus", -2), "field 'jobs[3].gpus' = -2: must be >= 1"),
    "string gpus": (_set("jobs.3.gpus", "2"), "field 'jobs[3].gpus' = '2': must be an integer"),
    "null gpus": (_set("jobs.3.gpus", None), "field 'jobs[3].gpus': must be an integer, got null"),
    "bool gpus": (_set("jobs.3.gpus", True), "field 'jobs[3].gpus' = True: must be an integer"),
    "nan": (_set("jobs.0.attained_s", math.nan),
            "field 'jobs[0].attained_s' = nan: must be a finite number"),
    "bad state": (_set("jobs.0.state", "runing"),
                  "field 'jobs[0].state' = 'runing': must be one of 'pending', 'running'"),
    "bad node state": (_set("nodes.1.state", "offline"),
                       "field 'nodes[1].state' = 'offline': must be one of 'up', 'drain'"),
    "zero weight": (_set("tenants.0.weight", 0), "field 'tenants[0].weight' = 0: must be > 0"),
    "zero time limit": (_set("jobs.0.time_limit_s", 0),
                        "field 'jobs[0].time_limit_s' = 0: must be > 0"),
    "empty id": (_set("jobs.2.id", ""), "field 'jobs[2].id' = '': must not be empty"),
    "missing id": (_set("jobs.2.id", "-"), "field 'jobs[2].id': required field is missing"),
    "missing time": (_set("time_s", "-"), "field 'time_s': required field is missing"),
    "unknown record key": (_set("jobs.0.gpu", 3),
                           "field 'jobs[0].gpu' = 3: unknown field; did you mean 'gpus'?"),
    "unknown top key": (_set("job", []), "field 'job' = []: unknown field; did you mean 'jobs'?"),
    "unknown progress key": (_set("jobs.0.progress.iters", 5),
                             "field 'jobs[0].progress.iters' = 5: unknown field"),
    "version": (_set("version", 2), "field 'version' = 2: unsupported snapshot version; "
                                    "this gpufair reads version 1"),
    "format": (_set("format", "gpufair-trace"),
               "field 'format' = 'gpufair-trace': not a gpufair snapshot"),
    "duplicate job id": (_set("jobs.2.id", "41023"),
                         "field 'jobs[2].id' = '41023': duplicate job id; first used by jobs[0]"),
    "duplicate node": (_append("nodes", NODE_0),
                       "field 'nodes[3].name' = 'gpu-r1-01': duplicate node"),
    "duplicate tenant": (_append("tenants", {"name": "nlp"}),
                         "field 'tenants[2].name' = 'nlp': duplicate tenant"),
    "unknown tenant": (_set("jobs.0.tenant", "robotics"),
                       "field 'jobs[0].tenant' = 'robotics': unknown tenant; tenants lists "
                       "'vision', 'nlp'"),
    "implicit default tenant": (_set("jobs.3.tenant", "-"),
                                "field 'jobs[3].tenant' = 'default': unknown tenant (the default"),
    "unlisted gpu type": (_set("nodes.2.gpu_type", "a100"),
                          "field 'nodes[2].gpu_type' = 'a100': unknown GPU type"),
    "gpu id format": (_set("jobs.0.gpus_held.0", "gpu-r1-01"),
                      "field 'jobs[0].gpus_held[0]' = 'gpu-r1-01': must be a GPU id 'node:index'"),
    "gpu of unknown node": (_set("jobs.0.gpus_held.0", "gpu-r9-01:0"),
                            "field 'jobs[0].gpus_held[0]' = 'gpu-r9-01:0': no node named"),
    "gpu index out of range": (_set("jobs.0.gpus_held.3", "gpu-r1-01:4"),
                               "field 'jobs[0].gpus_held[3]' = 'gpu-r1-01:4': node 'gpu-r1-01' "
                               "has 4 GPUs"),
    "gpu held by two jobs": (_set("jobs.1.gpus_held.1", "gpu-r1-01:2"),
                             "field 'jobs[1].gpus_held[1]' = 'gpu-r1-01:2': also held by job "
                             "'41023' (jobs[0])"),
    "gpu listed twice": (_set("jobs.0.gpus_held.1", "gpu-r1-01:0"),
                         "field 'jobs[0].gpus_held[1]' = 'gpu-r1-01:0': listed twice"),
    "pending job holds gpus": (_set("jobs.3.gpus_held", ["gpu-r1-02:2"]),
                               "field 'jobs[3].gpus_held' = ['gpu-r1-02:2']: only running or "
                               "suspended jobs hold GPUs; this job is 'pending'"),
    "held count != gpus": (_set("jobs.2.gpus_held", ["gpu-r2-01:0"]),
                           "field 'jobs[2].gpus_held' = ['gpu-r2-01:0']: holds 1 GPUs but "
                           "gpus = 2"),
    "elastic holds too many": (_set("jobs.1.gpus_held", FIVE),
                               "holds 5 GPUs; this elastic job must hold between min_gpus and "
                               "max_gpus (1..4)"),
    "gpus above max": (_set("jobs.1.max_gpus", 1),
                       "field 'jobs[1].gpus' = 2: must be <= max_gpus (1)"),
    "gpus below min": (_set("jobs.2.min_gpus", 3),
                       "field 'jobs[2].gpus' = 2: must be >= min_gpus (3)"),
    "iterations past total": (_set("jobs.0.progress.iterations_done", 95000),
                              "field 'jobs[0].progress.iterations_done' = 95000: must be <= "
                              "iterations_total (90000)"),
    "epochs past total": (_set("jobs.0.progress.epochs_done", 91),
                          "field 'jobs[0].progress.epochs_done' = 91: must be <= epochs_total"),
    "finish before arrival": (_late_arrival_of_job_4,
                              "field 'jobs[4].finish_s' = 5400.0: must be >= arrival_s (6000.0)"),
    "start before arrival": (_set("jobs.0.start_s", 60.0),
                             "field 'jobs[0].start_s' = 60.0: must be >= arrival_s (120.0)"),
    "duplicate rate": (_append("jobs.3.throughput",
                               {"gpu_type": "k80", "gpus": 1, "iterations_per_s": 9.0}),
                       "field 'jobs[3].throughput[2]' = {'gpu_type': 'k80', 'gpus': 1, "),
    "missing rate": (_append("jobs.3.throughput", {"gpu_type": "k80", "gpus": 2}),
                     "field 'jobs[3].throughput[2].iterations_per_s': required field is missing"),
    "bad taken_at": (_set("source.taken_at", "yesterday"),
                     "field 'source.taken_at' = 'yesterday': must be an ISO 8601 time"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_names_field_and_value(case: str) -> None:
    mutate, expected = BAD[case]
    doc = example()
    mutate(doc)
    messages = validate_snapshot(doc, "snap.json")
    assert len(messages) == 1, messages
    assert messages[0].startswith("snap.json: field '")
    assert expected in messages[0]
    with pytest.raises(InputError) as caught:
        state_from_dict(doc, "snap.json")
    assert str(caught.value) == messages[0]
    assert caught.value.source == "snap.json"


def test_elastic_job_may_hold_any_count_in_range() -> None:
    doc = example()
    doc["jobs"][1]["gpus_held"] = ["gpu-r1-02:0", "gpu-r1-02:1", "gpu-r1-02:2"]  # gpus is 2
    assert validate_snapshot(doc, "s") == []


def test_validate_returns_every_problem_in_path_order() -> None:
    doc = example()
    doc["tenants"][1]["weight"] = -1.0        # schema
    doc["jobs"][3]["gpus"] = -2               # schema
    doc["jobs"][2]["id"] = "41023"            # semantic: duplicate
    doc["nodes"][0]["gpu_type"] = "a100"      # semantic: reference
    messages = validate_snapshot(doc, "snap.json")
    assert messages == [
        "snap.json: field 'jobs[2].id' = '41023': duplicate job id; first used by jobs[0]",
        "snap.json: field 'jobs[3].gpus' = -2: must be >= 1",
        "snap.json: field 'nodes[0].gpu_type' = 'a100': unknown GPU type; gpu_types lists "
        "'v100', 'k80'",
        "snap.json: field 'tenants[1].weight' = -1.0: must be > 0",
    ]
    with pytest.raises(InputError, match=r"jobs\[2\]\.id.*\(and 3 more problems"):
        check_snapshot(doc, "snap.json")


def test_three_errors_give_three_messages() -> None:
    doc = example()
    doc["jobs"][0]["gpus"] = 0
    doc["jobs"][1]["tenant"] = "robotics"
    doc["nodes"][1]["gpus"] = "4"
    assert len(validate_snapshot(doc, "s")) == 3


def test_numeric_path_order() -> None:
    doc = example()
    doc["jobs"] = [dict(doc["jobs"][3], id=f"x{i}") for i in range(12)]
    doc["jobs"][10]["gpus"] = 0
    doc["jobs"][9]["gpus"] = 0
    assert [m.split("'")[1] for m in validate_snapshot(doc, "s")] == ["jobs[9].gpus",
                                                                    "jobs[10].gpus"]


@pytest.mark.parametrize(("version", "newer"), [(2, True), (0, False), ("1", False),
                                                (True, False)])
def test_unsupported_version_is_the_only_message(version: Any, newer: bool) -> None:
    doc = example()
    doc["version"] = version
    doc["jobs"][0]["gpus"] = -2  # not reported: a different version may allow it
    messages = validate_snapshot(doc, "s")
    assert len(messages) == 1
    assert f"field 'version' = {version!r}: unsupported snapshot version" in messages[0]
    assert "reads version 1" in messages[0]
    assert ("newer gpufair" in messages[0]) is newer


def test_not_an_object() -> None:
    assert validate_snapshot([1, 2], "s") == ["s: a snapshot must be a JSON object, not a list"]
    with pytest.raises(InputError, match="must be a JSON object"):
        state_from_dict([])


def test_valid_example_passes_check() -> None:
    check_snapshot(example(), "snap.json")  # no exception


# ------------------------------------------------------------------------------ file errors


def test_invalid_json_gives_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text('{\n  "format": "gpufair-snapshot",\n  "version": 1,,\n}\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_snapshot(path)
    assert str(caught.value).startswith(f"{path}:3: invalid JSON: ")
    assert "column 16" in str(caught.value)
    assert caught.value.line == 3


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"
    with pytest.raises(InputError, match=f"^{path}: cannot read snapshot"):
        load_snapshot(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('{"format": "gpufair-snapshot", "x": "caf\u00e9"}'.encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8"):
        load_snapshot(path)


def test_duplicate_json_key(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    doc = json.dumps(example(), indent=2).replace('"gpus": 4,', '"gpus": 4, "gpus": 8,', 1)
    path.write_text(doc, encoding="utf-8")
    with pytest.raises(InputError, match=f"^{path}: field 'gpus' = 8: key appears twice"):
        load_snapshot(path)


def test_load_reports_validation_problem_with_file_name(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    doc = example()
    doc["jobs"][3]["gpus"] = -2
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{path}: field 'jobs\[3\]\.gpus' = -2: must be >= 1$"):
        load_snapshot(path)

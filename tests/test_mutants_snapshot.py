"""Snapshot validation rules pinned one by one (issue 21's surviving mutants).

Each case breaks one rule in the shipped example (gpufair/deploy/snapshot.example.json) and
checks the one message an admin gets, word for word; the valid edge of each rule passes.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from test_snapshot import EXAMPLE, example  # the bundled example document, one reader

from gpufair.errors import InputError
from gpufair.model.records import ClusterState, Job
from gpufair.model.snapshot import (
    check_snapshot,
    dump_snapshot,
    load_snapshot,
    state_from_dict,
    state_to_dict,
    validate_snapshot,
)


def only_problem(doc: dict[str, Any]) -> str:
    messages = validate_snapshot(doc, "s.json")
    assert len(messages) == 1, messages
    return messages[0]


def test_a_job_cannot_finish_before_it_started():
    """Job 4 arrived at 0, started at 30, finished at 5400: a start at 6000 is after its
    finish (and after its arrival, so only the start rule can catch it)."""
    doc = example()
    doc["jobs"][4]["start_s"] = 6000.0
    assert only_problem(doc) == ("s.json: field 'jobs[4].finish_s' = 5400.0: must be >= "
                                 "start_s (6000.0)")
    with pytest.raises(InputError, match=r"must be >= start_s \(6000\.0\)"):
        check_snapshot(doc, "s.json")


def test_finishing_as_it_starts_or_arrives_is_valid():
    doc = example()
    doc["jobs"][4].update(arrival_s=5400.0, start_s=5400.0, finish_s=5400.0)
    assert validate_snapshot(doc, "s.json") == []


@pytest.mark.parametrize(("edit", "message"), [
    # a value of the wrong type that is itself an object: a type problem, not unknown fields
    (lambda d: d["jobs"][0].update(id={}), "field 'jobs[0].id' = {}: must be a string"),
    (lambda d: d.update(zzzzzz=1),
     "field 'zzzzzz' = 1: unknown field; allowed: format, gpu_types, jobs, nodes, source, "
     "tenants, time_s, version"),
    (lambda d: d["jobs"][0].update(gpus=True),
     "field 'jobs[0].gpus' = True: must be an integer, got true/false"),
    (lambda d: d["jobs"][0].update(start_s="x"),
     "field 'jobs[0].start_s' = 'x': must be a number or null"),
    (lambda d: d["jobs"][0].update(id="a\ud800"),
     "field 'jobs[0].id' = 'a\\\\ud800': must be text without lone surrogates (\\ud800-\\udfff "
     "escapes that encode no character)"),
    (lambda d: d["gpu_types"].append({"name": "v100"}),
     "field 'gpu_types[2].name' = 'v100': duplicate GPU type; first used by gpu_types[0]"),
])
def test_each_problem_is_named_in_the_admins_words(edit, message):
    doc = example()
    edit(doc)
    assert only_problem(doc) == f"s.json: {message}"


def test_a_long_listing_is_cut_after_eight_names():
    doc = example()
    doc["nodes"] = [n for n in doc["nodes"] if n["gpu_type"] == "k80"]
    doc["jobs"] = []
    doc["gpu_types"] = [{"name": f"t{i}"} for i in range(10)]
    messages = validate_snapshot(doc, "s.json")
    assert messages == ["s.json: field 'nodes[0].gpu_type' = 'k80': unknown GPU type; "
                        "gpu_types lists 't0', 't1', 't2', 't3', 't4', 't5', 't6', 't7' "
                        "and 2 more"]
    doc["gpu_types"] = [{"name": f"t{i}"} for i in range(8)]
    assert validate_snapshot(doc, "s.json") == [
        "s.json: field 'nodes[0].gpu_type' = 'k80': unknown GPU type; "
        "gpu_types lists 't0', 't1', 't2', 't3', 't4', 't5', 't6', 't7'"]


def test_a_utc_time_may_end_in_z():
    doc = example()
    doc["source"]["taken_at"] = "2024-05-14T09:30:00Z"
    assert validate_snapshot(doc, "s.json") == []


def test_two_problems_say_one_more_and_three_say_two_more():
    doc = example()
    doc["jobs"][0]["gpus"] = 0
    doc["jobs"][3]["gpus"] = 0
    with pytest.raises(InputError) as caught:
        check_snapshot(doc, "s.json")
    assert str(caught.value) == ("s.json: field 'jobs[0].gpus' = 0: must be >= 1 (and 1 more "
                                 "problem; see 'gpufair validate')")
    doc["jobs"][4]["gpus"] = 0
    with pytest.raises(InputError, match=r"\(and 2 more problems; see 'gpufair validate'\)"):
        check_snapshot(doc, "s.json")


def test_the_default_source_is_named_in_errors():
    with pytest.raises(InputError) as caught:
        state_from_dict({"format": "gpufair-snapshot", "version": 1})
    assert caught.value.source == "<snapshot>"


def test_a_snapshot_of_nothing_but_the_time_loads():
    state = state_from_dict({"format": "gpufair-snapshot", "version": 1, "time_s": 5})
    assert state == ClusterState(5.0)


def test_every_optional_field_round_trips_set_and_unset():
    """Set optional fields come back as the declared types (a hand-edited 3 for a float is
    3.0), and unset ones stay None."""
    doc = example()
    job = doc["jobs"][0]
    job.update(min_gpus=4.0, max_gpus=4, batch_size=64.0, initial_batch_size=32,
               owner_uid=1000, owner_gid=100, nodes=1, allowed_nodes=["gpu-r1-01"],
               gpu_types=["v100"], samples_per_epoch=1000, max_batch_size=256, finish_s=None)
    doc["gpu_types"][0]["memory_gb"] = 16
    state = state_from_dict(doc, "s.json")
    loaded = state.job("41023")
    assert (loaded.min_gpus, loaded.max_gpus, loaded.batch_size) == (4, 4, 64)
    assert type(loaded.min_gpus) is int and type(loaded.batch_size) is int
    assert loaded.start_s == 180.0 and loaded.finish_s is None
    assert (loaded.owner_uid, loaded.owner_gid, loaded.nodes) == (1000, 100, 1)
    assert loaded.allowed_nodes == ("gpu-r1-01",) and loaded.gpu_types == ("v100",)
    assert (loaded.samples_per_epoch, loaded.max_batch_size, loaded.initial_batch_size) == \
        (1000, 256, 32)
    memory = state.gpu_types[0].memory_gb
    assert memory == 16.0 and type(memory) is float
    assert state_from_dict(state_to_dict(state), "again") == state
    pending = state.job("41052")
    assert pending.start_s is None and pending.min_gpus is None and pending.owner_uid is None


def test_a_file_with_a_byte_order_mark_loads(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + EXAMPLE.read_bytes())
    assert load_snapshot(path) == load_snapshot(EXAMPLE)


def test_a_dump_without_an_adapter_has_no_source(tmp_path):
    path = tmp_path / "s.json"
    dump_snapshot(load_snapshot(EXAMPLE), path)
    assert "source" not in json.loads(path.read_text(encoding="utf-8"))
    dump_snapshot(load_snapshot(EXAMPLE), path, adapter="slurm")
    assert json.loads(path.read_text(encoding="utf-8"))["source"]["adapter"] == "slurm"


def test_a_dump_writes_text_as_utf8_not_escapes(tmp_path):
    path = tmp_path / "s.json"
    dump_snapshot(ClusterState(0.0, jobs=(Job("é", tenant="équipe"),)), path)
    raw = path.read_bytes()
    assert "é".encode() in raw and b"\\u00e9" not in raw


def test_a_non_finite_number_is_refused_naming_the_file_and_field(tmp_path):
    path = tmp_path / "s.json"
    with pytest.raises(InputError) as caught:
        dump_snapshot(ClusterState(math.inf), path)
    assert str(caught.value) == (f"{path}: field 'time_s' = inf: cannot be saved: JSON has "
                                 "no NaN or infinity")
    assert not path.exists()


def test_a_dump_is_written_beside_the_target_then_renamed(tmp_path, monkeypatch):
    """Atomic: a temporary file in the same directory (a rename never crosses file systems),
    removed if the rename fails, and the old file is left whole."""
    path = tmp_path / "s.json"
    path.write_text("old", encoding="utf-8")
    seen = []

    def refuse(src, dst):
        seen.append(Path(src))
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        dump_snapshot(ClusterState(0.0), path)
    (tmp,) = seen
    assert tmp.parent == tmp_path and tmp.name.startswith(".s.json.") and \
        tmp.name.endswith(".tmp")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]
    assert path.read_text(encoding="utf-8") == "old"


def test_min_gpus_above_max_gpus_is_named_on_max_gpus():
    doc = example()
    doc["jobs"][1]["min_gpus"] = 5      # max_gpus is 4; it holds 2
    assert validate_snapshot(doc, "s.json") == [
        "s.json: field 'jobs[1].gpus_held' = ['gpu-r1-02:0', 'gpu-r1-02:1']: holds 2 GPUs; "
        "this elastic job must hold between min_gpus and max_gpus (5..4)",
        "s.json: field 'jobs[1].max_gpus' = 4: must be >= min_gpus (5)"]


@pytest.mark.parametrize("gpus", [1, 4])
def test_gpus_may_equal_min_gpus_or_max_gpus(gpus):
    doc = example()
    doc["jobs"][1]["gpus"] = gpus       # min 1, max 4
    assert validate_snapshot(doc, "s.json") == []


def test_omitted_gpus_and_state_take_their_defaults():
    """An omitted gpus is 1 (so below a min_gpus of 2); an omitted state is pending (so
    holding GPUs is wrong)."""
    doc = example()
    del doc["jobs"][3]["gpus"]
    doc["jobs"][3].update(min_gpus=2, max_gpus=2)
    assert only_problem(doc) == "s.json: field 'jobs[3].gpus' = 1: must be >= min_gpus (2)"
    doc = example()
    del doc["jobs"][0]["state"]
    assert only_problem(doc).endswith(
        ": only running or suspended jobs hold GPUs; this job is 'pending'")


def test_an_omitted_arrival_is_zero():
    doc = example()
    del doc["jobs"][4]["arrival_s"]
    doc["jobs"][4]["start_s"] = 0.5     # after an arrival at 0 (not at 1)
    assert validate_snapshot(doc, "s.json") == []


def test_duplicate_rates_are_found_past_a_broken_entry():
    doc = example()
    rates = doc["jobs"][3]["throughput"]
    rates.insert(0, 7)
    rates.append(dict(rates[1]))
    assert validate_snapshot(doc, "s.json") == [
        "s.json: field 'jobs[3].throughput[0]' = 7: must be an object",
        "s.json: field 'jobs[3].throughput[3]' = {'gpu_type': 'v100', 'gpus': 1, "
        "'iterations_per_s': 4.2}: second rate for 1 x v100 (first is throughput[1])"]


def test_rates_with_a_broken_gpu_type_are_not_compared():
    doc = example()
    doc["jobs"][3]["throughput"] = [{"gpu_type": 5, "gpus": 1, "iterations_per_s": 1.0}] * 2
    assert validate_snapshot(doc, "s.json") == [
        "s.json: field 'jobs[3].throughput[0].gpu_type' = 5: must be a string",
        "s.json: field 'jobs[3].throughput[1].gpu_type' = 5: must be a string"]


def test_a_duplicate_node_does_not_change_the_first_ones_gpu_count():
    doc = example()
    doc["nodes"].append(dict(doc["nodes"][0], gpus=2))   # job 0 holds gpu-r1-01:0-3
    assert only_problem(doc) == ("s.json: field 'nodes[3].name' = 'gpu-r1-01': duplicate "
                                 "node; first used by nodes[0]")


def test_gpu_indices_are_checked_against_a_node_of_zero_gpus_not_a_negative_count():
    doc = example()
    doc["nodes"][0]["gpus"] = 0
    messages = validate_snapshot(doc, "s.json")
    assert len(messages) == 4
    assert all("node 'gpu-r1-01' has 0 GPUs" in m for m in messages)
    doc["nodes"][0]["gpus"] = -1        # the schema's problem only: no index is judged by it
    assert only_problem(doc) == "s.json: field 'nodes[0].gpus' = -1: must be >= 0"


def test_a_key_with_a_lone_surrogate_is_named_escaped():
    doc = example()
    doc["jobs"][0]["\ud800x"] = 1
    messages = validate_snapshot(doc, "s.json")
    assert messages[0] == ("s.json: field 'jobs[0].\\ud800x' = '\\ud800x': must be text "
                           "without lone surrogates (\\ud800-\\udfff escapes that encode no "
                           "character)")
    assert len(messages) == 2 and "unknown field" in messages[1]


@pytest.mark.parametrize("held", [["gpu-r1-02:0"],
                                  ["gpu-r1-02:0", "gpu-r1-02:1", "gpu-r1-02:2", "gpu-r1-02:3"]])
def test_an_elastic_job_may_hold_exactly_min_or_max_gpus(held):
    doc = example()
    doc["jobs"][1]["gpus_held"] = held      # min 1, max 4
    assert validate_snapshot(doc, "s.json") == []


@pytest.mark.parametrize(("held", "messages"), [
    (["gpu-r1-01:0", "gpu-r1-01:1", "gpu-r1-01:2", "gpu-r1-01:4"],
     ["field 'jobs[0].gpus_held[3]' = 'gpu-r1-01:4': node 'gpu-r1-01' has 4 GPUs "
      "(indices 0..3)"]),
    ([5, "gpu-r1-01:1", "gpu-r1-01:2", "gpu-r1-01:3"],
     ["field 'jobs[0].gpus_held[0]' = 5: must be a string"]),
    (["bad", "gpu-r9-01:1", "gpu-r1-01:2", "gpu-r1-01:3"],
     ["field 'jobs[0].gpus_held[0]' = 'bad': must be a GPU id 'node:index'",
      "field 'jobs[0].gpus_held[1]' = 'gpu-r9-01:1': no node named 'gpu-r9-01' in nodes"]),
])
def test_each_gpu_held_is_checked_past_a_broken_one(held, messages):
    doc = example()
    doc["jobs"][0]["gpus_held"] = held
    assert validate_snapshot(doc, "s.json") == [f"s.json: {m}" for m in messages]


def test_duplicates_are_found_past_a_name_of_the_wrong_type():
    doc = example()
    doc["nodes"].insert(0, {"name": 5, "gpu_type": "v100", "gpus": 1})
    doc["nodes"].append(dict(doc["nodes"][1]))
    assert validate_snapshot(doc, "s.json") == [
        "s.json: field 'nodes[0].name' = 5: must be a string",
        "s.json: field 'nodes[4].name' = 'gpu-r1-01': duplicate node; first used by nodes[1]"]


def test_an_infinite_arrival_is_not_compared_with_the_start():
    doc = example()
    doc["jobs"][0]["arrival_s"] = math.inf
    assert validate_snapshot(doc, "s.json") == [
        "s.json: field 'jobs[0].arrival_s' = inf: must be <= 1099511627776",
        "s.json: field 'jobs[0].arrival_s' = inf: must be a finite number"]


def test_format_and_version_messages():
    doc = example()
    del doc["format"]
    assert only_problem(doc) == "s.json: field 'format': required field is missing"
    doc = example()
    doc["version"] = 2
    assert only_problem(doc) == ("s.json: field 'version' = 2: unsupported snapshot version; "
                                 "this gpufair reads version 1 (a newer gpufair wrote it: "
                                 "upgrade to load it)")
    doc["version"] = 0
    assert only_problem(doc) == ("s.json: field 'version' = 0: unsupported snapshot version; "
                                 "this gpufair reads version 1")


def test_a_gpu_on_a_node_without_gpus_names_no_impossible_index_range():
    """A node with 0 GPUs: the message says there is none to hold, not "indices 0..-1"."""
    doc = example()
    doc["nodes"][0]["gpus"] = 0
    messages = [str(p) for p in validate_snapshot(doc, "s.json")]
    assert any("node 'gpu-r1-01' has 0 GPUs (no GPU to hold)" in m for m in messages), messages
    assert not any("0..-1" in m for m in messages)

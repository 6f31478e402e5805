"""A replayed history carries each job's time limit and node count (issue 31).

``slurm_backfill`` plans with a job's limit and places it on exactly its node count; before,
a replay planned every job with the one-day default and could split a ``-N 1`` job. The
recorded loopback histories (tests/data/sacct/) hold both, in the parsable and JSON shapes;
the expected values are read here by the fidelity harness's own parser of the raw file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from slurm_fidelity import DATA, allocations
from test_replay_history import HEADER, ROWS, row, write
from test_replay_json import JOBS, job_2205, to_2302
from test_replay_json import write as write_json
from test_replay_published import DB_HEADER, DB_ROWS

from gpufair.adapters.history.convert import history_to_trace
from gpufair.adapters.history.published import read_published
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import for_history, semantics_named
from gpufair.adapters.slurm.sacct import read_sacct_live
from gpufair.adapters.slurm.sacct_json import read_sacct_json
from gpufair.adapters.slurm.sacct_limits import parse_time_limit
from gpufair.adapters.slurm.sacct_saved import parse_sacct_text, read_sacct_text
from gpufair.cli.main import main
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

HISTORIES = ("one_node_a", "one_node_b", "one_node_c", "fifo_backfill", "mixed_types")


@pytest.mark.parametrize(("text", "seconds"), [
    ("UNLIMITED", None), ("Partition_Limit", None), ("", None), ("INFINITE", None),
    ("00:00:00", None), ("1-02:00:00", 93_600.0), ("02:00:00", 7200.0), ("30:00", 1800.0),
    ("30", 1800.0), ("2-12", 216_000.0), ("1-00:30", 88_200.0), ("12-00:00:01", 1_036_801.0),
])
def test_time_limit_texts(text, seconds):
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["1h", "-5", "1:2:3:4", "1-", "soon", "1.5"])
def test_time_limit_text_that_is_none_of_slurms_forms(text):
    with pytest.raises(ValueError, match="expected a time limit"):
        parse_time_limit(text)


@pytest.mark.parametrize("history", HISTORIES)
@pytest.mark.parametrize("shape", ["sacct_parsable2.txt", "sacct.json"])
def test_recorded_limits_and_node_counts_reach_the_trace(history, shape):
    read = read_sacct_json if shape.endswith(".json") else read_sacct_text
    loaded = read(DATA / history / shape, tenant="account")
    trace = history_to_trace(loaded, "k80:8,v100:8" if history == "mixed_types" else
                             "v100:16", "4")
    recorded = {a.id: (60.0 * a.limit_minutes, a.nodes) for a in _recorded(history)}
    carried = {job_id: (job.time_limit_s, job.nodes)
               for job_id, job in zip(trace.job_ids, trace.trace, strict=True)}
    assert carried == recorded
    assert {n for _, n in carried.values()} == ({1, 2} if history in (
        "fifo_backfill", "mixed_types") else {1})


@dataclass(frozen=True)
class _Recorded:
    id: str
    limit_minutes: int
    nodes: int


def _recorded(history: str) -> list[_Recorded]:
    """The GPU allocations of a recorded history, read apart from both readers: TimelimitRaw
    (minutes) and NNodes, by the ids the fidelity harness keeps."""
    kept = {a.id for a in allocations(DATA / history / "sacct_parsable2.txt")}
    header, *lines = (DATA / history / "sacct_parsable2.txt").read_bytes().decode(
        "latin-1").splitlines()
    rows = [dict(zip(header.split("|"), line.split("|"), strict=True)) for line in lines]
    return [_Recorded(r["JobIDRaw"], int(r["TimelimitRaw"]), int(r["NNodes"])) for r in rows
            if r["JobIDRaw"] in kept]


def _starts_within_a_round(history: str, cluster: str) -> int:
    """Jobs whose replayed ``slurm_backfill`` start is within one 2-s round of Slurm's."""
    loaded = read_sacct_text(DATA / history / "sacct_parsable2.txt", tenant="account")
    converted = history_to_trace(loaded, cluster, "4")
    sim = TraceSimulator(converted.trace, converted.throughputs, converted.nodes,
                         for_history(semantics_named("clean")), 2.0)
    run_to_end(sim, Round(create_policy("slurm_backfill", PolicyConfig(round_s=2.0))))
    real = loaded.jobs["start"].to_numpy() - loaded.t0
    return sum(job.start_s is not None and abs(job.start_s - real[job.trace.index]) <= 2.0
               for job in sim.jobs)


@pytest.mark.parametrize(("history", "cluster", "at_least"), [
    ("fifo_backfill", "v100:16", 15), ("one_node_c", "v100:16", 31)])
def test_slurm_backfill_replay_plans_with_the_recorded_limits(history, cluster, at_least):
    # with the one-day default every waiting job blocks its reservation for a day: 8 and 20
    # of 40 jobs start within a round of Slurm's start; with the recorded 1-3 minutes, 15, 31
    assert _starts_within_a_round(history, cluster) >= at_least


def test_a_node_count_the_cluster_cannot_give_is_dropped_and_said(tmp_path):
    tres = "cpu=2,gres/gpu={}"
    rows = [row("1", "a", "x", "00:00:00", "00:00:00", "00:10:00", "COMPLETED",
                tres.format(8), nodes="2"),    # exact fit: two 4-GPU nodes
            row("2", "a", "x", "00:00:00", "00:10:00", "00:20:00", "COMPLETED",
                tres.format(3), nodes="2"),    # not split evenly
            row("3", "a", "x", "00:00:00", "00:20:00", "00:30:00", "COMPLETED",
                tres.format(6), nodes="3"),    # three nodes on a two-node cluster
            row("4", "a", "x", "00:00:00", "00:30:00", "00:40:00", "COMPLETED",
                tres.format(4), nodes="1")]
    trace = history_to_trace(read_sacct_text(write(tmp_path, rows)), "gpu:8", "4")
    assert [j.nodes for j in trace.trace] == [2, None, None, 1]
    assert any(n.startswith("2 job(s) ran on a node count") for n in trace.notes)


def test_no_limit_fields_keep_the_default(tmp_path):
    """A history without Timelimit (the hand-written shape, a published trace) plans with
    the policy's default, as before."""
    trace = history_to_trace(read_sacct_text(write(tmp_path, ROWS)))
    assert {j.time_limit_s for j in trace.trace} == {None}


def test_timelimit_raw_stands_in_when_the_text_is_absent(tmp_path):
    rows = [r + f"|{limit}" for r, limit in zip(ROWS, ["90", "UNLIMITED", "5", "", "1", "0",
                                                       "4294967295"], strict=True)]
    history = read_sacct_text(write(tmp_path, rows, header=HEADER + "|TimelimitRaw"))
    assert history.jobs.set_index("job_id")["time_limit_s"].fillna(-1).to_dict() == {
        "100": 5400.0, "101": -1, "106_2": -1}


BAD_TEXT = {
    "Timelimit": ("soon", "expected a time limit like 1-02:00:00"),
    "TimelimitRaw": ("-3", "expected a time limit in whole minutes"),
    "NNodes": ("two", "expected a whole node count"),
}


@pytest.mark.parametrize("case", [*BAD_TEXT, "NNodes 1.5"])
def test_bad_limit_or_node_count_exits_2_naming_line_and_field(case, tmp_path, capsys):
    field = case.split()[0]
    value, problem = BAD_TEXT[field] if field == case else ("1.5", "whole node count")
    good = "1" if field == "NNodes" else "10"
    header = HEADER.replace("|NNodes", "") + f"|{field}"
    rows = ["|".join(r.split("|")[:11] + r.split("|")[12:]) + f"|{v}"
            for r, v in zip(ROWS[:3], [good, value, good], strict=True)]
    path = write(tmp_path, rows, header=header)
    assert main(["replay", str(path), "--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpufair: error: {path}:3: field '{field}'"), err
    assert problem in err and "Traceback" not in err


def test_json_limits_in_both_shapes_and_unlimited(tmp_path):
    jobs = json.loads(json.dumps(JOBS))
    jobs[1]["time"]["limit"] = 4294967295          # 22.05's INFINITE
    jobs[5]["allocation_nodes"] = 2
    newer = [to_2302(j) for j in json.loads(json.dumps(JOBS))]
    newer[1]["time"]["limit"] = {"set": True, "infinite": True, "number": 0}
    newer[5]["allocation_nodes"] = {"set": True, "infinite": False, "number": 2}
    for name, shape in (("old.json", jobs), ("new.json", newer)):
        got = read_sacct_json(write_json(tmp_path, shape, name)).jobs.set_index("job_id")
        assert got["time_limit_s"].fillna(-1).to_dict() == {
            "10": 3600.0, "11": -1, "14_1": 3600.0}, name
        assert got["nodes"].to_dict() == {"10": 1.0, "11": 1.0, "14_1": 2.0}, name


@pytest.mark.parametrize(("where", "value", "problem"), [
    ("time.limit", "soon", "expected a number"), ("time.limit", -5, "negative time limit"),
    ("allocation_nodes", 2.5, "whole node count")])
def test_bad_json_limit_or_node_count_exits_2(where, value, problem, tmp_path, capsys):
    jobs = [job_2205(10, "v", 1_700_000_000, 1_700_000_000, 1_700_000_060, "COMPLETED", 1)]
    if where == "time.limit":
        jobs[0]["time"]["limit"] = value
    else:
        jobs[0][where] = value
    path = write_json(tmp_path, jobs)
    assert main(["replay", str(path), "--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: field 'jobs[0].{where}'" in err and problem in err, err


def test_slurm_db_table_carries_timelimit_minutes_and_nodes(tmp_path):
    rows = [r + f",{limit}" for r, limit in zip(
        DB_ROWS, ["90", "4294967295", "0", "5", "1"], strict=True)]
    path = tmp_path / "job_table.csv"
    path.write_text("\n".join([DB_HEADER + ",timelimit", *rows]) + "\n", encoding="utf-8")
    jobs = read_published(path).jobs.set_index("job_id")
    assert jobs["time_limit_s"].fillna(-1).to_dict() == {"1": 5400.0, "2": -1, "4_7": -1}
    assert jobs["nodes"].to_dict() == {"1": 1.0, "2": 1.0, "4_7": 1.0}
    path.write_text("\n".join([DB_HEADER + ",timelimit", rows[0],
                               rows[1].replace(",4294967295", ",-7")]) + "\n",
                    encoding="utf-8")
    assert main(["replay", str(path), "--policies", "fifo"]) == 2


def test_bad_published_node_count_is_named(tmp_path, capsys):
    path = tmp_path / "job_table.csv"
    path.write_text("\n".join([DB_HEADER, DB_ROWS[0], DB_ROWS[1][:-1] + "x"]) + "\n",
                    encoding="utf-8")
    assert main(["replay", str(path), "--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: field 'nodes_alloc'" in err and "whole node count" in err, err


def test_live_sacct_output_carries_them_too():
    """``gpufair replay --sacct`` parses what sacct printed with the saved-file reader."""
    data = (DATA / "fifo_backfill" / "sacct_parsable2.txt").read_bytes()
    history = parse_sacct_text(read_sacct_live("2026-11-01", "2026-11-30",
                                               run=lambda argv: data), "sacct")
    assert sorted(history.jobs["time_limit_s"].unique()) == [60.0, 120.0, 180.0]
    assert sorted(history.jobs["nodes"].unique()) == [1.0, 2.0]


def test_a_one_node_job_waits_for_one_node_instead_of_splitting(tmp_path):
    """Two 3-GPU jobs leave one GPU free on each 4-GPU node: a 2-GPU ``-N 1`` job waits for
    a node, as in Slurm, rather than run on one GPU of each."""
    tres = "cpu=2,gres/gpu={}"
    rows = [row("1", "a", "x", "00:00:00", "00:00:00", "00:10:00", "COMPLETED",
                tres.format(3), nodes="1"),
            row("2", "a", "x", "00:00:00", "00:00:00", "00:10:00", "COMPLETED",
                tres.format(3), nodes="1"),
            row("3", "a", "x", "00:01:00", "00:10:00", "00:15:00", "COMPLETED",
                tres.format(2), nodes="1")]
    converted = history_to_trace(read_sacct_text(write(tmp_path, rows)), "gpu:8", "4")
    sim = TraceSimulator(converted.trace, converted.throughputs, converted.nodes,
                         for_history(semantics_named("clean")), 2.0)
    run_to_end(sim, Round(create_policy("slurm_backfill", PolicyConfig(round_s=2.0))))
    assert [job.start_s for job in sim.jobs] == [0.0, 0.0, 600.0]


@pytest.mark.parametrize("field", ["AllocNodes", "ReqNodes"])
def test_alloc_or_req_nodes_stand_in_for_nnodes(field, tmp_path):
    rows = [r.replace("|1|train", "|2|train") if r.startswith("100|") else r for r in ROWS]
    history = read_sacct_text(write(tmp_path, rows, header=HEADER.replace("NNodes", field)))
    assert history.jobs.set_index("job_id")["nodes"].to_dict() == {
        "100": 2.0, "101": 1.0, "106_2": 1.0}

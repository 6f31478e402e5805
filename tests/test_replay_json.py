"""Saved ``sacct --json`` histories, in the 22.05 shape and the 23.02+ shape (issue 31).

The job objects follow the documented/recorded shapes: 22.05 (a real record published in
mila-iqia/SARC's tests: ``state.current`` a string, plain numbers, ``tres`` entries with
type/name/id/count) and 23.02+ (``state.current`` a list, numbers as set/infinite/number).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufair.adapters.slurm.sacct_json import read_sacct_json
from gpufair.cli.main import main

T0 = 1_700_000_000


def job_2205(job_id, account, submit, start, end, state, gpus=None, gpu_type=None,
             array=(0, None, None)):
    tres = [{"type": "cpu", "name": None, "id": 1, "count": 8},
            {"type": "node", "name": None, "id": 4, "count": 1}]
    if gpus is not None:
        tres.append({"type": "gres", "name": "gpu", "id": 1001, "count": gpus})
        if gpu_type:
            tres.append({"type": "gres", "name": f"gpu:{gpu_type}", "id": 1002,
                         "count": gpus})
    parent, task_id, task = array
    return {"account": account, "allocation_nodes": 1, "user": "u-" + account,
            "array": {"job_id": parent, "task_id": task_id, "task": task,
                      "limits": {"max": {"running": {"tasks": 0}}}},
            "association": {"account": account, "partition": "gpu", "user": "u-" + account},
            "job_id": job_id, "partition": "gpu", "qos": "normal",
            "state": {"current": state, "reason": "None"}, "steps": [],
            "time": {"elapsed": 0 if not start else (end or T0) - start,
                     "submission": submit, "start": start, "end": end, "limit": 60,
                     "eligible": submit, "suspended": 0},
            "tres": {"allocated": tres if start else [], "requested": tres}}


def to_2302(job):
    """The same job as 23.02+ prints it."""
    job = json.loads(json.dumps(job))
    job["state"]["current"] = [job["state"]["current"]]
    job["time"]["limit"] = {"set": True, "infinite": False, "number": 60}
    task = job["array"]["task_id"]
    job["array"]["task_id"] = {"set": task is not None, "infinite": False,
                               "number": task or 0}
    return job


JOBS = [
    job_2205(10, "vision", T0, T0, T0 + 3600, "COMPLETED", 4, "a100"),
    job_2205(11, "nlp", T0 + 600, T0 + 3600, T0 + 5400, "FAILED", 2),
    job_2205(12, "nlp", T0 + 700, 0, 0, "CANCELLED", 2),
    job_2205(13, "vision", T0 + 800, T0 + 800, T0 + 900, "COMPLETED"),
    job_2205(14, "vision", T0 + 900, 0, 0, "PENDING", 1, array=(14, None, "2-5")),
    job_2205(20, "nlp", T0 + 950, T0 + 4000, T0 + 4600, "TIMEOUT", 1, array=(14, 1, None)),
]


def write(tmp_path: Path, jobs, name="h.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"meta": {"plugin": {"type": "openapi/dbv0.0.38"}},
                                "errors": [], "jobs": jobs}, indent=2), encoding="utf-8")
    return path


@pytest.mark.parametrize("shape", ["22.05", "23.02"])
def test_both_shapes_read_alike(shape, tmp_path):
    jobs = JOBS if shape == "22.05" else [to_2302(j) for j in JOBS]
    history = read_sacct_json(write(tmp_path, jobs))
    assert history.jobs["job_id"].tolist() == ["10", "11", "14_1"]
    assert history.jobs["gpu_type"].tolist() == ["a100", "", ""]
    assert history.jobs["gpus"].tolist() == [4, 2, 1]
    assert history.excluded == {"no_gpus": 1, "never_started": 4,
                                "cancelled_before_start": 1, "unfinished": 0}
    assert history.jobs["tenant"].tolist() == ["vision", "nlp", "nlp"]


def test_replay_auto_detects_json(tmp_path, capsys):
    assert main(["replay", str(write(tmp_path, JOBS)), "--policies", "fifo", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["policy"] == "as_run" and lines[0]["num_jobs"] == 3
    assert lines[-1]["history"]["excluded"]["never_started"] == 4


BAD = {
    "end before start": (lambda j: j[0]["time"].update(end=T0 - 5),
                         "jobs[0].time.end", "ends before it starts"),
    "negative gpus": (lambda j: j[1]["tres"]["allocated"][2].update(count=-1),
                      "jobs[1].tres", "negative"),
    "gpu count text": (lambda j: j[1]["tres"]["allocated"][2].update(count="2"),
                       "jobs[1].tres.allocated[2].count", "GPU count"),
    "duplicate": (lambda j: j.append(json.loads(json.dumps(j[0]))), "jobs[6].job_id",
                  "appears twice"),
    "time not a number": (lambda j: j[0]["time"].update(start="yesterday"),
                          "jobs[0].time.start", "expected a number"),
    "job not an object": (lambda j: j.insert(0, [1, 2]), "jobs[0]", "expected an object"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_json_history_exits_2(case, tmp_path, capsys):
    change, field, problem = BAD[case]
    jobs = json.loads(json.dumps(JOBS))
    change(jobs)
    path = write(tmp_path, jobs)
    assert main(["replay", str(path), "--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: field '{field}'" in err and problem in err, err


def test_not_sacct_json(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text('{"items": []}', encoding="utf-8")
    assert main(["replay", str(path)]) == 2
    assert "'jobs' list" in capsys.readouterr().err


def test_json_truncated_names_the_line(tmp_path, capsys):
    path = write(tmp_path, JOBS)
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:" in err and "invalid JSON" in err


def test_real_22_05_cancel_while_pending_and_bytes_in_a_name(tmp_path, capsys):
    """As the loopback slurmdbd's sacct --json writes them: a job cancelled while pending has
    start = end and no allocated TRES; a job name's bytes are written as they are (not UTF-8),
    which is no error unless a field the replay reads holds them."""
    pending = job_2205(9, "vision", T0, T0 + 1, T0 + 1, "CANCELLED", 2)
    pending["tres"]["allocated"] = []
    named = job_2205(8, "vision", T0, T0 + 1, T0 + 3, "COMPLETED", 1, "v100")
    named["name"] = "NAME"
    path = write(tmp_path, [JOBS[0], pending, named])
    data = path.read_bytes().replace(b'"NAME"', b'"caf\xe9-\xff\xfe-latin1"')
    path.write_bytes(data)
    history = read_sacct_json(path)
    assert history.excluded["cancelled_before_start"] == 1
    assert history.jobs["job_id"].tolist() == ["10", "8"]
    path.write_bytes(data.replace(b'"account": "vision"', b'"account": "vis\xe9on"', 1))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "field 'jobs[0].account'" in err and "not UTF-8" in err

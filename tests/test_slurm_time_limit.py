"""A job's time limit from squeue / slurmrestd into ``Job.time_limit_s`` (issue 31: the live
daemon left it unfilled, so ``slurm_backfill`` planned every live job with its one-day
default). The shapes are the recorded ones of ``tests/data/slurm/``: 22.05's squeue prints a
limit in minutes and UNLIMITED as null; slurmrestd v0.0.37/38 a number (the samples' jobs
have 525,600 minutes, a year); later versions ``{"set", "infinite", "number"}``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpufair.adapters.slurm.translate import time_limit_s, translate

DATA = Path(__file__).parent / "data" / "slurm"


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.mark.parametrize("jobs, nodes", [("squeue.json", "sinfo.json"),
                                         ("rest_v0.0.37_jobs.json", "sinfo.json"),
                                         ("rest_v0.0.38_jobs.json", "rest_v0.0.38_nodes.json")])
def test_recorded_limits_in_minutes_become_seconds(jobs, nodes):
    doc = _load(jobs)
    minutes = {str(r["job_id"]): r["time_limit"] for r in doc["jobs"]}
    view = translate(doc, _load(nodes), now=1.7e9)
    assert {j.time_limit_s for j in view.state.jobs} == {525600 * 60.0, None}   # both shown
    for job in view.state.jobs:
        limit = minutes[job.id.partition("_")[0]]
        assert job.time_limit_s == (None if limit is None else 60.0 * limit)


def test_unlimited_as_22_05_squeue_prints_it_is_no_limit():
    jobs, nodes = _load("squeue_eligibility.json"), _load("sinfo_eligibility.json")
    assert all(r["time_limit"] is None for r in jobs["jobs"])
    view = translate(jobs, nodes, now=1795855721.0)
    assert view.state.jobs and all(j.time_limit_s is None for j in view.state.jobs)


@pytest.mark.parametrize("value, seconds", [
    (5, 300.0), (1, 60.0), (0, None), (None, None),
    (4294967295, None), (4294967294, None),                    # INFINITE, NO_VAL
    ({"set": True, "infinite": False, "number": 30}, 1800.0),   # 23.02+
    ({"set": True, "infinite": True, "number": 0}, None),
    ({"set": False, "infinite": False, "number": 0}, None),
])
def test_each_shape_of_a_limit(value, seconds):
    assert time_limit_s({"time_limit": value}) == seconds


def test_a_limit_that_is_not_a_number_skips_the_record_naming_the_field():
    jobs, nodes = _load("squeue.json"), _load("sinfo.json")
    broken = copy.deepcopy(jobs)
    broken["jobs"][0]["time_limit"] = "5:00"
    view = translate(broken, nodes, now=1.7e9)
    first = str(jobs["jobs"][0]["job_id"])
    assert first not in {j.id for j in view.state.jobs}
    assert any("'time_limit'" in p for p in view.problems), view.problems
    assert len(view.state.jobs) == len(translate(jobs, nodes, now=1.7e9).state.jobs) - 1

"""Slurm translation rules pinned one by one (issue 21's surviving mutants).

Each test edits one field of a real ``squeue --json`` record (tests/data/slurm) and checks the
translated value against a number worked out by hand from Slurm's documented meaning of the
field, not against the translator's own helpers.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpufair.adapters.slurm.translate import translate
from gpufair.model import JobState

DATA = Path(__file__).parent / "data" / "slurm"
NOW = 1795305510.0
SQUEUE = json.loads((DATA / "squeue.json").read_text())
SINFO = json.loads((DATA / "sinfo.json").read_text())


def one(state: str, **fields: Any) -> tuple[Any, Any]:
    """Translate the sample with its job 4 (pending, 4 GPUs) changed; (Job, SlurmJobInfo)."""
    jobs = copy.deepcopy(SQUEUE)
    record = next(j for j in jobs["jobs"] if j["job_id"] == 4)
    record.update(job_state=state, **fields)
    view = translate(jobs, SINFO, now=NOW)
    assert view.problems == (), view.problems
    return next(j for j in view.state.jobs if j.id == "4"), view.jobs["4"]


def running(**fields: Any) -> tuple[Any, Any]:
    """Job 1 (running on gpu-k80-1, GPUs 0-1) with fields changed."""
    jobs = copy.deepcopy(SQUEUE)
    record = next(j for j in jobs["jobs"] if j["job_id"] == 1)
    record.update(**fields)
    view = translate(jobs, SINFO, now=NOW)
    assert view.problems == (), view.problems
    return next(j for j in view.state.jobs if j.id == "1"), view.jobs["1"]


def test_attained_time_restarts_at_the_last_resume():
    """suspend_time is when the job was last suspended or resumed: a job started 1000 s ago
    and resumed 300 s ago has run 300 s since, not 1000 s."""
    job, _ = running(start_time=NOW - 1000, suspend_time=NOW - 300)
    assert job.attained_s == pytest.approx(300.0)
    job, _ = running(start_time=NOW - 1000, suspend_time=0)       # never suspended
    assert job.attained_s == pytest.approx(1000.0)
    job, _ = running(start_time=NOW - 1000, suspend_time=NOW - 5000)   # before the start
    assert job.attained_s == pytest.approx(1000.0)
    job, _ = running(start_time=NOW + 50, suspend_time=0)          # clock skew: not negative
    assert job.attained_s == 0.0


def test_a_pending_job_has_no_attained_time_nor_start():
    job, _ = one("PENDING", start_time=NOW - 1000, suspend_time=0)
    assert job.attained_s == 0.0 and job.start_s is None and job.gpus_held == ()


@pytest.mark.parametrize(("state", "reason", "priority", "held"), [
    ("PENDING", "JobHeldUser", 1000, True),      # a hold reason alone
    ("PENDING", "JobHeldAdmin", 1000, True),
    ("PENDING", "job requeued in held state", 1000, True),
    ("PENDING", "Priority", 0, True),            # priority 0 alone: scontrol hold's mark
    ("PENDING", "Priority", 1, False),
    ("PENDING", "Resources", 1000, False),
    ("SUSPENDED", "None", 0, False),             # priority 0 means held only while pending
])
def test_held_is_a_hold_reason_or_a_pending_job_at_priority_zero(state, reason, priority, held):
    fields = {"state_reason": reason, "priority": priority}
    if state == "SUSPENDED":
        _, info = running(job_state=state, **fields)
    else:
        _, info = one(state, **fields)
    assert info.held is held


@pytest.mark.parametrize(("per_node", "per_job", "nodes", "gpus"), [
    ("gres:gpu:2", "", 3, 6),                  # 2 per node on 3 nodes
    ("gres:gpu:v100:1", "", 4, 4),
    ("gres:gpu:2", "", None, 2),               # no node count: one node
    ("", "gres:gpu:3", 2, 3),                  # per job: the total, whatever the nodes
])
def test_gpus_asked_per_node_are_multiplied_by_the_node_count(per_node, per_job, nodes, gpus):
    job, info = one("PENDING", tres_per_node=per_node, tres_per_job=per_job,
                    node_count=nodes)
    assert job.gpus == gpus
    assert info.gres_field == ("TresPerNode" if per_node else "TresPerJob")
    assert info.node_count == (nodes or 1)


def test_a_running_job_counts_the_gpus_it_holds_not_what_it_asked():
    """gres_detail lists what Slurm gave: 2 GPUs, though the request says 3 per node."""
    job, _ = running(tres_per_node="gres:gpu:3")
    assert job.gpus == 2 and job.gpus_held == ("gpu-k80-1:0", "gpu-k80-1:1")
    assert job.state is JobState.RUNNING

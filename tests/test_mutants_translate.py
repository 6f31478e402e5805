"""Slurm translation rules pinned one by one (issue 21's surviving mutants).

Each test edits one field of a real ``squeue --json`` record (tests/data/slurm) and checks the
translated value against a number worked out by hand from Slurm's documented meaning of the
field, not against the translator's own helpers.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from gpufair.adapters.slurm.translate import (
    Malformed,
    _as_number,
    _bounded,
    _describe,
    _int,
    _show,
    dependency_met,
    fix_nice,
    translate,
)
from gpufair.model import JobState, NodeState

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


def test_an_administrator_s_hold_is_waiting_not_demand():
    """JobHeldAdmin is a hold too, but never gpufair's own (its holds are user holds): the
    job waits for the administrator, out of the plan (tests/test_slurm_eligibility.py)."""
    jobs = copy.deepcopy(SQUEUE)
    record = next(j for j in jobs["jobs"] if j["job_id"] == 4)
    record.update(job_state="PENDING", state_reason="JobHeldAdmin", priority=1000)
    view = translate(jobs, SINFO, now=NOW)
    assert "4" not in {j.id for j in view.state.jobs}
    assert [why for job, why in view.waiting if job.id == "4"] == [
        "held by an administrator (scontrol hold); scontrol uhold hands it back"]


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


# ---- reading one field ------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    ({"set": True, "infinite": False, "number": 5}, 5.0),
    ({"number": 7}, 7.0),                        # no "set": it is set
    ({"set": False, "number": 5}, None),
    ({"set": True, "infinite": True, "number": 5}, None),
    (None, None), (10, 10.0), (0, 0.0), (10.0, 10.0),
])
def test_numbers_plain_or_in_openapi_form(value, expected):
    assert _as_number(value, "k", 0, 10) == expected


@pytest.mark.parametrize(("value", "message"), [
    (11, "field 'k' out of range: 11"), (-1, "field 'k' out of range: -1"),
    (10.5, "field 'k' out of range: 10.5"), (math.inf, "field 'k' out of range: inf"),
    (math.nan, "field 'k' out of range: nan"),
    ("x", "field 'k' is text, not a number: 'x'"),
    (True, "field 'k' is true/false, not a number: True"),
    ({"set": True, "number": 11}, "field 'k' out of range: 11"),
])
def test_numbers_out_of_range_or_of_another_kind_are_named(value, message):
    with pytest.raises(Malformed) as caught:
        _as_number(value, "k", 0, 10)
    assert str(caught.value) == message


def test_whole_numbers():
    assert _int({"k": 3.0}, "k") == 3 and _int({}, "k") is None
    with pytest.raises(Malformed, match=r"^field 'k' is not a whole number: 2\.5$"):
        _int({"k": 2.5}, "k")


def test_nice_wraps_at_two_to_the_31():
    assert fix_nice(1 << 31) == -(1 << 31)
    assert fix_nice((1 << 31) - 1) == (1 << 31) - 1
    assert fix_nice(-(1 << 31)) == -(1 << 31)
    with pytest.raises(Malformed):
        fix_nice(-(1 << 31) - 1)


def test_ranges_are_bounded_by_the_names_they_expand_to():
    assert _bounded("a[1-40000],b[1-25536]", "w") == "a[1-40000],b[1-25536]"   # 65536
    with pytest.raises(Malformed) as caught:
        _bounded("a[1-40000],b[1-25537]", "host list 'nodes'")
    assert str(caught.value) == ("host list 'nodes' 'a[1-40000],b[1-25537]': more than 65536 "
                                 "names")
    assert _bounded("n[123456789-123456789]", "w")          # nine digits: one name
    assert _bounded("n[5-3]", "w") == "n[5-3]"              # backwards: counts as one
    with pytest.raises(Malformed) as caught:
        _bounded("n[0-1234567890]", "w")
    assert str(caught.value) == "w 'n[0-1234567890]': range '0-1234567890' too large"


def test_show_is_short_and_never_raises():
    class Boom:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    class Long:
        def __repr__(self) -> str:
            return "x" * 61

    assert _show(10 ** 30) == "<100-bit integer>"
    assert _show(10 ** 30 - 1) == repr(10 ** 30 - 1)
    assert _show(-(10 ** 30)) == "<100-bit integer>"
    assert _show(True) == "True"
    assert _show("a" * 61) == repr("a" * 60) + "…"
    assert _show("a" * 60) == repr("a" * 60)
    assert _show([1, 2, 3]) == "<a list of 3>" and _show({}) == "<an object of 0>"
    assert _show(Boom()) == "<Boom>"
    assert _show(Long()) == "x" * 60 + "…"
    assert _show(Long(), limit=61) == "x" * 61


def test_describe_says_what_went_wrong_on_one_line():
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert _describe(KeyError("gres")) == "missing field 'gres'"
    assert _describe(KeyError()) == "missing field None"
    assert _describe(ValueError("a\nb\x00")) == "a\\nb\\x00"
    assert _describe(TypeError("boom")) == "unreadable record (TypeError: boom)"
    assert _describe(Unprintable()) == "unreadable record (Unprintable)"
    assert _describe(ValueError("x" * 300)) == "x" * 300
    assert _describe(ValueError("x" * 301)) == "x" * 300 + "…"


@pytest.mark.parametrize(("text", "met"), [
    ("afterok:12_3", True),          # an array task: its array job's state
    ("afterok:12+1", True),          # a heterogeneous component: its leader's state
    ("afterok:12(unfulfilled)", True),
    ("afterok:12,afterok:99", False),
    ("afterok:99?afterok:12", True),  # any of
    ("singleton", False), ("afterok", False), ("after:24", True), ("afterany:24", False),
])
def test_dependencies(text, met):
    assert dependency_met(text, {"12": "COMPLETED", "24": "RUNNING", "99": "PENDING"}) is met


# ---- placement constraints of a pending job ---------------------------------------------------
def constrained(sinfo: dict | None = None, **fields: Any):
    jobs = copy.deepcopy(SQUEUE)
    record = next(j for j in jobs["jobs"] if j["job_id"] == 4)
    record.update({"admin_comment": "gpufair:managed", **fields})
    view = translate(jobs, sinfo or SINFO, now=NOW)
    return next((j for j in view.state.jobs if j.id == "4"), None), view


def test_the_partition_limits_the_nodes():
    sinfo = copy.deepcopy(SINFO)
    for node in sinfo["nodes"]:
        if "v100" in node["name"]:
            node["partitions"] = ["urgent"]
    job, _ = constrained(sinfo, partition="gpu")
    assert job.allowed_nodes == ("gpu-k80-1", "gpu-k80-2")
    job, _ = constrained(sinfo, partition="gpu,urgent")
    assert job.allowed_nodes == ("gpu-k80-1", "gpu-k80-2", "gpu-v100-1", "gpu-v100-2")
    job, _ = constrained(sinfo, partition="gpu", features="k80&v100")
    assert job.allowed_nodes == ()
    job, _ = constrained(sinfo, partition="urgent", excluded_nodes="gpu-v100-1")
    assert job.allowed_nodes == ("gpu-k80-1", "gpu-k80-2", "gpu-v100-2")
    job, _ = constrained(sinfo, partition="gpu",
                         admin_comment="gpufair:managed nodelist=gpu-k80-2,gpu-v100-1")
    assert job.allowed_nodes == ("gpu-k80-2",) and job.nodes == 1   # node_count of a per-node ask


def test_features_alone_and_node_lists_alone():
    job, _ = constrained(features="v100")
    assert job.allowed_nodes == ("gpu-v100-1", "gpu-v100-2")
    job, _ = constrained(features="v100,k80")
    assert job.allowed_nodes == ()
    job, _ = constrained(excluded_nodes="gpu-k80-[1-2]")
    assert job.allowed_nodes == ("gpu-v100-1", "gpu-v100-2")
    job, _ = constrained(admin_comment="gpufair:managed nodelist=gpu-v100-[1-2]",
                         tres_per_node="", tres_per_job="gres:gpu:2")
    assert job.allowed_nodes == ("gpu-v100-1", "gpu-v100-2") and job.nodes == 2


def test_gpu_type_and_node_count_come_from_the_request():
    everywhere = ("gpu-k80-1", "gpu-k80-2", "gpu-v100-1", "gpu-v100-2")   # partition gpu
    job, _ = constrained(tres_per_node="gres:gpu:1", node_count=None)
    assert job.nodes == 1 and job.gpu_types is None and job.allowed_nodes == everywhere
    job, _ = constrained(tres_per_node="gres:gpu:1", node_count=None, partition="elsewhere")
    assert job.allowed_nodes is None
    job, _ = constrained(tres_per_node="", tres_per_job="gres:gpu:k80:2", node_count=None)
    assert job.gpu_types == ("k80",) and job.nodes is None
    job, _ = constrained(tres_per_node="gres:gpu:v100:2", node_count=2)
    assert job.gpu_types == ("v100",) and job.nodes == 2 and job.gpus == 4


def test_a_dependency_keeps_the_job_away_until_met():
    job, view = constrained(dependency="afterok:1")       # job 1 is running
    assert job is None and view.problems == ()
    job, _ = constrained(dependency="(null)")
    assert job is not None
    job, view = constrained(features="k80|v100")
    assert job is None
    assert view.problems == ("slurm: job 4: not scheduled by gpufair: --constraint 'k80|v100' "
                             "is more than a list of features",)


# ---- what a running job holds -----------------------------------------------------------------
@pytest.mark.parametrize(("detail", "message"), [
    ("gpu:k80:2", "slurm: job 1: skipped: field 'gres_detail' is not a list of GRES strings: "
                  "'gpu:k80:2'"),
    ([1], "slurm: job 1: skipped: field 'gres_detail' is not a list of GRES strings: "
          "<a list of 1>"),
    (["gpu:k80:2(IDX:0-1)", "gpu:k80:1(IDX:0)"],
     "slurm: job 1: skipped: gres_detail has 2 entries for 1 nodes"),
    (["gpu:k80:2"], "slurm: job 1: skipped: no GPU indices in gres_detail 'gpu:k80:2'"),
    (["gpu:k80:2(IDX:0,0)"], "slurm: job 1: skipped: a GPU listed twice in gres_detail "
                             "<a list of 1>"),
])
def test_a_broken_gres_detail_is_named(detail, message):
    jobs = copy.deepcopy(SQUEUE)
    next(j for j in jobs["jobs"] if j["job_id"] == 1)["gres_detail"] = detail
    view = translate(jobs, SINFO, now=NOW)
    assert "1" not in {j.id for j in view.state.jobs}
    assert view.problems == (message,)
    assert {n.name: n.state for n in view.state.nodes}["gpu-k80-1"] is not NodeState.UP


def test_an_unreadable_record_with_unreadable_nodes_holds_every_node_back():
    jobs = copy.deepcopy(SQUEUE)
    record = next(j for j in jobs["jobs"] if j["job_id"] == 1)
    record.update(gres_detail=5, nodes=7)
    view = translate(jobs, SINFO, now=NOW)
    assert view.problems == ("slurm: job 1: skipped: field 'nodes' is a number, not text: 7; "
                             "its nodes cannot be told, so every node is held back this round",)
    assert all(n.state is not NodeState.UP for n in view.state.nodes)


# ---- nodes -----------------------------------------------------------------------------------
def nodes_view(*edits, jobs: dict | None = None, **kw):
    sinfo = copy.deepcopy(SINFO)
    if jobs is None:   # no job holds the GPUs sinfo shows in use: clear them
        for node in sinfo["nodes"]:
            node["gres_used"] = ""
    for edit in edits:
        edit(sinfo["nodes"])
    return translate(copy.deepcopy(jobs or {"jobs": []}), sinfo, now=NOW, **kw)


def node_states(view) -> dict[str, NodeState]:
    return {n.name: n.state for n in view.state.nodes}


@pytest.mark.parametrize(("state", "flags", "expected"), [
    ("idle", [], NodeState.UP), ("MIXED", [], NodeState.UP), ("allocated", [], NodeState.UP),
    ("completing", [], NodeState.UP), ("planned", [], NodeState.UP),
    ("reserved", [], NodeState.UP), (["IDLE", "DRAIN"], [], NodeState.UP),
    ("down", [], NodeState.DOWN), ("unknown", [], NodeState.DOWN),
    ("future", [], NodeState.DOWN), ("idle", ["NOT_RESPONDING"], NodeState.DOWN),
    ("idle", ["drain"], NodeState.DRAIN), ("idle", ["DRAINING"], NodeState.DRAIN),
    ("idle", ["DRAINED"], NodeState.DRAIN), ("idle", ["FAIL"], NodeState.DRAIN),
    ("idle", ["MAINTENANCE"], NodeState.DRAIN), ("idle", ["REBOOT_REQUESTED"], NodeState.DRAIN),
    ("idle", ["RESERVED"], NodeState.DRAIN), ("drain", [], NodeState.DRAIN),
    ("drained", [], NodeState.DRAIN), ("draining", [], NodeState.DRAIN),
    ("fail", [], NodeState.DRAIN), ("error", [], NodeState.DRAIN),
])
def test_node_states(state, flags, expected):
    def edit(nodes):
        nodes[0].update(state=state, state_flags=flags, gres_used="gpu:k80:0(IDX:N/A)")
    view = nodes_view(edit)
    assert node_states(view)["gpu-k80-1"] is expected
    assert view.problems == ()


def test_an_unknown_node_state_is_named_and_not_scheduled():
    view = nodes_view(lambda n: n[0].update(state="weird", gres_used=""))
    assert node_states(view)["gpu-k80-1"] is NodeState.DOWN
    assert view.problems == ("slurm: node gpu-k80-1: unknown node state 'weird'; not scheduled",)


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda n: n[0].update(state_flags="DRAIN"),
     "slurm: node gpu-k80-1: skipped: field 'state_flags' is not a list of names: 'DRAIN'"),
    (lambda n: n[0].update(partitions="gpu"),
     "slurm: node gpu-k80-1: skipped: field 'partitions' is not a list of names: 'gpu'"),
    (lambda n: n[0].update(gres="gpu:k80:5000"),
     "slurm: node gpu-k80-1: skipped: 5000 GPUs in GRES 'gpu:k80:5000'"),
    (lambda n: n.__setitem__(0, 7),
     "slurm: node #0: skipped: the record is a number, not an object"),
    (lambda n: n[0].pop("name"), "slurm: node #0: skipped: missing field 'name'"),
    (lambda n: n[0].update(name=5),
     "slurm: node #0: skipped: field 'name' is a number, not text: 5"),
])
def test_an_unreadable_node_is_named_and_left_out(edit, problem):
    view = nodes_view(edit)
    assert problem in view.problems
    assert "gpu-k80-1" not in {n.name for n in view.state.nodes}
    assert {"gpu-k80-2", "gpu-v100-1", "gpu-v100-2"} <= {n.name for n in view.state.nodes}


def test_a_node_listed_twice_is_skipped_and_its_jobs_left_alone():
    view = nodes_view(lambda n: n.append(dict(n[0])), jobs=SQUEUE)
    assert "slurm: node gpu-k80-1: skipped: listed 2 times" in view.problems
    assert "gpu-k80-1" not in {n.name for n in view.state.nodes}
    assert "1" not in {j.id for j in view.state.jobs}    # job 1 runs there
    assert any(p.startswith("slurm: job 1: skipped: runs on node gpu-k80-1 whose record "
                            "could not be read") for p in view.problems)


def test_gres_decides_the_type_and_count():
    def edit(nodes):
        nodes[0].update(gres="gpu:k80:2,gpu:v100:2", gres_used="")
        nodes[1].update(gres="gpu:4", gres_used="")
        nodes[2].update(gres="", gres_used="")
    view = nodes_view(edit)
    nodes = {n.name: (n.gpu_type, n.gpus) for n in view.state.nodes}
    assert nodes["gpu-k80-1"] == ("k80", 2) and nodes["gpu-k80-2"] == ("gpu", 4)
    assert "gpu-v100-1" not in nodes          # no GPUs: not gpufair's
    assert view.problems == ("slurm: node gpu-k80-1: several GPU types "
                             "('gpu:k80:2,gpu:v100:2'); scheduling it as k80 only",)
    assert [t.name for t in view.state.gpu_types] == ["gpu", "k80", "v100"]


def test_only_managed_partitions_nodes_are_read():
    view = nodes_view(lambda n: n[0].update(partitions=["other"]), managed_partitions=["other"])
    assert [n.name for n in view.state.nodes] == ["gpu-k80-1"]


def test_gpus_in_use_by_nobody_gpufair_sees_are_not_offered():
    """sinfo says GPUs 0-1 of gpu-k80-1 are in use but no job of the state holds them: they
    belong to somebody gpufair does not schedule. An index past the node's count is noise."""
    def edit(nodes):
        nodes[0].update(gres_used="gpu:k80:3(IDX:0-1,7)")
        nodes[1].update(gres_used="gpu:k80:1(IDX:0)", state="drain")
    view = nodes_view(edit)
    by_name = {n.name: n for n in view.state.nodes}
    assert by_name["gpu-k80-1"].unavailable == (0, 1)
    assert by_name["gpu-k80-2"].unavailable == ()            # drained: not offered anyway
    assert view.problems == ("slurm: node gpu-k80-1: GPUs [0, 1] used by jobs gpufair does not "
                             "schedule; not offered",)
    held = translate(copy.deepcopy(SQUEUE), copy.deepcopy(SINFO), now=NOW)  # job 1 holds them
    assert {n.name: n.unavailable for n in held.state.nodes}["gpu-k80-1"] == ()


def test_features_come_from_active_features_first():
    def edit(nodes):
        nodes[0].update(active_features="fast,k80", features="slow")
        nodes[1].update(active_features="", features="fast")
    jobs = copy.deepcopy(SQUEUE)
    next(j for j in jobs["jobs"] if j["job_id"] == 4).update(
        features="fast", admin_comment="gpufair:managed")
    view = nodes_view(edit, jobs=jobs)
    assert next(j for j in view.state.jobs if j.id == "4").allowed_nodes == \
        ("gpu-k80-1", "gpu-k80-2")


def test_documents_without_their_lists():
    view = translate({}, copy.deepcopy(SINFO), now=NOW)
    assert view.problems == ("slurm: the jobs document has no 'jobs' list; every node is held "
                             "back this round",)
    assert all(n.state is NodeState.DRAIN for n in view.state.nodes)
    view = translate(copy.deepcopy(SQUEUE), {"nodes": None}, now=NOW)
    assert view.problems[0] == "slurm: the nodes document has no 'nodes' list"


# ---- job ids and order ------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "ok"), [
    ("12", "12"), (4294967295, "4294967295"), (4294967296, None), (0, None), ("0012x", None),
    (True, None), ("12345678901", None), (1.0, None),
])
def test_job_ids(value, ok):
    from gpufair.adapters.slurm.translate import _job_id
    if ok is not None:
        assert _job_id(value) == ok
    else:
        with pytest.raises(Malformed, match=r"^field 'job_id' is not a job id: "):
            _job_id(value)


def test_jobs_come_out_in_submission_order_and_a_bad_id_is_named_by_position():
    jobs = copy.deepcopy(SQUEUE)
    jobs["jobs"].reverse()
    jobs["jobs"][0]["job_id"] = "x"       # was job 5
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW)
    assert [j.id for j in view.state.jobs] == ["1", "2", "3", "4"]
    assert view.problems == ("slurm: job #0: skipped: field 'job_id' is not a job id: 'x'",)


@pytest.mark.parametrize(("value", "problem"), [
    (["PENDING"], None), ([], "slurm: job 4: skipped: unknown job state <a list of 0>"),
    (5, "slurm: job 4: skipped: field 'job_state' is a number, not a state name: 5"),
    ("pending", None),
])
def test_job_states_as_text_or_a_list_of_flags(value, problem):
    jobs = copy.deepcopy(SQUEUE)
    next(j for j in jobs["jobs"] if j["job_id"] == 4)["job_state"] = value
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW)
    assert view.problems == (() if problem is None else (problem,))
    assert ("4" in {j.id for j in view.state.jobs}) is (problem is None)


# ---- every field of a job -------------------------------------------------------------------
def test_every_field_of_a_running_job_and_its_slurm_info():
    job, info = running(account="vision", user_name="alice", user_id=1001, group_id=100,
                        array_job_id=77, array_task_id=3, submit_time=NOW - 500,
                        start_time=NOW - 400, suspend_time=0, restart_cnt=2, priority=4242,
                        partition="gpu", admin_comment="gpufair:managed",
                        required_nodes="gpu-k80-1", tres_per_node="gres:gpu:k80:2")
    assert (job.id, job.tenant, job.app, job.gpus) == ("1", "vision", "77", 2)
    assert (job.arrival_s, job.start_s, job.attained_s) == (NOW - 500, NOW - 400, 400.0)
    assert (job.restarts, job.owner_uid, job.owner_gid) == (2, 1001, 100)
    assert job.gpus_held == ("gpu-k80-1:0", "gpu-k80-1:1")
    assert (info.job_id, info.raw_state, info.partition, info.managed) == \
        ("1", "RUNNING", "gpu", True)
    assert (info.priority, info.gpu_type, info.pinned, info.nodes, info.node_count) == \
        (4242.0, "k80", ("gpu-k80-1",), ("gpu-k80-1",), 1)


def test_defaults_of_a_sparse_pending_record():
    job, info = one("PENDING", submit_time=None, restart_cnt=None, array_job_id=0,
                    admin_comment="", required_nodes="")
    assert (job.arrival_s, job.restarts, job.app, job.start_s) == (0.0, 0, None, None)
    assert (info.managed, info.pinned) == (False, ())


@pytest.mark.parametrize(("fields", "tenant"), [
    ({"account": "acct", "user_name": "bob", "user_id": 7}, "acct"),
    ({"account": "", "user_name": "bob", "user_id": 7}, "bob"),
    ({"account": "", "user_name": "", "user_id": 7}, "7"),
    ({"account": "", "user_name": "", "user_id": 0}, "0"),       # root is uid 0, not "none"
    ({"account": "", "user_name": "", "user_id": None}, "default"),
])
def test_the_tenant_is_the_account_then_the_user_then_the_uid(fields, tenant):
    job, _ = one("PENDING", **fields)
    assert job.tenant == tenant


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda r: r.pop("job_id"), "slurm: job #3: skipped: missing field 'job_id'"),
    (lambda r: r.pop("job_state"), "slurm: job 4: skipped: missing field 'job_state'"),
    (lambda r: r.update(tres_per_node="gres:gpu:2000000", node_count=1),
     "slurm: job 4: skipped: asks for 2000000 GPUs"),
    (lambda r: r.update(priority=1 << 32), "slurm: job 4: skipped: field 'priority' out of "
                                          "range: 4294967296"),
])
def test_a_broken_job_record_is_named(edit, problem):
    jobs = copy.deepcopy(SQUEUE)
    edit(next(j for j in jobs["jobs"] if j["job_id"] == 4))
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW)
    assert view.problems == (problem,)


def test_a_record_that_is_not_an_object_is_named():
    jobs = copy.deepcopy(SQUEUE)
    jobs["jobs"].append("junk")
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW)
    assert any(p.startswith("slurm: job #5: skipped: the record is text, not an object")
               for p in view.problems)


def test_a_job_that_asks_for_no_gpu_is_not_gpufairs_and_a_partition_list_is_split():
    job, view = constrained(tres_per_node="gres:gpu:0")
    assert job is None and view.problems == ()
    jobs = copy.deepcopy(SQUEUE)
    next(j for j in jobs["jobs"] if j["job_id"] == 4)["partition"] = "cpu,gpu"
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW, managed_partitions=["gpu"])
    assert "4" in {j.id for j in view.state.jobs}
    next(j for j in jobs["jobs"] if j["job_id"] == 4)["partition"] = "cpu"
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW, managed_partitions=["gpu"])
    assert "4" not in {j.id for j in view.state.jobs}


def test_a_job_of_the_largest_size_is_read():
    job, _ = one("PENDING", tres_per_node="gres:gpu:1048576", node_count=1)
    assert job.gpus == 1 << 20


@pytest.mark.parametrize(("pattern", "expected"), [
    ("out-%j.log", "/w/out-67.log"), ("%3j", "/w/067"), ("%03j", "/w/067"),
    ("%10j", "/w/0000000067"), ("%11j", "/w/0000000067"), ("%100j", "/w/0000000067"),
    ("%0j", "/w/67"), ("%010j", "/w/0000000067"), ("%1j", "/w/67"),
    ("100", None), ("000", "/w/000"), ("a%", "/w/a%"), ("50%-done", "/w/50%-done"),
])
def test_output_path_widths_and_literals(pattern, expected):
    from gpufair.adapters.slurm.translate import slurm_output_path
    assert slurm_output_path(pattern, cwd="/w", job_id=67) == expected


def test_output_path_of_a_relative_pattern_with_a_backslash_and_no_cwd_is_unknown():
    from gpufair.adapters.slurm.translate import slurm_output_path
    assert slurm_output_path("a\\b", cwd="", job_id=1) is None
    assert slurm_output_path("a\\b", cwd="/w", job_id=1) == "/wab"
    assert slurm_output_path("/x/\ufffd", cwd="/w", job_id=1) is None
    assert slurm_output_path("/x/XX", cwd="/w", job_id=1) == "/x/XX"


def test_a_dependency_on_a_job_of_the_same_document_is_read_from_its_state():
    jobs = copy.deepcopy(SQUEUE)
    by_id = {j["job_id"]: j for j in jobs["jobs"]}
    by_id[5].update(job_state="completed", tres_per_node="")      # done: not a GPU job now
    by_id[4].update(dependency="afterok:5", admin_comment="gpufair:managed")
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW)
    assert "4" in {j.id for j in view.state.jobs}
    by_id[5]["job_state"] = "FAILED"
    assert "4" not in {j.id for j in translate(jobs, copy.deepcopy(SINFO), now=NOW).state.jobs}


@pytest.mark.parametrize("edit", [
    {"tres_per_node": "gres:gpu:0"},                             # not a GPU job
    {"features": "a|b", "admin_comment": "gpufair:managed"},     # not modelled
    {"dependency": "afterok:99", "admin_comment": "gpufair:managed"},   # waits
    {"tres_per_node": 5},                                        # unreadable
])
def test_a_job_left_out_does_not_stop_the_ones_after_it(edit):
    jobs = copy.deepcopy(SQUEUE)
    next(j for j in jobs["jobs"] if j["job_id"] == 4).update(edit)
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW)
    assert [j.id for j in view.state.jobs] == ["1", "2", "3", "5"]


def test_the_state_has_the_time_and_the_tenants_of_its_jobs():
    jobs = copy.deepcopy(SQUEUE)
    next(j for j in jobs["jobs"] if j["job_id"] == 4)["account"] = "vision"
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW)
    assert view.state.time_s == NOW
    assert [t.name for t in view.state.tenants] == ["root", "vision"]


# ---- an elastic job's range, from its comment -------------------------------------------------
@pytest.mark.parametrize(("comment", "bounds", "problem"), [
    ("gpufair:gpus=1-8", (1, 8), None),
    ("run gpufair:gpus=4-4 fast", (4, 4), None),                    # one word among others
    ("gpufair:gpus=1-1048576", (1, 1 << 20), None),
    ("", (None, None), None),
    ("gpufair:gpus=1-8 gpufair:gpus=2-4", (None, None), "gives gpufair:gpus= more than once"),
    ("gpufair:gpus=abc", (None, None), "expects MIN-MAX (e.g. gpufair:gpus=1-8)"),
    ("gpufair:gpus=0-4", (None, None), "needs 1 <= MIN <= MAX <= 1048576"),
    ("gpufair:gpus=4-2", (None, None), "needs 1 <= MIN <= MAX <= 1048576"),
    ("gpufair:gpus=1-1048577", (None, None), "needs 1 <= MIN <= MAX <= 1048576"),
    ("gpufair:gpus=5-8", (None, None), "asks for 4 GPUs, outside 5-8"),
    ("gpufair:gpus=1-3", (None, None), "asks for 4 GPUs, outside 1-3"),
])
def test_an_elastic_range_in_the_comment(comment, bounds, problem):
    """Job 4 asks for 4 GPUs; a range it does not fit, or a broken one, is reported and the job
    stays rigid at the size it asked for."""
    jobs = copy.deepcopy(SQUEUE)
    next(j for j in jobs["jobs"] if j["job_id"] == 4)["comment"] = comment
    view = translate(jobs, copy.deepcopy(SINFO), now=NOW)
    job = next(j for j in view.state.jobs if j.id == "4")
    assert (job.min_gpus, job.max_gpus, job.gpus) == (*bounds, 4)
    word = next((w for w in comment.split() if w.startswith("gpufair:gpus=")), "")
    assert view.problems == (() if problem is None else (
        f"slurm: job 4: comment {word!r} {problem}; scheduled as a rigid job of 4 GPUs",))

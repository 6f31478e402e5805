"""Slurm job arrays: the task list of a pending array record, and how gpufair starts such a
record (one task at a time, by ``A_T``). Expected values are written out by hand from
Slurm's array syntax (sbatch(1) ``--array``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.arrays import TaskList, parse_task_list
from gpufair.adapters.slurm.commands import steps_for
from gpufair.adapters.slurm.translate import translate
from gpufair.adapters.slurm.transport import CommandResult, RestTransport
from gpufair.model import JobState, Preempt, SetPriority, Start


@pytest.mark.parametrize(("text", "expected"), [
    ("0-7", TaskList(0, 8)),
    ("7", TaskList(7, 1)),
    ("1,3,5", TaskList(1, 3)),
    ("0-12:4", TaskList(0, 4)),             # 0, 4, 8, 12
    ("0-15:4", TaskList(0, 4)),             # 0, 4, 8, 12 (15 is not a task)
    ("3-9:3,20", TaskList(3, 4)),           # 3, 6, 9, 20
    ("0-7%2", TaskList(0, 8, 2)),
    ("5,1-2%10", TaskList(1, 3, 10)),       # the lowest wherever it is
    ("2-3,8,10-11...", TaskList(2, None)),  # cut by Slurm: "10-11" may be cut too
    ("4,6,...%3", TaskList(4, None, 3)),
    (" 0-1 ", TaskList(0, 2)),
])
def test_task_lists_as_slurm_prints_them(text, expected):
    got = parse_task_list(text)
    assert (got.first, got.count, got.limit) == (expected.first, expected.count, expected.limit)


@pytest.mark.parametrize(("text", "why"), [
    ("", "no task ids"), ("N/A", "bad item"), ("0-7%", "bad %-limit"),
    ("0-7%0", "bad %-limit"), ("0-7%x", "bad %-limit"), ("7-3", "bad range"),
    ("0-8:0", "bad range"), ("1,,2", "bad item"), ("-1", "bad item"), ("0-", "bad item"),
    ("1...", "no task ids"), ("0-4000001", "bad range"), ("12345678", "bad item"),
    ("0-7%2%3", "bad item"), ("١", "bad item"), ("0-7%²", "bad %-limit"),
])
def test_what_is_not_a_task_list_is_refused_naming_it(text, why):
    with pytest.raises(ValueError, match=why) as err:
        parse_task_list(text)
    assert repr(text) in str(err.value)


# ---- the translation, the steps and the reads of an array --------------------------------

DATA = Path(__file__).parent / "data" / "slurm"
SQUEUE = json.loads((DATA / "squeue.json").read_text())
SINFO = json.loads((DATA / "sinfo.json").read_text())
MANAGED = "gpufair:managed"


def _array(tasks: str, *, limit: int = 0, split: dict[int, str] | None = None) -> dict:
    """The sample's held job 5 (1 GPU) as array 5 holding ``tasks``, with tasks split out
    of it as records of their own (task id → state; their job ids from 40 on)."""
    doc = copy.deepcopy(SQUEUE)
    record = doc["jobs"][4]
    record.update(array_job_id=5, array_task_id=None, array_task_string=tasks,
                  array_max_tasks=limit, admin_comment=MANAGED)
    for n, (task, state) in enumerate(sorted((split or {}).items())):
        rec = copy.deepcopy(record)
        rec.update(job_id=40 + n, array_task_id=task, array_task_string="", job_state=state,
                   priority=1 if state != "PENDING" else 0, array_max_tasks=0)
        if state == "RUNNING":
            rec.update(nodes="gpu-k80-1", gres_detail=[f"gpu:k80:1(IDX:{3 - n})"],
                       state_reason="None", start_time=NOW - 50)
        doc["jobs"].append(rec)
    return doc


NOW = 1795305510.0


def test_a_pending_array_record_is_the_jobs_of_its_tasks():
    """Each task the record stands for is a job ``A_T`` of its own (issue 29: one job for the
    whole record started one task per round), started by ``A_T``, held by the record."""
    view = translate(_array("3,5-9:2", split={1: "RUNNING"}), SINFO, now=NOW)
    assert view.problems == ()
    jobs = {j.id: j for j in view.state.jobs if j.app == "5"}
    assert set(jobs) == {"5_3", "5_5", "5_7", "5_9", "40"}
    for task in ("5_3", "5_5", "5_7", "5_9"):
        assert (jobs[task].gpus, jobs[task].state) == (1, JobState.PENDING)
        assert (view.jobs[task].job_id, view.jobs[task].control_id,
                view.jobs[task].record_id) == (task, task, "5")
    assert jobs["40"].state is JobState.RUNNING and jobs["40"].attained_s == 50.0
    # a task is named A_T to scontrol/scancel: its array's number is the whole array to
    # scontrol, and scancel does not find a task by its own job id
    assert (view.jobs["40"].control_id, view.jobs["40"].record_id) == ("5_1", "5_1")
    steps = steps_for(Preempt("40"), view.jobs["40"], hard=True)
    assert [(s.verb, s.job_id) for s in steps] == [("requeuehold", "5_1"),
                                                   ("verify-requeued", "5_1")]


def test_the_tasks_of_an_array_are_in_task_order_at_their_arrays_place():
    """Split-out tasks get job ids above their array record's (40, 41 here): in job id order
    the waiting tasks (the record) would come first and, arriving at the same time, take
    GPUs back from their running siblings under a policy that keeps arrival order."""
    doc = _array("3-9", split={1: "RUNNING", 0: "RUNNING"})
    later = copy.deepcopy(doc["jobs"][3])
    later.update(job_id=6)
    doc["jobs"].insert(0, later)
    order = [j.id for j in translate(doc, SINFO, now=NOW).state.jobs]
    assert order == ["1", "2", "3", "4", "40", "41", *(f"5_{t}" for t in range(3, 10)), "6"]
    # a task split out of the middle of the record (its owner's refused release splits it)
    # stays at its task's place: else FIFO would take GPUs back for it from tasks after it
    middle = [j.id for j in translate(_array("0-2,4-5", split={3: "PENDING"}), SINFO,
                                      now=NOW).state.jobs]
    assert middle == ["1", "2", "3", "4", "5_0", "5_1", "5_2", "40", "5_4", "5_5"]


def test_an_unreadable_task_list_skips_the_record_naming_it():
    view = translate(_array("0-3,x"), SINFO, now=NOW)
    assert [p for p in view.problems if "job 5:" in p] == \
        ["slurm: job 5: skipped: array task list '0-3,x': bad item 'x'"]
    assert [j.id for j in view.state.jobs] == ["1", "2", "3", "4"]


def test_an_array_at_its_limit_of_running_tasks_waits():
    full = translate(_array("2-7%2", limit=2, split={0: "RUNNING", 1: "RUNNING"}), SINFO,
                     now=NOW)
    assert [(j.id, why) for j, why in full.waiting] == \
        [("5_2", "its array has 2 tasks running, its limit (%2)")]
    # a task released but not started yet counts: Slurm would hold it back, not gpufair
    released = _array("2-7%2", limit=2, split={0: "RUNNING", 1: "PENDING"})
    released["jobs"][-1]["priority"] = 7
    assert [j.id for j, _ in translate(released, SINFO, now=NOW).waiting] == ["5_2"]
    room = translate(_array("2-7%2", limit=2, split={0: "RUNNING", 1: "COMPLETED"}), SINFO,
                     now=NOW)
    assert room.waiting == () and "5_2" in {j.id for j in room.state.jobs}
    # one task runs, the limit is 2: one more task may start, the lowest
    assert [j.id for j in room.state.jobs if j.id.startswith("5_")] == ["5_2"]
    wide = translate(_array("2-7%4", limit=4, split={0: "RUNNING"}), SINFO, now=NOW)
    assert [j.id for j in wide.state.jobs if j.id.startswith("5_")] == ["5_2", "5_3", "5_4"]


def test_an_array_lists_no_more_tasks_than_could_run_at_once():
    """An array of 4 million tasks is not 4 million jobs to the policy: at most as many as
    the cluster's GPUs could run at once (the rest follow as these start)."""
    gpus = sum(n.gpus for n in translate({"jobs": []}, SINFO, now=NOW).state.nodes)
    view = translate(_array("0-3999999"), SINFO, now=NOW)
    assert [j.id for j in view.state.jobs if j.app == "5"] == [f"5_{t}" for t in range(gpus)]
    cut = translate(_array("2,4,9-10..."), SINFO, now=NOW)   # Slurm cut the list short
    assert [j.id for j in cut.state.jobs if j.app == "5"] == ["5_2", "5_4"]


def test_a_task_list_knows_its_tasks():
    tasks = parse_task_list("1,4-12:4,20-21%3")
    assert [t for t in range(25) if t in tasks] == [1, 4, 8, 12, 20, 21]
    assert tasks.ids(4) == [1, 4, 8, 12] and tasks.ids(100) == [1, 4, 8, 12, 20, 21]
    assert parse_task_list("5,1-2").ids(2) == [1, 2] and "1" not in tasks


def test_a_start_acts_on_the_task_a_hold_or_a_priority_on_the_record():
    info = translate(_array("3-9"), SINFO, now=NOW).jobs["5_3"]
    steps = steps_for(Start("5_3", ("gpu-k80-2:0",)), info, hard=True)
    assert [(s.verb, s.job_id) for s in steps] == [
        ("update", "5_3"), ("verify-pinned", "5_3"), ("release", "5_3"),
        ("verify-released", "5_3")]
    assert [(s.verb, s.job_id) for s in steps_for(SetPriority("5_3", 9), info, hard=False)] \
        == [("update", "5")]
    released = copy.copy(info)
    object.__setattr__(released, "held", False)    # released whole (before this change)
    assert [(s.verb, s.job_id) for s in steps_for(Preempt("5_3"), released, hard=True)] == \
        [("uhold", "5"), ("verify-held", "5")]


class _Docs:
    """A transport whose jobs document the test sets; records every control call."""

    name = "docs"

    def __init__(self, jobs: dict) -> None:
        self.jobs = jobs
        self.calls: list[tuple[str, str]] = []

    def read_jobs(self) -> dict:
        return self.jobs

    def read_nodes(self) -> dict:
        return SINFO

    def control(self, verb: str, job_id: str, fields=None) -> CommandResult:
        self.calls.append((verb, job_id))
        return CommandResult(True, verb)


def test_a_task_is_read_as_its_own_record_once_split_out_else_as_its_array_record():
    docs = _Docs(_array("3-9"))
    slurm = SlurmAdapter(docs, SlurmSettings(), sleep=lambda s: None)
    assert slurm._read_job("5_3")["job_id"] == 5
    assert slurm._read_job("5_3", own=True) is None
    assert slurm._read_job("5_4")["job_id"] == 5   # any task the record stands for
    assert slurm._read_job("5_10") is None
    assert slurm._read_job("6_3") is None
    docs.jobs = _array("4-9", split={3: "PENDING"})
    assert slurm._read_job("5_3")["job_id"] == 40
    assert slurm._read_job("5_3", own=True)["job_id"] == 40
    assert slurm._read_job("5")["array_task_string"] == "4-9"
    # the last task left is the record itself (array_task_id set): not another task's
    docs.jobs = _array("9")
    docs.jobs["jobs"][4]["array_task_id"] = 9
    assert slurm._read_job("5_8") is None and slurm._read_job("5_9")["job_id"] == 5


def test_rest_hands_array_tasks_to_scontrol():
    cli = _Docs({"jobs": []})
    rest = RestTransport("unix:/nonexistent.sock", cli=cli)
    assert rest.control("release", "5_3").ok
    assert rest.control("update", "5_3", {"Priority": "4"}).ok
    assert cli.calls == [("release", "5_3"), ("update", "5_3")]


def test_the_checkpoint_signal_reaches_an_array_task_by_its_task_name():
    """22.05's ``scancel --signal=USR1 <a task's own job id>`` prints "Invalid job id
    specified" and exits 0: the task would be requeued without its checkpoint."""
    doc = _array("3-9", split={1: "RUNNING"})
    doc["jobs"][-1]["comment"] = "gpufair:checkpoint"
    docs = _Docs(doc)
    slurm = SlurmAdapter(docs, SlurmSettings(), sleep=lambda s: None)
    slurm.snapshot()
    assert slurm.warn_preemptions([Preempt("40", grace_s=2.0)]) == 2.0
    assert docs.calls == [("signal", "5_1")]

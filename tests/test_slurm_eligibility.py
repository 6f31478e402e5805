"""What makes a managed job not yet eligible, read from Slurm's own fields (issue 29, item 1).

``tests/data/slurm/squeue_eligibility.json`` and ``sinfo_eligibility.json`` are real
``squeue --json`` / ``sinfo --json`` output of the loopback Slurm 22.05 in hard mode
(job_submit.lua holding every managed job), read right after these submissions:

====  ===========  ==========================================================================
 id   name         how it was submitted
====  ===========  ==========================================================================
  9   begin        ``--begin=now+600 --gres=gpu:1``
 10   deadline     ``--deadline=now+3600 --time-min=10 --gres=gpu:1``
 11   adminheld    ``--gres=gpu:1``, then root's ``scontrol hold 11``
 12   running      ``--gres=gpu:1 --mem=70000 -c 4``, pinned to gpu-v100-1 and released
 13   child        ``--dependency=afterok:12 --gres=gpu:1``
 14   pergpu       ``--gres=gpu:2 --cpus-per-gpu=3 --mem-per-gpu=5000``
 15   excl         ``--gres=gpu:1 --exclusive``
 16   percpu       ``--gres=gpu:1 -n 4 --mem-per-cpu=2000``
 17   resv         ``--gres=gpu:1 --reservation=r1`` (r1: gpu-k80-1, from 5 minutes later)
 18   stranded     ``--gres=gpu:1 --mem=70000``, pinned to gpu-v100-1 and released
                   (Reason=Resources: job 12 holds 70,000 of its 128,000 MB)
 19   tasks        ``--gres=gpu:1 --ntasks-per-node=2 -c 2``
====  ===========  ==========================================================================

(jobs 1-8: cancelled earlier submissions, as squeue still lists them).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.adapter import stranded
from gpufair.adapters.slurm.commands import steps_for
from gpufair.adapters.slurm.translate import (
    REFUSED_NOTE,
    RESOURCES_GRACE_S,
    RETRY_REFUSED_S,
    held_by_gpufair,
    not_eligible,
    refused,
    translate,
)
from gpufair.adapters.slurm.transport import CommandResult, FileTransport, scontrol_argv
from gpufair.model import Migrate, Preempt, Start

DATA = Path(__file__).parent / "data" / "slurm"
SUBMITTED = 1795855711.0          # the submissions above (their submit_time)
READ = SUBMITTED + 10             # when the documents were read


def _docs() -> tuple[dict, dict]:
    return (json.loads((DATA / "squeue_eligibility.json").read_text()),
            json.loads((DATA / "sinfo_eligibility.json").read_text()))


def _record(jobs: dict, job_id: int) -> dict:
    return next(j for j in jobs["jobs"] if j["job_id"] == job_id)


def _waiting(view) -> dict[str, str]:
    return {job.id: why for job, why in view.waiting}


def test_a_begin_time_in_the_future_keeps_the_job_out_of_the_plan():
    jobs, nodes = _docs()
    view = translate(jobs, nodes, now=READ)
    assert "9" not in {j.id for j in view.state.jobs}
    assert _waiting(view)["9"].startswith("not eligible before 2026-11-28T")
    assert "(its --begin)" in _waiting(view)["9"]
    # at its begin time it is demand like any other
    begin = _record(jobs, 9)["eligible_time"]
    later = translate(jobs, nodes, now=begin + 1.0)
    assert "9" in {j.id for j in later.state.jobs} and "9" not in _waiting(later)


def test_a_requeue_s_begin_time_is_gpufair_s_to_override():
    """Slurm gives a requeued job a begin time ~2 minutes on: the job ran before, so that
    one is the requeue's delay (gpufair restarts its preempted jobs at once), not a --begin."""
    jobs, nodes = _docs()
    record = _record(jobs, 9)
    record["restart_cnt"] = 1
    assert not_eligible(record, READ) is None
    assert "9" in {j.id for j in translate(jobs, nodes, now=READ).state.jobs}


def test_a_deadline_that_cannot_be_met_keeps_the_job_out():
    jobs, nodes = _docs()
    deadline = _record(jobs, 10)["deadline"]          # --time-min=10: 600 s before it
    assert "10" in {j.id for j in translate(jobs, nodes, now=deadline - 601).state.jobs}
    late = translate(jobs, nodes, now=deadline - 599)
    assert "10" not in {j.id for j in late.state.jobs}
    assert "--deadline" in _waiting(late)["10"]
    # without --time-min the time limit counts; unknown (null) only the deadline itself
    record = dict(_record(jobs, 10), time_minimum=0, time_limit=None)
    assert not_eligible(record, deadline - 1) is None
    assert not_eligible(record, deadline) is not None
    assert not_eligible(dict(record, time_limit=30), deadline - 1799) is not None
    assert not_eligible(dict(record, time_limit=30), deadline - 1801) is None


def test_an_administrator_s_hold_is_honoured_and_survives_an_uninstall():
    jobs, nodes = _docs()
    view = translate(jobs, nodes, now=READ)
    assert "11" not in {j.id for j in view.state.jobs}
    assert "administrator" in _waiting(view)["11"]
    # gpufair's own holds (the lua's, uhold, requeuehold) are user holds: those it starts
    assert {"14", "15", "16", "19"} <= {j.id for j in view.state.jobs}
    released = held_by_gpufair(jobs)
    assert "11" not in released and {"9", "10", "13", "14"} <= set(released)


def test_an_unmet_dependency_keeps_the_job_out():
    jobs, nodes = _docs()
    view = translate(jobs, nodes, now=READ)
    assert "dependency" in _waiting(view)["13"]


def test_gpufair_s_own_holds_are_user_holds():
    """An admin's hold is JobHeldAdmin: gpufair's must not look like one, or the next round
    would take its own hold for an administrator's and never start the job again."""
    jobs, nodes = _docs()
    view = translate(jobs, nodes, now=READ)
    info = view.jobs["18"]                     # released, pinned: "starting"
    preempt = steps_for(Preempt("18"), info, hard=True)
    move = steps_for(Migrate("18", ("gpu-v100-2:0",)), info, hard=True)
    assert preempt[0].verb == "uhold" and move[0].verb == "uhold"
    assert scontrol_argv("uhold", "18") == ["scontrol", "uhold", "18"]
    assert not any(s.verb == "hold" for s in preempt + move)


@pytest.mark.parametrize("field", ["eligible_time", "deadline"])
def test_an_odd_time_field_is_a_malformed_record_not_a_crash(field):
    jobs, nodes = _docs()
    bad = copy.deepcopy(jobs)
    _record(bad, 14)[field] = "tomorrow"
    view = translate(bad, nodes, now=READ)
    assert any("job 14" in p and field in p for p in view.problems)
    assert "14" not in {j.id for j in view.state.jobs} and "14" not in _waiting(view)


def test_a_start_of_an_eligible_job_still_sets_its_start_time_now():
    """The release path's StartTime=now stays (a requeued job would wait ~120 s), and is
    harmless now that no job whose own begin time lies ahead is ever started."""
    jobs, nodes = _docs()
    view = translate(jobs, nodes, now=READ)
    steps = steps_for(Start("14", ("gpu-k80-1:0", "gpu-k80-1:1")), view.jobs["14"], hard=True)
    assert ("StartTime", "now") in steps[0].fields


def _job_12_gone() -> tuple[dict, dict]:
    """The samples as if job 12 had ended: gpu-v100-1 then has room for job 18."""
    jobs, nodes = _docs()
    jobs["jobs"] = [j for j in jobs["jobs"] if j["job_id"] != 12]
    node = next(n for n in nodes["nodes"] if n["name"] == "gpu-v100-1")
    node.update(alloc_cpus=0, alloc_memory=0, gres_used="gpu:v100:0(IDX:N/A)")
    return jobs, nodes


class _Site(FileTransport):
    """The sample documents, with uhold and AdminComment updates taking effect."""

    def __init__(self, squeue: dict, sinfo: dict) -> None:
        super().__init__(squeue, sinfo)
        self.calls: list[tuple[str, str, dict | None]] = []

    def control(self, verb, job_id, fields=None):
        self.calls.append((verb, job_id, dict(fields) if fields else None))
        record = _record(self.jobs, int(job_id))
        if verb == "uhold":
            record.update(priority=0, state_reason="JobHeldUser")
        elif verb == "update" and fields and "AdminComment" in fields:
            record["admin_comment"] = fields["AdminComment"]
        return CommandResult(True, verb)


@pytest.mark.parametrize("reason", ["QOSMaxJobsPerUserLimit", "AssocGrpGRES", "ReqNodeNotAvail",
                                    "Licenses"])
def test_a_release_slurm_refuses_is_held_again_noted_and_offered_again_later(reason):
    """Job 18, released pinned to gpu-v100-1, waits there for a reason a wait does not cure
    (a limit, say). The next round's reconcile holds it again and notes the refusal in its
    admin comment: the job is out of the plan (and of the dry run's) for RETRY_REFUSED_S,
    then offered again."""
    jobs, nodes = _job_12_gone()                                    # room: not a memory case
    _record(jobs, 18)["state_reason"] = reason
    assert stranded(translate(jobs, nodes, now=READ)) == ["18"]
    site = _Site(jobs, nodes)
    adapter = SlurmAdapter(site, SlurmSettings(), clock=lambda: READ, mode="hard")
    adapter.reconcile()
    assert [c[:2] for c in site.calls] == [("uhold", "18"), ("update", "18")]
    assert site.calls[1][2] == {
        "AdminComment": f"gpufair:managed {REFUSED_NOTE}{reason}@{READ:.0f}"}
    view = translate(site.jobs, nodes, now=READ + RETRY_REFUSED_S - 1)
    assert f"Slurm refused to start it ({reason})" in _waiting(view)["18"]
    again = translate(site.jobs, nodes, now=READ + RETRY_REFUSED_S)
    assert "18" in {j.id for j in again.state.jobs} and "18" not in _waiting(again)


def test_resources_alone_is_no_refusal():
    """Reason=Resources is what a job pinned onto GPUs a requeue is still freeing shows (seen
    on the loopback Slurm for the seconds of KillWait): the model's own count decides."""
    jobs, nodes = _job_12_gone()
    assert _record(jobs, 18)["state_reason"] == "Resources"
    assert stranded(translate(jobs, nodes, now=READ)) == []
    assert not refused("Resources") and refused("QOSGrpGRES") and refused("ReqNodeNotAvail")


def test_a_managed_job_moved_into_a_reservation_waits_for_an_operator():
    """job_submit.lua leaves a job submitted into a reservation to Slurm (unheld, unmarked);
    the sample's job 17 was submitted before that, as a job moved into one later would be."""
    jobs, nodes = _docs()
    view = translate(jobs, nodes, now=READ)
    assert "reservation 'r1'" in _waiting(view)["17"]


@pytest.mark.parametrize(("looked_after_s", "settling", "placed_anew"), [
    (RESOURCES_GRACE_S, False, True),       # Slurm looked well after the release: no room
    (RESOURCES_GRACE_S - 1, False, False),  # too soon to tell
    (RESOURCES_GRACE_S + 60, True, False),  # a requeue still frees its node: it waits
])
def test_resources_long_after_the_release_with_nothing_settling(looked_after_s, settling,
                                                                placed_anew):
    """Resources for a cause gpufair does not count (a GRES, a limit it does not model): once
    Slurm's scheduler looked at the released job RESOURCES_GRACE_S after its release and
    still found nothing, with no requeue of gpufair's settling on its node, the job is held
    again and placed anew (not noted: the next round may try it elsewhere at once)."""
    jobs, nodes = _job_12_gone()
    record = _record(jobs, 18)
    record["last_sched_evaluation"] = record["eligible_time"] + looked_after_s
    if settling:
        jobs["jobs"].append(dict(_record(jobs, 14), job_id=30, job_state="COMPLETING",
                                 nodes="gpu-v100-1", gres_detail=["gpu:v100:1(IDX:1)"],
                                 admin_comment="gpufair:managed", priority=1))
    view = translate(jobs, nodes, now=READ)
    assert (stranded(view) == ["18"]) is placed_anew, (view.settling_nodes, stranded(view))
    if placed_anew:
        site = _Site(jobs, nodes)
        SlurmAdapter(site, SlurmSettings(), clock=lambda: READ, mode="hard").reconcile()
        assert [c[:2] for c in site.calls] == [("uhold", "18")]     # held, no refusal note

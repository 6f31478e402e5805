"""Issue 30 item 4: a round's starts applied together (shared reads, one ``scontrol release``
of all their ids), each with its own outcome, journalled as before, at a bounded rate."""

from __future__ import annotations

import pytest
from slurm_fake import FakeSlurm

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.transport import per_id_outcomes, scontrol_many_argv
from gpufair.core.enrich import with_default_profiles
from gpufair.core.round import Round, RoundRules
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import DONE, FAILED, SKIPPED, Store
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

NODES = {"v1": ("v100", 4), "v2": ("v100", 4)}


def test_each_ids_outcome_is_read_from_slurms_lines():
    """22.05's words, as the loopback cluster printed them for ``scontrol release 1,4,99``."""
    text = ("Job has already finished for job 4\nInvalid job id specified for job 99\n"
            "slurm_suspend error: Job has already finished")
    out = per_id_outcomes("release", ["1", "4", "99", "5_2"], 1, text)
    assert out is not None
    assert {j: (o.ok, o.detail) for j, o in out.items()} == {
        "1": (True, "release"), "4": (False, "Job has already finished"),
        "99": (False, "Invalid job id specified"), "5_2": (True, "release")}
    done = per_id_outcomes("release", ["1", "2"], 0, "")
    assert done is not None and all(o.ok for o in done.values())
    # a refusal of the whole call, or a failure naming no id of it: asked per id instead
    assert per_id_outcomes("release", ["2", "3"], 1, "scontrol: error: Invalid job ID 2,3") \
        is None
    assert per_id_outcomes("release", ["2"], 1, "Invalid job id specified for job 20") is None


def test_several_ids_are_one_comma_list_of_checked_ids():
    assert scontrol_many_argv("release", ["1", "5_2"]) == ["scontrol", "release", "1,5_2"]
    assert scontrol_many_argv("requeuehold", ["3", "4"]) == ["scontrol", "requeuehold", "3,4"]
    for verb, ids in (("update", ["1", "2"]), ("suspend", ["1", "2"]), ("release", []),
                      ("release", ["1", "2;reboot"]), ("release", ["1,2"])):
        with pytest.raises(ValueError):
            scontrol_many_argv(verb, ids)


def _daemon(slurm: FakeSlurm, store: Store, sleeps: list[float] | None = None,
            **settings) -> Daemon:
    adapter = SlurmAdapter(slurm, SlurmSettings(), mode="hard", sleep=lambda s: None,
                           clock=lambda: slurm.clock)
    rounds = Round(create_policy("fifo", PolicyConfig()), RoundRules(mode="hard"),
                   enrichers=[with_default_profiles])
    return Daemon(adapter, rounds, store, ServiceSettings(**settings),
                  sleep=(sleeps.append if sleeps is not None else lambda s: None))


def _four_waiting(slurm: FakeSlurm) -> None:
    for job in ("1", "2", "3", "4"):
        slurm.submit(job, 2)


@pytest.mark.parametrize(("batch", "releases", "reads"), [(100, 1, 3), (2, 2, 6), (1, 0, 12)])
def test_a_rounds_starts_share_their_reads_and_release(tmp_path, batch, releases, reads):
    """Four starts: together, one read before them, one per check (pins, releases) and one
    release of all four ids; one at a time (apply_batch = 1, the old way) three reads
    each and a release each."""
    slurm = FakeSlurm(NODES)
    _four_waiting(slurm)
    store = Store(tmp_path / "s.db")
    daemon = _daemon(slurm, store, apply_batch=batch)
    original = daemon.adapter.snapshot
    daemon.adapter.snapshot = lambda: (original(), setattr(slurm, "reads", 0))[0]
    round_id = daemon.run_round()
    assert [(e.action.job_id, e.status) for e in store.journal(round_id)] == \
        [(j, DONE) for j in "1234"]
    assert slurm.reads == reads
    assert len(slurm.many) == releases
    assert sorted(j for _, ids in slurm.many for j in ids) == ([] if batch == 1 else
                                                               ["1", "2", "3", "4"])
    assert all(count == 1 for count in slurm.verbs.values())
    assert {j: slurm.jobs[j]["job_state"] for j in "1234"} == dict.fromkeys("1234", "RUNNING")


def test_one_failing_id_in_the_release_loses_no_other(tmp_path):
    slurm = FakeSlurm(NODES)
    _four_waiting(slurm)
    release_all = slurm.control_many

    def owner_cancels_3_first(verb, job_ids):
        slurm.jobs.pop("3")
        return release_all(verb, job_ids)

    slurm.control_many = owner_cancels_3_first
    store = Store(tmp_path / "s.db")
    round_id = _daemon(slurm, store).run_round()
    journal = {e.action.job_id: (e.status, e.detail) for e in store.journal(round_id)}
    assert journal["3"] == (FAILED, "release failed: Invalid job id specified "
                                    "(after update, verify-pinned)")
    assert {j: journal[j][0] for j in "124"} == dict.fromkeys("124", DONE)
    assert {j: slurm.jobs[j]["job_state"] for j in "124"} == dict.fromkeys("124", "RUNNING")


def test_slurm_gone_mid_batch_sends_nothing_more_and_the_next_round_starts_them(tmp_path):
    """Two pins answered, the third not: no pin and no release is sent after it; every start
    is journalled as not done (the two pinned jobs stay held: nothing runs unplanned), and
    the next round, Slurm back, starts all four."""
    slurm = FakeSlurm(NODES)
    _four_waiting(slurm)
    slurm.unavailable_after = 2
    store = Store(tmp_path / "s.db")
    round_id = _daemon(slurm, store).run_round()
    journal = store.journal(round_id)
    assert [e.status for e in journal] == [SKIPPED] * 4
    assert all(e.detail.startswith("resource manager unavailable") for e in journal)
    assert [verb for verb, _ in slurm.verbs] == ["update", "update"]
    assert [slurm.jobs[j]["priority"] for j in "1234"] == [0, 0, 0, 0]
    slurm.unavailable_after = None
    again = _daemon(slurm, store).run_round()
    assert [e.status for e in store.journal(again)] == [DONE] * 4


@pytest.mark.parametrize(("batch", "pauses"), [(100, [2.0]), (2, [1.0, 1.0]), (1, [0.5] * 4)])
def test_the_action_rate_stays_bounded_when_applied_together(tmp_path, batch, pauses):
    """``action_interval_s`` per action, paid after each group for all its actions: at
    most 1/interval actions a second however they are grouped."""
    slurm = FakeSlurm(NODES)
    _four_waiting(slurm)
    sleeps: list[float] = []
    _daemon(slurm, Store(tmp_path / "s.db"), sleeps, apply_batch=batch,
            action_interval_s=0.5).run_round()
    assert sleeps == pauses


def test_a_run_of_preemptions_shares_its_reads_and_one_requeuehold():
    """Issue 30: preemptions were sent one at a time (a read, a requeuehold and a read
    each). Together: one read before, one requeuehold of their ids, one read to check; a
    job that ended since the snapshot is skipped (stale), the others go on; a suspension
    after them goes alone."""
    from gpufair.model import Preempt, PreemptMode

    slurm = FakeSlurm(NODES)
    _four_waiting(slurm)
    for job, node, idx in zip("1234", ["v1", "v1", "v2", "v2"], ["0-1", "2-3"] * 2,
                              strict=True):
        slurm.jobs[job]["pinned"] = [node]
        slurm.run_now(job, [node])
        slurm.jobs[job]["gres_detail"] = [f"gpu:v100:2(IDX:{idx})"]
    adapter = SlurmAdapter(slurm, SlurmSettings(), mode="hard", sleep=lambda s: None,
                           clock=lambda: slurm.clock)
    adapter.snapshot()
    slurm.jobs["2"]["job_state"] = "COMPLETED"               # it ended after the snapshot
    slurm.reads = 0
    results = adapter.apply_many([Preempt("1"), Preempt("4"), Preempt("2"),
                                  Preempt("3", PreemptMode.SUSPEND)])
    assert [(r.ok, r.stale) for r in results] == [(True, False), (True, False), (False, True),
                                                  (True, False)]
    assert slurm.many == [("requeuehold", ("1", "4"))]
    assert slurm.verbs[("requeuehold", "2")] == 0 and slurm.verbs[("suspend", "3")] == 1
    assert slurm.reads == 2 + 1          # the run: before and to check; the suspension: before
    assert {j: slurm.jobs[j]["job_state"] for j in "134"} == {
        "1": "PENDING", "3": "SUSPENDED", "4": "PENDING"}

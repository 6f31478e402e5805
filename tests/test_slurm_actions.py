"""Actions → Slurm verbs, and the adapter's read retries, against a recording fake transport."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings, SlurmUnavailable
from gpufair.adapters.slurm.commands import NotExpressible, precondition, steps_for
from gpufair.adapters.slurm.translate import SlurmJobInfo
from gpufair.adapters.slurm.transport import CommandResult, TransportError, scontrol_argv
from gpufair.core.guards import rank_priorities
from gpufair.model import Migrate, Preempt, PreemptMode, Resize, SetPriority, Start

DATA = Path(__file__).parent / "data" / "slurm"


def _info(**kw) -> SlurmJobInfo:
    base = dict(job_id="7", raw_state="PENDING", partition="gpu", reason="JobHeldUser",
                held=True, managed=True, priority=0.0, nice=0, gres_field="TresPerNode",
                gpu_type=None, nodes=(), node_count=1)
    base.update(kw)
    return SlurmJobInfo(**base)


def test_start_pins_nodes_then_releases():
    steps = steps_for(Start("7", ("a:0", "a:1", "b:0", "b:1")), _info(), hard=True)
    assert [s.verb for s in steps] == ["update", "verify-pinned", "release", "verify-released"]
    assert steps[0].as_fields() == {"NodeList": "a,b", "NumNodes": "2",
                                    "TresPerNode": "gres:gpu:2", "StartTime": "now"}


def test_start_keeps_the_field_and_type_the_job_used():
    fields = steps_for(Start("7", ("a:0", "a:1", "b:0")), _info(gres_field="TresPerJob",
                                                               gpu_type="k80"), hard=True)
    assert fields[0].as_fields()["TresPerJob"] == "gres:gpu:k80:3"
    with pytest.raises(NotExpressible, match="uneven"):
        steps_for(Start("7", ("a:0", "a:1", "b:0")), _info(), hard=True)


def test_preempt_holds_in_hard_mode_and_suspend_is_suspend():
    assert [s.verb for s in steps_for(Preempt("7"), _info(), hard=True)] == \
        ["requeuehold", "verify-requeued"]
    assert [s.verb for s in steps_for(Preempt("7"), _info(), hard=False)] == \
        ["requeue", "verify-requeued"]
    assert [s.verb for s in steps_for(Preempt("7", PreemptMode.SUSPEND), _info(),
                                      hard=True)] == ["suspend"]


def test_migrate_waits_for_the_requeue_to_settle():
    verbs = [s.verb for s in steps_for(Migrate("7", ("b:0",)), _info(), hard=True)]
    assert verbs == ["requeuehold", "await-pending", "update", "verify-pinned", "release",
                     "verify-released"]


def test_priorities_by_rank():
    assert rank_priorities({"3": -1.0, "10": 0.0, "2": -2.0}) == \
        {"10": 1_000_000, "3": 999_999, "2": 999_998}
    assert steps_for(SetPriority("7", 999_999), _info(), hard=False)[0].as_fields() == \
        {"Priority": "999999"}


def test_argv_never_needs_a_shell():
    assert scontrol_argv("update", "12", {"Priority": "5"}) == \
        ["scontrol", "update", "JobId=12", "Priority=5"]
    assert scontrol_argv("signal", "12", {"signal": "USR1"}) == \
        ["scancel", "--signal=USR1", "--full", "12"]
    with pytest.raises(ValueError):
        scontrol_argv("update", "12; rm -rf /", {"Priority": "5"})
    # a comment (the owner's hold mark after their words) is one argument, spaces and all
    assert scontrol_argv("update", "12", {"Comment": "a b gpufair:userhold"}) == \
        ["scontrol", "update", "JobId=12", "Comment=a b gpufair:userhold"]
    for fields in ({"Comment": "a\nb"}, {"Comment": "a\tb"}, {"Comment": "a\x00b"},
                   {"NodeList": "a b"}, {"Priority": "5 Comment=x"}):
        with pytest.raises(ValueError):
            scontrol_argv("update", "12", fields)
    with pytest.raises(ValueError):
        scontrol_argv("reboot", "12")


class FakeTransport:
    name = "fake"

    def __init__(self, fail_reads: int = 0) -> None:
        self.jobs = json.loads((DATA / "squeue.json").read_text())
        self.nodes = json.loads((DATA / "sinfo.json").read_text())
        self.fail_reads = fail_reads
        self.calls: list[tuple[str, str, dict | None]] = []

    def read_jobs(self) -> dict:
        if self.fail_reads:
            self.fail_reads -= 1
            raise TransportError("squeue: no answer in 10 s")
        return self.jobs

    def read_nodes(self) -> dict:
        return self.nodes

    def control(self, verb, job_id, fields=None):
        """Enough of slurmctld for the adapter's checks: updates pin, requeues hold."""
        self.calls.append((verb, job_id, fields))
        if verb == "release" and job_id == "5":
            return CommandResult(False, "Invalid job id")
        job = next((j for j in self.jobs["jobs"] if str(j["job_id"]) == job_id), None)
        if job is not None and verb == "update" and "NodeList" in (fields or {}):
            job["required_nodes"] = fields["NodeList"]
        elif job is not None and verb in ("requeuehold", "requeue"):
            job.update(job_state="COMPLETING", priority=0)
        return CommandResult(True, verb)


def test_reads_retry_with_backoff_then_give_up():
    sleeps: list[float] = []
    adapter = SlurmAdapter(FakeTransport(fail_reads=2), SlurmSettings(retries=3, backoff_s=0.1),
                           sleep=sleeps.append)
    adapter.snapshot()
    assert sleeps == [0.1, 0.2]
    adapter = SlurmAdapter(FakeTransport(fail_reads=5), SlurmSettings(retries=3),
                           sleep=lambda s: None)
    with pytest.raises(SlurmUnavailable, match="no answer"):
        adapter.snapshot()


def test_hard_mode_snapshot_offers_only_jobs_marked_by_job_submit():
    transport = FakeTransport()
    transport.jobs["jobs"][4]["admin_comment"] = "gpufair:managed"
    state = SlurmAdapter(transport, SlurmSettings(), mode="hard").snapshot()
    pending = [j.id for j in state.jobs if j.state.value == "pending"]
    assert pending == ["5"]
    soft = SlurmAdapter(FakeTransport(), SlurmSettings(), mode="soft").snapshot()
    assert [j.id for j in soft.jobs if j.state.value == "pending"] == ["4", "5"]


def test_apply_reports_failures_with_the_step():
    transport = FakeTransport()
    adapter = SlurmAdapter(transport, SlurmSettings(), sleep=lambda s: None)
    adapter.snapshot()
    result = adapter.apply([Start("5", ("gpu-k80-2:3",))])[0]
    assert not result.ok and "release failed" in result.detail and "after update" in result.detail
    missing = adapter.apply([Start("99", ("gpu-k80-2:3",))])[0]
    assert not missing.ok and "99" in missing.detail


def test_grace_signal_goes_out_once_for_all_victims_that_opted_in():
    transport = FakeTransport()
    for job in transport.jobs["jobs"]:
        if str(job["job_id"]) in ("1", "2"):
            job["comment"] = "resnet sweep gpufair:checkpoint"
    sleeps: list[float] = []
    adapter = SlurmAdapter(transport, SlurmSettings(), sleep=sleeps.append)
    adapter.snapshot()
    adapter.apply([Preempt("1", grace_s=5), Preempt("2", grace_s=3)])
    assert [c[0] for c in transport.calls] == ["signal", "signal", "requeuehold", "requeuehold"]
    assert sleeps == [5]


def test_checkpoint_signals_stop_once_slurm_stops_answering():
    """Issue 29 soak, seed 3: two victims' scancels each waited out their 10-s timeout, one
    after the other, while the GPUs the round freed idled for 20 s. Once one signal finds
    Slurm not answering, the others are not sent (the round's requeues meet the same
    silence and a later round retries); a plain refusal still lets the others go."""

    class Silent(FakeTransport):
        def control(self, verb, job_id, fields=None):
            self.calls.append((verb, job_id, fields))
            if verb == "signal" and job_id == self.silent:
                return CommandResult(False, "scancel: no answer in 10 s", unavailable=True)
            if verb == "signal" and job_id == self.refuses:
                return CommandResult(False, "Invalid job id specified")
            return CommandResult(True, verb)

    for silent, refuses, sent, grace in (("1", None, ["1"], 0.0),
                                         (None, "1", ["1", "2", "3"], 5.0)):
        transport = Silent()
        transport.silent, transport.refuses = silent, refuses
        for job in transport.jobs["jobs"]:
            job["comment"] = "gpufair:checkpoint"
        adapter = SlurmAdapter(transport, SlurmSettings(), sleep=lambda s: None)
        adapter.snapshot()
        victims = [Preempt("1", grace_s=5), Preempt("2", grace_s=5), Preempt("3", grace_s=5)]
        assert adapter.warn_preemptions(victims) == grace
        assert [j for verb, j, _ in transport.calls if verb == "signal"] == sent


def test_no_signal_to_a_job_that_did_not_ask_for_one():
    """SIGUSR1 kills a job that does not trap it: it would end FAILED, not requeued."""
    transport = FakeTransport()
    sleeps: list[float] = []
    adapter = SlurmAdapter(transport, SlurmSettings(), sleep=sleeps.append)
    adapter.snapshot()
    adapter.apply([Preempt("1", grace_s=5)])
    assert [c[0] for c in transport.calls] == ["requeuehold"] and sleeps == []
    everyone = SlurmAdapter(FakeTransport(), SlurmSettings(checkpoint_opt_in=""),
                            sleep=sleeps.append)
    everyone.snapshot()
    everyone.apply([Preempt("1", grace_s=5)])
    assert [c[0] for c in everyone.transport.calls] == ["signal", "requeuehold"]


def test_hold_and_cancel_are_plain_verbs():
    transport = FakeTransport()
    adapter = SlurmAdapter(transport, SlurmSettings())
    assert adapter.hold("4").ok and adapter.cancel("4").ok
    assert transport.calls == [("uhold", "4", None), ("cancel", "4", None)]


def _running(**kw) -> dict:
    return {"job_state": "RUNNING", "restart_cnt": 0, "start_time": 1000, **kw}


@pytest.mark.parametrize(("action", "fresh", "problem"), [
    (Preempt("7"), None, "no longer in Slurm"),
    (Preempt("7"), _running(job_state="COMPLETED"), "COMPLETED, not RUNNING"),
    (Preempt("7"), _running(start_time=1500), "started again"),
    (Preempt("7"), _running(restart_cnt=1), "restarted since the snapshot"),
    (Migrate("7", ("b:0",)), _running(job_state="COMPLETING"), "COMPLETING, not RUNNING"),
    (Start("7", ("b:0",)), _running(job_state="COMPLETING", start_time=0), "still settling"),
    (Start("7", ("b:0",)), _running(), "RUNNING, not PENDING"),
    (Preempt("7"), _running(), None),
    (Preempt("7"), _running(start_time=1000.4), None),
    (Start("7", ("b:0",)), _running(job_state="PENDING", start_time=0), None),
])
def test_every_action_is_checked_against_the_job_as_slurm_shows_it_now(action, fresh, problem):
    """A requeue of a job that just COMPLETED would run it again; a preemption of a job that
    restarted since the snapshot would hit the wrong run: both are refused, not carried out."""
    from gpufair.model import Job, JobState
    job = Job("7", state=JobState.RUNNING if isinstance(action, (Preempt, Migrate))
              else JobState.PENDING, start_s=1000.0, restarts=0)
    found = precondition(action, job, fresh)
    assert (found is None) if problem is None else (problem in found)


def test_a_job_that_finished_since_the_snapshot_is_not_requeued():
    transport = FakeTransport()
    adapter = SlurmAdapter(transport, SlurmSettings(), sleep=lambda s: None)
    adapter.snapshot()
    job = next(j for j in transport.jobs["jobs"] if str(j["job_id"]) == "1")
    job["job_state"] = "COMPLETED"
    result = adapter.apply_one(Preempt("1"))
    assert not result.ok and not result.retry and "COMPLETED, not RUNNING" in result.detail
    assert not [c for c in transport.calls if c[0] == "requeuehold"]


def test_a_migrating_job_that_opted_in_is_warned_before_it_restarts():
    transport = FakeTransport()
    job = next(j for j in transport.jobs["jobs"] if str(j["job_id"]) == "1")
    job["comment"] = "gpufair:checkpoint"
    sleeps: list[float] = []
    adapter = SlurmAdapter(transport, SlurmSettings(), sleep=sleeps.append)
    adapter.snapshot()
    assert adapter.warn_preemptions([Migrate("1", ("gpu-k80-2:0",), 20.0)]) == 20.0
    assert transport.calls == [("signal", "1", {"signal": "USR1"})]


def test_an_action_on_a_job_that_changed_is_stale_not_failed(tmp_path):
    """The daemon journals it as skipped: nothing went wrong, the next round plans again."""
    from fixed_policy import FixedPlan

    from gpufair.core.round import Round
    from gpufair.model import Plan
    from gpufair.plugin.daemon import Daemon, ServiceSettings
    from gpufair.plugin.store import SKIPPED, Store
    transport = FakeTransport()
    adapter = SlurmAdapter(transport, SlurmSettings(), sleep=lambda s: None)
    store = Store(tmp_path / "s.db")
    daemon = Daemon(adapter, Round(FixedPlan(Plan())), store, ServiceSettings(),
                    sleep=lambda s: None)
    adapter.snapshot()
    job = next(j for j in transport.jobs["jobs"] if str(j["job_id"]) == "1")
    round_id = store.begin_round("fixed", {}, [Preempt("1")], keys=["k"])
    job["job_state"] = "COMPLETED"                     # it finished after the snapshot
    daemon.apply_round(round_id)
    [entry] = store.journal(round_id)
    assert entry.status == SKIPPED and "COMPLETED, not RUNNING" in entry.detail


class ManualClock:
    """The adapter's wall clock and its sleep: time moves only when the adapter sleeps."""

    def __init__(self, start: float) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_a_restart_after_a_requeue_waits_into_the_next_second():
    """slurmd revokes a requeued incarnation's credential to the second; a restart launched
    in that second fails ("Job credential revoked"). The update and release of a resize come
    only after the wall clock has passed into the next second."""
    clock = ManualClock(1000.3)

    class Settling(FakeTransport):
        def read_jobs(self) -> dict:
            for job in self.jobs["jobs"]:     # the requeue settles at the next read
                if job["job_state"] == "COMPLETING":
                    job["job_state"] = "PENDING"
            return self.jobs

        def control(self, verb, job_id, fields=None):
            self.at = getattr(self, "at", [])
            self.at.append((verb, clock.now))
            result = super().control(verb, job_id, fields)
            if verb == "requeuehold":    # as slurmctld: a restart, submit_time = the requeue
                job = next(j for j in self.jobs["jobs"] if str(j["job_id"]) == job_id)
                job.update(restart_cnt=int(job.get("restart_cnt") or 0) + 1,
                           submit_time=int(clock.now))
            return result

    transport = Settling()
    adapter = SlurmAdapter(transport, SlurmSettings(), clock=clock, sleep=clock.sleep)
    adapter.snapshot()
    adapter.apply([Resize("1", ("gpu-k80-1:0",))])
    times = dict(transport.at)
    assert times["requeuehold"] == 1000.3
    assert times["release"] >= 1001.0
    assert clock.sleeps == [pytest.approx(0.75)]     # one wait, not one per check


def _requeued_by_someone(transport: FakeTransport, job_id: str, requeued_at: float) -> None:
    """A managed job that somebody else requeued and gpufair held again (``reconcile``)."""
    job = next(j for j in transport.jobs["jobs"] if str(j["job_id"]) == job_id)
    job.update(job_state="PENDING", priority=0, state_reason="JobHeldUser",
               admin_comment="gpufair:managed", restart_cnt=1, submit_time=int(requeued_at),
               required_nodes="", nodes="")


@pytest.mark.parametrize("batched", [False, True])
def test_a_start_right_after_somebody_elses_requeue_waits_into_the_next_second(batched):
    """Issue 29 soak, seed 2: a job's owner requeued it; gpufair held it again and started
    it 0.05 s later, in the second in which slurmd had revoked its credential, and it ended
    FAILED. The release now comes in a later second than the read that showed it PENDING:
    once for a batch; not at all for a requeue long past."""
    clock = ManualClock(2000.4)

    class Timed(FakeTransport):
        def control(self, verb, job_id, fields=None):
            self.at = getattr(self, "at", [])
            self.at.append((verb, job_id, clock.now))
            if verb == "release":
                job = next(j for j in self.jobs["jobs"] if str(j["job_id"]) == job_id)
                job.update(priority=1000, state_reason="None")
                return CommandResult(True, verb)
            return super().control(verb, job_id, fields)

        def control_many(self, verb, job_ids):
            return {j: self.control(verb, j) for j in job_ids}

    transport = Timed()
    _requeued_by_someone(transport, "3", clock.now - 0.3)
    _requeued_by_someone(transport, "4", clock.now - 0.2)
    _requeued_by_someone(transport, "5", clock.now - 600)      # long past: no wait for it
    adapter = SlurmAdapter(transport, SlurmSettings(), clock=clock, sleep=clock.sleep,
                           mode="hard")
    adapter.snapshot()
    starts = [Start("3", ("gpu-k80-2:0",)), Start("4", ("gpu-k80-2:1",))]
    results = adapter.apply_many(starts) if batched else [adapter.apply_one(starts[0])]
    assert all(r.ok for r in results), results
    released = [t for verb, _, t in transport.at if verb == "release"]
    assert released and min(released) >= 2001.0
    assert clock.sleeps == [pytest.approx(0.65)]

    transport.at.clear()
    clock.sleeps.clear()
    adapter.snapshot()
    adapter.apply_one(Start("5", ("gpu-k80-1:0",)))
    assert [verb for verb, job, _ in transport.at if job == "5"] == ["update", "release"]
    assert clock.sleeps == []                 # released without a wait


def test_a_problem_is_logged_once_while_it_lasts(caplog):
    """Issue 29: a job's malformed ``gpufair:gpus=`` comment was warned about at every read
    (twice per round, and at every poll) for as long as the job waited."""
    transport = FakeTransport()
    transport.jobs["jobs"][4]["comment"] = "gpufair:gpus=8-1"
    adapter = SlurmAdapter(transport, SlurmSettings(), mode="hard")

    def warned() -> int:
        return sum("gpufair:gpus=8-1" in r.getMessage() for r in caplog.records)

    with caplog.at_level("WARNING", logger="gpufair.slurm"):
        for _ in range(4):
            adapter.reconcile()
            adapter.snapshot()
        assert warned() == 1
        transport.jobs["jobs"][4]["comment"] = ""
        adapter.snapshot()
        transport.jobs["jobs"][4]["comment"] = "gpufair:gpus=8-1"
        adapter.snapshot()
        adapter.snapshot()
    assert warned() == 2   # gone, then back: logged again


def test_a_disagreement_that_outlives_the_rereads_keeps_sinfos_gpus_in_use():
    """squeue and sinfo are read again while they disagree on the GPUs in use, at most
    CONSISTENT_READS pairs: GPUs sinfo shows in use that no job holds (a job gpufair cannot
    see) are then never offered, and the round goes on."""
    from gpufair.adapters.slurm.adapter import CONSISTENT_READS

    transport = FakeTransport()
    reads = []
    original = transport.read_jobs

    def counted() -> dict:
        reads.append(1)
        return original()

    transport.read_jobs = counted
    transport.jobs["jobs"][0].update(job_state="PENDING", nodes="", gres_detail=[])
    state = SlurmAdapter(transport, SlurmSettings(), mode="soft").snapshot()
    assert len(reads) == CONSISTENT_READS == 3
    node = next(n for n in state.nodes if n.name == "gpu-k80-1")
    assert node.unavailable == (0, 1)
    reads.clear()
    transport.jobs = json.loads((DATA / "squeue.json").read_text())   # they agree: one pair
    SlurmAdapter(transport, SlurmSettings(), mode="soft").snapshot()
    assert len(reads) == 1

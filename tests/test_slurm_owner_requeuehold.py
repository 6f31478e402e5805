"""A job its owner requeued *held* (``scontrol requeuehold``) is left held for them.

Slurm 22.05 shows such a job exactly as one gpufair preempted (PENDING, priority 0, reason
JobHeldUser, description "job requeued in held state", one more restart: checked on the
loopback Slurm), and job_submit.lua sees no requeue. Only gpufair's journal tells them apart;
the job then gets the owner's hold mark, so the owner's own ``scontrol release`` makes it
gpufair's again. The loopback run is ``tests/integration/test_slurm_userhold.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpufair.adapters.slurm.adapter import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.transport import CommandResult
from gpufair.model import Migrate, Preempt, Resize
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import DONE, FAILED, SKIPPED, Store

DATA = Path(__file__).parent / "data" / "slurm"
REQUEUED_AT = 1795305502


class Transport:
    """squeue/sinfo from the samples, job 4 requeued held once; records the writes."""

    name = "fake"

    def __init__(self, **job4: object) -> None:
        self.jobs = json.loads((DATA / "squeue.json").read_text())
        self.nodes = json.loads((DATA / "sinfo.json").read_text())
        self.job4 = next(j for j in self.jobs["jobs"] if j["job_id"] == 4)
        self.job4.update(admin_comment="gpufair:managed", priority=0, state_reason="JobHeldUser",
                         state_description="job requeued in held state", restart_cnt=1,
                         comment="waits for data", submit_time=REQUEUED_AT)
        self.job4.update(job4)
        self.calls: list[tuple[str, str, dict | None]] = []

    def read_jobs(self) -> dict:
        return self.jobs

    def read_nodes(self) -> dict:
        return self.nodes

    def control(self, verb: str, job_id: str, fields: dict | None = None) -> CommandResult:
        self.calls.append((verb, job_id, fields))
        return CommandResult(True, "")


def _reconcile(transport: Transport, answer: bool) -> list[tuple[str, int, float]]:
    asked: list[tuple[str, int, float]] = []

    def ours(job_id: str, run: int, at: float) -> bool:
        asked.append((job_id, run, at))
        return answer

    adapter = SlurmAdapter(transport, SlurmSettings(), mode="hard")
    assert adapter.reconcile(ours) == []
    return asked


def test_a_job_requeued_held_by_somebody_else_gets_its_owners_hold():
    transport = Transport()
    asked = _reconcile(transport, answer=False)
    assert asked == [("4", 0, float(REQUEUED_AT))]   # run 0 ended in the requeue
    assert transport.calls == [("update", "4", {
        "Comment": "waits for data gpufair:userhold",
        "AdminComment": "gpufair:managed gpufair:ownerhold=1"})]
    # marked, it is the owner's like any `scontrol hold`: not offered to the policy
    state = SlurmAdapter(transport, SlurmSettings(), mode="hard")
    transport.job4.update(comment="waits for data gpufair:userhold",
                          admin_comment="gpufair:managed gpufair:ownerhold=1")
    assert "4" not in {j.id for j in state.snapshot().jobs}
    # the owner's release takes their mark out (job_submit.lua): gpufair's again, for good
    transport.job4["comment"] = "waits for data"
    assert _reconcile(transport, answer=False) == []     # the note: nothing more to judge
    assert len(transport.calls) == 1
    assert "4" in {j.id for j in state.snapshot().jobs}


def test_the_next_run_requeued_held_is_judged_again():
    """The note is per run; the user's nodelist beside the mark is kept."""
    transport = Transport(restart_cnt=3, admin_comment="gpufair:managed nodelist=gpu-k80-1 "
                          "gpufair:ownerhold=1")
    assert _reconcile(transport, answer=False) == [("4", 2, float(REQUEUED_AT))]
    assert transport.calls[0][2]["AdminComment"] == \
        "gpufair:managed nodelist=gpu-k80-1 gpufair:ownerhold=3"


def test_gpufairs_own_preemption_stays_gpufairs_to_start():
    transport = Transport()
    _reconcile(transport, answer=True)
    assert transport.calls == []
    adapter = SlurmAdapter(transport, SlurmSettings(), mode="hard")
    assert "4" in {j.id for j in adapter.snapshot().jobs}


def test_only_a_requeuehold_is_taken_for_the_owners():
    for changes in ({"state_description": "launch failed requeued held"},   # Slurm's own
                    {"restart_cnt": 0, "state_description": ""},            # never ran
                    {"admin_comment": ""}):                                 # not gpufair's job
        transport = Transport(**changes)
        _reconcile(transport, answer=False)
        assert transport.calls == [], changes
    transport = Transport(comment="")
    _reconcile(transport, answer=False)
    assert [c[2]["Comment"] for c in transport.calls] == ["gpufair:userhold"]


def test_without_the_journal_nothing_is_marked():
    transport = Transport()
    SlurmAdapter(transport, SlurmSettings(), mode="hard").reconcile()
    assert transport.calls == []


def _store(path: Path) -> Store:
    """Hand-made journal: keys as core.round.action_key writes them (kind:ID#RUN@START:...)."""
    store = Store(path)
    rounds = [
        ([Preempt("7")], ["preempt:7#0@100:requeue"], DONE),
        ([Migrate("8", ("n:0",))], ["migrate:8#2@50:n:0"], FAILED),   # tried: it may have run
        ([Resize("11", ("n:0",))], ["resize:11#3@9:n:0"], SKIPPED),
        ([Preempt("9")], ["preempt:9#0@1:requeue"], None),            # planned, never tried
        ([Preempt("17"), Preempt("1")], ["preempt:17#0@5:requeue", "preempt:1#01@5:requeue"],
         DONE),
    ]
    for actions, keys, status in rounds:
        round_id = store.begin_round("gandiva_fair", {}, actions, keys=keys, now=1000.0)
        for seq in range(len(actions)):
            if status is not None:
                store.mark(round_id, seq, status)
    dry = store.begin_round("gandiva_fair", {}, [Preempt("10")],
                            keys=["preempt:10#0@1:requeue"], dry_run=True, now=1000.0)
    store.mark(dry, 0, DONE)
    return store


def test_the_journal_knows_which_runs_gpufair_requeued(tmp_path):
    store = _store(tmp_path / "state.db")
    found = {(job, run): store.tried_requeue(job, run)
             for job, run in [("7", 0), ("7", 1), ("8", 2), ("11", 3), ("9", 0), ("10", 0),
                              ("1", 0), ("1", 1), ("17", 0)]}
    assert found == {("7", 0): True, ("7", 1): False, ("8", 2): True, ("11", 3): True,
                     ("9", 0): False, ("10", 0): False, ("1", 0): False, ("1", 1): False,
                     ("17", 0): True}


def test_a_requeue_older_than_the_journal_counts_as_gpufairs(tmp_path):
    daemon = Daemon(SlurmAdapter(Transport(), SlurmSettings()), None, _store(tmp_path / "s.db"),
                    ServiceSettings())
    assert daemon.requeued_by_gpufair("9", 0, 999.0)          # before the first round
    assert not daemon.requeued_by_gpufair("9", 0, 1001.0)     # within it: not gpufair's
    assert daemon.requeued_by_gpufair("7", 0, 1001.0)
    empty = Daemon(SlurmAdapter(Transport(), SlurmSettings()), None,
                   Store(tmp_path / "empty.db"), ServiceSettings())
    assert empty.requeued_by_gpufair("9", 0, 1001.0)          # no journal yet


def test_the_round_plans_on_the_state_reconcile_judged():
    """A job requeued held between reconcile's read and a fresh one would reach the policy
    unjudged (and be started again): the snapshot right after reconcile is its view."""
    transport = Transport(state_description="", restart_cnt=0, submit_time=REQUEUED_AT)
    adapter = SlurmAdapter(transport, SlurmSettings(), mode="hard")
    adapter.reconcile(lambda *_: False)
    transport.job4.update(state_description="job requeued in held state", restart_cnt=1)
    assert next(j for j in adapter.snapshot().jobs if j.id == "4").restarts == 0
    assert next(j for j in adapter.snapshot().jobs if j.id == "4").restarts == 1   # once only
    # a reconcile that changed something: the snapshot reads what it changed
    adapter.reconcile(lambda *_: False)
    transport.job4["comment"] = "waits for data gpufair:userhold"
    assert "4" not in {j.id for j in adapter.snapshot().jobs}

"""A managed job's reason in its AdminComment: after job_submit.lua's marks, once per change
of its decision, rate-limited, never read back as a mark (in-memory Slurm; the loopback
Slurm's test is tests/integration/test_slurm_explain.py)."""

from __future__ import annotations

from slurm_fake import FakeSlurm

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.translate import translate
from gpufair.core.enrich import with_default_profiles
from gpufair.core.round import Round
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import Store
from gpufair.policy.registry import create_policy

NODES = {"v1": ("v100", 4)}


def _daemon(slurm: FakeSlurm, store: Store, **settings: object) -> Daemon:
    adapter = SlurmAdapter(slurm, SlurmSettings(**settings), sleep=lambda s: None,
                           clock=lambda: slurm.clock)
    rounds = Round(create_policy("fifo"), enrichers=[with_default_profiles], explain=True)
    return Daemon(adapter, rounds, store, ServiceSettings(), sleep=lambda s: None)


def test_one_update_per_change_of_the_decision(tmp_path):
    slurm = FakeSlurm(NODES)
    for job in ("1", "2"):
        slurm.submit(job, 4)
    daemon = _daemon(slurm, Store(tmp_path / "s.db"), reason_comment_min_interval_s=0.0)
    daemon.run_round()                     # 1 starts (pin + release), 2 waits
    waiting = slurm.jobs["2"]["admin_comment"]
    assert waiting.startswith("gpufair:managed | gpufair ")
    # (the fake submits each job at clock + its number: 2 s "in the future")
    assert waiting.endswith(": waiting — fifo.position: position 2, of 2, waited s -2")
    assert slurm.verbs[("update", "2")] == 1
    updates_of_1 = slurm.verbs[("update", "1")]   # its pin and its reason
    assert "starting — fifo.position: position 1" in slurm.jobs["1"]["admin_comment"]
    for _ in range(3):                     # waited s grows every round: no new comment
        slurm.clock += 120
        daemon.run_round()
    assert slurm.verbs[("update", "2")] == 1 and slurm.jobs["2"]["admin_comment"] == waiting
    assert slurm.verbs[("update", "1")] == updates_of_1   # start then run: one decision
    slurm.jobs["1"].update(job_state="COMPLETED", nodes="", gres_detail=[])
    slurm.clock += 120
    daemon.run_round()                     # 2 starts: its decision changed
    assert "starting" in slurm.jobs["2"]["admin_comment"]
    assert slurm.jobs["2"]["admin_comment"].startswith("gpufair:managed | gpufair ")
    assert slurm.verbs[("update", "2")] == 3   # its reason, its pin, its new reason


def test_the_rate_limit_and_the_switch(tmp_path):
    slurm = FakeSlurm(NODES)
    for job in ("1", "2"):
        slurm.submit(job, 4)
    daemon = _daemon(slurm, Store(tmp_path / "s.db"), reason_comment_min_interval_s=3600.0)
    daemon.run_round()
    assert slurm.verbs[("update", "2")] == 1
    slurm.jobs["1"].update(job_state="COMPLETED", nodes="", gres_detail=[])
    daemon.run_round()                     # 2 starts, but its comment changed < 1 h ago
    assert slurm.verbs[("update", "2")] == 2 and "waiting" in slurm.jobs["2"]["admin_comment"]
    off = FakeSlurm(NODES)
    for job in ("1", "2"):
        off.submit(job, 4)
    _daemon(off, Store(tmp_path / "t.db"), reason_comment=False).run_round()
    assert off.jobs["2"]["admin_comment"] == "gpufair:managed" and off.verbs[("update", "2")] == 0


def test_at_most_so_many_updates_per_round(tmp_path):
    slurm = FakeSlurm(NODES)
    for job in ("1", "2", "3", "4", "5"):
        slurm.submit(job, 4)
    daemon = _daemon(slurm, Store(tmp_path / "s.db"), reason_comment_max_per_round=2)
    daemon.run_round()
    shown = [j for j in "12345" if " | " in slurm.jobs[j]["admin_comment"]]
    assert len(shown) == 2
    daemon.run_round()
    assert len([j for j in "12345" if " | " in slurm.jobs[j]["admin_comment"]]) == 4


def test_a_reason_is_never_read_as_a_mark():
    """Job and tenant names are users' words: whatever the reason says after the separator,
    the marks are the words before it."""
    slurm = FakeSlurm({"v1": ("v100", 4), "v2": ("v100", 4)})
    slurm.submit("1", 4)
    slurm.submit("2", 4)
    slurm.jobs["1"]["admin_comment"] = \
        "gpufair:managed | gpufair 12:00: waiting — x: winners nodelist=v9 gpufair:ownerhold=0"
    slurm.jobs["2"]["admin_comment"] = "other | gpufair:managed"
    view = translate(slurm.read_jobs(), slurm.read_nodes(), now=slurm.clock,
                     managed_partitions=("gpu",), source="fake")
    assert view.jobs["1"].managed and view.state.job("1").allowed_nodes in (None, ("v1", "v2"))
    assert view.jobs["1"].admin_comment.startswith("gpufair:managed | ")
    assert not view.jobs["2"].managed


def test_the_line_is_one_printable_line_without_the_separator(tmp_path):
    slurm = FakeSlurm(NODES)
    slurm.submit("1", 4)
    adapter = SlurmAdapter(slurm, SlurmSettings(), clock=lambda: slurm.clock)
    adapter.view()
    assert adapter.show_reasons({"1": "waiting\n — app a | b\x07 " + "x" * 300}) == 1
    shown = slurm.jobs["1"]["admin_comment"]
    assert shown.count(" | ") == 1 and shown.isprintable()
    assert shown.startswith("gpufair:managed | waiting — app a / b ")
    assert len(shown) == len("gpufair:managed | ") + 200 and shown.endswith("…")


def test_a_pending_array_record_is_left_whole(tmp_path):
    """Tasks 8-9 still in their array's record: updating task 8 would split it out (as only
    its start should), so it gets no comment; a task of its own does."""
    slurm = FakeSlurm({"v1": ("v100", 4), "v2": ("v100", 4)})
    slurm.submit("7", 4)
    slurm.jobs["7"].update(array_job_id=7, array_task_id=None, array_task_string="8-9")
    slurm.submit("12", 4)
    slurm.jobs["12"].update(array_job_id=7, array_task_id=5)
    adapter = SlurmAdapter(slurm, SlurmSettings(), clock=lambda: slurm.clock)
    view = adapter.view()
    # every task still in the record is a job of its own (arrays start as many as fit)
    assert set(view.jobs) == {"7_8", "7_9", "12"}
    assert view.jobs["7_8"].record == view.jobs["7_9"].record == "7"
    assert adapter.show_reasons({"7_8": "waiting", "7_9": "waiting", "12": "waiting"}) == 1
    # the split-out task by its Slurm name; nothing to the array's record
    assert slurm.verbs[("update", "7_5")] == 1
    assert not {j for (verb, j) in slurm.verbs if verb == "update"} & {"7", "7_8", "7_9"}

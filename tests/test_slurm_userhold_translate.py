"""The owner's own hold of a managed job (``sbatch --hold``, ``scontrol hold``) is honoured.

job_submit.lua keeps such a hold as the word ``gpufair:userhold`` in the job's comment (the
loopback test, tests/integration/test_slurm_userhold.py, checks what Slurm does with it).
Here: hand-written ``squeue --json`` records, and what the adapter makes of them — a held job
is neither started nor counted as waiting demand, in the daemon's snapshot and the dry run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpufair.adapters.slurm import SlurmAdapter, SlurmSettings
from gpufair.adapters.slurm.translate import translate
from gpufair.adapters.slurm.transport import FileTransport
from gpufair.cli.main import main
from gpufair.model import JobState

SINFO = json.loads((Path(__file__).parent / "data" / "slurm" / "sinfo.json").read_text())
for _node in SINFO["nodes"]:   # an idle cluster: only the jobs written here use GPUs
    _node.update(state="idle", gres_used="")
NOW = 1795305600.0


def _job(job_id: int, *, state: str = "PENDING", comment: str = "",
         admin: str = "gpufair:managed", **extra: Any) -> dict[str, Any]:
    """A 22.05 squeue record as the lua leaves a managed job: held (priority 0)."""
    record = {"job_id": job_id, "job_state": state, "partition": "gpu", "user_name": "ann",
              "account": "lab", "user_id": 1000, "group_id": 1000,
              "tres_per_node": "gres:gpu:1", "node_count": 1, "submit_time": 1795305000 + job_id,
              "priority": 0, "state_reason": "JobHeldUser", "comment": comment,
              "admin_comment": admin, "nodes": "", "gres_detail": []}
    record.update(extra)
    return record


def _jobs(*records: dict[str, Any]) -> dict[str, Any]:
    return {"jobs": list(records)}


def _ids(view_or_state: Any) -> set[str]:
    return {j.id for j in view_or_state.jobs}


def test_a_job_its_owner_holds_is_no_demand_and_no_problem():
    docs = _jobs(_job(1, comment="gpufair:userhold"),
                 _job(2),                                       # gpufair's own hold
                 _job(3, comment="wait for data gpufair:userhold"),
                 _job(4, comment="gpufair:userholding not-gpufair:userhold"))
    view = translate(docs, SINFO, now=NOW, managed_partitions=["gpu"])
    assert _ids(view.state) == {"2", "4"}
    assert {j.id: why for j, why in view.waiting} == {
        "1": "held by its owner until they release it",
        "3": "held by its owner until they release it"}
    assert view.problems == ()
    assert set(view.jobs) == {"2", "4"}


def test_the_word_counts_only_in_a_job_the_lua_marked_and_only_while_it_waits():
    docs = _jobs(
        # not managed (submitted before the lua, or another partition's rules): Slurm's
        # own hold applies to it, gpufair's snapshot leaves it to Slurm anyway
        _job(1, comment="gpufair:userhold", admin=""),
        # the word in the admin comment is not the owner's hold
        _job(2, admin="gpufair:managed gpufair:userhold"),
        # an operator started it despite the hold: it runs and holds GPUs, like any job
        _job(3, state="RUNNING", comment="gpufair:userhold", priority=1000, state_reason="None",
             nodes="gpu-k80-2", gres_detail=["gpu:k80:1(IDX:2)"], start_time=1795305500))
    view = translate(docs, SINFO, now=NOW, managed_partitions=["gpu"])
    assert _ids(view.state) == {"1", "2", "3"} and view.waiting == ()
    running = next(j for j in view.state.jobs if j.id == "3")
    assert running.state is JobState.RUNNING and running.gpus_held == ("gpu-k80-2:2",)


def test_the_daemon_snapshot_in_hard_mode_offers_only_what_gpufair_may_start():
    docs = _jobs(_job(1, comment="gpufair:userhold"), _job(2),
                 _job(3, comment="gpufair:userhold", dependency="afterok:2"))
    adapter = SlurmAdapter(FileTransport(docs, SINFO), SlurmSettings(), mode="hard",
                           clock=lambda: NOW)
    assert _ids(adapter.snapshot()) == {"2"}
    # the owner released job 1: the lua took the word out, the job is still held (priority
    # 0): now it is gpufair's to start like any other
    docs["jobs"][0]["comment"] = " "
    assert _ids(adapter.snapshot()) == {"1", "2"}


def test_the_dry_run_shows_the_owner_held_job_waiting_and_starts_the_others(tmp_path, capsys):
    docs = _jobs(_job(1, comment="gpufair:userhold"), _job(2))
    (tmp_path / "squeue.json").write_text(json.dumps(docs))
    (tmp_path / "sinfo.json").write_text(json.dumps(SINFO))
    (tmp_path / "g.toml").write_text('[daemon]\nmode = "hard"\n\n[slurm]\n'
                                     'managed_partitions = ["gpu"]\n')
    assert main(["dry-run", "--squeue", str(tmp_path / "squeue.json"), "--sinfo",
                 str(tmp_path / "sinfo.json"), "--config", str(tmp_path / "g.toml"),
                 "--policy", "fifo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["job_id"]: r for r in data["jobs"]}
    assert rows["1"]["decision"] == "waits"
    assert rows["1"]["why"] == "held by its owner until they release it"
    assert [(a["kind"], a["job_id"]) for a in data["actions"]] == [("Start", "2")]


def test_release_held_picks_only_what_waits_for_gpufair():
    """The uninstall's ``gpufair unhold``: every job the lua held and nothing else —
    not the owner's own hold, not an administrator's, not a hold outside gpufair's
    partitions, not a running job, not a record it cannot read (expected ids written out by
    hand)."""
    from gpufair.adapters.slurm.translate import held_by_gpufair
    doc = _jobs(
        _job(1),                                                 # held by the lua: release
        _job(2, comment="gpufair:userhold"),                     # its owner's hold: keep
        _job(3, comment="needs data gpufair:userhold tomorrow"),  # owner's, amid words: keep
        _job(4, comment="gpufair:userholds"),                    # not the word: release
        _job(5, admin=""),                                       # not gpufair's: keep
        _job(6, state="RUNNING", priority=1, state_reason="None"),   # runs: nothing to do
        _job(7, priority=0, state_reason="Dependency"),          # lua-held, waits on a parent
        _job(8, state_reason="JobHeldUser", priority=0),         # held again by gpufair
        _job(12, state_reason="JobHeldAdmin", priority=0),       # an admin's hold: keep
        _job(9, priority=100, state_reason="Priority"),          # released, waits: nothing
        _job(10, comment=7),                                     # unreadable: left alone
        {"job_id": "11", "job_state": "PENDING"},                # no mark, odd id: left
    )
    assert held_by_gpufair(doc) == ["1", "4", "7", "8"]
    assert held_by_gpufair({"jobs": "nonsense"}) == []
    assert held_by_gpufair({}) == []


def test_release_held_command_releases_each_through_scontrol(monkeypatch, capsys):
    from gpufair.adapters.slurm.transport import CommandResult
    calls = []

    class Recording(FileTransport):
        def control(self, verb, job_id, fields=None):
            calls.append((verb, job_id))
            return CommandResult(job_id != "4", "Invalid job id specified")

    transport = Recording(_jobs(_job(1), _job(2, comment="gpufair:userhold"), _job(4)), SINFO)
    monkeypatch.setattr(SlurmAdapter, "from_settings",
                        classmethod(lambda cls, settings, mode="hard": cls(
                            transport, SlurmSettings(), mode=mode)))
    assert main(["unhold", "--list"]) == 0
    assert capsys.readouterr().out.split() == ["1", "4"] and calls == []
    assert main(["unhold"]) == 1                       # one release failed: status 1
    assert calls == [("release", "1"), ("release", "4")]
    out = capsys.readouterr().out
    assert "released  job 1" in out and "FAILED    job 4: Invalid job id" in out


def test_an_owner_hold_kept_in_the_admin_comment_counts_while_the_comment_has_no_room():
    """A comment of 1,008-1,024 bytes leaves no room for the mark (Slurm's limit is 1,024):
    job_submit.lua then keeps the owner's hold in the admin comment, which counts only while
    the comment still leaves no room; in the comment of a job the lua did not mark, or with
    room to spare, the admin comment's word means nothing."""
    from gpufair.adapters.slurm.translate import COMMENT_MAX, mark_fits, user_held

    admin = "gpufair:managed gpufair:userhold"
    full = "x" * (COMMENT_MAX - 16)          # 1,008 bytes: " gpufair:userhold" is 17
    fits = "x" * (COMMENT_MAX - 17)
    assert not mark_fits(full) and mark_fits(fits) and mark_fits("")
    assert mark_fits(f"{fits} gpufair:userhold") and not mark_fits("é" * 504)
    assert user_held(_job(1, comment=full, admin=admin))
    assert not user_held(_job(2, comment=fits, admin=admin))      # released: moved, then out
    assert user_held(_job(3, comment=f"{fits} gpufair:userhold", admin=admin))
    assert not user_held(_job(4, comment=full, admin="gpufair:userhold"))   # not managed
    view = translate(_jobs(_job(1, comment=full, admin=admin), _job(2, comment=full)), SINFO,
                     now=NOW, managed_partitions=["gpu"])
    assert [(j.id, why) for j, why in view.waiting] == \
        [("1", "held by its owner until they release it")]
    assert [j.id for j in view.state.jobs] == ["2"]

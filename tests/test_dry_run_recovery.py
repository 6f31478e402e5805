"""A dry run on a store whose last round was cut off lists what ``serve`` finishes first.

``serve`` begins by finishing an interrupted round (``Daemon.recover``) and only then plans
its own; a dry run that showed the new round alone would hide those actions (the loopback
Gandiva_fair test once compared such a dry run with the real round and failed on it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gpufair.adapters.recording import RecordingAdapter
from gpufair.adapters.slurm.translate import translate
from gpufair.cli.main import main
from gpufair.core.config import config_from_dict
from gpufair.model import Preempt, Start
from gpufair.model.snapshot import dump_snapshot, load_snapshot
from gpufair.plugin.service import build_daemon
from gpufair.plugin.store import DONE, SKIPPED, Store

DATA = Path(__file__).parent / "data" / "slurm"
K80 = ("gpu-k80-1:2", "gpu-k80-1:3")


def _snapshot(tmp_path: Path) -> Path:
    view = translate(json.loads((DATA / "squeue.json").read_text()),
                     json.loads((DATA / "sinfo.json").read_text()), now=1795305510.0)
    dump_snapshot(view.state, tmp_path / "snap.json", adapter="slurm")
    return tmp_path / "snap.json"


def _store(path: Path) -> None:
    """Round 1 done (it started job 4); round 2 cut off after its first action, holding a
    start of job 4 under round 1's key (done already: serve skips it), a start of job 5 and
    a preemption of job 2 (left 'applying' by the crash); round 3 done with one skipped
    action (a finished round is never redone)."""
    store = Store(path)
    one = store.begin_round("fifo", {}, [Start("4", K80)], keys=["start:4#0:k"])
    store.mark(one, 0, DONE)
    store.finish_round(one)
    two = store.begin_round("fifo", {}, [Preempt("1"), Start("4", K80),
                                         Start("5", ("gpu-k80-1:0",)), Preempt("2")],
                            keys=["preempt:1#0@1:requeue", "start:4#0:k", "start:5#0:x",
                                  "preempt:2#0@2:requeue"])
    store.mark(two, 0, DONE)
    store.mark(two, 3, "applying")
    three = store.begin_round("fifo", {}, [Start("5", ("gpu-k80-2:0",))], keys=["start:5#0:y"])
    store.mark(three, 0, SKIPPED, "stale")
    store.finish_round(three)
    assert store.unfinished_rounds() == [two]
    store.close()


def _dry(argv: list[str], capsys) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_dry_run_lists_the_interrupted_round_first(tmp_path, capsys):
    snap = _snapshot(tmp_path)
    _store(tmp_path / "state.db")
    out = json.loads(_dry(["dry-run", str(snap), "--policy", "fifo", "--store",
                           str(tmp_path / "state.db"), "--json"], capsys))
    assert out["recovering"] == [
        {"round": 2, "kind": "Start", "job_id": "5", "key": "start:5#0:x",
         "gpu_ids": ["gpu-k80-1:0"]},
        {"round": 2, "kind": "Preempt", "job_id": "2", "key": "preempt:2#0@2:requeue",
         "gpu_ids": []}]
    table = _dry(["dry-run", str(snap), "--policy", "fifo", "--store",
                  str(tmp_path / "state.db")], capsys)
    lines = table.splitlines()
    assert lines[:2] == ["serve first finishes interrupted round 2: start job 5 on gpu-k80-1:0",
                         "serve first finishes interrupted round 2: preempt job 2"]
    assert "dry run: nothing applied" in lines[3]
    # the store is the daemon's: the dry run read a copy and left it as it was
    assert Store(tmp_path / "state.db").unfinished_rounds() == [2]


def test_the_list_is_what_the_daemon_recovers(tmp_path, capsys):
    """The daemon itself, restarted on the same store, finishes exactly those actions."""
    snap = _snapshot(tmp_path)
    _store(tmp_path / "state.db")
    out = json.loads(_dry(["dry-run", str(snap), "--policy", "fifo", "--store",
                           str(tmp_path / "state.db"), "--json"], capsys))
    shutil.copy(tmp_path / "state.db", tmp_path / "copy.db")
    adapter = RecordingAdapter(load_snapshot(str(snap)))
    store = Store(tmp_path / "copy.db")
    daemon = build_daemon(config_from_dict({"daemon": {"policy": "fifo"}}), adapter, store)
    daemon.recover()
    assert [(type(a).__name__, a.job_id, list(getattr(a, "gpu_ids", ())))
            for a in adapter.recorded] == \
        [(r["kind"], r["job_id"], r["gpu_ids"]) for r in out["recovering"]]
    assert store.unfinished_rounds() == []
    store.close()


def test_nothing_to_recover_without_an_interrupted_round(tmp_path, capsys):
    snap = _snapshot(tmp_path)
    assert json.loads(_dry(["dry-run", str(snap), "--policy", "fifo", "--json"],
                           capsys))["recovering"] == []
    store = Store(tmp_path / "clean.db")
    done = store.begin_round("fifo", {}, [Start("5", ("gpu-k80-1:0",))], keys=["start:5#0:x"])
    store.mark(done, 0, DONE)
    store.finish_round(done)
    store.close()
    out = _dry(["dry-run", str(snap), "--policy", "fifo", "--store",
                str(tmp_path / "clean.db")], capsys)
    assert "interrupted" not in out and out.startswith("policy fifo at t=")

"""The state store's schema version and its migrations, on store files written by earlier
gpufair releases (tests/fixtures/store/, written by write_store.py there with the old code):
what those releases wrote is all still there after the upgrade, a copy of the old file is
kept for a rollback, a store from a newer gpufair is refused, a failed migration changes
nothing."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from gpufair.errors import RefusedToStart
from gpufair.model import Preempt, PreemptMode, Start
from gpufair.plugin import store as store_module
from gpufair.plugin.store import Store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "store"
# main-3ab03d6: gpufair 0.1.0 as on main at 3ab03d6; main-1cf806f: before idempotency keys
OLD = ["main-3ab03d6.db", "main-1cf806f.db"]
T0 = 1_700_000_000.0


def version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def columns(path: Path, table: str) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    finally:
        db.close()


def rows(path: Path, table: str) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        return sorted(db.execute(f"SELECT * FROM {table}"))
    finally:
        db.close()


@pytest.fixture(params=OLD)
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    target = tmp_path / "state.db"
    shutil.copy(FIXTURES / request.param, target)
    assert version(target) == 0   # what the releases before versioning left
    return target


def test_a_fresh_store_is_created_at_the_current_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    store.close()
    assert version(tmp_path / "state.db") == 2 == store_module.SCHEMA_VERSION
    assert "key" in columns(tmp_path / "state.db", "actions")
    assert {"outcome", "code", "figures", "owner_uid"} <= columns(tmp_path / "state.db",
                                                                   "decisions")
    assert not list(tmp_path.glob("*.bak"))   # nothing to go back to


def test_an_old_store_keeps_everything_it_held(old_store: Path) -> None:
    store = Store(old_store)
    try:
        journal = store.journal()
        assert [(e.round_id, e.seq, e.action, e.status, e.detail) for e in journal] == [
            (1, 0, Start("1", ("n1:0",)), "done", "released"),
            (1, 1, Preempt("2", PreemptMode.REQUEUE, 30.0), "failed", "Invalid job id specified"),
            (2, 0, Start("3", ("n2:0", "n2:1")), "planned", ""),
        ]
        assert store.unfinished_rounds() == [2]   # recovery still finds the interrupted round
        assert [r["status"] for r in store.rounds()] == ["done", "applying"]
        history = store.job_history()
        assert history["1"]["attained_s"] == 120.0 and history["1"]["tenant"] == "alice"
        assert history["2"]["restarts"] == 1 and history["2"]["finished_at"] == T0
        assert history["2"]["exit_code"] == "0:0"   # from the epilog event
        assert store.events() == [{"kind": "epilog", "ts": T0 + 1, "job_id": "2",
                                   "node": "n1", "exit_code": "0:0"}]
        assert store.policy_state("las") == {"attained": {"1": 120.0}, "rng": [1, 2, 3]}
        # and it works as a current store: keyed actions, their lookup
        new = store.begin_round("las", {}, [Start("4", ("n1:1",))], keys=["k4"], now=T0 + 120)
        store.mark(new, 0, "done")
        assert store.done_keys(["k4", "k-other"], before_round=new + 1) == {"k4": new}
    finally:
        store.close()
    assert version(old_store) == 2
    assert rows(old_store, "decisions") == []


def test_the_upgrade_keeps_a_copy_of_the_old_store(old_store: Path) -> None:
    before = {table: rows(old_store, table) for table in ("rounds", "actions", "jobs", "events")}
    Store(old_store).close()
    backup = Path(f"{old_store}.schema-v0.bak")
    assert version(backup) == 0
    assert {table: rows(backup, table) for table in before} == before
    Store(old_store).close()   # already current: no second copy, the first one untouched
    assert sorted(p.name for p in old_store.parent.glob("*.bak")) == ["state.db.schema-v0.bak"]
    assert version(backup) == 0


def test_a_store_from_a_newer_gpufair_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 7")
    db.close()
    with pytest.raises(RefusedToStart, match=r"schema version 7, newer than this gpufair's \(2\)"):
        Store(path)
    assert version(path) == 7


def test_a_failed_migration_changes_nothing(old_store: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    had_key = "key" in columns(old_store, "actions")
    before = rows(old_store, "actions")

    def broken(db: sqlite3.Connection) -> None:
        db.execute("DROP TABLE jobs")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store_module, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(store_module.MIGRATIONS, 3, broken)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        Store(old_store)
    assert version(old_store) == 0
    assert ("key" in columns(old_store, "actions")) == had_key   # step 1 rolled back too
    assert not columns(old_store, "decisions")                     # and step 2
    assert rows(old_store, "actions") == before and columns(old_store, "jobs")
    assert Path(f"{old_store}.schema-v0.bak").exists()
    monkeypatch.undo()
    Store(old_store).close()   # and the real migration still goes through afterwards
    assert version(old_store) == 2


def test_a_version_1_store_gains_the_decisions_and_keeps_its_rounds(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """The store of the release before reasons (version 1) moves to 2 with its journal."""
    path = tmp_path / "state.db"
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", 1)
    store = Store(path)
    store.begin_round("fifo", {}, [Start("1", ("n1:0",))], keys=["k1"], now=T0)
    store.close()
    monkeypatch.undo()
    assert version(path) == 1 and not columns(path, "decisions")
    store = Store(path)
    try:
        assert [e.action for e in store.journal()] == [Start("1", ("n1:0",))]
        assert store.decisions("1") == []
    finally:
        store.close()
    assert version(path) == 2 and Path(f"{path}.schema-v1.bak").exists()

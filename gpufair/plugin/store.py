"""The daemon's state store: SQLite in WAL mode, the embedded default.

It holds rounds, their plans, every action with its outcome, job history (attained service,
waiting time, restarts), hook events and policy state. It is also the write-ahead journal
that makes applying a round idempotent: all of a round's actions are written as ``planned``
in the transaction that opens the round; each is marked ``applying`` before it is sent to the
resource manager and ``done``/``failed`` after. A daemon killed at any point finds on restart
the round still ``applying``, skips what is ``done``, checks an ``applying`` action against
what the cluster shows (it may have taken effect just before the kill) and carries out the
rest: nothing is repeated, nothing is lost.

The schema is versioned in SQLite's ``PRAGMA user_version`` (:data:`SCHEMA_VERSION`). Opening
an older store copies it to ``<store>.schema-v<N>.bak`` (the way back for a rollback) and then
runs the migrations from its version to this one in one transaction: a failed migration
leaves the store as it was. A store newer than this gpufair is refused, never guessed at.
Version 0 is every store written before versioning (gpufair 0.1.0 and earlier).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufair.core.explain import Decision
from gpufair.errors import InputError, RefusedToStart
from gpufair.model import (
    Action,
    ClusterState,
    Migrate,
    Preempt,
    PreemptMode,
    Resize,
    Resume,
    SetPriority,
    Start,
)

log = logging.getLogger("gpufair.store")

#: This gpufair's schema version (``PRAGMA user_version``); bump it with a new migration.
SCHEMA_VERSION = 2

#: Schema version 1 (gpufair 0.1.0's tables). Frozen: later versions change the schema only
#: through MIGRATIONS, which a fresh store runs too, so old and new stores cannot drift apart.
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rounds (
  id INTEGER PRIMARY KEY, started_at REAL NOT NULL, finished_at REAL, policy TEXT NOT NULL,
  status TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', plan TEXT NOT NULL,
  latency_s REAL);
CREATE TABLE IF NOT EXISTS actions (
  round_id INTEGER NOT NULL REFERENCES rounds(id), seq INTEGER NOT NULL, kind TEXT NOT NULL,
  job_id TEXT NOT NULL, payload TEXT NOT NULL, status TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT '', updated_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
  key TEXT, PRIMARY KEY (round_id, seq));
CREATE INDEX IF NOT EXISTS actions_key ON actions(key, status);
CREATE TABLE IF NOT EXISTS jobs (
  job_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, first_seen REAL NOT NULL, arrival_s REAL,
  state TEXT NOT NULL,
  attained_s REAL NOT NULL DEFAULT 0, waiting_s REAL NOT NULL DEFAULT 0,
  restarts INTEGER NOT NULL DEFAULT 0, last_seen REAL NOT NULL, finished_at REAL,
  exit_code TEXT);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY, ts REAL NOT NULL, kind TEXT NOT NULL, job_id TEXT, node TEXT,
  payload TEXT NOT NULL, source TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS policy_state (
  name TEXT PRIMARY KEY, data TEXT NOT NULL, updated_at REAL NOT NULL);
"""

PLANNED, APPLYING, DONE, FAILED, SKIPPED = "planned", "applying", "done", "failed", "skipped"


def _to_v1(db: sqlite3.Connection) -> None:
    """0 → 1: every table of 0.1.0, and the actions' idempotency ``key`` column (with its
    index), which stores written before the keys lack."""
    columns = {r[1] for r in db.execute("PRAGMA table_info(actions)")}
    if columns and "key" not in columns:
        db.execute("ALTER TABLE actions ADD COLUMN key TEXT")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)


def _to_v2(db: sqlite3.Connection) -> None:
    """1 → 2: each job's decisions and their reasons (``gpufair explain``), one row per run
    of rounds with the same outcome, reason code and guard: a job waiting for a day is one
    row whose last round and figures move on, not 720 rows."""
    db.execute("""
CREATE TABLE IF NOT EXISTS decisions (
  job_id TEXT NOT NULL, from_round INTEGER NOT NULL, to_round INTEGER NOT NULL,
  from_s REAL NOT NULL, to_s REAL NOT NULL, outcome TEXT NOT NULL, code TEXT NOT NULL,
  figures TEXT NOT NULL, by_code TEXT, by_figures TEXT, text TEXT NOT NULL,
  owner_uid INTEGER, PRIMARY KEY (job_id, from_round))""")
    db.execute("CREATE INDEX IF NOT EXISTS decisions_to_s ON decisions(to_s)")
    # a shadow run's record of what the resource manager itself did, beside each round's
    # plan (rounds.plan) and would-be actions (actions): every active job as it was seen,
    # and the usable GPUs per type (gpufair shadow-report)
    db.execute("""
CREATE TABLE IF NOT EXISTS shadow_jobs (
  round_id INTEGER NOT NULL, t_s REAL NOT NULL, job_id TEXT NOT NULL, tenant TEXT NOT NULL,
  state TEXT NOT NULL, gpus INTEGER NOT NULL, held INTEGER NOT NULL, arrival_s REAL,
  start_s REAL, PRIMARY KEY (round_id, job_id))""")
    db.execute("""
CREATE TABLE IF NOT EXISTS shadow_gpus (
  round_id INTEGER NOT NULL, t_s REAL NOT NULL, gpu_type TEXT NOT NULL, total INTEGER NOT NULL,
  PRIMARY KEY (round_id, gpu_type))""")


#: MIGRATIONS[n] takes a store from version n - 1 to n, inside the caller's transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _to_v1, 2: _to_v2}


def schema_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: sqlite3.Connection, path: str, *, backup: bool = True) -> tuple[int, int]:
    """Bring the store on ``db`` to :data:`SCHEMA_VERSION`; return (from, to). A fresh store
    runs every migration; an older one is first copied aside (``backup``)."""
    found = schema_version(db)
    if found > SCHEMA_VERSION:
        raise RefusedToStart(
            f"{path}: the state store has schema version {found}, newer than this gpufair's "
            f"({SCHEMA_VERSION}): a later gpufair wrote it. Run that release, or restore the "
            f"copy the upgrade left ({path}.schema-v{SCHEMA_VERSION}.bak; docs/deploy.md, "
            "Rollback)")
    if found == SCHEMA_VERSION:
        return found, found
    fresh = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    if not fresh and backup and path != ":memory:":
        target = Path(f"{path}.schema-v{found}.bak")
        if not target.exists():   # a failed earlier attempt's copy is the original: keep it
            copy = sqlite3.connect(str(target))
            try:
                db.backup(copy)
            finally:
                copy.close()
    db.execute("BEGIN IMMEDIATE")
    try:
        found = schema_version(db)   # another process may have migrated it meanwhile
        for version in range(found + 1, SCHEMA_VERSION + 1):   # a fresh store: all of them
            MIGRATIONS[version](db)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    if not fresh and found < SCHEMA_VERSION:
        log.warning("state store %s migrated from schema version %d to %d", path, found,
                    SCHEMA_VERSION, extra={"fields": {"event": "store_migrated",
                                                      "from": found, "to": SCHEMA_VERSION}})
    return found, SCHEMA_VERSION


def action_to_dict(action: Action) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": type(action).__name__, "job_id": action.job_id}
    if isinstance(action, (Start, Resume, Resize, Migrate)):
        data["gpu_ids"] = list(action.gpu_ids)
    if isinstance(action, (Resize, Migrate)):
        data["grace_s"] = action.grace_s
    elif isinstance(action, Preempt):
        data.update(mode=action.mode.value, grace_s=action.grace_s)
    elif isinstance(action, SetPriority):
        data["priority"] = action.priority
    return data


def action_from_dict(data: Mapping[str, Any]) -> Action:
    kind, job = data["kind"], str(data["job_id"])
    gpus = tuple(data.get("gpu_ids", ()))
    if kind == "Preempt":
        return Preempt(job, PreemptMode(data["mode"]), float(data["grace_s"]))
    if kind == "SetPriority":
        return SetPriority(job, float(data["priority"]))
    if kind in ("Resize", "Migrate"):
        moved = Resize if kind == "Resize" else Migrate
        return moved(job, gpus, float(data.get("grace_s", 0.0)))
    classes = {"Start": Start, "Resume": Resume}
    return classes[kind](job, gpus)


@dataclass(frozen=True)
class JournalEntry:
    round_id: int
    seq: int
    action: Action
    status: str
    detail: str
    key: str | None = None


class Store:
    """One connection per daemon; WAL lets ``gpufair`` commands and tests read concurrently."""

    def __init__(self, path: str | Path, *, backup: bool = True) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # one user at a time, but not always the creating thread (tests, embedding)
        self.db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None,
                                  check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")  # a SIGKILL must not lose a commit
        try:
            migrate(self.db, self.path, backup=backup)
        except BaseException:
            self.db.close()
            raise
        self._latest: dict[str, tuple[int, tuple[str, str, str | None]]] | None = None

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # ---- rounds and the action journal ----------------------------------------------------
    def begin_round(self, policy: str, plan: Mapping[str, Any], actions: list[Action], *,
                    keys: list[str | None] | None = None, reason: str = "",
                    dry_run: bool = False,
                    now: float | None = None) -> int:
        now = time.time() if now is None else now
        keys = keys if keys is not None else [None] * len(actions)
        status = "dry-run" if dry_run else ("applying" if actions else "done")
        with self.tx() as db:
            cur = db.execute(
                "INSERT INTO rounds(started_at, finished_at, policy, status, reason, plan) "
                "VALUES (?,?,?,?,?,?)",
                (now, now if status != "applying" else None, policy, status, reason,
                 json.dumps(plan, sort_keys=True)))
            round_id = int(cur.lastrowid or 0)
            db.executemany(
                "INSERT INTO actions(round_id, seq, kind, job_id, payload, status, updated_at,"
                " key) VALUES (?,?,?,?,?,?,?,?)",
                [(round_id, seq, type(a).__name__, a.job_id,
                  json.dumps(action_to_dict(a), sort_keys=True), PLANNED, now, key)
                 for seq, (a, key) in enumerate(zip(actions, keys, strict=True))])
        return round_id

    def mark(self, round_id: int, seq: int, status: str, detail: str = "") -> None:
        self.mark_many(round_id, [(seq, status, detail)])

    def mark_many(self, round_id: int, marks: list[tuple[int, str, str]]) -> None:
        """Set the status (and detail) of several of a round's actions in one transaction,
        in order (a later mark of the same action wins). One commit costs a sync of the
        WAL; a round of thousands of actions committed one mark at a time spent seconds
        there (issue 30), so the daemon commits a batch's marks together."""
        if not marks:
            return
        now = time.time()
        with self.tx() as db:
            db.executemany("UPDATE actions SET status=?, detail=?, updated_at=?, "
                           "attempts = attempts + (? = 'applying') WHERE round_id=? AND seq=?",
                           [(status, detail, now, status, round_id, seq)
                            for seq, status, detail in marks])

    def finish_round(self, round_id: int, latency_s: float | None = None, *,
                     status: str = "done") -> None:
        with self.tx() as db:
            db.execute("UPDATE rounds SET status=?, finished_at=?, "
                       "latency_s=COALESCE(?, latency_s) WHERE id=?",
                       (status, time.time(), latency_s, round_id))

    def skip_round(self, policy: str, reason: str) -> int:
        with self.tx() as db:
            cur = db.execute("INSERT INTO rounds(started_at, finished_at, policy, status, "
                             "reason, plan) VALUES (?,?,?,?,?,?)",
                             (time.time(), time.time(), policy, "skipped", reason, "{}"))
            return int(cur.lastrowid or 0)

    def unfinished_rounds(self) -> list[int]:
        rows = self.db.execute("SELECT id FROM rounds WHERE status='applying' ORDER BY id")
        return [int(r[0]) for r in rows]

    def journal(self, round_id: int | None = None) -> list[JournalEntry]:
        sql = "SELECT round_id, seq, payload, status, detail, key FROM actions"
        args: tuple[Any, ...] = ()
        if round_id is not None:
            sql += " WHERE round_id=?"
            args = (round_id,)
        rows = self.db.execute(sql + " ORDER BY round_id, seq", args)
        return [JournalEntry(int(r[0]), int(r[1]), action_from_dict(json.loads(r[2])), r[3],
                             r[4], r[5]) for r in rows]

    def tried_requeue(self, job_id: str, run: int) -> bool:
        """Whether the journal holds a requeue of run ``run`` of the job that gpufair tried
        (not merely planned): a preemption by requeue, a move or a resize. Their keys name
        the run (``preempt:ID#RUN@START:requeue``, ``core.round.action_key``): found by key
        prefix on the key index, not by scanning the journal."""
        for kind in ("preempt", "migrate", "resize"):
            prefix = f"{kind}:{job_id}#{run}@"
            row = self.db.execute(
                "SELECT 1 FROM actions WHERE key >= ? AND key < ? AND status != ? AND round_id"
                " NOT IN (SELECT id FROM rounds WHERE status='dry-run') LIMIT 1",
                (prefix, prefix[:-1] + chr(ord("@") + 1), PLANNED)).fetchone()
            if row is not None:
                return True
        return False

    def journal_from(self) -> float | None:
        """When the oldest round the journal still holds began (None: no round yet)."""
        row = self.db.execute("SELECT MIN(started_at) FROM rounds").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def done_keys(self, keys: list[str], before_round: int) -> dict[str, int]:
        """Which of ``keys`` an earlier round already carried out (key → that round)."""
        out: dict[str, int] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(
                f"SELECT key, MAX(round_id) FROM actions WHERE status='done' AND round_id < ? "
                f"AND key IN ({marks}) AND round_id NOT IN "
                f"(SELECT id FROM rounds WHERE status='dry-run') GROUP BY key",
                (before_round, *chunk))
            out.update({r[0]: int(r[1]) for r in rows})
        return out

    def rounds(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT id, started_at, finished_at, policy, status, reason, "
                               "latency_s FROM rounds ORDER BY id")
        keys = ("id", "started_at", "finished_at", "policy", "status", "reason", "latency_s")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    # ---- decisions and reasons (gpufair explain) ------------------------------------------
    def record_decisions(self, round_id: int, decisions: Mapping[str, Decision],
                         owners: Mapping[str, int | None], *, now: float | None = None
                         ) -> None:
        """This round's decision of each job: a new row where the outcome, the reason's code
        or the guard changed since the job's last row, else that row carried on to this
        round (its figures and text the latest)."""
        now = time.time() if now is None else now
        latest = self._latest_decisions()
        new, carried = [], []
        for job_id, d in decisions.items():
            what = (d.outcome, d.reason.code, d.by.code if d.by else None)
            figures = json.dumps(dict(d.reason.figures), sort_keys=True)
            by = json.dumps(dict(d.by.figures), sort_keys=True) if d.by else None
            last = latest.get(job_id)
            if last is not None and last[1] == what:
                carried.append((round_id, now, figures, by, d.text(), job_id, last[0]))
            else:
                new.append((job_id, round_id, round_id, now, now, *what[:2], figures,
                            what[2], by, d.text(), owners.get(job_id)))
                latest[job_id] = (round_id, what)
        with self.tx() as db:
            db.executemany("UPDATE decisions SET to_round=?, to_s=?, figures=?, by_figures=?,"
                           " text=? WHERE job_id=? AND from_round=?", carried)
            db.executemany("INSERT OR REPLACE INTO decisions(job_id, from_round, to_round, "
                           "from_s, to_s, outcome, code, figures, by_code, by_figures, text, "
                           "owner_uid) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", new)

    def _latest_decisions(self) -> dict[str, tuple[int, tuple[str, str, str | None]]]:
        """Job → (first round, (outcome, code, guard)) of its latest row, read once."""
        if self._latest is None:
            rows = self.db.execute(
                "SELECT job_id, MAX(from_round), outcome, code, by_code FROM decisions "
                "GROUP BY job_id")   # SQLite: the bare columns come from the MAX row
            self._latest = {r[0]: (int(r[1]), (r[2], r[3], r[4])) for r in rows}
        return self._latest

    def decisions(self, job_id: str) -> list[dict[str, Any]]:
        """The job's story, oldest first (empty: gpufair has not decided on it)."""
        return read_decisions(self.db, job_id)

    # ---- shadow runs (gpufair serve --shadow) ---------------------------------------------
    def record_shadow(self, round_id: int, state: ClusterState) -> None:
        """What the resource manager itself did at this round: each active job's state and
        the GPUs it holds, and the usable GPUs per type (the snapshot before enrichment)."""
        t = state.time_s
        with self.tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO shadow_jobs(round_id, t_s, job_id, tenant, state, gpus,"
                " held, arrival_s, start_s) VALUES (?,?,?,?,?,?,?,?,?)",
                [(round_id, t, j.id, j.tenant, j.state.value, j.gpus, len(j.gpus_held),
                  j.arrival_s, j.start_s) for j in state.active_jobs()])
            db.executemany("INSERT OR REPLACE INTO shadow_gpus(round_id, t_s, gpu_type, total)"
                           " VALUES (?,?,?,?)",
                           [(round_id, t, g, state.gpu_count(g))
                            for g in state.gpu_type_names()])

    def shadow_rows(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(jobs, gpus) rows of every shadow round, in round order."""
        keys = ("round_id", "t_s", "job_id", "tenant", "state", "gpus", "held", "arrival_s",
                "start_s")
        jobs = [dict(zip(keys, r, strict=True)) for r in self.db.execute(
            f"SELECT {', '.join(keys)} FROM shadow_jobs ORDER BY round_id, rowid")]
        gpus = [dict(zip(("round_id", "t_s", "gpu_type", "total"), r, strict=True))
                for r in self.db.execute("SELECT round_id, t_s, gpu_type, total FROM "
                                         "shadow_gpus ORDER BY round_id, gpu_type")]
        return jobs, gpus

    def plans(self) -> dict[int, dict[str, Any]]:
        """Each round's plan as journalled (round id → {"assignments", "priorities", ...})."""
        return {int(r[0]): json.loads(r[1]) for r in
                self.db.execute("SELECT id, plan FROM rounds ORDER BY id")}

    # ---- job history ----------------------------------------------------------------------
    _JOB_KEYS = ("job_id", "tenant", "first_seen", "arrival_s", "state", "attained_s",
                 "waiting_s", "restarts", "last_seen", "finished_at", "exit_code")

    def job_history(self, job_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The stored history of ``job_ids`` (all jobs when None). A round asks only for
        the jobs in its snapshot, so its cost does not grow with the finished jobs kept."""
        sql = f"SELECT {', '.join(self._JOB_KEYS)} FROM jobs"
        if job_ids is None:
            rows = list(self.db.execute(sql))
        else:
            rows = []
            for start in range(0, len(job_ids), 500):
                chunk = job_ids[start:start + 500]
                rows += self.db.execute(f"{sql} WHERE job_id IN ({','.join('?' * len(chunk))})",
                                        chunk)
        return {r[0]: dict(zip(self._JOB_KEYS, r, strict=True)) for r in rows}

    def prune(self, *, keep_finished_s: float, keep_rounds_s: float,
              now: float | None = None) -> tuple[int, int]:
        """Forget jobs finished (or unseen) longer than ``keep_finished_s`` ago, and finished
        rounds with their actions and hook events older than ``keep_rounds_s``. Returns
        (jobs, rounds) removed. Unfinished rounds are never pruned: recovery needs them."""
        now = time.time() if now is None else now
        with self.tx() as db:
            jobs = db.execute("DELETE FROM jobs WHERE COALESCE(finished_at, last_seen) < ?",
                              (now - keep_finished_s,)).rowcount
            old = "SELECT id FROM rounds WHERE status != 'applying' AND started_at < ?"
            cutoff = (now - keep_rounds_s,)
            db.execute(f"DELETE FROM actions WHERE round_id IN ({old})", cutoff)
            rounds = db.execute(f"DELETE FROM rounds WHERE id IN ({old})", cutoff).rowcount
            db.execute("DELETE FROM events WHERE ts < ?", cutoff)
            db.execute("DELETE FROM decisions WHERE to_s < ?", cutoff)
            for table in ("shadow_jobs", "shadow_gpus"):   # with their rounds
                db.execute(f"DELETE FROM {table} WHERE round_id NOT IN (SELECT id FROM rounds)")
        self._latest = None
        return jobs, rounds

    def save_jobs(self, rows: list[dict[str, Any]]) -> None:
        with self.tx() as db:
            db.executemany(
                "INSERT INTO jobs(job_id, tenant, first_seen, arrival_s, state, attained_s, "
                "waiting_s, restarts, last_seen, finished_at, exit_code) VALUES (:job_id, "
                ":tenant, :first_seen, :arrival_s, :state, :attained_s, :waiting_s, :restarts, "
                ":last_seen, :finished_at, :exit_code) ON CONFLICT(job_id) DO UPDATE SET "
                "arrival_s=excluded.arrival_s, state=excluded.state, "
                "attained_s=excluded.attained_s, "
                "waiting_s=excluded.waiting_s, restarts=excluded.restarts, "
                "last_seen=excluded.last_seen, finished_at=excluded.finished_at, "
                "exit_code=COALESCE(excluded.exit_code, jobs.exit_code)", rows)

    # ---- hook events and policy state -----------------------------------------------------
    def add_event(self, event: Mapping[str, Any], source: str) -> bool:
        """Insert once per spool file (``source`` is unique): re-ingesting is harmless."""
        with self.tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO events(ts, kind, job_id, node, payload, source) "
                "VALUES (?,?,?,?,?,?)",
                (float(event.get("ts", time.time())), str(event.get("kind", "?")),
                 event.get("job_id"), event.get("node"), json.dumps(event, sort_keys=True),
                 source))
            if event.get("kind") in ("epilog", "epilog-slurmctld") and event.get("exit_code"):
                db.execute("UPDATE jobs SET exit_code=? WHERE job_id=?",
                           (str(event["exit_code"]), event.get("job_id")))
            return cur.rowcount > 0

    def events(self, job_id: str | None = None) -> list[dict[str, Any]]:
        sql, args = "SELECT payload FROM events", ()
        if job_id is not None:
            sql, args = sql + " WHERE job_id=?", (job_id,)
        return [json.loads(r[0]) for r in self.db.execute(sql + " ORDER BY ts, id", args)]

    def save_policy_state(self, name: str, data: Mapping[str, Any]) -> None:
        with self.tx() as db:
            db.execute("INSERT INTO policy_state(name, data, updated_at) VALUES (?,?,?) "
                       "ON CONFLICT(name) DO UPDATE SET data=excluded.data, "
                       "updated_at=excluded.updated_at",
                       (name, json.dumps(data, sort_keys=True), time.time()))

    def policy_state(self, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT data FROM policy_state WHERE name=?", (name,)).fetchone()
        return None if row is None else json.loads(row[0])


_DECISION_KEYS = ("from_round", "to_round", "from_s", "to_s", "outcome", "code", "figures",
                  "by_code", "by_figures", "text", "owner_uid")


def read_decisions(db: sqlite3.Connection, job_id: str) -> list[dict[str, Any]]:
    """A job's rows of ``decisions``, oldest first, on any connection to a store (the
    explain socket's thread reads on a read-only one of its own)."""
    rows = db.execute(f"SELECT {', '.join(_DECISION_KEYS)} FROM decisions WHERE job_id=? "
                      "ORDER BY from_round", (job_id,))
    out = []
    for r in rows:
        row = dict(zip(_DECISION_KEYS, r, strict=True))
        row["figures"] = json.loads(row["figures"])
        row["by_figures"] = json.loads(row["by_figures"]) if row["by_figures"] else None
        out.append(row)
    return out


@contextmanager
def scratch_copy(path: str | None) -> Iterator[Store]:
    """A store in a private temporary directory — empty, or a copy of the daemon's store at
    ``path`` — removed afterwards: dry runs start from the daemon's history and policy state
    but never write the daemon's files (nor take its lock: a real daemon may be running)."""
    with tempfile.TemporaryDirectory(prefix="gpufair-dry-run-") as tmp:
        target = Path(tmp) / "state.db"
        if path is not None:
            _copy_store(path, target)
        store = Store(target, backup=False)   # a copy: migrating it needs no way back
        try:
            yield store
        finally:
            store.close()


def _copy_store(path: str, target: Path) -> None:
    """A consistent copy through SQLite's backup API. Reading a WAL database may create its
    ``-wal``/``-shm`` companions (SQLite's own files, there anyway while the daemon runs);
    where we may not create them (the store is root's, the dry run an admin's), the file is
    read as immutable: the last commits still in the WAL are then missing from the copy."""
    errors = []
    for mode in ("ro", "ro&immutable=1"):
        try:
            source = sqlite3.connect(f"file:{path}?mode={mode}", uri=True)
            copy = sqlite3.connect(str(target))
            try:
                source.backup(copy)
                return
            finally:
                source.close()
                copy.close()
        except sqlite3.Error as exc:
            errors.append(str(exc))
    raise InputError(path, f"cannot read the state store: {errors[0]}")

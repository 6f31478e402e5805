"""``gpufair explain`` through the daemon's socket: owners read their own jobs, admins all,
anybody else gets what an unknown job gets; the daemon being down is exit 1."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpufair.cli.main import main
from gpufair.core.explain import Decision
from gpufair.model import Reason
from gpufair.plugin.explain_server import ExplainServer, admins
from gpufair.plugin.store import Store

NOBODY = 65534
OTHER = 1000


@pytest.fixture()
def reachable() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path sits under a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="gpufair-explain-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def stored(path: Path) -> Path:
    """A store where job "mine" is nobody's and "theirs" another user's, over two rounds."""
    store = Store(path / "state.db")
    waiting = Decision("mine", "wait", Reason("las.queue", {"queue": 1}))
    for round_id, now in ((1, 1000.0), (2, 1120.0)):
        store.record_decisions(round_id, {
            "mine": waiting,
            "theirs": Decision("theirs", "run", Reason("las.queue", {"queue": 0}))},
            {"mine": NOBODY, "theirs": OTHER}, now=now)
    store.record_decisions(3, {"mine": Decision(
        "mine", "held", waiting.reason, Reason("guard.min_runtime", {"min_runtime_s": 60}))},
        {"mine": NOBODY}, now=1240.0)
    store.close()
    return path / "state.db"


def server(path: Path, admin_uids: frozenset[int]) -> ExplainServer:
    return ExplainServer(path / "explain.sock", str(stored(path)), admin_uids=admin_uids,
                         admin_gid=None, next_round=lambda: 1360.0)


def ask_as(uid: int, sock: Path, job: str) -> dict:
    """Ask from a process of another user (the system python: it can run it)."""
    code = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
            "s.sendall(sys.argv[2].encode() + b'\\n'); print(s.makefile().readline())")
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    proc = subprocess.run([python, "-c", code, str(sock), json.dumps({"job": job})],
                          user=uid, group=uid, capture_output=True, text=True, timeout=20,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to ask as another user")
def test_an_owner_reads_their_job_and_nobody_elses(reachable):
    explain = server(reachable, admins(None)[0])
    try:
        sock = reachable / "explain.sock"
        assert (sock.stat().st_mode & 0o777) == 0o666
        mine = ask_as(NOBODY, sock, "mine")
        assert [(r["from_round"], r["to_round"], r["outcome"]) for r in mine["decisions"]] \
            == [(1, 2, "wait"), (3, 3, "held")]
        assert mine["decisions"][1]["text"] == \
            "held back (guard.min_runtime: min runtime s 60) — las.queue: queue 1"
        assert mine["next_round_at"] == 1360.0
        # another user's job and a job nobody ever ran get the very same answer
        assert ask_as(NOBODY, sock, "theirs") == {"error": "unknown", "job": "theirs"}
        assert ask_as(NOBODY, sock, "never") == {"error": "unknown", "job": "never"}
        assert ask_as(NOBODY, sock, "x" * 300)["error"] == "bad request"
    finally:
        explain.close()


def test_the_command_for_an_admin_an_outsider_and_with_no_daemon(reachable, capsys):
    explain = server(reachable, frozenset({os.geteuid()}))   # this user is an admin
    sock = str(reachable / "explain.sock")
    try:
        assert main(["explain", "theirs", "--socket", sock]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[0] == "job theirs: gpufair's decisions, oldest first"
        assert "rounds 1-2" in out and "running — las.queue: queue 0" in out
        assert "next round:" in out
        assert main(["explain", "mine", "--socket", sock, "--json"]) == 0
        reply = json.loads(capsys.readouterr().out)
        assert [r["code"] for r in reply["decisions"]] == ["las.queue", "las.queue"]
        assert reply["decisions"][1]["by_figures"] == {"min_runtime_s": 60}
        assert main(["explain", "12345", "--socket", sock]) == 2
        assert "job 12345: gpufair has no decision" in capsys.readouterr().err
    finally:
        explain.close()
    outsider = server(reachable, frozenset())   # this user is nobody's admin, owns neither
    try:
        assert main(["explain", "theirs", "--socket", sock]) == 2
        assert "job theirs:" in capsys.readouterr().err
    finally:
        outsider.close()
    assert main(["explain", "theirs", "--socket", sock]) == 1   # the daemon is down
    assert "daemon is unavailable" in capsys.readouterr().err


def test_a_client_that_sends_nothing_does_not_stop_the_others(reachable):
    explain = server(reachable, frozenset({os.geteuid()}))
    try:
        silent = socket.socket(socket.AF_UNIX)
        silent.connect(str(reachable / "explain.sock"))   # says nothing: times out alone
        assert main(["explain", "mine", "--socket", str(reachable / "explain.sock"),
                     "--json"]) == 0
        silent.close()
    finally:
        explain.close()


def test_the_story_prints_no_terminal_escapes():
    from gpufair.cli.explain import render
    row = {"from_round": 1, "to_round": 1, "from_s": 0.0, "to_s": 0.0,
           "text": "waiting — themis.lost_auction: winners \x1b]2;owned\x07app"}
    out = render({"job": "7", "decisions": [row], "next_round_at": None})
    assert "\x1b" not in out and "\x07" not in out and "winners ?]2;owned?app" in out

"""The live sacct reader without a cluster: its command line, and what it makes of a ``sacct``
that answers bytes that are not UTF-8, answers late, fails or prints something else first.

The ``sacct`` run here is a real executable (a small script put first on PATH), so the
reader's subprocess, timeout and decoding are the ones a site's sacct meets; the loopback
cluster with slurmdbd is in tests/integration/test_slurm_accounting.py.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime
from pathlib import Path

import pytest

from gpufair.adapters.slurm import SlurmUnavailable
from gpufair.adapters.slurm.sacct import ALL_STATES, SACCT_FIELDS, read_sacct_live, sacct_argv
from gpufair.adapters.slurm.transport import CliTransport, TransportError

HEADER = "|".join(SACCT_FIELDS).encode()
SAVED = Path(__file__).parent / "data" / "sacct" / "sacct_parsable2.txt"


def fake_sacct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """A ``sacct`` first on PATH running ``body`` (sh); it logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "sacct"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/argv"\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "argv"


def test_argv_asks_for_allocations_every_incarnation_and_state_and_the_fields():
    argv = sacct_argv(datetime(2026, 11, 1), "2026-11-28T10:00")
    assert argv[0] == "sacct"
    assert {"--allusers", "--allocations", "--duplicates", "--parsable2"} <= set(argv)
    assert "--starttime=2026-11-01T00:00:00" in argv and "--endtime=2026-11-28T10:00" in argv
    assert f"--state={ALL_STATES}" in argv
    assert f"--format={','.join(SACCT_FIELDS)}" in argv
    assert "--noheader" not in argv   # the header is what the parser maps fields by


@pytest.mark.parametrize("bad", ["now-7days", "2026-13-01", "; rm -rf /", ""])
def test_times_are_checked_before_anything_runs(bad):
    with pytest.raises(ValueError, match="not a time"):
        sacct_argv(bad, "2026-11-28")


def test_cluster_names_are_checked():
    assert "--clusters=loopback,gpu-2" in sacct_argv("2026-11-01", "2026-11-02",
                                                      clusters="loopback,gpu-2")
    with pytest.raises(ValueError, match="cluster"):
        sacct_argv("2026-11-01", "2026-11-02", clusters="a b")


def test_reads_the_header_and_rows_and_bytes_that_are_not_utf8(tmp_path, monkeypatch):
    fake_sacct(tmp_path, monkeypatch, f"cat '{SAVED}'")
    data = read_sacct_live("2026-11-28", "2026-11-29")
    assert data == SAVED.read_bytes()   # byte for byte, as a saved file
    assert data.splitlines()[0] == HEADER
    assert b"caf\xe9-\xff\xfe-latin1" in data   # the recorded job name that is not UTF-8


def test_passes_its_argv_without_a_shell(tmp_path, monkeypatch):
    logged = fake_sacct(tmp_path, monkeypatch, f"printf '%s\\n' '{HEADER.decode()}'")
    read_sacct_live("2026-11-28", "2026-11-29", clusters="loopback")
    assert logged.read_text().splitlines() == sacct_argv("2026-11-28", "2026-11-29",
                                                         clusters="loopback")[1:]


def test_slurmdbd_down_is_unavailable(tmp_path, monkeypatch):
    fake_sacct(tmp_path, monkeypatch, "echo 'sacct: error: Problem talking to the database: "
               "Connection refused' >&2; exit 1")
    with pytest.raises(SlurmUnavailable, match="Problem talking to the database"):
        read_sacct_live("2026-11-28", "2026-11-29")


def test_no_answer_in_time_is_unavailable(tmp_path, monkeypatch):
    fake_sacct(tmp_path, monkeypatch, "exec sleep 30")
    with pytest.raises(SlurmUnavailable, match=r"no answer in 0\.5 s"):
        read_sacct_live("2026-11-28", "2026-11-29", timeout_s=0.5)


def test_no_sacct_at_all_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SlurmUnavailable, match="cannot run"):
        read_sacct_live("2026-11-28", "2026-11-29")


def test_something_else_before_the_header_is_refused(tmp_path, monkeypatch):
    fake_sacct(tmp_path, monkeypatch, f"echo 'sacct: warning: x'; printf '%s\\n' "
               f"'{HEADER.decode()}'")
    with pytest.raises(SlurmUnavailable, match="unexpected first line"):
        read_sacct_live("2026-11-28", "2026-11-29")


def test_a_runner_may_be_given():
    seen = []

    def runner(argv):
        seen.append(argv)
        return HEADER + b"\n"

    assert read_sacct_live("2026-11-28", "2026-11-29", run=runner) == HEADER + b"\n"
    assert seen[0][0] == "sacct"

    def failing(argv):
        raise TransportError("sacct: no answer in 1 s")

    with pytest.raises(SlurmUnavailable, match="no answer"):
        read_sacct_live("2026-11-28", "2026-11-29", run=failing)


def test_cli_reads_bytes_and_says_why_a_command_failed(tmp_path, monkeypatch):
    fake_sacct(tmp_path, monkeypatch, "printf 'a\\377b'")
    assert CliTransport(timeout_s=5).read_bytes(["sacct"]) == b"a\xffb"
    assert CliTransport(timeout_s=5).read_text(["sacct"]) == "a\ufffdb"
    fake_sacct(tmp_path, monkeypatch, "echo boom >&2; exit 3")
    with pytest.raises(TransportError, match="exit 3: boom"):
        CliTransport(timeout_s=5).read_bytes(["sacct", "--x"])

"""slurmdbd on MariaDB for the loopback Slurm (up.sh --accounting), the history recorder and
the live sacct reader, against the real daemons.

One history is made per session (``record_history.py --quick``: every special case, a short
burst, about a minute) and read back three ways: the recorder's raw file, the live reader, and
the live reader with slurmdbd stopped (which must say "unavailable", not return nothing).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import REPO, SCRIPTS, Cluster

from gpufair.adapters.slurm import SlurmUnavailable
from gpufair.adapters.slurm.sacct import SACCT_FIELDS, read_sacct_live
from gpufair.adapters.slurm.transport import CliTransport, decode

NAME = b"caf\xe9-\xff\xfe-latin1"


@pytest.fixture(scope="module")
def recorded(slurm_accounting: Cluster, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[Path, dict]]:
    out = tmp_path_factory.mktemp("sacct")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(SCRIPTS / "record_history.py"), "--quick",
                           "--burst", "8", "--out", str(out)], env=slurm_accounting.env,
                          cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"recorded in {time.monotonic() - started:.1f} s: {proc.stdout.strip()}")
    yield out, json.loads((out / "workload.json").read_text())


def rows(raw: bytes) -> list[dict[str, str]]:
    header, *lines = decode(raw).splitlines()
    names = header.split("|")
    return [dict(zip(names, line.split("|"), strict=True)) for line in lines]


def test_sacct_records_every_case_of_a_real_history(recorded):
    out, workload = recorded
    raw = (out / "sacct_parsable2.txt").read_bytes()
    assert raw.split(b"\n", 1)[0].decode() == "|".join(SACCT_FIELDS)
    assert b"|" + NAME + b"|" in raw        # the bytes the user typed, not '?'
    by_case = {j["job_id"]: j["case"] for j in workload["jobs"]}
    seen: dict[str, list[dict[str, str]]] = {}
    for row in rows(raw):
        seen.setdefault(by_case.get(row["JobID"].split("_")[0], "?"), []).append(row)
    assert [r["State"] for r in seen["requeue"]] == ["REQUEUED", "COMPLETED"]
    assert [r["JobID"].split("_")[1] for r in seen["array"]] == ["0", "1", "2", "3"]
    assert seen["fail"][0]["State"] == "FAILED" and seen["fail"][0]["ExitCode"] == "1:0"
    cancelled = seen["cancel-pending"][0]
    assert cancelled["State"].startswith("CANCELLED") and cancelled["AllocTRES"] == ""
    assert cancelled["NodeList"] == "None assigned"
    assert seen["cancel-running"][0]["State"].startswith("CANCELLED")
    assert "gres/gpu" not in seen["nongpu"][0]["AllocTRES"]
    assert "gres/gpu:v100=2" in seen["requeue"][1]["AllocTRES"]   # typed GRES as TRES
    assert {r["Account"] for r in rows(raw)} == {"research", "vision", "nlp"}
    assert {r["User"] for r in rows(raw)} == {"root", "gpf-alice", "gpf-bob"}
    assert any(r["NNodes"] == "2" and "gres/gpu=8" in r["AllocTRES"] for r in rows(raw))
    doc = json.loads(decode((out / "sacct.json").read_bytes()))
    assert doc["meta"]["Slurm"]["release"].startswith("22.05")
    assert {j["job_id"] for j in doc["jobs"]} >= {int(j["job_id"]) for j in workload["jobs"]}


def test_live_reader_returns_what_was_recorded(slurm_accounting, recorded, monkeypatch):
    out, workload = recorded
    for key, value in slurm_accounting.env.items():
        monkeypatch.setenv(key, value)
    data = read_sacct_live(workload["starttime"], workload["endtime"])
    # the same command as the recorder, the same bytes (the name that is not UTF-8 too)
    assert data == (out / "sacct_parsable2.txt").read_bytes()
    assert b"|" + NAME + b"|" in data


def replay(cluster: Cluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpufair", "replay", *argv], env=cluster.env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_replay_sacct_reads_the_cluster_as_the_saved_file_does(slurm_accounting, recorded):
    """``gpufair replay --sacct`` runs sacct itself: the same history, the same table, as a
    replay of the file the recorder saved from the same window."""
    out, workload = recorded
    live = replay(slurm_accounting, "--sacct", "--starttime", workload["starttime"],
                  "--endtime", workload["endtime"], "--policies", "fifo", "--json", "-q")
    saved = replay(slurm_accounting, str(out / "sacct_parsable2.txt"), "--policies", "fifo",
                   "--json", "-q")
    assert live.returncode == 0 and saved.returncode == 0, live.stderr + saved.stderr
    got, want = live.stdout.splitlines(), saved.stdout.splitlines()
    assert json.loads(got[-1])["history"]["jobs"] == json.loads(want[-1])["history"]["jobs"]
    strip = ("wall_s", "policy_s", "solver_s", "trace")
    assert [{k: v for k, v in json.loads(line).items() if k not in strip} for line in got[:-1]] \
        == [{k: v for k, v in json.loads(line).items() if k not in strip} for line in want[:-1]]
    both = replay(slurm_accounting, str(out / "sacct_parsable2.txt"), "--sacct",
                  "--starttime", workload["starttime"])
    assert both.returncode == 2 and "give no history file" in both.stderr


def test_slurmdbd_down_is_unavailable(slurm_accounting, recorded, monkeypatch):
    _out, workload = recorded
    for key, value in slurm_accounting.env.items():
        monkeypatch.setenv(key, value)
    pid_file = slurm_accounting.base / "run" / "slurmdbd.pid"
    pid = int(pid_file.read_text())
    subprocess.run(["kill", "-TERM", str(pid)], check=True)
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        with pytest.raises(SlurmUnavailable, match=r"^sacct .*: exit 1"):
            read_sacct_live(workload["starttime"], workload["endtime"],
                            run=CliTransport(timeout_s=60).read_bytes)
        down = replay(slurm_accounting, "--sacct", "--starttime", workload["starttime"],
                      "--endtime", workload["endtime"], "-q")
        assert down.returncode == 1 and "unavailable" in down.stderr, down.stderr
        assert "Traceback" not in down.stderr
    finally:   # slurmdbd back for the rest of the session (it reads MariaDB's socket)
        env = dict(slurm_accounting.env,
                   MYSQL_UNIX_PORT=str(slurm_accounting.base / "run" / "mysqld.sock"))
        subprocess.run(["slurmdbd"], env=env, check=True, timeout=30)

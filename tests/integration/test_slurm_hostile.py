"""Job fields a user controls, on a real Slurm 22.05: bytes that are not UTF-8 in a comment,
name, output path or working directory, and the output paths Slurm really writes to.

On the shared cluster these jobs must not outlive the test in a form that breaks the other
tests' helpers (which read ``squeue`` as UTF-8 text): squeue keeps finished jobs for
MinJobAge (300 s), so before cancelling, every non-UTF-8 field is rewritten with
``scontrol update`` (pending jobs only; ``Account`` cannot be updated, so no test submits a
non-UTF-8 account here: the unit tests cover it).
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import Cluster, write_config

from gpufair.adapters.slurm import CliTransport, RestTransport
from gpufair.adapters.slurm.translate import translate

CLI = [sys.executable, "-m", "gpufair.cli.main"]


def _sbatch(cluster: Cluster, cwd: Path, *args: str) -> str:
    out = subprocess.run(["sbatch", "--parsable", *args], cwd=cwd, env=cluster.env,
                         capture_output=True, timeout=30, check=True).stdout
    return out.decode().strip().split(";")[0]


def _bad(path: Path | str, raw: bytes) -> str:
    """``raw`` appended to ``path`` as a str that the OS turns back into those bytes."""
    return os.fsdecode(os.fsencode(str(path)) + raw)


@pytest.fixture()
def scrubbed(cluster: Cluster):
    """Job ids whose non-UTF-8 fields are rewritten, then cancelled, whatever the test did."""
    ids: list[str] = []
    yield ids
    for job_id in ids:
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "Comment=scrubbed",
                        "JobName=scrubbed", "WorkDir=/tmp", "StdOut=/dev/null"],
                       env=cluster.env, capture_output=True, timeout=30, check=False)
    if ids:
        subprocess.run(["scancel", *ids], env=cluster.env, capture_output=True, timeout=30,
                       check=False)


def test_fields_that_are_not_utf8_stop_neither_the_reads_nor_the_round(
        cluster: Cluster, scrubbed: list[str], tmp_path: Path):
    bad_dir = Path(_bad(tmp_path / "d", b"\xffir"))
    bad_dir.mkdir()
    # held by job_submit.lua (hard mode), not by --hold: an owner-held job is no demand, and
    # the round below must see these (the lua would also add gpufair:userhold to comments)
    hold = ["-p", "gpu", "--gres=gpu:1", "--wrap", "sleep 600"]
    cases = {
        "comment": ["--comment", os.fsdecode(b"\xff"), *hold],
        "name": ["-J", os.fsdecode(b"bad\xfename"), *hold],
        "output": ["-o", os.fsdecode(b"o\xfeut-%j.out"), *hold],
        "workdir": ["-D", str(bad_dir), *hold],
        "controls": ["--comment", "a\x01\x1b[31mred\x7f\ttab\rcr", *hold],
        "plain": ["-J", "plain", *hold],
    }
    ids = {}
    for case, args in cases.items():
        ids[case] = _sbatch(cluster, tmp_path, *args)
        scrubbed.append(ids[case])

    raw = subprocess.run(["squeue", "--all", "--states=all", "--json"], env=cluster.env,
                         capture_output=True, timeout=30, check=True).stdout
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")   # what 22.05 prints: the bytes as they were typed
    start = raw.index(b'"comment": "\xff"')
    print("squeue --json:", raw[start:start + 16], raw[raw.index(b'"name": "bad'):][:20])

    cli = CliTransport(env=cluster.env)
    rest = RestTransport(f"unix:{cluster.base / 'run' / 'slurmrestd.sock'}")
    for transport in (cli, rest):
        jobs_doc = transport.read_jobs()
        records = {str(j["job_id"]): j for j in jobs_doc["jobs"]}
        assert records[ids["comment"]]["comment"] == "\ufffd"
        assert records[ids["name"]]["name"] == "bad\ufffdname"
        assert records[ids["controls"]]["comment"] == "a\x01\x1b[31mred\x7f\ttab\rcr"
        assert records[ids["workdir"]]["current_working_directory"] == \
            str(tmp_path / "d\ufffdir")
        view = translate(jobs_doc, transport.read_nodes(), now=0.0, managed_partitions=["gpu"],
                         source=transport.name)
        assert view.problems == ()
        jobs = {j.id: j for j in view.state.jobs}
        assert set(ids.values()) <= set(jobs)
        # a path with U+FFFD in it names no file: never handed to the profiler
        assert jobs[ids["output"]].log_path is None
        assert jobs[ids["workdir"]].log_path is None
        assert jobs[ids["plain"]].log_path == str(tmp_path / f"slurm-{ids['plain']}.out")

    config = write_config(tmp_path / "g.toml", cluster, tmp_path / "state.db")
    snap = subprocess.run([*CLI, "snapshot", "--slurm", "--config", str(config)],
                          env=cluster.env, capture_output=True, text=True, timeout=60)
    assert snap.returncode == 0, snap.stderr[-2000:]
    assert set(ids.values()) <= {j["id"] for j in json.loads(snap.stdout)["jobs"]}

    (tmp_path / "squeue.json").write_bytes(raw)
    (tmp_path / "sinfo.json").write_bytes(
        subprocess.run(["sinfo", "--json"], env=cluster.env, capture_output=True, timeout=30,
                       check=True).stdout)
    dry = subprocess.run([*CLI, "dry-run", "--squeue", str(tmp_path / "squeue.json"),
                          "--sinfo", str(tmp_path / "sinfo.json"), "--config", str(config),
                          "--json"], env=cluster.env, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr[-2000:]

    serve = subprocess.run([*CLI, "serve", "--config", str(config), "--rounds", "1",
                            "--dry-run"], env=cluster.env, capture_output=True, text=True,
                           timeout=60)
    assert serve.returncode == 0, serve.stderr[-2000:]
    assert "Traceback" not in serve.stderr
    rounds = [json.loads(line) for line in serve.stderr.splitlines()
              if line.startswith("{") and '"event": "round"' in line]
    assert rounds and rounds[0]["jobs"] >= len(ids)


def test_log_path_is_the_file_the_job_writes(cluster: Cluster, tmp_path: Path):
    """Jobs in the unmanaged partition (they start at once) with Slurm's default output and
    with filename patterns; each resolved path must be the file holding the job's marker."""
    user = pwd.getpwuid(os.getuid()).pw_name
    (tmp_path / "rel").mkdir()
    (tmp_path / "abs" / user).mkdir(parents=True)
    run = ["-p", "urgent", "--gres=gpu:1", "--wrap", "echo marker-$SLURM_JOB_ID; sleep 60"]
    submitted = {
        "default": _sbatch(cluster, tmp_path, *run),
        "default array": _sbatch(cluster, tmp_path, "--array=0-1", *run),
        "relative": _sbatch(cluster, tmp_path, "-J", "myname", "-o", "rel/%x-%j.out", *run),
        "absolute array": _sbatch(cluster, tmp_path, "--array=0-2",
                                  "-o", f"{tmp_path}/abs/%u/%A_%a.out", *run),
        "padded": _sbatch(cluster, tmp_path, "-o", "p-%4j-%%-%t.out", *run),
        "host": _sbatch(cluster, tmp_path, "-o", "h-%N-%j.out", *run),
        "devnull": _sbatch(cluster, tmp_path, "-o", "/dev/null", *run),
    }
    cli = CliTransport(env=cluster.env)

    def view():
        return translate(cli.read_jobs(), cli.read_nodes(), now=0.0)

    def records() -> dict[str, dict]:
        return {str(j["job_id"]): j for j in cli.read_jobs()["jobs"]}

    def tasks(case: str) -> list[dict]:
        master = int(submitted[case])
        return [j for j in records().values()
                if j["job_id"] == master or j["array_job_id"] == master]

    want = 1 + 2 + 1 + 3 + 1 + 1 + 1
    cluster.wait_for("every job running", lambda: (
        sum(len(tasks(c)) for c in submitted) == want
        and all(j["job_state"] == "RUNNING" for c in submitted for j in tasks(c))), 30)
    reported = {case: [(str(t["job_id"]), t["standard_output"], t["array_task_id"])
                       for t in tasks(case)] for case in submitted}
    print("22.05 standard_output:", json.dumps(reported))
    # where each job writes, from the job ids alone (sbatch(1), "filename pattern")
    expected: dict[str, str | None] = {}
    for case in submitted:
        for task in tasks(case):
            job_id, index = str(task["job_id"]), task["array_task_id"]
            expected[job_id] = {
                "default": f"{tmp_path}/slurm-{job_id}.out",
                "default array": f"{tmp_path}/slurm-{submitted[case]}_{index}.out",
                "relative": f"{tmp_path}/rel/myname-{job_id}.out",
                "absolute array": f"{tmp_path}/abs/{user}/{submitted[case]}_{index}.out",
                "padded": f"{tmp_path}/p-{int(job_id):04d}-%-0.out",
                "host": None,      # %N is the slurmd host's name: not the node's here
                "devnull": None,
            }[case]
    host = submitted["host"]
    cluster.wait_for("each job's marker in its output file", lambda: all(
        Path(path).is_file() and Path(path).read_text() == f"marker-{job_id}\n"
        for job_id, path in expected.items() if path is not None)
        and any(tmp_path.glob(f"h-*-{host}.out")), 30)

    jobs = {j.id: j for j in view().state.jobs}
    assert {k: jobs[k].log_path for k in expected} == expected
    written = [p.name for p in tmp_path.glob(f"h-*-{host}.out")]
    print("%N wrote:", written, "batch host:", records()[str(host)]["batch_host"])
    assert len(written) == 1   # Slurm wrote it, under a name the node record does not give

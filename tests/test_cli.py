"""The `gpufair` command line as an admin uses it: real subprocesses, exit codes, output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpufair.cli.main import main

REQUIRED_KEYS = {"policy", "makespan_s", "avg_jct_s", "worst_rho", "unfair_fraction", "jain",
                 "utilization", "num_jobs", "wall_s"}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpufair.cli.main", *args],
                          capture_output=True, text=True, timeout=300, check=False)


def test_simulate_default_runs_bundled_demo():
    proc = run_cli("simulate", "--json", "--policy", "fifo")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= REQUIRED_KEYS
    assert out["num_jobs"] == 60 and out["policy"] == "fifo"
    assert set(out["unfair_fraction"]) == {"1.0", "1.05", "1.1"}
    assert all(0 <= v <= 1 for v in out["unfair_fraction"].values())
    assert 0 < out["utilization"] <= 1


def test_simulate_is_reproducible(capsys):
    outs = []
    for _ in range(2):
        assert main(["simulate", "--json", "--policy", "las", "--seed", "3",
                     "--no-progress"]) == 0
        data = json.loads(capsys.readouterr().out)
        data.pop("wall_s"), data.pop("policy_s"), data.pop("solver_s")
        outs.append(data)
    assert outs[0] == outs[1]


def test_compare_prints_one_table(capsys):
    assert main(["compare", "--policies", "fifo,srtf", "--no-progress"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("metric"))
    assert header.split() == ["metric", "fifo", "srtf"]
    assert "worst rho" in out and "unfair >1.1 (%)" in out


@pytest.mark.parametrize(("args", "needle"), [
    (["simulate", "--policy", "nope"], "unknown policy"),
    (["simulate", "--cluster", "v100"], "field 'cluster' = 'v100'"),
    (["simulate", "--trace", "/nonexistent.trace"], "/nonexistent.trace: cannot read trace"),
    (["simulate", "--round", "0"], "field 'round' = 0.0"),
])
def test_bad_input_exits_2_with_named_error(args, needle):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_config_is_named(tmp_path):
    config = tmp_path / "g.toml"
    config.write_text('[solver]\nbackend = "cplex"\n')
    proc = run_cli("simulate", "--config", str(config))
    assert proc.returncode == 2 and "field 'solver.backend' = 'cplex'" in proc.stderr
    config.write_text('[solvr]\n')
    proc = run_cli("simulate", "--config", str(config))
    assert proc.returncode == 2 and "field 'solvr'" in proc.stderr


def test_validate(tmp_path):
    from pathlib import Path
    example = Path(__file__).resolve().parents[1] / "gpufair" / "deploy" / "snapshot.example.json"
    proc = run_cli("validate", str(example))
    assert proc.returncode == 0 and "ok" in proc.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "gpufair-snapshot", "version": 1, "time_s": 0,
                               "jobs": [{"id": "a", "gpus": -2}, {"id": "a"}]}))
    proc = run_cli("validate", str(bad))
    assert proc.returncode == 2   # bad input, as every command
    assert "field 'jobs[0].gpus' = -2" in proc.stderr
    assert "duplicate job id" in proc.stderr


def test_policies_lists_registry(capsys):
    assert main(["policies"]) == 0
    assert "max_min" in capsys.readouterr().out.split()


def test_a_reader_that_goes_away_gets_no_traceback():
    """``gpufair compare | head -1``: the pipe closes before the table is written. The
    command ends with SIGPIPE's shell status (141) and nothing on stderr — no traceback,
    no "Exception ignored" from the interpreter's last flush."""
    proc = subprocess.Popen([sys.executable, "-m", "gpufair.cli.main", "compare",
                             "--policies", "fifo,las"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()   # the reader leaves before anything is printed
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141, err.decode()
    assert err.decode() == ""

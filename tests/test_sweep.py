"""``gpufair sweep``: the grid, its checks before anything runs, the local pool, resuming,
refusing another sweep's directory, and the job array's submission (argv, never a shell)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpufair.cli.main import main
from gpufair.core.simulation import SimulationSpec, simulate
from gpufair.errors import InputError
from gpufair.results.reader import read_results
from gpufair.sweep.grid import load_sweep
from gpufair.sweep.run import cell_dir, claim_out, is_done, run_cell, run_local
from gpufair.sweep.slurm_array import check_not_managed, index_ranges, sbatch_argv, task_script

#: fields of a run's metrics that are timings of this machine, not results
TIMINGS = {"wall_s", "policy_s", "solver_s"}

SWEEP = """\
name = "small"
out = "small.results"
time_limit = 120
[grid]
policy = ["fifo", "las"]
seed = [0, 1]
round = [120, 360]
[policies.las]
queue_thresholds_gpu_s = [[3600.0], [1800.0, 7200.0]]
"""


def exit_code(argv: list[str]) -> int:
    """The command's exit status, whether it returned it or argparse exited with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def write(tmp_path: Path, text: str = SWEEP, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_grid_expands_every_combination_and_options_only_for_their_policy(tmp_path):
    sweep = load_sweep(write(tmp_path))
    # fifo: 2 seeds x 2 rounds; las: 2 seeds x 2 rounds x 2 threshold lists
    assert len(sweep.cells) == 4 + 8
    assert [c.index for c in sweep.cells] == list(range(12))
    assert all(not c.options for c in sweep.cells if c.params["policy"] == "fifo")
    las = [c.options["queue_thresholds_gpu_s"] for c in sweep.cells
           if c.params["policy"] == "las"]
    assert sorted(map(tuple, las)) == [(1800.0, 7200.0)] * 4 + [(3600.0,)] * 4
    assert sweep.out == tmp_path / "small.results"
    assert load_sweep(write(tmp_path)).key == sweep.key   # same file, same sweep


def test_a_cell_key_changes_with_its_trace_content(tmp_path):
    trace = tmp_path / "t.trace"
    shutil.copy(Path(__file__).parents[1] / "gpufair" / "data" / "demo_60jobs_16gpus.trace",
                trace)
    text = '[grid]\npolicy = ["fifo"]\ntrace = ["t.trace"]\n'
    before = load_sweep(write(tmp_path, text)).cells[0].key
    lines = trace.read_text().splitlines(keepends=True)
    trace.write_text("".join(lines[:-1]))   # one job fewer: another workload
    assert load_sweep(write(tmp_path, text)).cells[0].key != before


BAD = {
    "unknown policy": ('[grid]\npolicy = ["fifo", "fast"]\n', "grid.policy"),
    "unknown option": ('[grid]\npolicy = ["las"]\n[policies.las]\nspeed = [1]\n',
                       "policies.las.speed"),
    "empty grid": ('[grid]\npolicy = ["fifo"]\nseed = []\n', "grid.seed"),
    "duplicate cells": ('[grid]\npolicy = ["fifo"]\nseed = [0, 1, 0]\n', "duplicate cells"),
    "duplicate via alias": ('[grid]\npolicy = ["fifo", "fifo"]\n', "duplicate cells"),
    "unreadable trace": ('[grid]\npolicy = ["fifo"]\ntrace = ["nowhere.trace"]\n',
                         "grid.trace = 'nowhere.trace' cannot be read"),
    "malformed trace": ('[grid]\npolicy = ["fifo"]\ntrace = ["bad.trace"]\n', "bad.trace"),
    "unknown grid key": ('[grid]\npolicy = ["fifo"]\ngpus = [4]\n', "grid.gpus"),
    "unknown top key": ('sede = 1\n[grid]\npolicy = ["fifo"]\n', "'sede'"),
    "no policy": ('[grid]\nseed = [0]\n', "grid.policy"),
    "options of a policy not run": ('[grid]\npolicy = ["fifo"]\n[policies.las]\n'
                                    'queue_thresholds_gpu_s = [[1.0]]\n', "policies.las"),
    "bad cluster": ('[grid]\npolicy = ["fifo"]\ncluster = ["v100:-3"]\n', "grid.cluster"),
    "bad round": ('[grid]\npolicy = ["fifo"]\nround = [0]\n', "grid.round"),
    "bad semantics": ('[grid]\npolicy = ["fifo"]\nsemantics = ["fast"]\n', "grid.semantics"),
    "bad slurm key": ('[grid]\npolicy = ["fifo"]\n[slurm]\nnodes = 2\n', "slurm.nodes"),
    "slurm value with a newline": ('[grid]\npolicy = ["fifo"]\n[slurm]\n'
                                   'partition = "a\\nb"\n', "partition"),
    "not TOML": ('[grid\npolicy = 1\n', "invalid TOML"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_sweep_file_exits_2_naming_file_and_key_before_anything_runs(tmp_path, capsys,
                                                                           case):
    text, named = BAD[case]
    (tmp_path / "bad.trace").write_text("not\ta\ttrace\n")
    path = write(tmp_path, text)
    assert exit_code(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and named in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "sweep.results").exists()


def test_dry_run_lists_the_cells_and_writes_nothing(tmp_path, capsys):
    path = write(tmp_path)
    assert main(["sweep", str(path), "--dry-run", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert len(listing["cells"]) == 12 and not any(c["done"] for c in listing["cells"])
    assert not (tmp_path / "small.results").exists()


SMALL = """\
out = "r"
[grid]
policy = ["fifo", "las"]
seed = [0, 1]
"""


def test_local_run_writes_one_result_per_cell_identical_to_gpufair_simulate(tmp_path):
    sweep = load_sweep(write(tmp_path, SMALL))
    claim_out(sweep)
    outcomes = run_local(sweep, jobs=2)
    assert [o.index for o in outcomes] == [0, 1, 2, 3] and all(o.ran for o in outcomes)
    assert not any(o.error for o in outcomes)
    for cell in sweep.cells:
        got = read_results(cell_dir(sweep, cell))
        assert got.runs == [cell.params["policy"]] and got.kinds == ["sweep-cell"]
        alone = simulate(SimulationSpec(policy=cell.params["policy"], seed=cell.params["seed"]))
        metrics = got.metrics.iloc[0].to_dict()
        for key, value in alone.as_dict().items():
            if key in TIMINGS or not isinstance(value, int | float) or isinstance(value, bool):
                continue
            assert metrics[key] == pytest.approx(value, rel=1e-12, nan_ok=True), key


def test_a_finished_sweep_runs_nothing_again_and_a_lost_cell_alone_reruns(tmp_path):
    sweep = load_sweep(write(tmp_path, SMALL))
    claim_out(sweep)
    run_local(sweep, jobs=1)
    stamps = {c.index: (cell_dir(sweep, c) / "meta.json").stat().st_mtime_ns
              for c in sweep.cells}
    assert run_local(sweep, jobs=2) == []   # nothing pending: nothing run
    shutil.rmtree(cell_dir(sweep, sweep.cells[2]))
    # a truncated file is not a result either: the reader's sha256 check says so
    jobs_csv = cell_dir(sweep, sweep.cells[1]) / "jobs.csv"
    jobs_csv.write_text(jobs_csv.read_text()[:50])
    assert not is_done(sweep, sweep.cells[1])
    again = run_local(sweep, jobs=2)
    assert [o.index for o in again] == [1, 2]
    assert (cell_dir(sweep, sweep.cells[0]) / "meta.json").stat().st_mtime_ns == stamps[0]
    assert all(is_done(sweep, c) for c in sweep.cells)


def test_a_results_directory_of_another_sweep_is_refused_not_mixed(tmp_path, capsys):
    first = load_sweep(write(tmp_path, SMALL))
    claim_out(first)
    run_cell(first, 0)
    other = write(tmp_path, SMALL.replace("seed = [0, 1]", "seed = [0, 1, 2]"), "other.toml")
    assert exit_code(["sweep", str(other), "--collect"]) == 2
    assert "holds the results of another sweep" in capsys.readouterr().err
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not this sweep's results directory"):
        claim_out(load_sweep(write(tmp_path, SMALL.replace('out = "r"', 'out = "mine"'))))


def test_collect_prints_one_row_per_finished_cell_and_says_what_is_missing(tmp_path, capsys):
    path = write(tmp_path, SMALL)
    sweep = load_sweep(path)
    claim_out(sweep)
    run_cell(sweep, 1)
    run_cell(sweep, 3)
    assert main(["sweep", str(path), "--collect", "--json"]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)["rows"]
    assert [r["cell"] for r in rows] == [1, 3]
    assert {r["policy"] for r in rows} == {"fifo", "las"} and all(r["seed"] == 1 for r in rows)
    assert "2 of 4 cells have no result yet" in err


def test_array_ranges_and_the_sbatch_command_are_argv_not_a_shell(tmp_path):
    assert index_ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert index_ranges([4]) == "4"
    assert index_ranges([3, 1, 2, 2]) == "1-3"
    text = SMALL + '[slurm]\npartition = "cpu"\naccount = "lab"\nmax_parallel = 3\n'
    odd = tmp_path / "a dir $(touch x)"
    odd.mkdir()
    sweep = load_sweep(write(odd, text))
    argv = sbatch_argv(sweep, [0, 1, 3], odd / "task.sh")
    assert argv[0] == "sbatch" and "--array=0-1,3%3" in argv and "--requeue" in argv
    assert "--partition=cpu" in argv and "--account=lab" in argv
    script = task_script(sweep, sys.executable)
    run = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0
    assert f"'{odd}/sweep.toml'" in script   # quoted: the $( ) is never run
    echo = subprocess.run(["bash", "-c", script.replace("exec ", "printf '%s\\n' "),
                           "task"], capture_output=True, text=True, check=True,
                          env={"SLURM_ARRAY_TASK_ID": "7", "PATH": "/usr/bin:/bin"})
    assert echo.stdout.splitlines()[-3:] == [f"{odd}/sweep.toml", "--cell", "7"]
    assert not (odd / "x").exists()


def test_a_managed_partition_is_refused_unless_the_sweep_says_so(tmp_path):
    managed = load_sweep(write(tmp_path, SMALL + '[slurm]\npartition = "gpu"\n'))
    with pytest.raises(InputError, match=r"slurm\.partition"):
        check_not_managed(managed, ["gpu"])
    check_not_managed(managed, ["other"])
    meant = load_sweep(write(tmp_path, SMALL + '[slurm]\npartition = "gpu"\n'
                             'gpufair_managed = true\n'))
    check_not_managed(meant, ["gpu"])

"""``gpufair replay --out DIR``: "as run" and each policy in one results directory
(docs/FORMATS.md §9), read back by the one reader (issue 31)."""

from __future__ import annotations

import pytest
from test_replay_history import ROWS, row, write

from gpufair.cli.main import main
from gpufair.results.reader import read_results


def test_replay_out_is_a_results_directory(tmp_path, capsys):
    rows = [*ROWS,
            row("300", "erin", "vision", "00:00:00", "00:00:00", "00:10:00", "REQUEUED",
                "gres/gpu=1"),
            row("300", "erin", "vision", "00:00:00", "00:30:00", "00:50:00", "COMPLETED",
                "gres/gpu=1")]
    path = write(tmp_path, rows)
    out = tmp_path / "out"
    assert main(["replay", str(path), "--policies", "fifo,las", "--out", str(out), "-q"]) == 0
    results = read_results(out)
    assert results.runs == ["as_run", "fifo", "las"] and results.kinds == ["replay"]
    meta = results.metas[0]
    assert meta["inputs"]["format"] == "sacct" and meta["inputs"]["tenant"] == "account"
    jobs = results.jobs
    as_run = jobs[jobs["run"] == "as_run"].set_index("job_id")
    fifo = jobs[jobs["run"] == "fifo"].set_index("job_id")
    assert sorted(fifo.index) == sorted(as_run.index) == ["100", "101", "106_2", "300"]
    assert as_run.loc["101", "wait_s"] == 3000 and as_run.loc["101", "jct_s"] == 4800
    assert as_run.loc["300", "wait_s"] == 0 and as_run.loc["300", "jct_s"] == 3000
    allocations = results.allocations
    requeued = allocations[(allocations["run"] == "as_run") & (allocations["job_id"] == "300")]
    assert (requeued["end_s"] - requeued["start_s"]).tolist() == [600, 1200]   # incarnations
    cluster = results.cluster[results.cluster["run"] == "as_run"]
    assert (cluster["busy"] <= cluster["total"]).all()
    tenants = results.tenants[results.tenants["run"] == "as_run"]
    at_zero = tenants[tenants["t_s"] == 0].set_index("tenant")
    assert at_zero.loc["vision", "gpus"] == 5.0       # job 100's 4 GPUs and job 300's 1
    assert results.metrics.set_index("run").loc["as_run", "avg_jct_s"] == pytest.approx(
        (3600 + 4800 + 5340 + 3000) / 4)

"""simulate/compare --time-limit: a run out of wall time stops, reports what finished, partial.

No timing assertions: a limit of a nanosecond has always passed by the first decision, and a
limit of an hour never passes on the bundled demo trace."""

from __future__ import annotations

import json

import pytest

from gpufair.cli.main import main
from gpufair.core.simulation import SimulationSpec, simulate


def test_simulate_stops_at_the_time_limit_and_says_partial():
    report = simulate(SimulationSpec(policy="fifo"), progress=False, time_limit_s=1e-9)
    assert report.partial
    assert report.trace_jobs == 60
    assert report.metrics.num_jobs < report.trace_jobs
    assert report.as_dict()["partial"] is True
    full = simulate(SimulationSpec(policy="fifo"), progress=False, time_limit_s=3600.0)
    assert not full.partial
    assert full.metrics.num_jobs == full.trace_jobs == 60
    assert 0 < full.skipped_decisions < full.decisions   # fifo need not see every event
    assert len(full.decision_s) == full.decisions - full.skipped_decisions
    assert full.decision_percentile(99) >= full.decision_percentile(50) >= 0


def test_cli_partial_exits_3_with_json(capsys):
    assert main(["simulate", "--policy", "fifo", "--json", "--time-limit", "1e-9"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["partial"] is True and out["num_jobs"] < out["trace_jobs"]
    assert main(["simulate", "--policy", "fifo", "--json", "--time-limit", "3600"]) == 0
    assert json.loads(capsys.readouterr().out)["partial"] is False


def test_compare_table_marks_the_partial_policy(capsys):
    assert main(["compare", "--policies", "fifo,las", "--no-progress",
                 "--time-limit", "1e-9"]) == 3
    out = capsys.readouterr().out
    assert "PARTIAL fifo" in out and "PARTIAL las" in out


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "soon"])
def test_time_limit_must_be_positive_seconds(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--time-limit", bad])
    assert exit_.value.code == 2
    assert "--time-limit" in capsys.readouterr().err


def test_help_documents_exit_status_3(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "exit status 3" in capsys.readouterr().out

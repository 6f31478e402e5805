"""The simulator's capture (``--out``): what it records agrees with itself and with the run,
and recording it changes no decision and no figure."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from gpufair.adapters.simulator.capture import fair_shares
from gpufair.cli.main import main
from gpufair.core.round import Round
from gpufair.core.simulation import SimulationSpec, build_simulator, simulate
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy
from gpufair.results import read_results
from tests.test_sim_identity import DATA, REFERENCE, UNTIMED

TIMED = ("wall_s", "policy_s", "solver_s")
SHIFTED = "\n".join(f"A3C\tcmd\t.\t--steps\t0\t{steps}\t{sf}\t1\t-1\t{arrival}"
                    for steps, sf, arrival in [(3000, 1, 5000), (200, 2, 5010),
                                               (900, 1, 5020), (50, 4, 5030), (400, 1, 9000)])
RATES = {"v100": {"('A3C', 1)": {"null": 1.0}, "('A3C', 2)": {"null": 1.5},
                  "('A3C', 4)": {"null": 2.0}},
         "k80": {"('A3C', 1)": {"null": 0.5}, "('A3C', 2)": {"null": 0.8}}}


def _untimed(report) -> str:
    return json.dumps({k: v for k, v in report.as_dict().items() if k not in TIMED},
                      sort_keys=True)


@pytest.mark.parametrize(("policy", "semantics", "elastic"), [
    ("themis", "clean", False), ("las", "artifact", False), ("gandiva_fair", "clean", False),
    ("afs", "clean", True)])
def test_capture_changes_no_figure(policy, semantics, elastic):
    spec = SimulationSpec(policy=policy, semantics=semantics, elastic=elastic)
    plain = simulate(spec, progress=False)
    captured = simulate(spec, progress=False, capture=True)
    assert plain.capture is None and captured.capture is not None
    assert _untimed(captured) == _untimed(plain)
    assert captured.decisions == plain.decisions


@pytest.mark.parametrize("case", ["las.clean", "fifo.artifact"])
def test_simulate_out_matches_the_recorded_reference(case, capsys, tmp_path):
    """The identity test's own reference, with ``--out``: the JSON printed is unchanged, and
    the directory's metrics are those numbers."""
    policy, semantics = case.split(".")
    out = tmp_path / "res"
    assert main(["simulate", "--trace", str(DATA / "gen_220_64.trace"),
                 "--throughputs", "tacc_throughputs", "--cluster", "v100:64",
                 "--policy", policy, "--semantics", semantics, "--json", "-q",
                 "--out", str(out)]) == 0
    got = json.loads(capsys.readouterr().out)
    for key in UNTIMED:
        got.pop(key)
    assert json.dumps(got, sort_keys=True) == json.dumps(REFERENCE[case], sort_keys=True)
    results = read_results(out)
    row = results.metrics.set_index("run").loc[policy]
    assert row["avg_jct_s"] == got["avg_jct_s"] and row["worst_rho"] == got["worst_rho"]
    jobs = results.jobs
    assert len(jobs) == got["trace_jobs"] == 220
    ended = jobs[jobs.outcome.isin(["finished", "failed"])]   # what the metrics count
    assert (jobs.outcome == "failed").sum() == got["failed_jobs"]
    assert ended["rho"].max() == got["worst_rho"]
    assert ended["jct_s"].mean() == pytest.approx(got["avg_jct_s"], rel=1e-12)


def _run(tmp_path, policy="las", semantics="clean", cluster="v100:4,k80:2", **options):
    trace = tmp_path / "shifted.trace"
    trace.write_text(SHIFTED + "\n")
    rates = tmp_path / "rates.json"
    rates.write_text(json.dumps(RATES))
    spec = SimulationSpec(trace=str(trace), throughputs=str(rates), cluster=cluster,
                          policy=policy, semantics=semantics, round_s=60.0, **options)
    return simulate(spec, progress=False, capture=True)


def _covering(allocations, t):
    return [a for a in allocations if a[1] <= t < a[2]]


@pytest.mark.parametrize("semantics", ["clean", "artifact"])
@pytest.mark.parametrize("policy", ["las", "max_min", "fifo"])
def test_allocations_rounds_and_jobs_agree(tmp_path, policy, semantics):
    report = _run(tmp_path, policy, semantics)
    capture = report.capture
    rows = {r[0]: r for r in report.job_rows}
    # times count from the first arrival (5000 s into the trace), not from the trace's zero
    assert rows["0"][2] == 0.0 and rows["4"][2] == 4000.0
    assert capture.t0 == 5000.0
    # each job's intervals follow one another, start when it first started, end when it ended
    for job_id, row in rows.items():
        mine = sorted(a for a in capture.allocations if a[0] == job_id)
        assert mine, job_id
        assert mine[0][1] == row[3] and mine[-1][2] == row[4], job_id
        assert all(a[2] <= b[1] for a, b in itertools.pairwise(mine))
        assert all(a[1] < a[2] and a[4] >= 1 for a in mine)
        assert row[8] == ";".join(dict.fromkeys(a[3] for a in mine))
        assert row[10] == "finished" and row[5] == row[3] - row[2] and row[6] == row[4] - row[2]
    # at every round, the busy GPUs of each type are the allocations covering that instant
    assert capture.cluster
    for t, kind, total, busy, queued in capture.cluster:
        held = sum(a[4] for a in _covering(capture.allocations, t) if a[3] == kind)
        assert busy == held <= total, (t, kind)
        assert total == {"v100": 4, "k80": 2}[kind] and queued >= 0
    times = [row[0] for row in capture.cluster]
    assert times == sorted(times) and len(set(times)) * 2 == len(times)
    # the tenant (the trace names none) holds what the cluster has busy
    by_t = {}
    for t, _, _, busy, _ in capture.cluster:
        by_t[t] = by_t.get(t, 0) + busy
    for t, tenant, gpus, share in capture.tenants:
        assert tenant == "default" and gpus == by_t[t] and 0 <= share <= 6


def test_a_gpu_type_with_no_gpus_and_a_job_that_cannot_run(tmp_path):
    report = _run(tmp_path, cluster="v100:2,k80:0")   # the 4-GPU job cannot run
    rows = {r[0]: r for r in report.job_rows}
    assert rows["3"][10] == "dropped" and rows["3"][7] == 4 and rows["3"][2] == 30.0
    assert math.isnan(rows["3"][3]) and rows["3"][8] == ""
    assert {row[1] for row in report.capture.cluster} == {"v100"}
    assert sum(r[10] == "finished" for r in report.job_rows) == 4


def test_a_run_cut_short_closes_its_allocations(tmp_path):
    """A run stopped part-way (``--time-limit``): the allocations still held end where the
    run stopped, and the jobs are unfinished or never started, not finished."""
    trace = tmp_path / "shifted.trace"
    trace.write_text(SHIFTED + "\n")
    rates = tmp_path / "rates.json"
    rates.write_text(json.dumps(RATES))
    spec = SimulationSpec(trace=str(trace), throughputs=str(rates), cluster="v100:2",
                          policy="fifo", round_s=60.0)
    sim = build_simulator(spec, capture=True)
    rounds = Round(create_policy("fifo", PolicyConfig(round_s=60.0)))
    for _ in range(3):
        sim.apply(rounds.run(sim.snapshot(), preemptive=sim.at_round_boundary).actions)
        sim.advance()
    sim.capture.finish(sim.now)
    rows = {r[0]: r for r in sim.capture.job_rows(sim.jobs, sim.dropped_jobs, {})}
    assert rows["0"][10] == "unfinished" and math.isnan(rows["0"][4])
    assert rows["4"][10] == "never_started" and math.isnan(rows["4"][3])
    assert rows["3"][10] == "dropped"                   # 4 GPUs on a 2-GPU cluster
    open_ = [a for a in sim.capture.allocations if a[0] == "0"]
    assert open_ and open_[-1][2] == sim.now - 5000.0


@pytest.mark.parametrize(("capacity", "demand", "expected"), [
    (8, {"a": 2, "b": 10}, {"a": 2.0, "b": 6.0}),          # a needs less: b takes the rest
    (8, {"a": 4, "b": 4}, {"a": 4.0, "b": 4.0}),           # an exact fit
    (9, {"a": 10, "b": 10, "c": 1}, {"a": 4.0, "b": 4.0, "c": 1.0}),
    (8, {"a": 0, "b": 3}, {"a": 0.0, "b": 3.0}),           # no demand, no share
    (0, {"a": 2}, {"a": 0.0}),                              # no GPUs at all
    (6, {"a": 10, "b": 10, "c": 10, "d": 10}, {"a": 1.5, "b": 1.5, "c": 1.5, "d": 1.5}),
])
def test_fair_shares_fill_water_to_the_demands(capacity, demand, expected):
    assert fair_shares(capacity, demand) == expected


def test_compare_out_writes_every_policy_and_refuses_a_foreign_directory(tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["compare", "--policies", "fifo,las", "-q", "--out", str(out)]) == 0
    results = read_results(out)
    assert results.runs == ["fifo", "las"] and results.kinds == ["compare"]
    assert results.metas[0]["command"] == ["gpufair", "compare", "--policies", "fifo,las",
                                           "-q", "--out", str(out)]
    assert set(results.jobs.run) == {"fifo", "las"} and len(results.jobs) == 120
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    capsys.readouterr()
    assert main(["simulate", "-q", "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine}: exists and is not a gpufair results directory" in err
    assert "Traceback" not in err and (mine / "notes.txt").read_text() == "keep"

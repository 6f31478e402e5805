"""The shadow report's figures against numbers worked out by hand, on a recorded period whose
state changes every round (jobs start on their own, end, arrive; a job never starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.adapters.recording import RecordingAdapter
from gpufair.cli.main import main
from gpufair.core.enrich import with_default_profiles
from gpufair.core.round import Round
from gpufair.model import ClusterState, Job, JobState, Node
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import Store
from gpufair.policy.registry import create_policy
from gpufair.results import read_results
from gpufair.shadow.report import figures

NODES = (Node("n0", "v100", 4), Node("n1", "v100", 4))
N0 = tuple(f"n0:{g}" for g in range(4))
N1 = tuple(f"n1:{g}" for g in range(4))


def job(jid: str, tenant: str, gpus: int, arrival: float, *, on: tuple[str, ...] = (),
        start: float | None = None) -> Job:
    return Job(jid, tenant=tenant, gpus=gpus, arrival_s=arrival, start_s=start,
               state=JobState.RUNNING if on else JobState.PENDING, gpus_held=on)


#: what Slurm did, as four squeue samples: a waits while 4 GPUs idle, Slurm starts it at
#: 1050; d (the earliest submitted) comes and never starts; b ends; c (8 GPUs) starts at 1350
SAMPLES = [
    ClusterState(1000.0, NODES, (job("b", "y", 4, 10, on=N0, start=900.0),
                                 job("a", "x", 4, 5), job("c", "x", 8, 20))),
    ClusterState(1100.0, NODES, (job("b", "y", 4, 10, on=N0, start=900.0),
                                 job("a", "x", 4, 5, on=N1, start=1050.0),
                                 job("c", "x", 8, 20), job("d", "y", 4, 1))),
    ClusterState(1300.0, NODES, (job("a", "x", 4, 5, on=N1, start=1050.0),
                                 job("c", "x", 8, 20), job("d", "y", 4, 1))),
    ClusterState(1400.0, NODES, (job("c", "x", 8, 20, on=N0 + N1, start=1350.0),
                                 job("d", "y", 4, 1))),
]


def shadow_store(path: Path) -> Store:
    adapter = RecordingAdapter(SAMPLES[0])
    store = Store(path)
    rounds = Round(create_policy("fifo"), enrichers=[with_default_profiles], explain=True)
    daemon = Daemon(adapter, rounds, store, ServiceSettings(dry_run=True, shadow=True),
                    sleep=lambda s: None)
    for sample in SAMPLES:
        adapter.source = sample
        daemon.run_round()
    assert adapter.recorded   # it would have acted...
    return store


def test_the_figures_match_the_hand_count(tmp_path):
    shadow = figures(shadow_store(tmp_path / "s.db"))
    assert (shadow.t0, shadow.period_s, shadow.rounds, shadow.policy) == \
        (1000.0, 400.0, 4, "fifo")
    # 1000-1100: a (4) waits, 4 idle; 1100-1300: none idle; 1300-1400: d (4) waits, 4 idle
    # (c, 8, fits no better); the last sample opens no interval
    assert shadow.idle_gpu_s_while_fit_waited == 100 * 4 + 100 * 4
    # held by Slurm / given by fifo, time-weighted: x 0,4,4 / 4,4,4; y 4,4,0 / 4,4,4
    assert shadow.tenant_means == {"x": ((0 * 100 + 4 * 200 + 4 * 100) / 400, 4.0),
                                   "y": ((4 * 100 + 4 * 200 + 0 * 100) / 400, 4.0)}
    # fifo places a at 1000 (Slurm: 1050) and d at 1100 (never started: the period's end)
    assert shadow.earlier == {"a": 50.0, "d": 1400.0 - 1100.0}
    # fifo would take b's GPUs for d at 1100, and c's for d at 1400
    stops = [(a["t_s"], a["job_id"]) for a in shadow.actions if a["action"] == "Preempt"]
    assert stops == [(100.0, "b"), (400.0, "c")] and shadow.preemptions == 2


def test_the_results_directory_and_the_command(tmp_path, capsys):
    shadow_store(tmp_path / "s.db").close()
    out = tmp_path / "shadow"
    assert main(["shadow-report", "--store", str(tmp_path / "s.db"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "idle GPU-seconds while a job that fit waited: 800" in printed
    assert "job d: 300 s earlier" in printed and "would have made: 2" in printed
    results = read_results(out)
    assert results.kinds == ["shadow"] and results.runs == ["slurm", "fifo"]
    metrics = results.metrics.set_index("run")
    assert metrics.loc["slurm", "idle_gpu_s_while_fit_waited"] == 800
    assert metrics.loc["fifo", "would_preempt"] == 2
    jobs = results.jobs.set_index(["run", "job_id"])
    assert jobs.loc[("slurm", "a"), "start_s"] == 50 and jobs.loc[("fifo", "a"), "start_s"] == 0
    assert jobs.loc[("slurm", "d"), "outcome"] == "never_started"
    assert jobs.loc[("fifo", "d"), "start_s"] == 100
    assert jobs.loc[("slurm", "b"), "outcome"] == "finished"
    tenants = results.tenants
    assert len(tenants) == 8 and set(tenants["run"]) == {"slurm"}


def test_no_shadow_round_is_exit_2(tmp_path, capsys):
    Store(tmp_path / "s.db").close()
    assert main(["shadow-report", "--store", str(tmp_path / "s.db")]) == 2
    assert "no shadow round" in capsys.readouterr().err
    assert main(["shadow-report", "--store", str(tmp_path / "none.db")]) == 2


@pytest.mark.parametrize("shadow", [False, True])
def test_only_a_shadow_run_records_samples(tmp_path, shadow):
    store = Store(tmp_path / "s.db")
    daemon = Daemon(RecordingAdapter(SAMPLES[0]), Round(create_policy("fifo")), store,
                    ServiceSettings(dry_run=True, shadow=shadow), sleep=lambda s: None)
    daemon.run_round()
    assert bool(store.shadow_rows()[1]) is shadow

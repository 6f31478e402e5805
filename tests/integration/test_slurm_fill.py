"""Issue 12, item 18 on the real loopback Slurm: a submission is no hook event, yet a job
that fits idle GPUs must not wait for the next timer round (it used to wait up to round_s)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from slurm_cluster import Cluster, start_daemon, stop_daemon, store_rounds, write_config

from gpufair.plugin.store import Store


def _past_first_round(cluster: Cluster, tmp_path: Path, store_path: Path, *, poll_s: float
                      ) -> subprocess.Popen:
    """``gpufair serve`` (LAS, the timer round 600 s away) once its first round is over."""
    config = write_config(tmp_path / "gpufair.toml", cluster, store_path, policy="las",
                          round_s=600, poll_s=poll_s, event_min_interval_s=1)
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("the daemon's first round",
                         lambda: store_path.exists() and store_rounds(store_path) >= 1, 60)
    except BaseException:
        stop_daemon(daemon)
        raise
    return daemon


def test_a_submission_onto_idle_gpus_starts_long_before_the_timer_round(cluster: Cluster,
                                                                         tmp_path: Path):
    store_path = tmp_path / "state.db"
    daemon = _past_first_round(cluster, tmp_path, store_path, poll_s=1)
    try:
        submitted = time.monotonic()
        job = cluster.sbatch("late", tmp_path, gpus_per_node=2, steps=40, step_s=0.5)
        cluster.wait_for(f"job {job} RUNNING",
                         lambda: cluster.jobs()[job]["job_state"] == "RUNNING", 30)
        waited = time.monotonic() - submitted
    finally:
        stop_daemon(daemon)
    # the timer round is 600 s away: only the poll can have started it
    assert waited < 30, waited
    starts = [e for e in Store(store_path).journal() if e.action.job_id == job]
    assert [type(e.action).__name__ for e in starts] == ["Start"]
    assert starts[0].status == "done"



def test_a_submission_wakes_the_daemon_through_job_submits_stamp(cluster: Cluster,
                                                                  tmp_path: Path):
    """With the poll an hour away, only job_submit.lua's stamp (``<hook_dir>/submitted``,
    truncated at each managed submission) can bring the daemon to a submission: the job
    starts within seconds (it used to wait for the poll, 2.5 s on average at poll_s 5)."""
    store_path = tmp_path / "state.db"
    daemon = _past_first_round(cluster, tmp_path, store_path, poll_s=3600)
    try:
        stamp = cluster.hook_dir / "submitted"
        before = stamp.stat().st_mtime_ns if stamp.exists() else None
        job = cluster.sbatch("stamped", tmp_path, gpus_per_node=2, steps=40, step_s=0.5)
        assert stamp.stat().st_mtime_ns != before, "job_submit.lua did not stamp"
        cluster.wait_for(f"job {job} RUNNING",
                         lambda: cluster.jobs()[job]["job_state"] == "RUNNING", 30)
    finally:
        stop_daemon(daemon)
    starts = [e for e in Store(store_path).journal() if e.action.job_id == job]
    assert [(type(e.action).__name__, e.status) for e in starts] == [("Start", "done")]

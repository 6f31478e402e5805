"""Issue 33, shadow mode on the real loopback Slurm: ``gpufair serve --shadow`` beside Slurm's
own scheduler leaves Slurm exactly as a run without gpufair (no hold, priority or comment
change, no update sent at all), and ``gpufair shadow-report``'s figures are those worked out
here from the squeue samples the run recorded."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

from slurm_cluster import ENDED, Cluster, start_daemon, stop_daemon, store_rounds, write_config

from gpufair.cli.main import main
from gpufair.plugin.store import Store
from gpufair.results import read_results

SHADOWED = "urgent"   # no job_submit.lua there: Slurm schedules it alone, as before gpufair


def workload(cluster: Cluster, workdir: Path, tag: str) -> list[str]:
    """Five 4-GPU jobs on 16 GPUs. The first asks to be nice, so Slurm runs the four after
    it and the first waits for one of them to end; fifo (by submission) would run it at
    once, taking the GPUs of the last: a start earlier and a preemption to report."""
    ids = []
    for i in range(5):
        out = cluster.run("sbatch", "--parsable", "-p", SHADOWED, "-J", f"{tag}{i}",
                          "-o", str(workdir / f"{tag}{i}.log"), "--gres=gpu:4",
                          *(["--nice=100000"] if i == 0 else []),
                          "--comment", f"mine {i}", "--wrap", f"sleep {6 + i}")
        ids.append(out.stdout.strip().split(";")[0])
    return ids


def observe(cluster: Cluster, ids: list[str], log_from: int) -> dict[str, tuple]:
    """Until every job ended: what a gpufair could have touched, per job (ever held or at
    priority 0, its admin comment and comment), and the updates slurmctld logged for it."""
    seen: dict[str, set] = {j: set() for j in ids}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        jobs = cluster.jobs()
        for j in ids:
            job = jobs[j]
            seen[j].add((job["state_reason"] in ("JobHeldUser", "JobHeldAdmin")
                         or job["priority"] == 0, job["admin_comment"], job["comment"]))
        if all(jobs[j]["job_state"] in ENDED for j in ids):
            break
        time.sleep(0.5)
    text = (cluster.base / "log" / "slurmctld.log").read_bytes()[log_from:].decode(
        errors="replace")
    touched = re.findall(r"_slurm_rpc_(update_job|requeue|suspend|signal)\w*:? .*?JobId=(\d+)",
                         text)
    return {ids.index(j): (frozenset(seen[j]), sum(t[1] == j for t in touched)) for j in ids}


def by_hand(store: Store) -> dict[str, float]:
    """The report's figures from the recorded samples, counted here without its code."""
    rounds = store.db.execute("SELECT round_id, t_s, SUM(total) FROM shadow_gpus "
                              "GROUP BY round_id ORDER BY round_id").fetchall()
    idle_waste = 0.0
    for (rid, t, total), (_, t_next, _) in itertools.pairwise(rounds):
        held, fits = store.db.execute(
            "SELECT COALESCE(SUM(held), 0), COALESCE(MAX(state = 'pending' AND gpus <= ? - "
            "(SELECT COALESCE(SUM(held), 0) FROM shadow_jobs WHERE round_id = ?)), 0) "
            "FROM shadow_jobs WHERE round_id = ?", (total, rid, rid)).fetchone()
        if fits:
            idle_waste += (t_next - t) * (total - held)
    ids = {r[0] for r in rounds}
    stops = len({e.key for e in store.journal() if e.round_id in ids
                 and type(e.action).__name__ in ("Preempt", "Migrate", "Resize")})
    # a job the plan placed while Slurm had it waiting, by Slurm's start (or the end) - then
    planned: dict[str, float] = {}
    for rid, t, _ in rounds:
        (plan,) = store.db.execute("SELECT plan FROM rounds WHERE id = ?", (rid,)).fetchone()
        placed = json.loads(plan)["assignments"]
        for (job,) in store.db.execute("SELECT job_id FROM shadow_jobs WHERE round_id = ? "
                                       "AND state = 'pending'", (rid,)):
            if job in placed:
                planned.setdefault(job, t)
    # earlier only where it gains time: a job planned at the round Slurm reports it started
    # (a round that saw it still pending, as a loaded daemon's may) would start no earlier
    earlier: dict[str, float] = {}
    for job, t in planned.items():
        (start,) = store.db.execute("SELECT MIN(start_s) FROM shadow_jobs WHERE job_id = ? AND "
                                    "state != 'pending'", (job,)).fetchone()
        gain = (start if start is not None else rounds[-1][1]) - t
        if gain > 0:
            earlier[job] = gain
    return {"idle": idle_waste, "rounds": len(rounds), "stops": stops,
            "period": rounds[-1][1] - rounds[0][1], "earlier": sum(earlier.values()),
            "earlier_jobs": len(earlier)}


def test_a_shadow_run_leaves_slurm_as_it_was_and_reports_what_it_saw(cluster: Cluster,
                                                                        tmp_path: Path):
    log = cluster.base / "log" / "slurmctld.log"
    alone_from = log.stat().st_size
    alone = observe(cluster, workload(cluster, tmp_path, "alone"), alone_from)
    cluster.clear()

    store_path = tmp_path / "state.db"
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="fifo",
                          round_s=1, poll_s=0, explain_socket=str(tmp_path / "e.sock"))
    config.write_text(config.read_text().replace('managed_partitions = ["gpu"]',
                                                 f'managed_partitions = ["{SHADOWED}"]'))
    shadow_from = log.stat().st_size
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log", "--shadow")
    try:
        cluster.wait_for("the first shadow round",
                         lambda: store_path.exists() and store_rounds(store_path) >= 1, 60)
        shadowed = observe(cluster, workload(cluster, tmp_path, "shadowed"), shadow_from)
    finally:
        stop_daemon(daemon)
    # Slurm ran the jobs exactly as without gpufair: nothing held, no priority 0, comments
    # as submitted, and slurmctld logged no update, requeue, suspend or signal of any
    assert shadowed == alone
    assert all(touched == 0 for _, touched in shadowed.values())
    assert all(seen == frozenset({(False, "", f"mine {i}")})
               for i, (seen, _) in shadowed.items())

    out = tmp_path / "report"
    assert main(["shadow-report", "--store", str(store_path), "--out", str(out)]) == 0
    store = Store(store_path)
    try:
        hand = by_hand(store)
        sampled = {r["job_id"] for r in store.shadow_rows()[0]}
    finally:
        store.close()
    metrics = read_results(out).metrics.set_index("run")
    assert metrics.loc["slurm", "rounds"] == hand["rounds"] >= 5
    assert abs(metrics.loc["slurm", "period_s"] - hand["period"]) < 1e-6
    assert abs(metrics.loc["slurm", "idle_gpu_s_while_fit_waited"] - hand["idle"]) < 1e-6
    assert metrics.loc["fifo", "would_preempt"] == hand["stops"] >= 1
    assert abs(metrics.loc["fifo", "would_start_earlier_s"] - hand["earlier"]) < 1e-6
    assert metrics.loc["fifo", "would_start_earlier_jobs"] == hand["earlier_jobs"] >= 1
    assert len(sampled) == 5   # every job of the workload was seen

"""Gandiva_fair enforcing ticket shares on a real Slurm 22.05 on loopback.

Two accounts with tickets 3:1 each submit four 4-GPU jobs onto the 16 GPUs (four 4-GPU
servers, two types). Gandiva_fair homes one job of each account on every server and time-
slices them by stride, through real Slurm actions (requeue-held with a checkpoint, pin,
release): account A should hold 3/4 of the GPU time. Measured from Slurm itself (squeue,
sampled), checked against the tickets and against the daemon's own plans. Then the daemon is
stopped between two rounds, the cluster snapshotted, and ``gpufair dry-run`` on that snapshot
(with the daemon's store: the stride passes) shows exactly the actions the real daemon then
takes. (Stopped in the middle of a round, the next ``serve`` would first finish that round,
which no dry run of the snapshot plans: the test once failed on that, one time in five.)
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

from slurm_cluster import TRAIN_JOB, Cluster, start_daemon, stop_daemon_between_rounds

from gpufair.plugin.store import Store

QUANTUM_S = 6.0
TICKETS = {"acct_a": 3.0, "acct_b": 1.0}


def _config(path: Path, cluster: Cluster, store: Path) -> Path:
    lines = ["[daemon]", 'policy = "gandiva_fair"', f"round_s = {QUANTUM_S}",
             "max_preempt_share = 1.0", "min_runtime_s = 0",
             f"hook_dir = {json.dumps(str(cluster.hook_dir))}",
             "metrics_port = 0", "poll_s = 0",
             "[policies.gandiva_fair]", f"quantum_s = {QUANTUM_S}", "trading = false",
             "tickets = { " + ", ".join(f"{k} = {v}" for k, v in TICKETS.items()) + " }",
             "[slurm]", 'managed_partitions = ["gpu"]',
             "[store]", f"path = {json.dumps(str(store))}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _brief(snapshot: dict) -> str:
    """Who holds which GPUs and which nodes are usable, in a snapshot document: what a
    failure of the dry-run comparison needs to show."""
    nodes = {n["name"]: (n.get("state"), n.get("unavailable")) for n in snapshot["nodes"]}
    jobs = {j["id"]: (j.get("state"), j.get("gpus_held")) for j in snapshot["jobs"]}
    return json.dumps({"time": snapshot.get("time_s"), "nodes": nodes, "jobs": jobs})


def _submit(cluster: Cluster, name: str, account: str, workdir: Path) -> str:
    out = cluster.run("sbatch", "--parsable", "-J", name, "-A", account,
                      "-o", str(workdir / f"{name}.log"), "--open-mode=append", "-N", "1",
                      "--gres=gpu:4", str(TRAIN_JOB), str(workdir), "100000", "0.5").stdout
    return out.strip().split(";")[0]


def test_ticket_shares_through_real_slurm_actions(cluster: Cluster, tmp_path: Path):
    store_path = tmp_path / "state.db"
    config = _config(tmp_path / "g.toml", cluster, store_path)
    account = {}
    for i in range(4):   # interleaved submissions, as two users would
        for acct in TICKETS:
            account[_submit(cluster, f"{acct}-{i}", acct, tmp_path)] = acct
    jobs = cluster.jobs()
    assert {jobs[j]["account"] for j in account} == set(TICKETS)
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    gpu_s = dict.fromkeys(TICKETS, 0.0)
    try:
        cluster.wait_for("all 16 GPUs busy", lambda: sum(
            1 for j, v in cluster.jobs().items()
            if j in account and v["job_state"] == "RUNNING") == 4, 60)
        start = last = time.monotonic()
        while time.monotonic() - start < 8 * QUANTUM_S:   # eight quanta, sampled
            time.sleep(0.4)
            now = time.monotonic()
            running = [j for j, v in cluster.jobs().items()
                       if j in account and v["job_state"] == "RUNNING"]
            for job_id in running:
                gpu_s[account[job_id]] += 4 * (now - last)
            last = now
    finally:   # between rounds: a round cut off here is finished by the next serve first
        stop_daemon_between_rounds(daemon, tmp_path / "daemon.log")
    log = (tmp_path / "daemon.log").read_text()
    assert daemon.returncode == 0, log[-3000:]
    store = Store(store_path)
    assert store.unfinished_rounds() == [], "stopped mid-round: " + log[-3000:]
    journal = store.journal()
    assert not [e for e in journal if e.status == "failed"], journal
    share_a = gpu_s["acct_a"] / sum(gpu_s.values())
    # the plans of the timer rounds (quanta): GPU-quanta per account
    db = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
    planned = dict.fromkeys(TICKETS, 0)
    quanta = 0
    for plan_text, reason in db.execute("SELECT plan, reason FROM rounds ORDER BY id"):
        if "quantum" not in reason.split(",")[0]:
            continue
        quanta += 1
        for job_id, gpus in json.loads(plan_text)["assignments"].items():
            planned[account[job_id]] += len(gpus)
    db.close()
    plan_a = planned["acct_a"] / sum(planned.values())
    preempts = sum(1 for e in journal if type(e.action).__name__ == "Preempt"
                   and e.status == "done")
    print(f"\nGPU time measured from Slurm over {8 * QUANTUM_S:g} s: "
          f"{ {k: round(v) for k, v in gpu_s.items()} } -> A {share_a:.3f}; "
          f"planned over {quanta} quanta: {planned} -> A {plan_a:.3f}; {preempts} requeues")
    assert quanta >= 8
    assert abs(plan_a - 0.75) <= 0.05           # the stride plans: tickets 3:1
    assert abs(share_a - 0.75) <= 0.10          # what Slurm really ran
    assert preempts >= 4                        # time slicing by real requeues
    # every account's jobs really ran and resumed from their checkpoints
    assert all((tmp_path / f"{name}-0.log").exists() for name in TICKETS)
    state = store.policy_state("gandiva_fair")
    assert state is not None and len(state["home"]) == 8 and state["quanta"] >= quanta

    # -- dry run on a saved snapshot == what the daemon then does ----------------------------
    def youngest_run_s() -> float:
        starts = [v["start_time"] for j, v in cluster.jobs().items()
                  if j in account and v["job_state"] == "RUNNING"]
        return time.time() - max(starts, default=0)

    def in_transition() -> bool:
        return any(v["job_state"] == "COMPLETING" or (
            v["job_state"] == "PENDING" and v["priority"] not in (0, None))
            for j, v in cluster.jobs().items() if j in account)

    cli = [sys.executable, "-m", "gpufair.cli.main"]
    # A quantum may rightly keep every server's job (stride on a server runs A's job 3 quanta
    # in 4: about one quantum in ten switches nothing, seen in CI), so up to three quanta are
    # compared, each one fully, until one of them switches jobs.
    for _ in range(3):
        time.sleep(QUANTUM_S + 1)     # the next round is a quantum step for both
        # ... once every running job has had its quantum: under load Slurm starts a released
        # job seconds after the release, and the policy rightly keeps one that ran less than
        # its quantum (seen in CI: both jobs started 3 s late, 5.7 s run, no switch planned)
        cluster.wait_for("every running job past a quantum",
                         lambda: youngest_run_s() >= QUANTUM_S + 1, 60)
        # ... and nothing in transition: the snapshot and the serve's own read are seconds
        # apart, and a requeue still settling (COMPLETING, KillWait 5 s) or a job released
        # but not started yet changes in between which nodes are usable and who holds what
        # (issue 29: a cause of the intermittent difference; so was squeue and sinfo read at
        # different moments, now read again until they agree)
        cluster.wait_for("no job settling or starting", lambda: not in_transition(), 60)
        snap = cluster.run(*cli, "snapshot", "--slurm", "--config", str(config))
        (tmp_path / "snap.json").write_text(snap.stdout)
        dry = json.loads(cluster.run(*cli, "dry-run", str(tmp_path / "snap.json"), "--config",
                                     str(config), "--store", str(store_path), "--json").stdout)
        rounds_before = len(Store(store_path).rounds())
        served = cluster.run(*cli, "serve", "--config", str(config), "--rounds", "1")
        real = [e for e in Store(store_path).journal() if e.round_id > rounds_before]
        after = json.loads(cluster.run(*cli, "snapshot", "--slurm", "--config",
                                       str(config)).stdout)
        assert [(type(e.action).__name__, e.action.job_id,
                 list(getattr(e.action, "gpu_ids", ()))) for e in real] == \
            [(a["kind"], a["job_id"], a["gpu_ids"]) for a in dry["actions"]], (
                "what differed: the snapshot the dry run read, then a read after the serve, "
                "then the serve's warnings:\n" + _brief(json.loads(snap.stdout)) + "\n"
                + _brief(after) + "\n" + "\n".join(
                    line for line in served.stderr.splitlines() if '"warning"' in line))
        if dry["actions"]:
            break
    else:
        raise AssertionError("none of three quanta switched jobs")

"""OEF on a real Slurm 22.05 on loopback: weighted accounts get their shares through real
Slurm actions, the dry run of a saved snapshot shows the same decisions, and a restarted
daemon keeps the allocation (carried deviations and the round in force come from the store).

The loopback cluster has two GPU types (8 v100, 8 k80) but jobs measured on one type only
get no speedup on the other (``gpufair.core.enrich``), so every job's speedup vector is
(1, 1): OEF then shares the 16 GPUs by weight. Accounts a (weight 1) and b (weight 3) each
submit six 2-GPU jobs (24 GPUs wanted): cooperative OEF gives a 16/4 = 4 GPUs and b 12.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from slurm_cluster import TRAIN_JOB, Cluster, start_daemon, stop_daemon, write_config

from gpufair.plugin.store import Store

CLI = [sys.executable, "-m", "gpufair.cli.main"]
WEIGHTS = {"a": 1.0, "b": 3.0}


def submit(cluster: Cluster, account: str, name: str, workdir: Path) -> str:
    out = cluster.run("sbatch", "--parsable", "-A", account, "-J", name,
                      "-o", str(workdir / f"{name}.log"), "--open-mode=append", "-N", "1",
                      "--gres=gpu:2", str(TRAIN_JOB), str(workdir), "400", "0.5").stdout
    return out.strip().split(";")[0]


def oef_config(path: Path, cluster: Cluster, store: Path) -> Path:
    write_config(path, cluster, store, policy="oef")
    weights = ", ".join(f"{k} = {v}" for k, v in WEIGHTS.items())
    with path.open("a") as f:   # an OEF round far longer than the test: no rotation
        f.write(f'[policies.oef]\nmode = "cooperative"\nround_s = 3600\n'
                f"weights = {{ {weights} }}\n")
    return path


def running_gpus(cluster: Cluster, ids: dict[str, str]) -> dict[str, int]:
    jobs = cluster.jobs()
    out = dict.fromkeys(WEIGHTS, 0)
    for job_id, account in ids.items():
        if jobs[job_id]["job_state"] == "RUNNING":
            out[account] += 2
    return out


def test_weighted_accounts_get_their_oef_shares(cluster: Cluster, tmp_path):
    ids = {submit(cluster, acct, f"{acct}{i}", tmp_path): acct
           for i in range(6) for acct in WEIGHTS}
    jobs = cluster.jobs()
    assert {jobs[k]["account"] for k in ids} == set(WEIGHTS)
    config = oef_config(tmp_path / "g.toml", cluster, tmp_path / "state.db")
    # the policy's decisions on a saved snapshot, twice: the same
    snap = cluster.run(*CLI, "snapshot", "--slurm", "--config", str(config))
    (tmp_path / "snap.json").write_text(snap.stdout)
    outputs = [cluster.run(*CLI, "dry-run", str(tmp_path / "snap.json"), "--config",
                           str(config), "--json").stdout for _ in range(2)]
    assert outputs[0] == outputs[1]
    dry = json.loads(outputs[0])
    planned = {a["job_id"]: a["gpu_ids"] for a in dry["actions"] if a["kind"] == "Start"}
    assert {a["kind"] for a in dry["actions"]} == {"Start"}
    per_account = dict.fromkeys(WEIGHTS, 0)
    for job_id, gpus in planned.items():
        per_account[ids[job_id]] += len(gpus)
    # the plan is the weighted share: 16 GPUs split 1:3
    assert per_account == {"a": 4, "b": 12}, per_account
    # one real round: exactly the dry run's actions, carried out by Slurm
    cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
    journal = Store(tmp_path / "state.db").journal()
    assert sorted((e.action.job_id, list(e.action.gpu_ids), e.status) for e in journal) == \
        sorted((j, g, "done") for j, g in planned.items())
    cluster.wait_for("the planned jobs RUNNING", lambda: all(
        cluster.jobs()[j]["job_state"] == "RUNNING" for j in planned), 30)
    assert running_gpus(cluster, ids) == per_account
    # the daemon restarted (its state from the store): several rounds, nothing moves
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        time.sleep(8)   # four daemon rounds
        assert running_gpus(cluster, ids) == per_account
    finally:
        stop_daemon(daemon)
    assert daemon.returncode == 0, (tmp_path / "daemon.log").read_text()[-2000:]
    after = Store(tmp_path / "state.db").journal()
    assert len(after) == len(journal), [e.action for e in after[len(journal):]]
    jobs = cluster.jobs()
    assert all(jobs[j]["restart_cnt"] == 0 for j in planned)

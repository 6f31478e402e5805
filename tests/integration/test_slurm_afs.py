"""AFS on a real Slurm 22.05 (loopback): elastic jobs of several accounts, resized by requeue +
update, and a dry run of a saved snapshot that decides exactly what the daemon then does.

Elastic jobs declare their range in the comment (``gpufair:gpus=MIN-MAX``) and ask with
``--gpus`` (a per-job count the resize can change). Their output goes to /dev/null, so no
measured rates: every job gets the neutral profile, linear in its count (AFS's
"overestimate first"), and with lengths unknown AFS-L is deterministic (no coins, no clock).
What AFS then decides was worked out by hand on the 2 x 4 V100 + 2 x 4 K80 loopback cluster:

1. two 1-8 GPU jobs of teams A and B, alone: one per GPU type (equal rates: spread by
   unclaimed GPUs), each on its type's 8 GPUs;
2. two 1-4 GPU jobs of teams C and D arrive: in each type the newcomer takes one GPU, then
   the ties of Algorithm 1 (lines 9-12, the scanned job plays the shorter one) give it its
   steps up to 4, and the old job gets the other 4 back: each 8-GPU job is resized to 4 on
   one of its servers (a requeue and a restart there), each newcomer starts on the other.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from slurm_cluster import TRAIN_JOB, Cluster, write_config

from gpufair.adapters.slurm.translate import translate
from gpufair.model import node_of
from gpufair.plugin.store import Store

CLI = [sys.executable, "-m", "gpufair.cli.main"]


def submit(cluster: Cluster, name: str, account: str, workdir: Path, *, gpus: int,
           elastic: str, steps: int = 600) -> str:
    out = cluster.run("sbatch", "--parsable", "-J", name, "-A", account, "-o", "/dev/null",
                      "-e", str(workdir / f"{name}.err"), "--open-mode=append",
                      f"--gpus={gpus}", f"--comment=gpufair:gpus={elastic} gpufair:checkpoint",
                      str(TRAIN_JOB), str(workdir), str(steps), "0.5").stdout
    return out.strip().split(";")[0]


def afs_config(path: Path, cluster: Cluster, store: Path) -> Path:
    write_config(path, cluster, store, policy="afs")
    path.write_text(path.read_text() + '[policies.afs]\nmode = "afs_l"\n')
    return path


def held(cluster: Cluster) -> dict[str, tuple[str, ...]]:
    """Job id → the GPUs Slurm shows it running on (through gpufair's own reading)."""
    jobs = json.loads(cluster.run("squeue", "--all", "--states=all", "--json").stdout)
    nodes = json.loads(cluster.run("sinfo", "--json").stdout)
    view = translate(jobs, nodes, now=time.time())
    return {j.id: j.gpus_held for j in view.state.jobs if j.state.value == "running"}


def nodes_and_count(gpus: tuple[str, ...]) -> tuple[frozenset[str], int]:
    return frozenset(node_of(g) for g in gpus), len(gpus)


def test_afs_resizes_elastic_jobs_through_slurm_as_planned(cluster: Cluster, tmp_path):
    config = afs_config(tmp_path / "g.toml", cluster, tmp_path / "afs.db")
    first = {submit(cluster, name, account, tmp_path, gpus=4, elastic="1-8"): name
             for name, account in (("big_a", "teama"), ("big_b", "teamb"))}
    snap = json.loads(cluster.run(*CLI, "snapshot", "--slurm", "--config",
                                  str(config)).stdout)
    declared = {j["id"]: (j["tenant"], j.get("min_gpus"), j.get("max_gpus"))
                for j in snap["jobs"]}
    assert sorted(declared[k] for k in first) == [("teama", 1, 8), ("teamb", 1, 8)]

    # round 1: each big job alone on one GPU type, all 8 of its GPUs
    cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
    cluster.wait_for("both big jobs running", lambda: set(first) <= set(held(cluster)), 60)
    running = held(cluster)
    types = {k: {node_of(g).split("-")[1] for g in running[k]} for k in first}
    assert sorted(len(running[k]) for k in first) == [8, 8]
    assert sorted(min(t) for t in types.values()) == ["k80", "v100"], types

    # round 2: two small elastic jobs of two more accounts arrive
    second = {submit(cluster, name, account, tmp_path, gpus=2, elastic="1-4"): name
              for name, account in (("small_c", "teamc"), ("small_d", "teamd"))}
    (tmp_path / "snap.json").write_text(cluster.run(*CLI, "snapshot", "--slurm", "--config",
                                                    str(config)).stdout)
    dry = [json.loads(cluster.run(*CLI, "dry-run", str(tmp_path / "snap.json"), "--config",
                                  str(config), "--json").stdout) for _ in range(2)]
    assert dry[0] == dry[1]
    planned = {(a["kind"], a["job_id"]): tuple(a["gpu_ids"]) for a in dry[0]["actions"]}
    assert {k for k, _ in planned} == {"Resize", "Start"}
    assert {j for k, j in planned if k == "Resize"} == set(first)
    assert {j for k, j in planned if k == "Start"} == set(second)
    assert all(len(g) == 4 for g in planned.values())
    for job_id in first:   # shrunk to one of its own two servers
        assert {node_of(g) for g in planned["Resize", job_id]} <= \
            {node_of(g) for g in running[job_id]}
        assert len({node_of(g) for g in planned["Resize", job_id]}) == 1

    # the real daemon, one round on the same state: the dry run's actions, carried out
    before = len(Store(tmp_path / "afs.db").journal())
    cluster.run(*CLI, "serve", "--config", str(config), "--rounds", "1")
    journal = Store(tmp_path / "afs.db").journal()[before:]
    assert [(type(e.action).__name__, e.action.job_id, tuple(e.action.gpu_ids), e.status)
            for e in journal] == [(a["kind"], a["job_id"], tuple(a["gpu_ids"]), "done")
                                  for a in dry[0]["actions"]]

    def as_planned() -> bool:
        now = held(cluster)
        return all(job_id in now and nodes_and_count(now[job_id]) == nodes_and_count(gpus)
                   for (_, job_id), gpus in planned.items())
    try:
        cluster.wait_for("every job running at its planned size and servers", as_planned, 60)
    except AssertionError as exc:
        why = {k: (j["job_state"], j.get("state_reason"), j.get("exit_code"),
                   j.get("restart_cnt"), j.get("nodes")) for k, j in cluster.jobs().items()}
        errors = {p.name: p.read_text()[-500:] for p in tmp_path.glob("*.err")}
        raise AssertionError(f"{exc}\n{why}\n{held(cluster)}\n{errors}") from None
    jobs = cluster.jobs()
    # a resize is a restart from the checkpoint: once for each big job, never for the others
    assert {k: jobs[k]["restart_cnt"] for k in {*first, *second}} == \
        {**dict.fromkeys(first, 1), **dict.fromkeys(second, 0)}
    for job_id in first:
        assert jobs[job_id]["tres_per_job"].endswith("gpu:4"), jobs[job_id]["tres_per_job"]

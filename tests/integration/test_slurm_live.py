"""gpufair against a real Slurm 22.05 on loopback: the acceptance tests of the Slurm plugin.

Figures these tests measure (round latency, hook latency) are printed with ``-s``.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from slurm_cluster import Cluster, start_daemon, stop_daemon, write_config

from gpufair.adapters.slurm import CliTransport, RestTransport, TransportError
from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.translate import translate
from gpufair.plugin.store import Store

ACTIVE = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING")


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_daemon_starts_preempts_and_resumes_as_the_policy_says(cluster: Cluster, tmp_path):
    """LAS with a 40 GPU-s queue threshold on 16 GPUs and four 8-GPU jobs: two run, cross the
    threshold, are requeued (checkpointed) for the other two, and come back to finish."""
    store_path = tmp_path / "state.db"
    port = _free_port()
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="las",
                          metrics_port=port)
    ids = {cluster.sbatch(name, tmp_path, nodes=2, gpus_per_node=4, steps=16): name
           for name in ("a", "b", "c", "d")}
    assert all(j["state_reason"] == "JobHeldUser" for k, j in cluster.jobs().items() if k in ids)
    time.sleep(3)   # hard mode: with no daemon, Slurm must start none of them
    assert all(cluster.jobs()[k]["job_state"] == "PENDING" for k in ids)
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")
    metrics = ""
    try:
        def finished() -> bool:
            nonlocal metrics
            if not metrics:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) \
                            as resp:
                        text = resp.read().decode()
                    metrics = text if 'kind="Preempt"' in text else ""
                except OSError:
                    pass
            return all(cluster.jobs()[k]["job_state"] == "COMPLETED" for k in ids)
        cluster.wait_for("all jobs COMPLETED", finished, 150)
        time.sleep(2.5)   # one more round: the epilog events get ingested
    finally:
        stop_daemon(daemon)
    assert daemon.returncode == 0, (tmp_path / "daemon.log").read_text()[-2000:]
    jobs = cluster.jobs()
    store = Store(store_path)
    journal = store.journal()
    assert not [e for e in journal if e.status == "failed"], journal
    done = [e for e in journal if e.status == "done"]

    def count(job_id: str, *kinds: str) -> int:
        return sum(1 for e in done if e.action.job_id == job_id
                   and type(e.action).__name__ in kinds)

    # every requeue Slurm counted was one of gpufair's (a preemption, or a move, which is a
    # requeue and a restart elsewhere), each exactly once
    requeues = {k: count(k, "Preempt", "Migrate", "Resize") for k in ids}
    assert {k: jobs[k]["restart_cnt"] for k in ids} == requeues
    assert sum(count(k, "Preempt") for k in ids) >= 2, "LAS should have preempted two jobs"
    # no race in hard mode: every run of a job (one PrologSlurmctld each; slurmd skips its
    # Prolog when a requeued job returns to a node it ran on) is one of gpufair's Starts or
    # moves, on nodes the plan chose
    events = store.events()
    for job_id in ids:
        placed = [e for e in done if e.action.job_id == job_id
                  and type(e.action).__name__ in ("Start", "Migrate", "Resize")]
        planned = {g.rpartition(":")[0] for e in placed for g in e.action.gpu_ids}
        runs = [e for e in events if e.get("job_id") == job_id
                and e["kind"] == "prolog-slurmctld"]
        assert len(runs) == len(placed) == requeues[job_id] + 1, (job_id, runs, placed)
        for run in runs:
            assert set(expand_hostlist(run["nodelist"])) <= planned, (run, planned)
    moves = sum(count(k, "Migrate", "Resize") for k in ids)
    # the jobs really trained: each resumed from its checkpoint and finished all 16 steps
    for name in ids.values():
        steps = [int(line.split("][")[1].split("/")[0]) + 1 for line in
                 (tmp_path / f"{name}.log").read_text().splitlines()
                 if line.startswith("Epoch: [0][")]
        assert steps == sorted(set(steps)) and steps[-1] == 16, (name, steps)
    assert 'gpufair_actions_total{kind="Preempt",outcome="ok"}' in metrics
    assert "gpufair_round_seconds_count" in metrics and "gpufair_tenant_gpus" in metrics
    latencies = [r["latency_s"] for r in store.rounds() if r["latency_s"] is not None]
    acting = [r["latency_s"] for r in store.rounds()
              if r["latency_s"] is not None and any(e.round_id == r["id"] for e in journal)]
    print(f"\n{moves} moves (requeue + restart elsewhere) in the LAS run")
    print(f"round latency over {len(latencies)} rounds: p50 "
          f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms;"
          f" rounds with actions: p50 {statistics.median(acting) * 1000:.0f} ms")
    log_lines = [json.loads(line) for line in (tmp_path / "daemon.log").read_text().splitlines()]
    assert {"round", "action", "applied"} <= {line.get("event") for line in log_lines}


def _prime_fifo_reclaim(cluster: Cluster, tmp_path: Path) -> tuple[list[str], list[str]]:
    """Jobs w1, w2 submitted first wait; r1, r2 submitted later were started by hand."""
    waiting = [cluster.sbatch(n, tmp_path, nodes=2, steps=200) for n in ("w1", "w2")]
    running = [cluster.sbatch(n, tmp_path, nodes=2, steps=200) for n in ("r1", "r2")]
    for job_id, nodes in zip(running, ("gpu-v100-1,gpu-v100-2", "gpu-k80-1,gpu-k80-2"),
                             strict=True):
        cluster.run("scontrol", "update", f"JobId={job_id}", f"NodeList={nodes}", "NumNodes=2")
        cluster.run("scontrol", "release", job_id)
    cluster.wait_for("r1, r2 running",
                     lambda: all(cluster.jobs()[j]["job_state"] == "RUNNING" for j in running),
                     30)
    time.sleep(2.5)   # a few training steps in their logs
    return waiting, running


def test_sigkill_mid_round_neither_repeats_nor_loses_an_action(cluster: Cluster, tmp_path):
    waiting, running = _prime_fifo_reclaim(cluster, tmp_path)
    store_path = tmp_path / "state.db"
    config = write_config(tmp_path / "g.toml", cluster, store_path, policy="fifo",
                          round_s=3600, action_interval_s=1.5)
    daemon = start_daemon(cluster, config, tmp_path / "daemon.log")

    def progress() -> list[str]:
        if not store_path.exists():
            return []
        db = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True, timeout=5)
        try:
            return [r[0] for r in db.execute("SELECT status FROM actions WHERE round_id=1 "
                                             "ORDER BY seq")]
        except sqlite3.Error:
            return []
        finally:
            db.close()

    def half_applied() -> bool:
        # Slurm has carried out the first preemption and the round is not over; the journal
        # commits a batch of actions' statuses at once (docs/deploy.md, "Large sites"), so
        # the point is read from Slurm: the journal shows the batch as applying
        return cluster.jobs()[running[0]]["restart_cnt"] >= 1 and "done" not in progress()

    try:
        cluster.wait_for("the round half applied", half_applied, 60)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(10)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    at_kill = progress()
    assert "planned" in at_kill or "applying" in at_kill, at_kill
    restarted = start_daemon(cluster, config, tmp_path / "daemon.log")
    try:
        cluster.wait_for("round 1 finished", lambda: progress() and all(
            s == "done" for s in progress()), 60)
        cluster.wait_for("w1, w2 running", lambda: all(
            cluster.jobs()[j]["job_state"] == "RUNNING" for j in waiting), 60)
    finally:
        stop_daemon(restarted)
    store = Store(store_path)
    round1 = store.journal(1)
    assert sorted((type(e.action).__name__, e.action.job_id) for e in round1) == \
        sorted([("Preempt", running[0]), ("Preempt", running[1]), ("Start", waiting[0]),
                ("Start", waiting[1])])
    jobs = cluster.jobs()
    assert [jobs[j]["restart_cnt"] for j in running] == [1, 1]   # requeued once, not twice
    # w1, w2 were started once by round 1: a restart of either is a later round's own
    # journaled decision, never round 1 again. (Under load a later round can preempt w2 for a
    # move of w1 that a guard then holds back: w1 was released onto a node still settling
    # from r2's requeue. Seen in CI under load; a known gap in the guards, in the notes.)
    later_moves = [e.action.job_id for e in store.journal() if e.round_id > 1
                   and type(e.action).__name__ in ("Preempt", "Migrate") and e.status == "done"]
    assert [jobs[j]["restart_cnt"] for j in waiting] == [later_moves.count(j) for j in waiting]
    assert all(jobs[j]["job_state"] == "PENDING" for j in running)
    later = [e for e in store.journal() if e.round_id > 1 and e.action.job_id in running]
    assert not [e for e in later if type(e.action).__name__ == "Preempt"]
    print(f"\nSIGKILL with round 1 at {at_kill}; after restart: "
          f"{[(e.status, e.detail) for e in round1]}")


def test_hooks_with_daemon_stopped_exit_zero_and_drain_nothing(cluster: Cluster, tmp_path):
    """How long they take is measured by ``bench/hook_latency.py`` (no timing assertion
    here: a p99 bound failed under load)."""
    hooks = [cluster.base / "scripts" / k for k in ("prolog", "epilog")]
    env = {"PATH": cluster.env["PATH"], "SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "gpu-k80-1",
           "SLURM_JOB_GPUS": "0,1", "SLURM_JOB_EXIT_CODE": "0",
           "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}
    for i in range(20):
        proc = subprocess.run([str(hooks[i % 2])], env=env, capture_output=True, timeout=10,
                              check=False)
        assert proc.returncode == 0, proc.stderr
    # and real jobs through the real Prolog/Epilog with no daemon: all run, no node drains
    ids = [cluster.sbatch(f"h{i}", tmp_path, gpus_per_node=1, steps=1, step_s=0.1)
           for i in range(8)]
    for job_id in ids:
        cluster.run("scontrol", "release", job_id)
    cluster.wait_for("hook jobs COMPLETED", lambda: all(
        cluster.jobs()[j]["job_state"] == "COMPLETED" for j in ids), 60)
    assert cluster.drained() == []
    spooled = list((cluster.hook_dir / "spool").glob("*.json"))
    for job_id in ids:
        assert any("-prolog.json" in p.name and f'"job_id": "{job_id}"' in p.read_text()
                   for p in spooled), job_id


def test_dry_run_shows_exactly_what_the_daemon_then_does(cluster: Cluster, tmp_path):
    """Snapshot the live cluster, dry-run it (snapshot and raw squeue/sinfo files, and the
    daemon's own --dry-run), then let the real daemon run one round on the same state: the
    same actions, keys and placements, the same action held back by the preemption cap."""
    waiting, running = _prime_fifo_reclaim(cluster, tmp_path)
    config = write_config(tmp_path / "g.toml", cluster, tmp_path / "dry.db", policy="fifo",
                          max_preempt_share=0.5)
    cli = [sys.executable, "-m", "gpufair.cli.main"]

    def slurm_state() -> dict:
        return {k: (j["job_state"], j["state_reason"], j["priority"], j["nodes"],
                    j["restart_cnt"]) for k, j in cluster.jobs().items()}

    before = slurm_state()
    snap = cluster.run(*cli, "snapshot", "--slurm", "--config", str(config))
    (tmp_path / "snap.json").write_text(snap.stdout)
    (tmp_path / "sq.json").write_text(cluster.run("squeue", "--all", "--states=all",
                                                  "--json").stdout)
    (tmp_path / "si.json").write_text(cluster.run("sinfo", "--json").stdout)
    # the snapshot carries what the profiler measured in the running jobs' logs
    measured = {j["id"]: j for j in json.loads(snap.stdout)["jobs"]}
    for job_id in running:
        assert measured[job_id]["progress"]["iterations_done"] >= 1
        assert {t["gpu_type"] for t in measured[job_id]["throughput"]} in ({"v100"}, {"k80"})
    assert cluster.run(*cli, "validate", str(tmp_path / "snap.json")).returncode == 0
    outputs = [cluster.run(*cli, "dry-run", str(tmp_path / "snap.json"), "--config",
                           str(config), "--json").stdout for _ in range(2)]
    assert outputs[0] == outputs[1]
    dry = json.loads(outputs[0])
    # fifo wants both waiting jobs in, both running ones out; the cap (8 of 16 GPUs) lets one
    # 8-GPU preemption through and holds back the other with the start that needed its GPUs
    acted = {a["kind"]: a["job_id"] for a in dry["actions"]}
    held = {d["kind"]: d["job_id"] for d in dry["deferred"]}
    assert len(dry["actions"]) == len(dry["deferred"]) == 2
    assert {acted["Preempt"], held["Preempt"]} == set(running)
    assert {acted["Start"], held["Start"]} == set(waiting)
    assert all("preemption cap" in d["reason"] for d in dry["deferred"])
    decisions = {j["job_id"]: j["decision"] for j in dry["jobs"]}
    assert decisions[held["Preempt"]] == "not preempt"
    assert decisions[held["Start"]] == "not start"
    # raw squeue/sinfo files go through the adapter's own snapshot logic: the same actions
    raw = json.loads(cluster.run(*cli, "dry-run", "--squeue", str(tmp_path / "sq.json"),
                                 "--sinfo", str(tmp_path / "si.json"), "--config",
                                 str(config), "--json").stdout)
    assert [(a["kind"], a["job_id"], a["gpu_ids"]) for a in raw["actions"]] == \
        [(a["kind"], a["job_id"], a["gpu_ids"]) for a in dry["actions"]]
    # the daemon's --dry-run: logs the same actions, sends nothing, writes no store of its own
    serve = cluster.run(*cli, "serve", "--config", str(config), "--dry-run", "--rounds", "1")
    logged = [json.loads(line) for line in serve.stderr.splitlines() if line.startswith("{")]
    assert [(e["kind"], e["job"], e["gpus"], e["key"]) for e in logged
            if e.get("event") == "action"] == \
        [(a["kind"], a["job_id"], a["gpu_ids"], a["key"]) for a in dry["actions"]]
    assert '"would preempt job' in serve.stderr
    assert not (tmp_path / "dry.db").exists()
    time.sleep(3)   # two of Slurm's scheduling passes
    assert slurm_state() == before
    # now the real daemon, one round on the same state: exactly what the dry run showed
    real_config = write_config(tmp_path / "real.toml", cluster, tmp_path / "real.db",
                               policy="fifo", max_preempt_share=0.5)
    cluster.run(*cli, "serve", "--config", str(real_config), "--rounds", "1")
    done = Store(tmp_path / "real.db").journal()
    assert [(type(e.action).__name__, e.action.job_id, list(getattr(e.action, "gpu_ids", ())),
             e.key, e.status) for e in done] == \
        [(a["kind"], a["job_id"], a["gpu_ids"], a["key"], "done") for a in dry["actions"]]
    cluster.wait_for("the planned swap", lambda: (
        cluster.jobs()[acted["Preempt"]]["job_state"] == "PENDING"
        and cluster.jobs()[acted["Start"]]["job_state"] == "RUNNING"
        and cluster.jobs()[held["Preempt"]]["job_state"] == "RUNNING"), 30)


def test_rest_transport_reads_what_the_cli_reads(cluster: Cluster, tmp_path):
    cluster.sbatch("rest", tmp_path, gpus_per_node=2, steps=200)
    token = cluster.run("scontrol", "token", "username=root", "lifespan=600").stdout
    token = token.strip().removeprefix("SLURM_JWT=")
    cli = CliTransport(env=cluster.env)
    local = RestTransport(f"unix:{cluster.base / 'run' / 'slurmrestd.sock'}")
    jwt = RestTransport(f"http://127.0.0.1:{cluster.restd_port}", user="root", token=token)
    views = [translate(t.read_jobs(), t.read_nodes(), now=1.0) for t in (cli, local, jwt)]
    assert views[0].state == views[1].state == views[2].state
    job_id = next(j.id for j in views[0].state.jobs if j.state.value == "pending")
    held = local.control("update", job_id, {"Priority": "4242"})
    assert not held.ok and "held state" in held.detail   # Slurm's refusal, passed on as is
    for step in (local.control("release", job_id),
                 local.control("update", job_id, {"Priority": "4242"})):
        assert step.ok, step.detail
    assert cluster.jobs()[job_id]["priority"] == 4242
    bad = jwt.control("update", "999999", {"Priority": "1"})
    assert not bad.ok and "Invalid job id" in bad.detail


def test_slurmrestd_tells_a_quiet_cluster_from_a_changed_one(cluster: Cluster, tmp_path):
    """The poll's question (issue 30): with update_time, real slurmrestd 22.05 answers 304
    while no job or node changed since, and the adapter then needs no read; a submission is
    a change. A stamp is whole seconds: it is taken a second after the last change."""
    local = RestTransport(f"unix:{cluster.base / 'run' / 'slurmrestd.sock'}")

    def quiet_stamp() -> float:
        """A stamp slurmrestd calls unchanged: slurmd pings refresh node records every ~15 s,
        so a quiet 2 s is waited for (304 on both), not assumed."""
        for _ in range(10):
            stamp = time.time() + 1.0
            time.sleep(2.0)
            if local.changed_since(stamp) is False:
                return stamp
        raise AssertionError("slurmrestd never answered 304 in 20 s")

    stamp = quiet_stamp()
    job = cluster.sbatch("poll", tmp_path, gpus_per_node=1, steps=200)
    assert local.changed_since(stamp) is True
    stamp = quiet_stamp()
    # this test's own job: the first squeue lists may be an earlier test's, ended (refused)
    cluster.run("scontrol", "update", f"JobId={job}", "Nice=5")
    assert local.changed_since(stamp) is True


def test_an_expired_slurmrestd_token_is_renewed(cluster: Cluster, tmp_path):
    """Issue 12, item 10: with a 5 s token and no renewal every read fails once it expires;
    with renewal (the daemon as root may mint tokens) reads go on, and the token file is
    rewritten with the new token. A token slurmrestd refuses (401) is replaced at once."""
    from gpufair.adapters.slurm.token import TokenSource, token_expiry
    url = f"http://127.0.0.1:{cluster.restd_port}"

    def minted(lifespan: int) -> str:
        out = cluster.run("scontrol", "token", "username=root", f"lifespan={lifespan}").stdout
        return out.strip().removeprefix("SLURM_JWT=")

    def run(argv):   # `scontrol token` in the cluster's environment
        return subprocess.run(list(argv), env=cluster.env, capture_output=True, text=True,
                              timeout=15, check=False)

    token_file = tmp_path / "slurm.jwt"
    token_file.write_text(minted(5) + "\n")
    fixed = RestTransport(url, user="root", tokens=TokenSource(str(token_file)))
    renewing = RestTransport(url, user="root", tokens=TokenSource(
        str(token_file), renew=True, lifespan_s=300, run=run))
    assert fixed.read_jobs()["jobs"] is not None
    time.sleep(6.5)
    try:
        fixed.read_jobs()
        raise AssertionError("an expired token was accepted")
    except TransportError as exc:   # 22.05 says so as HTTP 500 from slurm_load_jobs
        assert "HTTP 401" in str(exc) or "HTTP 500" in str(exc), exc
    assert renewing.read_jobs()["jobs"] is not None
    assert renewing.tokens.renewals >= 1
    saved = token_file.read_text().strip()
    assert token_expiry(saved) is not None and token_expiry(saved) > time.time() + 200
    token_file.write_text("not.a.token\n")              # slurmrestd answers 401
    assert renewing.read_nodes()["nodes"]

"""On YARN, gpufair speaks YARN: its log and its dry-run explanations name apps, and a
preemption is a kill (YARN has no requeue); /metrics shows the YARN adapter's state as it
shows Slurm's (gpufair_adapter_status). Against the emulator over real HTTP."""

from __future__ import annotations

import json
import logging
import re

from gpufair.adapters.yarn import YarnAdapter
from gpufair.cli.main import main
from gpufair.plugin.service import build_daemon
from gpufair.plugin.store import Store
from tests.test_yarn_cli import write_config
from tests.yarn_emulator import RMServer
from tests.yarn_setup import gpu_cluster, yarn_config

SLURM_WORDS = re.compile(r"\b(jobs?|requeue\w*|sbatch|scontrol|Slurm)\b")


def fifo_kills_b2(cluster) -> tuple[str, str]:
    """a1 (4), a2 (2), b1 (2), b2 (2) on 8 GPUs, the RM running a1, b1, b2: FIFO runs a1,
    a2, b1 and preempts b2 — on YARN, kills it (test_yarn_adapter's converging round)."""
    cluster.submit("alice", "a", 4)
    a2 = cluster.submit("alice", "a", 2)
    cluster.submit("bob", "b", 2)
    b2 = cluster.submit("bob", "b", 2)
    cluster.tick()
    return a2, b2


def test_dry_run_of_a_yarn_snapshot_explains_in_yarns_words(tmp_path, capsys) -> None:
    cluster = gpu_cluster()
    server = RMServer(cluster)
    try:
        a2, b2 = fifo_kills_b2(cluster)
        snap = tmp_path / "snap.json"
        assert main(["snapshot", "--yarn", server.url]) == 0
        snap.write_text(capsys.readouterr().out)
        assert main(["dry-run", str(snap)]) == 0          # no config: the snapshot says YARN
        table = capsys.readouterr().out
        header = next(line for line in table.splitlines() if "tenant" in line)
        assert header.split()[0] == "app"
        rows = {line.split()[0]: line for line in table.splitlines()}
        assert " kill " in rows[b2] and "higher-ranked apps" in rows[b2]
        assert " start " in rows[a2]
        # (the first line quotes the policy's own reason, shared with the simulator)
        body = table.split("\n", 1)[1]
        assert not SLURM_WORDS.search(body), SLURM_WORDS.search(body)
        assert main(["dry-run", str(snap), "--json"]) == 0
        decided = {r["job_id"]: r["decision"] for r in json.loads(capsys.readouterr().out)
                   ["jobs"]}
        assert decided[b2] == "kill"
    finally:
        server.close()


def test_the_daemon_logs_apps_and_kills_and_metrics_show_yarn(tmp_path, caplog) -> None:
    cluster = gpu_cluster()
    server = RMServer(cluster)
    try:
        a2, b2 = fifo_kills_b2(cluster)
        config = yarn_config(tmp_path, server, lease_s=600.0)
        store = Store(config.store.path)
        daemon = build_daemon(config, YarnAdapter.from_settings(config.yarn), store)
        with caplog.at_level(logging.INFO, logger="gpufair"):
            daemon.run_round()
        actions = [r.getMessage() for r in caplog.records
                   if getattr(r, "fields", {}).get("event") in ("action", "applied")]
        assert any(m.startswith(f"will kill app {b2}") for m in actions), actions
        assert any(m.startswith(f"will start app {a2} on ") for m in actions), actions
        assert not any(SLURM_WORDS.search(m) for m in actions), actions
        metrics = daemon.metrics.render()
        for key, value in (("yarn_leases", 1.0), ("yarn_lease_renewals", 0.0),
                           ("yarn_rm_failovers", 0.0)):
            assert f'gpufair_adapter_status{{key="{key}"}} {value}' in metrics, metrics
        assert 'gpufair_adapter_status{key="yarn_lease_expires_at"}' in metrics
        store.close()
    finally:
        server.close()


def test_a_slurm_round_still_speaks_slurm(tmp_path, capsys) -> None:
    """The same snapshot without its source and with no YARN config is explained as before."""
    cluster = gpu_cluster()
    server = RMServer(cluster)
    try:
        _, b2 = fifo_kills_b2(cluster)
        assert main(["snapshot", "--yarn", server.url]) == 0
        doc = json.loads(capsys.readouterr().out)
        del doc["source"]
        snap = tmp_path / "snap.json"
        snap.write_text(json.dumps(doc))
        assert main(["dry-run", str(snap)]) == 0
        table = capsys.readouterr().out
        rows = {line.split()[0]: line for line in table.splitlines()}
        assert " preempt " in rows[b2] and "higher-ranked jobs" in rows[b2]
        assert main(["dry-run", str(snap), "--config", write_config(tmp_path, server)]) == 0
        assert " kill " in {line.split()[0]: line for line in
                            capsys.readouterr().out.splitlines()}[b2]   # [daemon] adapter
    finally:
        server.close()

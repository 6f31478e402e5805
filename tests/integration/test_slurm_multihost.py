"""Hook events reach the daemon wherever the hook runs (issue 12, item 12): slurmd on several
loopback addresses, each with a node-local spool the daemon cannot read, events over UDP."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import SCRIPTS, TRAIN_JOB, Cluster

from gpufair.plugin.store import Store


@pytest.fixture(scope="module")
def multihost() -> Iterator[Cluster]:
    if shutil.which("slurmctld") is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("Slurm not installed")
        pytest.skip("Slurm not installed")
    base = Path(f"/tmp/gpufair-mh-{os.getpid()}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(SLURM_LO_BASE=str(base), SLURM_LO_MULTIHOST="1", GPUFAIR_PYTHON=sys.executable,
               SLURM_LO_NODES="mh-a:v100:2 mh-b:k80:2",
               SLURM_CONF=str(base / "etc" / "slurm.conf"))
    up = subprocess.run(["bash", str(SCRIPTS / "up.sh"), "--hard"], env=env,
                        capture_output=True, text=True, timeout=180, check=False)
    try:
        if up.returncode != 0:
            pytest.fail(f"multi-host loopback Slurm did not come up:\n{up.stdout}{up.stderr}")
        yield Cluster(base, env, 0)
    finally:
        subprocess.run(["bash", str(SCRIPTS / "down.sh"), "--purge"], env=env,
                       capture_output=True, text=True, timeout=120, check=False)


def test_node_events_reach_the_daemon_over_udp_and_forgeries_do_not(multihost: Cluster,
                                                                     tmp_path):
    base = multihost.base
    ports = dict(line.split("=") for line in (base / "etc" / "ports").read_text().split())
    addrs = {line.split("NodeAddr=")[1].split()[0]
             for line in (base / "etc" / "slurm.conf").read_text().splitlines()
             if line.startswith("NodeName=mh-")}
    assert addrs == {"127.0.0.2", "127.0.0.3"}
    store_path = tmp_path / "state.db"
    config = tmp_path / "g.toml"
    config.write_text("\n".join([
        "[daemon]", 'policy = "fifo"', "round_s = 3600", "event_min_interval_s = 0",
        "metrics_port = 0", f'hook_dir = "{tmp_path / "daemon-hooks"}"',
        f'event_listen = "127.0.0.1:{ports["EVENT_PORT"]}"',
        f'event_key_file = "{base / "etc" / "event.key"}"',
        "[slurm]", 'managed_partitions = ["gpu"]', "[store]", f'path = "{store_path}"']) + "\n")
    daemon = subprocess.Popen([sys.executable, "-m", "gpufair.cli.main", "serve", "--config",
                               str(config)], env=multihost.env, stdout=subprocess.DEVNULL,
                              stderr=(tmp_path / "daemon.log").open("wb"))
    try:
        multihost.wait_for("the daemon's first round", lambda: store_path.exists() and bool(
            Store(store_path).rounds()), 30)
        # a forged event (wrong key) and a replayed real one must not count
        forged = b'{"kind": "epilog", "job_id": "1", "nonce": "ff", "ts": %f}' % time.time()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(b"gpufair1 " + b"0" * 64 + b" " + forged,
                        ("127.0.0.1", int(ports["EVENT_PORT"])))
        job_id = multihost.run("sbatch", "--parsable", "-J", "mh", "-o", str(tmp_path / "mh.out"),
                               "-N1", "--gres=gpu:1", str(TRAIN_JOB), str(tmp_path), "2", "0.2"
                               ).stdout.strip()
        multihost.run("scontrol", "update", f"JobId={job_id}", "NodeList=mh-b", "NumNodes=1")
        multihost.run("scontrol", "release", job_id)
        multihost.wait_for("prolog and epilog events in the daemon's store", lambda: {
            "prolog", "epilog"} <= {e["kind"] for e in Store(store_path).events(job_id)}, 60)
    finally:
        daemon.terminate()
        daemon.wait(20)
    events = Store(store_path).events(job_id)
    assert {e.get("node") for e in events if e["kind"] in ("prolog", "epilog")} == {"mh-b"}
    assert all(e["kind"] != "epilog" or e.get("job_id") == job_id for e in events)
    # the node-local spool has them too (nothing lost if the network drops a datagram),
    # and the daemon's own spool never saw them: they came over the network
    local = list((base / "nodes" / "mh-b" / "gpufair" / "spool").glob("*.json"))
    assert any(json.loads(p.read_text()).get("job_id") == job_id for p in local)
    assert not list((tmp_path / "daemon-hooks" / "spool").glob("*.json"))
    assert not [e for e in Store(store_path).events() if e.get("nonce") == "ff"]

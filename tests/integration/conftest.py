"""A real Slurm 22.05 on 127.0.0.1 for the integration tests, brought up once per session.

The fixture runs the project's own ``scripts/slurm/up.sh`` (hard mode with job_submit.lua,
plus slurmrestd) in a private directory and ports, and tears down exactly what it started with
``down.sh`` (PID files). Without Slurm installed the tests skip locally, but FAIL under CI
(``CI=true``): CI must prove the plugin against a real Slurm, never pass by skipping.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from slurm_cluster import REPO, SCRIPTS, Cluster


def _missing() -> list[str]:
    return [b for b in ("munged", "slurmctld", "slurmd", "squeue", "slurmrestd")
            if shutil.which(b) is None]


def _free_port_block(size: int) -> int:
    """A run of ``size`` free TCP ports on 127.0.0.1 (random start: parallel runs differ)."""
    rng = random.Random(os.getpid())
    for _ in range(200):
        start = rng.randrange(20000, 40000, size)
        try:
            for port in range(start, start + size):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return start
    raise RuntimeError("no free block of TCP ports for the loopback Slurm")


@contextmanager
def _loopback(base: Path, *flags: str, extra_ports: Sequence[str] = (),
              job_submit: Path | None = None, nodes: str | None = None) -> Iterator[Cluster]:
    """A cluster from up.sh ``flags`` in ``base`` on its own free ports, torn down after."""
    missing = _missing()
    if "--accounting" in flags:
        missing += [b for b in ("mariadbd", "slurmdbd", "sacct", "sacctmgr")
                    if shutil.which(b) is None]
    if missing:
        message = f"Slurm not installed (missing {', '.join(missing)}): scripts/slurm/install.sh"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    # slurmctld, slurmrestd, 4 slurmd, then extra_ports: no clash with other runs
    port0 = _free_port_block(6 + len(extra_ports))
    env = dict(os.environ, SLURM_LO_BASE=str(base), SLURM_LO_CTLD_PORT=str(port0),
               SLURM_LO_RESTD_PORT=str(port0 + 1), SLURM_LO_PORT0=str(port0 + 2),
               GPUFAIR_PYTHON=sys.executable, SLURM_CONF=str(base / "etc" / "slurm.conf"))
    env.update({name: str(port0 + 6 + i) for i, name in enumerate(extra_ports)})
    env.pop("SLURM_JOB_ID", None)
    if job_submit is not None:
        env["SLURM_LO_JOB_SUBMIT"] = str(job_submit)
    if nodes is not None:
        env["SLURM_LO_NODES"] = nodes
    up = subprocess.run(["bash", str(SCRIPTS / "up.sh"), *flags], env=env,
                        capture_output=True, text=True, timeout=180, check=False)
    try:
        if up.returncode != 0:
            pytest.fail(f"loopback Slurm did not come up:\n{up.stdout}\n{up.stderr}")
        yield Cluster(base, env, port0 + 1)
    finally:
        subprocess.run(["bash", str(SCRIPTS / "down.sh"), "--purge"], env=env,
                       capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    with _loopback(Path(f"/tmp/gpufair-it-{os.getpid()}"), "--hard", "--restd") as cluster:
        yield cluster


#: the accounting cluster's nodes (up.sh's, but gpu-v100-2 with 256,000 MB)
ACCOUNTING_NODES = ("gpu-v100-1:v100:4 gpu-v100-2:v100:4:256000 gpu-k80-1:k80:4 "
                    "gpu-k80-2:k80:4")
#: the partition job_submit.lua holds for gpufair on the accounting cluster (only this one:
#: the history recorder's jobs in ``gpu`` run as Slurm alone runs them)
ACCOUNTING_MANAGED = "urgent"


@pytest.fixture(scope="session")
def slurm_accounting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A second loopback Slurm with slurmdbd on MariaDB (up.sh --accounting), limits enforced:
    the hard-mode cluster above has no accounting, and starting one costs about 5 s more, so
    only the tests that read sacct or need association limits get it. It runs in hard mode for
    partition ``urgent`` only (job_submit.lua's MANAGED edited), so jobs of ``gpu`` are
    Slurm's alone. One node has twice the memory of the others (256,000 MB), for what
    depends on a node's size (``--mem=0``)."""
    lua = tmp_path_factory.mktemp("lua") / "job_submit.lua"
    original = (REPO / "gpufair" / "deploy" / "job_submit.lua").read_text()
    assert "local MANAGED = { gpu = true }" in original
    lua.write_text(original.replace("local MANAGED = { gpu = true }",
                                    f"local MANAGED = {{ {ACCOUNTING_MANAGED} = true }}"))
    with _loopback(Path(f"/tmp/gpufair-acct-{os.getpid()}"), "--accounting", "--hard",
                   extra_ports=("SLURM_LO_EVENT_PORT", "SLURM_LO_DBD_PORT"),
                   job_submit=lua, nodes=ACCOUNTING_NODES) as cluster:
        yield cluster


@pytest.fixture()
def cluster(slurm_cluster: Cluster) -> Iterator[Cluster]:
    slurm_cluster.clear()
    yield slurm_cluster
    slurm_cluster.clear()



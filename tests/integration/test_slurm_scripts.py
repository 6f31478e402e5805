"""The project's own loopback-Slurm scripts: two clusters side by side never collide."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import SCRIPTS


@pytest.mark.skipif(shutil.which("slurmctld") is None and os.environ.get("CI") != "true",
                    reason="Slurm not installed")
def test_two_clusters_pick_their_own_free_ports(tmp_path):
    bases = [Path(f"/tmp/gpufair-ports-{os.getpid()}-{i}") for i in range(2)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(SLURM_LO_NODES="solo:v100:1", GPUFAIR_PYTHON=sys.executable)
    ups = [subprocess.Popen(["bash", str(SCRIPTS / "up.sh")], env={**env, "SLURM_LO_BASE":
                                                                     str(base)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for base in bases]
    try:
        outputs = [up.communicate(timeout=180)[0] for up in ups]
        assert [up.returncode for up in ups] == [0, 0], outputs
        ports = [dict(line.split("=") for line in (b / "etc" / "ports").read_text().split())
                 for b in bases]
        assert ports[0]["CTLD_PORT"] != ports[1]["CTLD_PORT"]
        for base in bases:
            conf = {**env, "SLURM_CONF": str(base / "etc" / "slurm.conf")}
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=conf,
                                 capture_output=True, text=True, timeout=30,
                                 check=True).stdout
            assert out.split()[0] == "solo"
    finally:
        for base in bases:
            subprocess.run(["bash", str(SCRIPTS / "down.sh"), "--purge"],
                           env={**env, "SLURM_LO_BASE": str(base)}, capture_output=True,
                           timeout=120, check=False)

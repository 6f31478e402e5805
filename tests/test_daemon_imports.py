"""The daemon does not pay for the reporting libraries: ``gpufair serve`` runs rounds without
importing pandas, matplotlib, jinja2 or pyarrow (docs/architecture.md: results and reports sit
above core/ and below cli/, and plugin/ never imports them). They are in the default install
only on that condition.

Checked on a real serve — a fresh interpreter runs ``gpufair serve`` for two rounds against
the YARN emulator over HTTP, with a policy that solves an LP — and then lists what it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "matplotlib", "jinja2", "pyarrow")

SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tests.test_yarn_cli import write_config
    from tests.yarn_emulator import RMServer
    from tests.yarn_setup import gpu_cluster
    from gpufair.cli.main import main
    tmp = Path(sys.argv[1])
    cluster = gpu_cluster()
    server = RMServer(cluster)
    cluster.submit("alice", "a", 2)
    cluster.submit("bob", "b", 3)
    cluster.tick()
    cluster.submit("bob", "b", 2)
    try:
        status = main(["serve", "--config", write_config(tmp, server), "--policy",
                       sys.argv[2], "--rounds", "2"])
    finally:
        server.close()
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    print(json.dumps({"status": status, "heavy": heavy,
                      "gpufair": sorted(m for m in sys.modules if m.startswith("gpufair."))}))
""")


def _serve_modules(tmp_path: Path, policy: str) -> dict:
    script = f"HEAVY = {HEAVY!r}\n{SCRIPT}"
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), policy], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("policy", ["fifo", "max_min"])
def test_serve_imports_no_reporting_library(tmp_path, policy):
    loaded = _serve_modules(tmp_path, policy)
    assert loaded["status"] == 0
    assert any(m.startswith("gpufair.plugin.") for m in loaded["gpufair"])   # it did serve
    assert loaded["heavy"] == []
    assert not [m for m in loaded["gpufair"]
                if m.startswith(("gpufair.results", "gpufair.report"))]


def test_the_check_sees_a_heavy_import(tmp_path, monkeypatch):
    """The same check, with the daemon made to import pandas on its way (as a careless
    ``from gpufair.results import ...`` in plugin/ would): it must be seen."""
    sitecustom = tmp_path / "site"
    sitecustom.mkdir()
    (sitecustom / "sitecustomize.py").write_text(
        "import gpufair.plugin.service\nimport pandas\n")
    monkeypatch.setenv("PYTHONPATH", str(sitecustom))
    loaded = _serve_modules(tmp_path, "fifo")
    assert "pandas" in loaded["heavy"]

"""The floors of docs/architecture.md, checked on the import graph: no module imports a floor
above its own, adapters never import policies (nor policies adapters), and the app layer
(plugin/) never imports one adapter — only the protocol."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpufair"

FLOOR = {"errors": 0, "settings": 0, "model": 0, "metrics": 1, "tenant_metrics": 1,
         "adapters": 1, "policy": 1,
         "profiler": 1, "data": 1, "core": 2, "plugin": 3, "cli": 4,
         "gpufair": 0,    # the package itself: __version__ only
         "deploy": 3,     # admin files and their writer (hooks.py's path)
         "results": 3,    # results directories (pandas): above core/, never under plugin/
         "report": 3,     # HTML reports of results directories (jinja2, matplotlib)
         "sweep": 3,      # grids of simulations, local or as a Slurm job array (results/)
         "__main__": 5}   # python -m gpufair
#: siblings on one floor that must not know each other
APART = {("adapters", "policy"), ("policy", "adapters"), ("adapters", "profiler"),
         ("policy", "profiler"), ("profiler", "policy"), ("profiler", "adapters"),
         # the daemon must not load pandas/matplotlib/jinja2 (tests/test_daemon_imports.py)
         ("plugin", "results"), ("plugin", "report"), ("deploy", "results"),
         ("deploy", "report"), ("results", "report"), ("plugin", "sweep"),
         ("results", "sweep")}


def _part(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [m for m in found if m == "gpufair" or m.startswith("gpufair.")]


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_down_only(path: Path):
    rel = path.relative_to(PACKAGE)
    here = rel.parts[0].removesuffix(".py")
    if here == "__init__":
        return
    assert here in FLOOR, f"{rel}: new top-level part; give it a floor in this test"
    for module in _imports(path):
        there = _part(module)
        assert there in FLOOR, f"{rel} imports {module}: unknown part"
        if there == here:
            continue
        assert FLOOR[there] <= FLOOR[here], f"{rel} ({here}) imports {module} ({there})"
        assert (here, there) not in APART, f"{rel} ({here}) must not import {module}"
        if here == "plugin" and there == "adapters":
            assert module in ("gpufair.adapters.base", "gpufair.adapters.recording"), \
                f"{rel} imports one adapter ({module}); use the protocol"


def test_the_check_sees_a_violation(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("from gpufair.cli.main import main\nimport gpufair.plugin.daemon\n")
    assert _imports(bad) == ["gpufair.cli.main", "gpufair.plugin.daemon"]

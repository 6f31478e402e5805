"""The bundled data: every file is catalogued, documented, packaged, and found by its name."""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest

from gpufair import data
from gpufair.adapters.simulator.throughputs import load_throughputs
from gpufair.adapters.simulator.trace import load_trace

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
NOT_INPUTS = {"__init__.py", "README.md", "LICENSE-gavel.txt", "LICENSE-shockwave.txt"}


def test_every_file_is_catalogued_and_every_entry_exists() -> None:
    shipped = {p.name for p in data.data_dir().iterdir() if p.is_file()} - NOT_INPUTS
    assert shipped == {entry.file for entry in data.CATALOGUE}


def test_every_file_has_its_provenance_and_is_packaged() -> None:
    """A file missing from the README has no stated source or licence; one missing from
    package-data is in the checkout but not in the wheel, where users would look for it."""
    readme = (data.data_dir() / "README.md").read_text(encoding="utf-8")
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))[
        "tool"]["setuptools"]["package-data"]["gpufair.data"]
    for name in {entry.file for entry in data.CATALOGUE} | NOT_INPUTS - {"__init__.py"}:
        assert name == "README.md" or f"`{name}`" in readme, name
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name


def test_every_trace_and_throughputs_file_loads() -> None:
    loaders = {"trace": load_trace, "throughputs": load_throughputs}
    for entry in data.CATALOGUE:
        if entry.kind in loaders:
            assert loaders[entry.kind](data.path(entry.name))


def test_a_bare_name_resolves_to_the_bundled_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bundled = str(data.data_dir() / "tacc_throughputs.json")
    assert data.resolve("tacc_throughputs") == bundled
    assert data.resolve("tacc_throughputs.json") == bundled
    # a path is taken as given, found or not, and so is an unknown name
    assert data.resolve("./tacc_throughputs") == "./tacc_throughputs"
    assert data.resolve("elsewhere/tacc_throughputs.json") == "elsewhere/tacc_throughputs.json"
    assert data.resolve("no_such_data") == "no_such_data"
    assert data.resolve(None) is None
    # a local file of that name shadows the bundled one
    (tmp_path / "tacc_throughputs.json").write_text("{}")
    assert data.resolve("tacc_throughputs.json") == "tacc_throughputs.json"


def test_help_lists_the_inputs_but_not_the_results() -> None:
    text = data.listing()
    assert all(entry.name in text for entry in data.CATALOGUE if entry.kind != "results")
    assert "artifact_results" not in text

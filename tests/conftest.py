"""Shared fixtures: the shared data directory beside the repo, and small builders."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.adapters.simulator.throughputs import Throughputs, load_throughputs
from gpufair.adapters.simulator.trace import TraceJob, load_trace

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
CANONICAL_TRACE = SHARED_DATA / "shockwave_120jobs_32gpus.trace"
TACC = SHARED_DATA / "tacc_throughputs.json"
BUNDLED = REPO / "gpufair" / "data"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not found: {path}")
    return path


@pytest.fixture(scope="session")
def canonical_trace() -> list[TraceJob]:
    return load_trace(_need(CANONICAL_TRACE))


@pytest.fixture(scope="session")
def tacc() -> Throughputs:
    return load_throughputs(_need(TACC))


@pytest.fixture(scope="session")
def bundled_throughputs() -> Throughputs:
    return load_throughputs(BUNDLED / "tacc_throughputs_v100.json")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return _need(SHARED_DATA)

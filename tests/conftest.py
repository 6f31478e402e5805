"""Shared fixtures: the data bundled in the package (gpufair/data), and small builders.

The tests read the same files an installed gpufair ships, so they run (and compare with the
artifact's recorded results) on a bare checkout or install, with nothing beside the repo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.adapters.simulator.throughputs import Throughputs, load_throughputs
from gpufair.adapters.simulator.trace import TraceJob, load_trace
from gpufair.data import data_dir

REPO = Path(__file__).resolve().parents[1]
BUNDLED = data_dir()
CANONICAL_TRACE = BUNDLED / "shockwave_120jobs_32gpus.trace"
TACC = BUNDLED / "tacc_throughputs.json"


@pytest.fixture(scope="session")
def canonical_trace() -> list[TraceJob]:
    return load_trace(CANONICAL_TRACE)


@pytest.fixture(scope="session")
def tacc() -> Throughputs:
    return load_throughputs(TACC)


@pytest.fixture(scope="session")
def bundled_data() -> Path:
    return BUNDLED

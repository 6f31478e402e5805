"""Snapshot validation rules pinned one by one (issue 21's surviving mutants).

Each case breaks one rule in the shipped example (etc/snapshot.example.json) and checks the one
message an admin gets, word for word; the valid edge of each rule is checked to pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpufair.errors import InputError
from gpufair.model.snapshot import check_snapshot, validate_snapshot

EXAMPLE = Path(__file__).resolve().parents[1] / "etc" / "snapshot.example.json"


def example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


def only_problem(doc: dict[str, Any]) -> str:
    messages = validate_snapshot(doc, "s.json")
    assert len(messages) == 1, messages
    return messages[0]


def test_a_job_cannot_finish_before_it_started():
    """Job 4 arrived at 0, started at 30, finished at 5400: a start at 6000 is after its
    finish (and after its arrival, so only the start rule can catch it)."""
    doc = example()
    doc["jobs"][4]["start_s"] = 6000.0
    assert only_problem(doc) == ("s.json: field 'jobs[4].finish_s' = 5400.0: must be >= "
                                 "start_s (6000.0)")
    with pytest.raises(InputError, match=r"must be >= start_s \(6000\.0\)"):
        check_snapshot(doc, "s.json")


def test_finishing_as_it_starts_or_arrives_is_valid():
    doc = example()
    doc["jobs"][4].update(arrival_s=5400.0, start_s=5400.0, finish_s=5400.0)
    assert validate_snapshot(doc, "s.json") == []

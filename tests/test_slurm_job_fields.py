"""squeue decoded with only the fields gpufair reads (issue 30): nothing a reader needs is
dropped, and the translation of the pruned records is the translation of the full ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpufair.adapters.slurm.job_fields import READ_FIELDS, loads_jobs
from gpufair.adapters.slurm.transport import TransportError, _parse_document

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "slurm"
sys.path.insert(0, str(ROOT / "bench"))
from site_scale import site_documents  # noqa: E402
from site_view import view_digest  # noqa: E402


def _recorded_job_fields() -> set[str]:
    """Every field name of a job record in the recorded squeue/slurmrestd documents."""
    names: set[str] = set()
    for path in sorted((ROOT / "tests" / "data").rglob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("jobs"), list):
            for job in doc["jobs"]:
                if isinstance(job, dict) and "job_state" in job:
                    names |= set(job)
    return names


def _source_text() -> str:
    """gpufair's source, this module aside (names found here are what decoding keeps)."""
    return "\n".join(path.read_text() for path in sorted((ROOT / "gpufair").rglob("*.py"))
                     if path.name != "job_fields.py")


def test_every_job_field_named_in_the_source_is_kept() -> None:
    """A reader that starts reading another squeue field must add it to READ_FIELDS: any
    recorded job field named anywhere in gpufair's source is kept (a conservative net: a
    name used for something else is kept too, which costs only memory)."""
    recorded = _recorded_job_fields()
    assert len(recorded) > 100   # the recordings carry Slurm's whole records
    source = _source_text()
    named = {k for k in recorded if f'"{k}"' in source or f"'{k}'" in source}
    missing = sorted(named - READ_FIELDS)
    assert not missing, f"read by gpufair but dropped when decoding squeue: {missing}"
    assert recorded >= READ_FIELDS   # (no name kept that Slurm does not write)


def test_decoding_keeps_the_read_fields_and_nothing_else() -> None:
    text = (DATA / "squeue.json").read_text()
    full, pruned = json.loads(text), loads_jobs(text)
    assert len(pruned["jobs"]) == len(full["jobs"]) > 0
    for whole, kept in zip(full["jobs"], pruned["jobs"], strict=True):
        assert kept == {k: v for k, v in whole.items() if k in READ_FIELDS}
        assert "job_resources" not in kept and len(kept) < len(whole) / 1.5
        assert list(kept) == [k for k in whole if k in READ_FIELDS]   # order kept
    assert pruned["meta"] == full["meta"] and pruned["errors"] == full["errors"]


def test_a_record_without_a_state_is_left_whole() -> None:
    """Not a job record as Slurm writes one: kept as read, so the translation names what
    is wrong with it rather than a field the decoder dropped."""
    doc = loads_jobs('{"jobs": [{"job_id": 7, "junk": {"job_id": 1}, "x": [1, {"y": 2}]}]}')
    assert doc["jobs"] == [{"job_id": 7, "junk": {"job_id": 1}, "x": [1, {"y": 2}]}]


def test_the_transport_decodes_squeue_pruned_and_still_refuses_bad_json() -> None:
    text = (DATA / "squeue.json").read_text()
    doc = _parse_document(text, "squeue --json", "jobs")
    assert all(set(job) <= READ_FIELDS for job in doc["jobs"])
    nodes = _parse_document((DATA / "sinfo.json").read_text(), "sinfo --json", "nodes")
    assert nodes == json.loads((DATA / "sinfo.json").read_text())   # nodes untouched
    try:
        _parse_document('{"jobs": [', "squeue --json", "jobs")
    except TransportError as exc:
        assert "not JSON" in str(exc)
    else:
        raise AssertionError("bad JSON accepted")


def _digest(jobs: dict, nodes: dict) -> str:
    return view_digest(jobs, nodes)[0]


def test_pruned_records_translate_as_the_full_ones() -> None:
    jobs, nodes = site_documents(200, 16, 5)
    text = json.dumps(jobs)
    assert _digest(loads_jobs(text), nodes) == _digest(json.loads(text), nodes)
    for kind in ("", "_allocated", "_eligibility"):   # the loopback cluster's recordings
        text = (DATA / f"squeue{kind}.json").read_text()
        nodes = json.loads((DATA / f"sinfo{kind}.json").read_text())
        assert _digest(loads_jobs(text), nodes) == _digest(json.loads(text), nodes)

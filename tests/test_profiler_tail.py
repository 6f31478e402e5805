"""Incremental tailing: only new bytes, partial lines held back, truncation and rotation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpufair.profiler import JobLog, Profiler
from gpufair.profiler.store import JsonOffsetStore
from gpufair.profiler.tail import read_new


def _line(step: int, ms: float = 50.0) -> str:
    return f"step {step}/100 loss 1.0 time {ms}ms\n"


def test_reads_only_new_complete_lines(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(_line(1) + "step 2/100 lo")
    first = read_new(str(log), None)
    assert first.data == _line(1).encode()
    with log.open("a") as fh:
        fh.write("ss 1.0 time 50.0ms\n")
    second = read_new(str(log), first.position)
    assert second.data == _line(2).encode()
    assert read_new(str(log), second.position).data == b""


def test_truncation_restarts_from_the_top(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(_line(1) + _line(2))
    pos = read_new(str(log), None).position
    log.write_text(_line(7))  # copytruncate then a short new line
    again = read_new(str(log), pos)
    assert again.event == "truncated" and again.data == _line(7).encode()


def test_rewrite_in_place_of_same_length_is_noticed(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(_line(1))
    pos = read_new(str(log), None).position
    with log.open("r+") as fh:  # same inode, different first bytes, longer
        fh.write(_line(5) + _line(6))
    again = read_new(str(log), pos)
    assert again.event == "rewritten" and again.data == (_line(5) + _line(6)).encode()


def test_rotation_reads_the_rest_of_the_old_file_then_the_new(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text(_line(1))
    pos = read_new(str(log), None).position
    with log.open("a") as fh:
        fh.write(_line(2))
    os.rename(log, str(log) + ".1")
    log.write_text(_line(3))
    again = read_new(str(log), pos)
    assert again.event == "rotated"
    assert again.data == (_line(2) + _line(3)).encode()


def test_overlong_line_is_skipped_not_blocking(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"x" * 5000 + b"\n" + _line(1).encode())
    first = read_new(str(log), None, max_bytes=1024)
    assert first.data == b"" and first.skipped_bytes == 1024
    pos = first.position
    data = b""
    for _ in range(10):
        r = read_new(str(log), pos, max_bytes=1024)
        pos, data = r.position, data + r.data
    assert data.endswith(_line(1).encode())


def test_missing_file_is_not_an_error(tmp_path: Path) -> None:
    assert read_new(str(tmp_path / "nope"), None).event == "missing"


def test_profiler_rounds_persist_offsets_across_restarts(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    store_path = tmp_path / "offsets.json"
    log.write_text("".join(_line(i) for i in range(1, 11)))
    prof = Profiler(JsonOffsetStore(store_path))
    job = JobLog("j1", str(log), gpu_type="v100", gpus=1)
    report = prof.round([job])["j1"]
    assert report.iterations_done == 10 and report.family == "pytorch"
    assert prof.round([job]) == {}  # nothing new: no work, no report
    # the daemon restarts: a new profiler over the same store reads only what is new
    with log.open("a") as fh:
        fh.write(_line(11, 100.0) + _line(12, 100.0))
    again = Profiler(JsonOffsetStore(store_path))
    report = again.round([job])["j1"]
    assert report.iterations_done == 12 and report.restarts == 0
    assert report.lines["lines"] == 2  # only the two new lines were read
    assert report.family == "pytorch"


def test_binary_and_undecodable_lines_are_counted(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(_line(1).encode() + b"\x00\x01\x02 core dump\n" + b"\xff\xfe bad\n"
                    + _line(2).encode())
    prof = Profiler()
    report = prof.round([JobLog("j", str(log))])["j"]
    assert report.lines["binary"] == 2
    assert report.iterations_done == 2


def test_throughput_model_fed_per_gpu_type(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_text("".join(_line(i, 100.0) for i in range(1, 21)))
    prof = Profiler()
    prof.round([JobLog("j", str(log), gpu_type="k80", gpus=1)])
    with log.open("a") as fh:
        fh.write("".join(_line(i, 25.0) for i in range(21, 41)))
    prof.round([JobLog("j", str(log), gpu_type="v100", gpus=1)])
    assert prof.model.speedup("j", "v100", "k80") == pytest.approx(4.0, rel=0.01)

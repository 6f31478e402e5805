"""The profiler streams: memory bounded whatever the log's size, and the last line counted.

A log's last line without a newline counts when the log is finished (``gpufair profile``)
and is left for its newline while the log may still be written (the daemon's rounds); a
whole file read in small pieces gives what one read of it gives; ``gpufair profile`` on a
large log needs no more memory than on a smaller one (peak RSS of a subprocess, not time).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.profiler import JobLog, Profiler, profile_file
from gpufair.profiler.tail import read_new
from tests.profiler_helpers import LOGS

IMAGENET = LOGS / "pytorch_imagenet.log"


def _cut_after_last_iteration(tmp_path: Path, newline: bool) -> Path:
    """The ImageNet fixture up to its last training line, with or without its newline."""
    lines = IMAGENET.read_text().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if line.startswith("Epoch"))
    text = "".join(lines[:last + 1])
    path = tmp_path / ("with_newline.log" if newline else "without_newline.log")
    path.write_text(text if newline else text.rstrip("\n"))
    return path


def test_one_shot_counts_a_last_line_without_newline(tmp_path: Path) -> None:
    whole = profile_file(str(_cut_after_last_iteration(tmp_path, newline=True)))
    cut = profile_file(str(_cut_after_last_iteration(tmp_path, newline=False)))
    assert whole.iterations_done == cut.iterations_done == 24
    assert cut.lines["lines"] == whole.lines["lines"]
    assert cut.lines["bytes"] == whole.lines["bytes"] - 1
    assert cut.iter_time_s == whole.iter_time_s


def test_rounds_leave_a_partial_last_line_for_its_newline(tmp_path: Path) -> None:
    full = _cut_after_last_iteration(tmp_path, newline=True).read_text()
    head, last = full[:-1].rsplit("\n", 1)
    log = tmp_path / "job.out"
    log.write_text(head + "\n" + last[:20])            # the writer is mid-line
    prof = Profiler()
    job = JobLog("j", str(log))
    assert prof.round([job])["j"].iterations_done == 23
    assert prof.round([job]) == {}                      # still nothing new to read
    with log.open("a") as fh:
        fh.write(last[20:] + "\n")                      # the line is finished
    report = prof.round([job])["j"]
    assert report.iterations_done == 24
    # read once, whole: as many lines as the file has, none malformed
    assert report.lines["lines"] == full.count("\n")
    assert report.lines["malformed"] == 0
    assert report.lines["bytes"] == len(full.encode())


def test_a_finished_log_gives_its_partial_last_line(tmp_path: Path) -> None:
    log = _cut_after_last_iteration(tmp_path, newline=False)
    prof = Profiler()
    assert prof.round([JobLog("j", str(log))])["j"].iterations_done == 23
    # the job ended: the line will not be finished, so it is read as it is
    assert prof.round([JobLog("j", str(log), finished=True)])["j"].iterations_done == 24


def test_final_read_takes_the_partial_line_only_at_the_end_of_the_file(tmp_path: Path
                                                                        ) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"a 1\nb 2\nc 3")
    first = read_new(str(log), None, max_bytes=7, final=True)
    assert (first.data, first.more) == (b"a 1\n", True)    # cut by the budget: not the end
    second = read_new(str(log), first.position, max_bytes=7, final=True)
    assert (second.data, second.more) == (b"b 2\nc 3", False)
    assert read_new(str(log), second.position, final=True).data == b""
    held = read_new(str(log), None)                         # not final: held back
    assert (held.data, held.more, held.position.offset) == (b"a 1\nb 2\n", False, 8)


def test_more_says_whether_a_read_left_some_of_the_file(tmp_path: Path) -> None:
    """An over-long line skipped is a read that moved on; the read that reaches the end
    (or a partial last line it leaves for its newline) says there is no more."""
    log = tmp_path / "job.out"
    log.write_bytes(b"x" * 100 + b"\nab\ncd")
    skipped = read_new(str(log), None, max_bytes=10)
    assert skipped.skipped_bytes == 10 and skipped.more
    pos = skipped.position
    while (read := read_new(str(log), pos, max_bytes=10)).more:
        pos = read.position
    assert read.position.offset == 104 and read.data.endswith(b"ab\n")


TEXT_FIXTURES = sorted(p.name for p in LOGS.iterdir()
                       if p.suffix in (".log", ".csv") and p.name != "tensorboard.tfevents")


@pytest.mark.parametrize("name", TEXT_FIXTURES)
@pytest.mark.parametrize("chunk", [512, 4096])
def test_reading_in_pieces_gives_what_one_read_gives(name: str, chunk: int) -> None:
    """``drain`` reports once, at the end: the report does not depend on the read size
    (each fixture's longest line is shorter than 512 bytes)."""
    whole = profile_file(str(LOGS / name), chunk_bytes=1 << 30).as_dict()
    assert profile_file(str(LOGS / name), chunk_bytes=chunk).as_dict() == whole


def test_profile_memory_does_not_grow_with_the_log(tmp_path: Path, monkeypatch) -> None:
    """Peak RSS of ``gpufair profile`` on 20 MB and on 60 MB of real ImageNet-example
    lines: the same within 20 MB, and under the 150 MB the issue asks for at 200 MB
    (``bench/bench_profiler_memory.py`` measures 10, 50 and 200 MB)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))
    from bench_profiler_memory import profile_once

    from gpufair.profiler.synthetic import grow_log

    peaks = {}
    for mb in (20, 60):
        log = tmp_path / f"imagenet_{mb}.log"
        grow_log(IMAGENET, log, mb << 20)
        _, peaks[mb], report = profile_once(str(log))
        with log.open("rb") as fh:
            lines = sum(1 for _ in fh)
        assert report["iterations_done"] == lines and report["lines"]["lines"] == lines
        log.unlink()
    assert peaks[60] - peaks[20] < 20, peaks
    assert peaks[60] < 150, peaks

"""Property tests: no input makes a parser raise, and chunking never changes the result."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufair.profiler import JobLog, Profiler
from gpufair.profiler.events import LineStats
from gpufair.profiler.parsers import FAMILIES
from gpufair.profiler.stream import LogStream, clean
from gpufair.profiler.summary import Accumulator
from tests.profiler_helpers import LOGS

TEXT_LOGS = sorted(p for p in LOGS.glob("*.log"))
# fragments the regexes key on, so random input reaches the conversion code
FRAGMENTS = ["Epoch: [", "][", "/", "]\tTime ", " (", ")", "| epoch ", " batches | ",
             "ms/batch ", "step ", "iter ", "loss ", "time ", "ms", "it/s", "s/it", "|",
             "%|", " [", "<", ", ", "{'loss': ", "'epoch': ", "}", "━", " - ", "/step",
             "Epoch ", "global_step/sec: ", "loss = ", ", step = ", " sec)", "images/sec: ",
             " +/- ", "(jitter = ", "Iter #", " img/sec per GPU", "iteration ",
             "elapsed time per iteration (ms): ", "global batch size: ", "step=",
             ", skipped=", "RunningAvgSamplesPerSec=", ", CurrSamplesPerSec=",
             '{"gpufair": 1, "iteration": ', "epoch,step", "\n", "\r", "\x1b[1m", "\x08",
             "1", "0", "9" * 400, "1e999", "-3", "nan", ".", "?", "\x00", "\xff"]

log_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)),
                    max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=log_text)
def test_every_parser_survives_random_text(text: str) -> None:
    for family in FAMILIES:
        stats = LineStats()
        samples = family().parse(clean(text.encode(), LineStats()), stats)
        assert stats.parsed == len(samples) <= text.count("\n") + text.count("\r") + 1


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=2000))
def test_stream_and_summary_survive_random_bytes(data: bytes) -> None:
    stream = LogStream()
    acc = Accumulator()
    acc.add(stream.feed(data))
    report = acc.report(stream.family, stream.stats)
    assert report.lines["lines"] >= report.lines["parsed"]


@pytest.mark.parametrize("path", TEXT_LOGS, ids=lambda p: p.name)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0, 1), flip=st.integers(0, 10**9))
def test_truncated_or_corrupted_fixture_never_raises(path: Path, cut: float, flip: int) -> None:
    data = bytearray(path.read_bytes())
    data = data[:int(len(data) * cut)]
    if data:
        data[flip % len(data)] ^= 0xFF
    stream = LogStream()
    acc = Accumulator()
    acc.add(stream.feed(bytes(data)))
    acc.report(stream.family, stream.stats)


@pytest.mark.parametrize("path", TEXT_LOGS, ids=lambda p: p.name)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.floats(0, 1), max_size=6))
def test_tailing_in_any_chunks_gives_the_same_report(path: Path, cuts: list[float],
                                                     tmp_path_factory) -> None:
    data = path.read_bytes()
    whole = Profiler()
    tmp = tmp_path_factory.mktemp("tail")
    ref_log = tmp / "ref.log"
    ref_log.write_bytes(data)
    expected = whole.round([JobLog("j", str(ref_log))])["j"]
    log = tmp / "job.log"
    log.write_bytes(b"")
    prof = Profiler()
    done = 0
    for point in [*sorted(int(len(data) * c) for c in cuts), len(data)]:
        with log.open("ab") as fh:
            fh.write(data[done:point])
        done = max(done, point)
        prof.round([JobLog("j", str(log))])
    got = prof.reports["j"]
    assert (got.family, got.iterations_done, got.restarts) == (
        expected.family, expected.iterations_done, expected.restarts)
    if expected.iter_time_s is None:
        assert got.iter_time_s is None
    else:
        assert got.iter_time_s == pytest.approx(expected.iter_time_s, rel=1e-9)


def test_absurd_iteration_times_are_not_fatal(tmp_path):
    """Huge, close-together times once overflowed the robust mean and broke the round."""
    from gpufair.profiler.profiler import profile_file
    from gpufair.profiler.robust import robust_mean

    huge = "1" + "0" * 200
    log = tmp_path / "absurd.log"
    log.write_text("".join(f"step {n} loss 1.0 time {n}{'0' * 200}\n" for n in range(1, 40))
                   + f"step 40 loss 1.0 time {huge}\n")
    profile_file(str(log))  # must not raise
    assert robust_mean([1e200, 2e200, 3e200]) is None
    assert robust_mean([1e200, 0.5, 0.5]).value == 0.5

"""Template extraction (one regex match per line shape) against matching every line.

The template path is exact only if lines with one skeleton match a family's pattern alike;
these tests compare it, column by column, with the path that runs the regex on every line,
on every fixture, on the benchmark's lines, and on random lines built from the fragments
the patterns key on. They also run the pure-Python scanner in place of the C one.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.profiler import extract, scan
from gpufair.profiler.events import LineStats, Samples
from gpufair.profiler.extract import Extractor, Fields
from gpufair.profiler.parsers import BY_NAME, FAMILIES
from gpufair.profiler.stream import LogStream, clean, feed_many
from tests.profiler_helpers import LOGS
from tests.test_profiler_fuzz import FRAGMENTS

TEXT_LOGS = sorted(p for p in LOGS.glob("*.log")) + sorted(LOGS.glob("*.csv"))


def _one_by_one(self: Extractor, line: str, tokens: int) -> str | None:
    return None if self._captures(line) is None else extract._PER_LINE


def _parse(data: bytes, family: str | None = None) -> tuple[Samples, LineStats, str | None]:
    stream = LogStream(family)
    samples = stream.feed(data)
    return samples, stream.stats, stream.family


def _assert_same(a: Samples, b: Samples) -> None:
    assert len(a) == len(b)
    for f in fields(Samples):
        assert np.array_equal(getattr(a, f.name), getattr(b, f.name), equal_nan=True), f.name


def _bench_lines() -> dict[str, bytes]:
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from bench_profiler import FAMILIES as BENCH
    from bench_profiler import _corpus
    return {name: b"".join(_corpus(make, 60_000)) for name, make in BENCH.items()}


@pytest.fixture(autouse=True)
def _fresh_caches():
    for family in FAMILIES:
        family.extractor._cache.clear()
    yield
    for family in FAMILIES:
        family.extractor._cache.clear()


@pytest.mark.parametrize("path", TEXT_LOGS, ids=lambda p: p.name)
def test_templates_equal_line_by_line_on_fixtures(path: Path, monkeypatch) -> None:
    data = path.read_bytes()
    fast = _parse(data)
    monkeypatch.setattr(Extractor, "_template", _one_by_one)
    for family in FAMILIES:
        family.extractor._cache.clear()
    slow = _parse(data)
    _assert_same(fast[0], slow[0])
    assert fast[1:] == slow[1:]


def test_templates_equal_line_by_line_on_benchmark_lines(monkeypatch) -> None:
    corpora = _bench_lines()
    fast = {name: _parse(data) for name, data in corpora.items()}
    monkeypatch.setattr(Extractor, "_template", _one_by_one)
    for family in FAMILIES:
        family.extractor._cache.clear()
    for name, data in corpora.items():
        slow = _parse(data)
        assert len(slow[0]) > 100, name
        _assert_same(fast[name][0], slow[0])
        assert fast[name][1:] == slow[1:]


def test_python_scanner_gives_the_same_samples(monkeypatch) -> None:
    corpora = _bench_lines()
    corpora.update({p.name: p.read_bytes() for p in TEXT_LOGS})
    native = {name: _parse(data) for name, data in corpora.items()}
    monkeypatch.setattr(extract, "scan", scan.scan_python)
    for family in FAMILIES:
        family.extractor._cache.clear()
    for name, data in corpora.items():
        got = _parse(data)
        _assert_same(native[name][0], got[0])
        assert native[name][1:] == got[1:]


line_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS[:-8]), st.sampled_from(
    ["1", "12", "0.5", "2.5e-03", "007", " ", "  ", "\t"]), st.text("ab :=", max_size=3)),
    min_size=1, max_size=25).map("".join)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(line_text, min_size=1, max_size=30),
       family=st.sampled_from(sorted(BY_NAME)))
def test_templates_equal_line_by_line_on_random_lines(lines: list[str], family: str) -> None:
    data = clean("\n".join(lines).encode() + b"\n", LineStats())
    parser = BY_NAME[family]
    parser.extractor._cache.clear()
    fast = parser().parse(data, LineStats())
    original = Extractor._template
    try:
        Extractor._template = _one_by_one  # type: ignore[method-assign]
        parser.extractor._cache.clear()
        slow = parser().parse(data, LineStats())
    finally:
        Extractor._template = original  # type: ignore[method-assign]
        parser.extractor._cache.clear()
    _assert_same(fast, slow)


def test_a_capture_that_is_not_one_number_goes_line_by_line() -> None:
    # "1.2.3" is two numbers to the scanner: the template cannot gather it, so the lines go
    # through the regex one by one, which captures "1.2.3": no number, a malformed line
    data = (b"step 1/10 loss 2.5 time 1.2.3ms\nstep 2/10 loss 2.4 time 4.5.6ms\n"
            b"step 3/10 loss 2.3 time 4.5ms\n")
    samples, stats, _ = _parse(data, "pytorch")
    assert samples.step.tolist() == [3] and samples.iter_time_s.tolist() == [0.0045]
    assert stats.malformed == 2


def test_signed_and_constant_captures() -> None:
    data = (b"step 1 loss -2.5\nstep 2 loss nan\nstep 3 loss +1e-3\n")
    samples, _, _ = _parse(data, "pytorch")
    assert samples.loss[0] == -2.5 and np.isnan(samples.loss[1]) and samples.loss[2] == 1e-3


def test_context_carries_across_chunks() -> None:
    stream = LogStream("keras")
    stream.feed(b"Epoch 3/10\n")
    samples = stream.feed(b"5/20 \xe2\x94\x81\xe2\x94\x81 1s 10ms/step - loss: 1.0\n")
    assert samples.step.tolist() == [2 * 20 + 5] and samples.total_steps.tolist() == [200]
    # "bars": a bar in progress was seen, so epoch-end lines are the end of a period, not
    # an epoch's mean on their own (a file log's, issue 14)
    assert stream.state()["context"] == {"epoch": 2, "epochs": 10, "bars": 1}


def test_context_is_kept_per_log_in_a_batch() -> None:
    f = Fields(6, np.array([0, 0, 0, 1, 1, 2]), [{"b": 9}, {}, {"b": 4}])
    values = np.array([np.nan, 2.0, np.nan, np.nan, 5.0, np.nan])
    assert np.array_equal(f.carry(values, "b"), [9, 2, 2, np.nan, 5, 4], equal_nan=True)
    assert f.contexts == [{"b": 2}, {"b": 5}, {"b": 4}]
    first = Fields(5, np.array([0, 0, 1, 1, 1]), [{}, {"t": 7}])
    got = first.first(np.array([np.nan, 3.0, 4.0, np.nan, 5.0]), "t")
    assert got.tolist() == [3, 3, 7, 7, 7] and first.contexts == [{"t": 3}, {"t": 7}]
    prev = Fields(5, np.array([0, 0, 0, 1, 1]), [{"s": 1}, {}])
    steps = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    rows = np.array([0, 2, 3, 4])
    assert prev.previous(rows, steps, "s").tolist() == [1, 10, 40, 40]
    assert prev.contexts == [{"s": 30}, {"s": 50}]


def test_previous_of_no_rows_is_empty_and_keeps_the_context() -> None:
    """A chunk with header lines only: no rows, nothing before them, context untouched."""
    fields = Fields(3, np.array([0, 0, 0]), [{"s": 1}])
    got = fields.previous(np.array([], dtype=np.int64), np.array([1.0, 2.0, 3.0]), "s")
    assert got.shape == (0,) and fields.contexts == [{"s": 1}]


@pytest.mark.parametrize("cut", [1, 3, 7])
def test_a_batch_of_logs_parses_as_each_log_alone(cut: int) -> None:
    """Every fixture split into pieces and fed as one round: the same samples, stats and
    contexts as feeding each log alone, piece by piece."""
    pieces: list[list[bytes]] = []
    for path in TEXT_LOGS:
        lines = path.read_bytes().splitlines(keepends=True)
        pieces.append([b"".join(lines[i:i + cut]) for i in range(0, len(lines), cut)])
    alone = [LogStream() for _ in pieces]
    together = [LogStream() for _ in pieces]
    want: list[list[Samples]] = [[s.feed(p) for p in log] for s, log in zip(
        alone, pieces, strict=True)]
    got: list[list[Samples]] = [[] for _ in pieces]
    for r in range(max(map(len, pieces))):
        batch = [(i, log[r]) for i, log in enumerate(pieces) if r < len(log)]
        for (i, _), samples in zip(batch, feed_many([(together[i], p) for i, p in batch]),
                                   strict=True):
            got[i].append(samples)
    for a, b, w, g in zip(alone, together, want, got, strict=True):
        assert (a.family, a.stats, a.state()) == (b.family, b.stats, b.state())
        _assert_same(Samples.concat(w), Samples.concat(g))

"""Detection once per line shape (``detect_chunk``) against the per-line definition
(``detect(sample_lines(...))``).

Grouping by shape is exact only if a signature treats every run of digits alike; these tests
hold it to the per-line answer on every fixture, real log and benchmark corpus, with both
scanners and on random lines, check the assumption itself by re-writing the numbers of real
lines, and check with hand-made chunks that shapes are weighted by their line counts and that
a signature that reads a digit (the reporter's version) still sees every line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpufair.profiler.parsers as parsers
from gpufair.profiler import scan
from gpufair.profiler.events import LineStats
from gpufair.profiler.parsers import FAMILIES, detect, detect_chunk, sample_lines
from gpufair.profiler.stream import clean
from tests.profiler_helpers import LOGS
from tests.test_profiler_fuzz import FRAGMENTS

REAL = Path(__file__).parent / "data" / "real_logs"
FILES = (sorted(REAL.glob("*/*.log")) + sorted(LOGS.glob("*.log"))
         + sorted(LOGS.glob("*.csv")))


def _clean(data: bytes) -> bytes:
    return clean(data, LineStats())


def _bench_chunks() -> dict[str, bytes]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from bench_profiler import FAMILIES as BENCH
    from bench_profiler import _corpus
    return {name: _corpus(make, 1 << 20)[0] for name, make in BENCH.items()}


def _name(family: type | None) -> str | None:
    return None if family is None else family.family


@pytest.mark.parametrize("python_scanner", [False, True], ids=["C", "python"])
def test_same_family_as_line_by_line_on_every_log(python_scanner: bool, monkeypatch) -> None:
    if python_scanner:
        monkeypatch.setattr(parsers, "scan", scan.scan_python)
    corpora = {str(p): _clean(p.read_bytes()) for p in FILES}
    corpora.update(_bench_chunks())
    found = set()
    for name, data in corpora.items():
        want = _name(detect(sample_lines(data)))
        assert _name(detect_chunk(data)) == want, name
        found.add(want)
    assert len(found) >= 20  # the corpora do exercise most families


line_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(
    ["1", "12", "0.5", "2.5e-03", "007", "3E+2", " ", "  ", "\t"]), st.text("ab :=", max_size=3)),
    min_size=1, max_size=25).map("".join)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(line_text, min_size=1, max_size=40))
def test_same_family_as_line_by_line_on_random_lines(lines: list[str]) -> None:
    data = _clean("\n".join(lines).encode())
    assert _name(detect_chunk(data)) == _name(detect(sample_lines(data)))


# the numbers of a line, re-written: other digits and another length, the same form
_INT = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_VARIANTS = ({"int": "7", "frac": "3.1", "exp": "1e5"},
             {"int": "123456", "frac": "12345.678", "exp": "22.75E+10"},
             {"int": "90", "frac": "0.05", "exp": "4.0e-07"})


def _rewritten(line: str, forms: dict[str, str]) -> str:
    def swap(m: re.Match[str]) -> str:
        text = m.group(0)
        if "e" in text or "E" in text:
            return forms["exp"]
        return forms["frac"] if "." in text else forms["int"]
    return _INT.sub(swap, line)


def test_signatures_treat_every_digit_run_alike_on_real_lines() -> None:
    """The assumption under ``detect_chunk``, on the lines of every log: a signature that does
    not declare ``signature_reads_digits`` answers a line and its re-numbered twins alike."""
    lines = sorted({line for p in FILES for line in sample_lines(_clean(p.read_bytes()))})
    assert len(lines) > 1000
    for family in FAMILIES:
        if family.signature_reads_digits:
            continue
        search = family.signature.search
        for line in lines:
            hit = search(line) is not None
            for forms in _VARIANTS:
                twin = _rewritten(line, forms)
                assert (search(twin) is not None) == hit, (family.family, line, twin)


def _reads_digits(pattern: str) -> bool:
    """Whether a pattern names a digit itself or counts a repetition (``{2}``, ``{1,3}``):
    the two ways a regex can tell digit runs of one form apart. Walks the parsed pattern."""
    try:
        from re import _constants as c
        from re import _parser
    except ImportError:   # Python 3.10 (the minimum-versions pass): the same, under old names
        import sre_constants as c  # type: ignore[no-redef]
        import sre_parse as _parser  # type: ignore[no-redef]
    repeats = {c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)}

    def walk(items) -> bool:
        for op, arg in items:
            if op in (c.LITERAL, c.NOT_LITERAL) and chr(arg).isdigit():
                return True
            if op is c.IN:
                for inner_op, inner in arg:
                    if inner_op is c.LITERAL and chr(inner).isdigit():
                        return True
                    if inner_op is c.RANGE and not (inner[0] <= 48 and inner[1] >= 57) and (
                            inner[0] <= 57 and inner[1] >= 48):
                        return True
            children: list = []
            if op in repeats:
                low, high, body = arg
                if not (low in (0, 1) and high in (1, c.MAXREPEAT)):
                    return True
                children = [body]
            elif op is c.SUBPATTERN:
                children = [arg[-1]]
            elif op is c.BRANCH:
                children = list(arg[1])
            elif op in (c.ASSERT, c.ASSERT_NOT):
                children = [arg[1]]
            if any(walk(child) for child in children):
                return True
        return False
    return walk(_parser.parse(pattern))


def test_reads_digits_finds_what_it_looks_for() -> None:
    assert _reads_digits(r'^\{"gpufair": ?1\b')
    assert _reads_digits(r"step \d{2} ")
    assert _reads_digits(r"step [1-9]\d*")
    assert _reads_digits(r"(?:a|b\d{1,3})x")
    assert not _reads_digits(r"step \d+/\s*\d+ \|.*time: [\d.]+(?:/\d+)?")


def test_every_signature_that_reads_digits_says_so() -> None:
    readers = {f.family for f in FAMILIES if _reads_digits(f.signature.pattern)}
    assert readers == {f.family for f in FAMILIES if f.signature_reads_digits} == {"reporter"}


def test_shapes_count_by_lines_not_by_shapes() -> None:
    """One DeepSpeed line shape 50 times against three Megatron shapes once each: 50 to 3,
    DeepSpeed (counting shapes, Megatron would win 3 to 1)."""
    ds = "".join(f"[2024-05-01 10:00:{i % 60:02d},001] [INFO] [timer.py:260:stop] epoch=0/"
                 f"micro_step={i}/global_step={i}, RunningAvgSamplesPerSec=120.51, "
                 f"CurrSamplesPerSec=128.5, MemAllocated=1.2GB, MaxMemAllocated=2.3GB\n"
                 for i in range(10, 60))
    mg = "".join(f" iteration {pad}{i}/ 1000 | elapsed time per iteration (ms): {t} |\n"
                 for pad, i, t in (("", 10, "1000.4"), (" ", 20, "990"), ("  ", 30, "1.5e3")))
    data = _clean((mg + ds).encode())
    assert detect_chunk(data).family == "deepspeed"
    assert len(parsers._shapes(parsers._picked(data))) == 4


def test_a_signature_that_reads_a_version_digit_sees_every_line() -> None:
    """Five reporter-shaped records, one of version 1, against two plain ``step`` lines: the
    reporter has one hit, PyTorch two (as one shape, version 2 records would count five)."""
    records = "".join(f'{{"gpufair": {v}, "iteration": {i}, "iter_time_s": 0.5}}\n'
                      for v, i in ((1, 1), (2, 2), (2, 3), (2, 4), (2, 5)))
    plain = "step 6 loss 2.5 time 40ms\nstep 7 loss 2.4 time 41ms\n"
    data = _clean((records + plain).encode())
    assert detect_chunk(data).family == "pytorch"
    assert detect_chunk(_clean((records.replace(": 2,", ": 1,") + plain).encode())
                        ).family == "reporter"


def test_shapes_keep_lines_of_other_token_counts_apart(monkeypatch) -> None:
    """A hash collision (here: every skeleton equal) must not merge shapes whose lines carry
    different numbers of numbers."""
    def colliding(data: bytes) -> scan.Scanned:
        real = scan.scan_python(data)
        return scan.Scanned(real.starts, real.ends, real.skeletons * 0, real.token_offsets,
                            real.values)
    monkeypatch.setattr(parsers, "scan", colliding)
    shapes = parsers._shapes([b"a 1", b"b 2 3", b"c 4", b"d"])
    assert sorted(n for _, n in shapes) == [1, 1, 2]
    assert {line for line, _ in shapes} == {"a 1", "b 2 3", "d"}


def test_an_empty_chunk_detects_nothing() -> None:
    assert detect_chunk(b"") is None and detect_chunk(b"\n\n") is None

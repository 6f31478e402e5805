"""Which lines were left out of a reading, and why (``DroppedLines``, ``--explain``)."""

from __future__ import annotations

import itertools
import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.cli.main import main
from gpufair.profiler.summary import MAX_RANGES, DroppedLines

LOG = """\
Epoch: [0][ 0/12]\tTime  0.123 ( 0.123)\tData  0.003 ( 0.003)\tLoss 2.3892e+00 (2.3892e+00)
Epoch: [0][ 1/12]\tTime  0.048 ( 0.085)\tData  0.000 ( 0.001)\tLoss 2.3979e+00 (2.3936e+00)
Epoch: [0][ 2/12]\tTime  0.039 ( 0.070)\tData  0.000 ( 0.001)\tLoss 2.2873e+00 (2.3581e+00)
Epoch: [0][ 2/12]\tTime  0.039 ( 0.070)\tData  0.000 ( 0.001)\tLoss 2.2873e+00 (2.3581e+00)
Epoch: [0][ 3/12]\tTime  0.044 ( 0.063)\tData  0.000 ( 0.001)\tLoss 2.4197e+00 (2.3735e+00)
Test: [0/3]\tTime  0.020 ( 0.020)
Test: [1/3]\tTime  0.017 ( 0.018)
Test: [2/3]\tTime  0.018 ( 0.018)
 * Acc@1 10.000 Acc@5 50.000
Epoch: [1][ 0/12]\tTime  0.034 ( 0.034)\tData  0.000 ( 0.000)\tLoss 2.2684e+00 (2.2684e+00)
Epoch: [1][ 1/12]\tTime  0.035 ( 0.034)\tData  0.000 ( 0.000)\tLoss 2.3722e+00 (2.3203e+00)
"""


def test_json_and_explain_list_the_dropped_lines(tmp_path, capsys) -> None:
    log = tmp_path / "imagenet.log"
    log.write_text(LOG)
    assert main(["profile", "--json", str(log)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dropped"] == [
        {"reason": "warm-up", "first": 1, "last": 1},
        {"reason": "duplicate", "first": 4, "last": 4},
        {"reason": "evaluation", "first": 6, "last": 8}]
    assert report["dropped_more"] == 0
    assert main(["profile", "--explain", str(log)]) == 0
    assert "lines left out: 1 (warm-up), 4 (duplicate), 6-8 (evaluation)" in \
        capsys.readouterr().out


def test_line_numbers_count_across_reads(tmp_path) -> None:
    """Lines are numbered in the whole log, not in the read that parsed them."""
    from gpufair.profiler.profiler import profile_file
    log = tmp_path / "imagenet.log"
    log.write_text(LOG * 50)
    report = profile_file(str(log), chunk_bytes=1000)
    evals = [(d["first"], d["last"]) for d in report.dropped if d["reason"] == "evaluation"]
    assert evals[:3] == [(6, 8), (17, 19), (28, 30)]


def test_ranges_are_bounded_and_counted() -> None:
    dropped = DroppedLines()
    dropped.note_many("duplicate", np.arange(1.0, 2001.0, 2.0))  # 1000 separate lines
    dropped.note("evaluation", 4000.0)
    listed, more = dropped.listed()
    assert len(listed) == MAX_RANGES and listed[0] == {"reason": "duplicate", "first": 1,
                                                       "last": 1}
    assert more == 1000 + 1 - MAX_RANGES


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(1, 3)), max_size=120),
       st.lists(st.integers(0, 120), max_size=6), st.booleans())
def test_many_at_once_equals_one_at_a_time(steps: list[tuple[str, int]], cuts: list[int],
                                           unknown: bool) -> None:
    """Lines noted in bulk (any split of each reason's lines) give the ranges one at a
    time gives, bound included."""
    line, lines = 0.0, {"a": [], "b": []}
    for reason, gap in steps:
        line += gap
        lines[reason].append(np.nan if unknown and gap == 3 else line)
    one, bulk = DroppedLines(), DroppedLines()
    for reason, values in lines.items():
        for value in values:
            one.note(reason, value)
        bounds = [0, *sorted(min(c, len(values)) for c in cuts), len(values)]
        for a, b in itertools.pairwise(bounds):
            bulk.note_many(reason, np.array(values[a:b], dtype=float))
    assert one.listed() == bulk.listed()

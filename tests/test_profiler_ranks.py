"""Multi-rank logs are read from one rank's lines, told apart by the launcher's prefix."""

from __future__ import annotations

import pytest

from gpufair.profiler.profiler import profile_file
from gpufair.profiler.ranks import RankFilter

LINE = ("Epoch: [0][{i:3d}/500]\tTime  {t:.3f} ({t:.3f})\tData  0.001 ( 0.001)\t"
        "Loss {loss:.4e} ({loss:.4e})")


def interleaved(prefix: str, ranks: tuple[int, ...] = (0, 1), steps: int = 40) -> str:
    """Each rank's copy of every iteration line; rank r's time is 0.1 * (r + 1) and its
    loss its own, so that telling ranks apart by text cannot work."""
    lines = []
    for i in range(steps):
        for r in ranks:
            lines.append(prefix.format(r=r) + LINE.format(i=i, t=0.1 * (r + 1),
                                                          loss=2.0 - 0.01 * i + 0.001 * r))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("prefix", ["[Rank {r}] ", "[1,{r}]<stdout>:", "rank{r}: ",
                                    "[default{r}]:", "{r}: ", "[{r}]<stdout>:",
                                    "Tue Sep  8 09:24:20 2020[{r}]<stdout>:"])
def test_one_rank_is_read(tmp_path, prefix: str) -> None:
    log = tmp_path / "multi.log"
    log.write_text("launching 2 processes\n" + interleaved(prefix))
    report = profile_file(str(log))
    assert report.family == "pytorch"
    assert report.iter_time_s == pytest.approx(0.1)   # rank 0's, not a mix
    assert (report.restarts, report.duplicates) == (0, 0)
    assert report.iterations_done == 40  # (the ImageNet example counts from 1)


def test_the_lowest_rank_when_rank_0_is_not_in_the_log(tmp_path) -> None:
    log = tmp_path / "multi.log"
    log.write_text(interleaved("[Rank {r}] ", ranks=(2, 1)))
    assert profile_file(str(log)).iter_time_s == pytest.approx(0.2)


def test_without_ranks_the_text_duplicates_are_what_is_left(tmp_path) -> None:
    """The same log without prefixes: a mix of both ranks (why prefixes matter)."""
    log = tmp_path / "multi.log"
    log.write_text(interleaved(""))
    report = profile_file(str(log))
    assert report.iter_time_s != pytest.approx(0.1)


def test_a_bare_number_prefix_of_one_value_is_text() -> None:
    """``N: `` is torchrun's prefix only when two ranks or more show it."""
    data = b"".join(b"1: loss 0.5 time 0.1\n" for _ in range(10))
    ranks = RankFilter()
    assert ranks.apply(data) == data and ranks.form is None


def test_other_ranks_lines_are_emptied_not_removed() -> None:
    """Line numbers stay the file's (``dropped`` ranges point at real lines)."""
    ranks = RankFilter()
    out = ranks.apply(b"[Rank 0] a\n[Rank 1] a\nplain\n[Rank 0] b\n")
    assert out == b"a\n\nplain\nb\n"
    assert ranks.apply(b"[Rank 1] c\n[Rank 0] d\n") == b"\nd\n"  # the form sticks


def test_deepspeed_pipeline_lines(tmp_path) -> None:
    log = tmp_path / "ds.log"
    log.write_text("".join(f"steps: {10 * i} loss: 0.69 iter time (s): {t:.3f} samples/sec: "
                           f"{64 / t:.3f}\n" for i, t in enumerate([0.9, 0.5, 0.52, 0.48], 1)))
    report = profile_file(str(log))
    assert report.family == "deepspeed"
    assert report.iter_time_s == pytest.approx(0.5)
    assert report.iterations_done == 40


def test_line_numbers_stay_the_files_when_the_last_line_is_another_ranks(tmp_path) -> None:
    """The log's last line is unterminated and another rank's: emptied, it must still count
    as a line, or every listed line number is one too high."""
    steps = [LINE.format(i=i, t=0.1, loss=2.0) for i in (0, 1, 2, 2, 3)]
    text = "".join(f"[Rank 0] {s}\n[Rank 1] {s}\n" for s in steps)
    log = tmp_path / "multi.log"
    for ending in ("", "\n"):   # unterminated, then terminated: the same numbers
        log.write_text(text.rstrip("\n") + ending)
        dropped = profile_file(str(log)).dropped
        # rank 0's lines are the odd ones: its warm-up step on line 1, the repeated step 2
        # on line 7
        assert [(d["reason"], d["first"]) for d in dropped] == [("warm-up", 1),
                                                                ("duplicate", 7)]

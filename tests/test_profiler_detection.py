"""Detection over a sample of the whole log, and the "unknown format" answer (issue 14)."""

from __future__ import annotations

from pathlib import Path

from gpufair.profiler import profile_file
from gpufair.profiler.parsers import closest, sample_lines

REAL = Path(__file__).parent / "data" / "real_logs"


def test_megatron_after_a_long_argument_dump(tmp_path: Path) -> None:
    """The first iteration line 20,000 lines in: found by the sampled windows."""
    dump = "".join(f"  arg_{i:05d} ........................ {i}\n" for i in range(20000))
    log = tmp_path / "megatron.log"
    log.write_text(dump + (REAL / "megatron" / "megatron_llm_issue11.log").read_text())
    report = profile_file(str(log))
    assert report.family == "megatron" and report.iterations_done == 125
    assert report.iter_time_s is not None and abs(report.iter_time_s - 88.8) < 1.0


def test_sample_is_bounded() -> None:
    # small on purpose: test_profiler_memory forks children whose peak RSS includes ours
    data = b"".join(b"line %d\n" % i for i in range(50000))
    assert 3000 < len(sample_lines(data)) <= 400 * 8


def test_unknown_format_names_the_closest_families() -> None:
    lines = ["epoch 3 | time: 0.5 | data_time: 0.1 | no brackets here"] * 5
    hints = closest(lines)
    assert hints and hints[0].startswith(("detectron2:", "mmcv:"))
    assert "data_time:" in hints[0] and "no line has the shape" in hints[0]
    assert closest(["nothing a trainer prints"]) == []

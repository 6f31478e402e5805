"""Segments on world-size changes: the reading is of the last segment."""

from __future__ import annotations

import numpy as np
import pytest

from gpufair.profiler.events import Samples
from gpufair.profiler.profiler import profile_file

LINE = ("Epoch: [0][{i:3d}/500]\tTime  {t:.3f} ({t:.3f})\tData  0.001 ( 0.001)\t"
        "Loss {loss:.4e} ({loss:.4e})\n")


def run(first: int, n: int, t: float) -> str:
    return "".join(LINE.format(i=i, t=t * (1 + 0.02 * (i % 3)), loss=2.0 - 0.001 * i)
                   for i in range(first, first + n))


@pytest.mark.parametrize("chunk", [4 << 20, 700])
def test_a_new_world_size_starts_a_segment(tmp_path, chunk: int) -> None:
    log = tmp_path / "elastic.log"
    log.write_text("world_size=2\n" + run(0, 60, 0.2) + "rendezvous done, WORLD_SIZE: 4\n"
                   + run(60, 60, 0.1))
    report = profile_file(str(log), chunk_bytes=chunk)
    assert [r["cause"] for r in report.regimes] == ["start", "world_size"]
    assert report.iter_time_s == pytest.approx(0.1 * 1.02, rel=0.02)  # the last segment's
    assert report.regimes[0]["iter_time_s"] == pytest.approx(0.2 * 1.02, rel=0.02)
    assert report.restarts == 0


def test_the_same_world_size_again_is_no_segment(tmp_path) -> None:
    log = tmp_path / "steady.log"
    log.write_text("--nproc_per_node=8\n" + run(0, 40, 0.2) + "nproc_per_node=8\n"
                   + run(40, 40, 0.2))
    assert [r["cause"] for r in profile_file(str(log)).regimes] == ["start"]


def test_megatron_argument_dump_form(tmp_path) -> None:
    log = tmp_path / "dump.log"
    log.write_text("  world_size ...................................... 8\n" + run(0, 40, 0.3)
                   + "  world_size ...................................... 16\n"
                   + run(40, 40, 0.15))
    report = profile_file(str(log))
    assert [r["cause"] for r in report.regimes] == ["start", "world_size"]
    assert report.iter_time_s == pytest.approx(0.15 * 1.02, rel=0.02)


def test_world_size_rows_fold_alike_by_rows_and_columns() -> None:
    from tests.test_profiler_summary_columns import feed_both
    n = 200
    world = np.full(n, np.nan)
    world[[0, 60, 120]] = [2.0, 2.0, 4.0]  # set, the same again (no segment), changed
    step = np.where(np.isnan(world), np.arange(n, dtype=float), np.nan)
    times = np.where(np.arange(n) < 120, 0.2, 0.1)
    samples = Samples.build(n, step=step, iter_time_s=np.where(np.isnan(world), times, np.nan),
                            world_size=world)
    _, cols = feed_both([samples])
    assert [r.cause for r in cols.regimes.regimes] == ["start", "world_size"]

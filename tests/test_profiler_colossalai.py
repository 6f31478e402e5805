"""A ColossalAI-launched job's log (hpcaitech/OPT-Benchmark, 8 ranks): what is read from it.

ColossalAI prints no per-step progress line of its own; its example scripts draw a tqdm bar
on rank 0 and log through ColossalAI's rich logger on every rank (wrapped at 80 columns,
interleaved). The bar is what carries the steps; the logger lines around it, glued to the
bar's end, must not disturb it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.profiler import profile_file

LOG = (Path(__file__).parent / "data" / "real_logs" / "colossalai"
       / "opt_benchmark_13b_8gpu_tqdm.log")


def test_the_bar_is_read_and_the_logger_lines_are_not() -> None:
    rep = profile_file(str(LOG))
    assert rep.family == "hf_trainer"  # a plain tqdm bar
    assert (rep.iterations_done, rep.iterations_total) == (20, 30)
    assert rep.lines["parsed"] == 10 and rep.lines["malformed"] == 0
    # the bar's own rates at steps 12..20 (step 11's is warm-up), as the lines show them
    shown = [24.60, 25.42, 25.96, 26.36, 26.44, 26.48, 26.76, 26.67, 21.52]
    assert rep.iter_time_s == pytest.approx(sum(shown) / len(shown), rel=1e-12)
    assert rep.warmup_skipped == 1


def test_within_two_percent_of_the_scripts_own_step_time() -> None:
    """The script measured 25.249 s per step over the same steps (its 'step time =' line)."""
    rep = profile_file(str(LOG))
    assert rep.iter_time_s is not None and abs(rep.iter_time_s / 25.249 - 1) < 0.02

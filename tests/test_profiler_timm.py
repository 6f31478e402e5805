"""The timm family, and throughput-only logs whose speed shifts (Horovod elastic runs), on
small logs whose answer is computed here by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpufair.profiler import extract, profile_file
from gpufair.profiler.events import Samples
from gpufair.profiler.extract import Extractor
from gpufair.profiler.parsers import FAMILIES, detect
from gpufair.profiler.stream import LogStream

TRAIN = ("Train: {e} [{i:4d}/{n} ({p:3.0f}%)]  Loss:  6.9 (6.95)  Time: {t:.3f}s, {r:7.2f}/s  "
         "({a:.3f}s, {ra:7.2f}/s)  LR: 1.000e-03  Data: 0.010 (0.020)")


def train(e: int, i: int, n: int, t: float, a: float, batch: int = 128) -> str:
    return TRAIN.format(e=e, i=i, n=n, p=100 * i / n, t=t, r=batch / t, a=a, ra=batch / a)


def write(tmp_path: Path, lines: list[str]) -> Path:
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_detected() -> None:
    found = detect([train(0, 50, 1000, 0.3, 0.35)])
    assert found is not None and found.family == "timm"


def test_the_epoch_mean_is_differenced_not_the_shown_batch(tmp_path: Path) -> None:
    # every 50th batch, the one shown, is fast (0.2 s); the epoch means say the batches
    # between cost more: (101 x 0.5 - 51 x 0.5) / 50 = 0.5, (151 x 0.6 - 101 x 0.5) / 50
    # = 0.802, (201 x 0.65 - 151 x 0.6) / 50 = 0.801
    lines = [train(0, 0, 1000, 2.0, 2.0), train(0, 50, 1000, 0.2, 0.5),
             train(0, 100, 1000, 0.2, 0.5), train(0, 150, 1000, 0.2, 0.6),
             train(0, 200, 1000, 0.2, 0.65)]
    rep = profile_file(str(write(tmp_path, lines)))
    assert rep.family == "timm" and rep.batch_size == 128
    # iterations 1..200 (the first batch, 2.0 s, is warm-up): (201 x 0.65 - 2.0) / 200
    assert rep.iter_time_s == pytest.approx((201 * 0.65 - 2.0) / 200, rel=1e-9)
    assert rep.samples_per_s == pytest.approx(128 / rep.iter_time_s)
    assert rep.iterations_done == 201 and rep.epoch == pytest.approx(201 / 1000)


def test_test_lines_are_evaluation_and_a_new_epoch_is_no_restart(tmp_path: Path) -> None:
    lines = [train(0, 0, 200, 3.0, 3.0), train(0, 100, 200, 0.4, 0.41),
             train(0, 199, 200, 0.3, 0.4, batch=77),  # the epoch's last, partial batch
             "Test: [   0/50]  Time: 5.000 (5.000)  Loss:  6.0 (6.0)  Acc@1:  0.0 ( 0.0)",
             "Test (EMA): [  49/50]  Time: 0.100 (0.200)  Loss:  6.0 (6.0)  Acc@1:  0.0 (0.0)",
             train(1, 0, 200, 3.0, 3.0), train(1, 100, 200, 0.4, 0.42)]
    rep = profile_file(str(write(tmp_path, lines)))
    assert rep.eval_samples == 2 and rep.restarts == 0
    assert [r["cause"] for r in rep.regimes] == ["start"]   # 77 is not a batch change
    assert rep.batch_size == 128
    # epoch 0: batches 1..100 (101 x 0.41 - 3) / 100 and 101..199 (200 x 0.4 - 101 x 0.41)
    # / 99; epoch 1: its first line is warm-up, then (101 x 0.42 - 3) / 100
    spans = [(101 * 0.41 - 3, 100), (200 * 0.4 - 101 * 0.41, 99), (101 * 0.42 - 3, 100)]
    assert rep.iter_time_s == pytest.approx(sum(s for s, _ in spans) / sum(n for _, n in spans),
                                            rel=1e-9)


def test_a_batch_the_rounding_leaves_open_is_not_guessed(tmp_path: Path) -> None:
    # 0.010 s x 25600.00/s: the time is 0.0095..0.0105, so the batch 243..269: unknown
    line = ("Train: 0 [  50/1000 (  5%)]  Loss:  6.9 (6.95)  Time: 0.010s, 25600.00/s  "
            "(0.010s, 25600.00/s)  LR: 1.000e-03  Data: 0.001 (0.001)")
    rep = profile_file(str(write(tmp_path, [line.replace("  50/", "   0/"), line])))
    assert rep.family == "timm" and rep.batch_size is None


def test_a_throughput_only_log_is_read_at_its_speed_after_a_shift(tmp_path: Path) -> None:
    rates = [100.0] * 12 + [60.0, 61.0, 59.0, 60.0, 62.0, 58.0, 60.0, 60.0]
    lines = [f"Iter #{k}: {r} img/sec per GPU" for k, r in enumerate(rates)]
    rep = profile_file(str(write(tmp_path, lines)))
    assert rep.family == "tensorflow" and rep.iter_time_s is None
    later = rates[12:]
    assert rep.samples_per_s == pytest.approx(len(later) / sum(1 / r for r in later))


def test_scattered_slow_rates_are_no_shift(tmp_path: Path) -> None:
    rates = [100.0, 100.0, 100.0, 100.0, 100.0, 50.0, 100.0, 100.0, 50.0, 100.0, 100.0]
    lines = [f"Iter #{k}: {r} img/sec per GPU" for k, r in enumerate(rates)]
    rep = profile_file(str(write(tmp_path, lines)))
    kept = rates[1:]  # the first is warm-up
    assert rep.samples_per_s == pytest.approx(len(kept) / sum(1 / r for r in kept))


ACC_HEADER = [
    "03/06/2024 17:32:14 - INFO - __main__ - ***** Running training *****",
    "03/06/2024 17:32:14 - INFO - __main__ -   Instantaneous batch size per device = 8",
    "03/06/2024 17:32:14 - INFO - __main__ -   Total train batch size (w. parallel, "
    "distributed & accumulation) = 256",
    "03/06/2024 17:32:14 - INFO - __main__ -   Total optimization steps = 100",
]


def bar(n: int, rate: str, loss: float) -> str:
    return (f"Steps: {n:3d}%|#         | {n}/100 [00:{n:02d}<01:00, {rate}, lr=1e-5, "
            f"step_loss={loss}]")


def test_accelerate_reads_the_header_batch_and_not_the_redraws(tmp_path: Path) -> None:
    lines = [*ACC_HEADER, "Steps:   0%|          | 0/100 [00:00<?, ?it/s]"]
    for n in range(1, 9):
        for micro in range(4):  # diffusers redraws the bar for each accumulated micro-batch
            lines.append(bar(n, "2.00s/it" if n > 1 else "9.00s/it", 0.1 + 0.01 * micro))
    rep = profile_file(str(write(tmp_path, lines)))
    assert rep.family == "accelerate"
    assert (rep.restarts, rep.duplicates) == (0, 0)
    assert rep.iterations_done == 8 and rep.iterations_total == 100
    assert rep.batch_size == 256
    assert rep.iter_time_s == pytest.approx(2.0)
    assert rep.samples_per_s == pytest.approx(128.0)


REAL = Path(__file__).parent / "data" / "real_logs"
NEW_REAL = sorted(p for family in ("timm", "accelerate", "horovod", "nemo", "colossalai")
                  for p in (REAL / family).glob("*.log"))


def _samples(data: bytes, chunks: int) -> Samples:
    """The log's samples fed to one stream in ``chunks`` pieces cut at line ends."""
    lines = data.splitlines(keepends=True)
    cut = max(1, len(lines) // chunks)
    stream = LogStream()
    parts = [stream.feed(b"".join(lines[i:i + cut])) for i in range(0, len(lines), cut)]
    return Samples.concat(parts)


@pytest.mark.parametrize("path", NEW_REAL, ids=lambda p: p.name)
def test_a_log_read_in_pieces_reads_as_a_whole(path: Path) -> None:
    # the context a family carries between chunks (a header's batch size, a bar's last
    # step) must make a tailer's rounds read what one read of the file does
    data = path.read_bytes()
    whole, pieces = _samples(data, 1), _samples(data, 7)
    assert len(whole) == len(pieces) > 0
    for name in ("step", "iter_time_s", "samples_per_s", "batch_size", "eval", "line"):
        assert np.array_equal(getattr(whole, name), getattr(pieces, name), equal_nan=True), name


@pytest.mark.parametrize("path", NEW_REAL, ids=lambda p: p.name)
def test_templates_equal_line_by_line_on_the_new_real_logs(path: Path, monkeypatch) -> None:
    data = path.read_bytes()
    fast = _samples(data, 1)
    monkeypatch.setattr(Extractor, "_template", lambda self, line, tokens: (
        None if self._captures(line) is None else extract._PER_LINE))
    for family in FAMILIES:
        family.extractor._cache.clear()
    slow = _samples(data, 1)
    for family in FAMILIES:
        family.extractor._cache.clear()
    for name in ("step", "iter_time_s", "samples_per_s", "batch_size", "loss", "eval"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name), equal_nan=True), name


def test_accelerate_redraws_across_chunk_ends() -> None:
    lines = [*ACC_HEADER] + [bar(n, "2.00s/it", 0.1 + 0.01 * m) for n in range(1, 7)
                             for m in range(4)]
    data = ("\n".join(lines) + "\n").encode()
    whole = _samples(data, 1)
    assert whole.step.tolist() == [2, 3, 4, 5, 6]  # the first bar of a log counts as a redraw
    for chunks in (3, 5, 9):
        pieces = _samples(data, chunks)
        assert pieces.step.tolist() == whole.step.tolist(), chunks
        assert np.array_equal(pieces.batch_size, whole.batch_size), chunks

"""The MXNet, JAX (clu / MaxText) and NeMo 2 families on small logs whose answer is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.profiler import profile_file
from gpufair.profiler.parsers import detect


@pytest.mark.parametrize(("line", "family"), [
    ("INFO:root:Epoch[0] Batch [100]\tSpeed: 412.34 samples/sec\taccuracy=0.5", "mxnet"),
    ("I1002 21:38:13.425730 1399 logging_writer.py:35] [400] steps_per_second=1.58, "
     "train_loss=3.2", "jax"),
    ("completed step: 9, seconds: 5.667, TFLOP/s/device: 134.924, loss: 10.374", "jax"),
    ("Training epoch 0, iteration 3/9 | lr: 0.0006 | global_step: 3 | "
     "reduced_train_loss: 8.5 | train_step_timing in s: 0.25", "nemo"),
])
def test_detected(line: str, family: str) -> None:
    found = detect([line])
    assert found is not None and found.family == family


def test_mxnet_epochs_are_not_restarts(tmp_path: Path) -> None:
    log = tmp_path / "mx.log"
    lines = [f"INFO:root:Epoch[{e}] Batch [{b}]\tSpeed: {rate} samples/sec\taccuracy=0.9"
             for e in range(3) for b, rate in ((50, 100.0), (100, 200.0))]
    log.write_text("\n".join(lines) + "\n")
    rep = profile_file(str(log))
    assert rep.family == "mxnet" and rep.restarts == 0
    # harmonic mean of 200,100,200,100,200 (the first left out): 5 / (3/200 + 2/100)
    assert rep.samples_per_s == pytest.approx(5 / (3 / 200 + 2 / 100))


def test_clu_host_copies_are_duplicates(tmp_path: Path) -> None:
    log = tmp_path / "flax.log"
    lines = []
    for step, rate in ((100, 1.0), (200, 2.0), (300, 4.0)):
        for host in (11, 22):
            lines.append(f"I1002 21:38:13.4 {host} logging_writer.py:35] [{step}] "
                         f"steps_per_second={rate}, train_loss=3.{step}")
    log.write_text("\n".join(lines) + "\n")
    rep = profile_file(str(log))
    assert rep.duplicates == 3
    assert rep.iter_time_s == pytest.approx((0.5 + 0.25) / 2)


def test_nemo_reads_step_timing_and_batch(tmp_path: Path) -> None:
    log = tmp_path / "nemo.log"
    lines = [f"Training epoch 0, iteration {i}/9 | lr: 0.0006 | consumed_samples: {32 * i} | "
             f"global_batch_size: 32 | global_step: {i} | reduced_train_loss: 8.{i} | "
             f"train_step_timing in s: {t}" for i, t in enumerate((9.0, 0.5, 0.5, 0.5))]
    log.write_text("\n".join(lines) + "\n")
    rep = profile_file(str(log))
    assert rep.iter_time_s == pytest.approx(0.5)
    assert rep.samples_per_s == pytest.approx(64.0)

"""Each parser family on real fixture logs (and marked hand-written ones where none can run)."""

from __future__ import annotations

import pytest

from gpufair.profiler import profile_file
from gpufair.profiler.events import LineStats
from gpufair.profiler.parsers import FAMILIES, detect
from gpufair.profiler.stream import LogStream
from gpufair.profiler.tensorboard_events import available as tensorboard_available
from tests.profiler_helpers import LOGS, REAL, measured_iter_time

TIMED = [name for name in REAL if name != "lightning_rich.log"]


def _profile(name: str):
    if name.endswith(".tfevents") and not tensorboard_available():
        pytest.skip("tensorboard (the profiler-tensorboard extra) is not installed")
    return profile_file(str(LOGS / name))


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_fixture_detected_with_progress(name: str) -> None:
    family, iterations = REAL[name]
    report = _profile(name)
    assert report.family == family
    assert report.iterations_done == iterations
    assert report.lines.get("malformed", 0) == 0


@pytest.mark.parametrize("name", TIMED)
def test_iteration_time_matches_script_measurement_within_5_percent(name: str) -> None:
    report = _profile(name)
    assert report.iter_time_s is not None and report.iter_time_basis is not None
    truth = measured_iter_time(name, report.iter_time_basis)
    assert abs(report.iter_time_s - truth) / truth < 0.05, (report.iter_time_s, truth)


def test_rich_bar_single_line_is_marked_as_warmup_only() -> None:
    report = _profile("lightning_rich.log")
    assert report.iter_time_basis == "warmup"
    assert report.confidence < 0.5


@pytest.mark.parametrize("name", ["pytorch_plain_batch_switch.log", "tensorboard.tfevents"])
def test_batch_size_switch_gives_two_regimes(name: str) -> None:
    report = _profile(name)
    assert [r["batch_size"] for r in report.regimes] == [r for r in (
        (16, 64) if name.startswith("pytorch") else (32, 64))]
    small, large = (r["iter_time_s"] for r in report.regimes)
    assert large > 1.5 * small  # 4x (2x) the samples per iteration costs visibly more


def test_evaluation_lines_are_not_training() -> None:
    report = _profile("pytorch_imagenet.log")
    assert report.eval_samples == 6  # two "Test: [i/3]" passes
    report = _profile("lightning_tqdm.log")
    assert report.eval_samples > 0 and report.restarts == 0


def test_lightning_csv_logger_progress() -> None:
    report = profile_file(str(LOGS / "lightning_csv_metrics.csv"))
    assert report.family == "lightning"
    assert report.iterations_done == 40
    assert report.epoch == 1


def test_megatron_ramp_eval_and_requeue() -> None:
    report = profile_file(str(LOGS / "megatron.handwritten.log"))
    assert report.family == "megatron"
    assert (report.iterations_done, report.iterations_total) == (90, 200)
    assert report.restarts == 1 and report.eval_samples == 1
    # the requeue starts a segment of its own (issue 14): the reading is the last one's
    assert [(r["batch_size"], r["cause"]) for r in report.regimes] == [
        (32, "start"), (64, "batch_size"), (64, "restart")]
    assert report.regimes[0]["iter_time_s"] == pytest.approx(1.0, rel=0.01)
    assert report.iter_time_s == pytest.approx(2.0, rel=0.01)
    assert report.lines["ignored"] >= 2  # srun's stderr lines


def test_deepspeed_rates_and_config_batch() -> None:
    report = profile_file(str(LOGS / "deepspeed.handwritten.log"))
    assert report.family == "deepspeed" and report.batch_size == 64
    assert report.iterations_done == 40
    assert report.iter_time_s == pytest.approx(64 / 128.0, rel=0.01)


def test_tensorflow_family() -> None:
    est = profile_file(str(LOGS / "tf_estimator.handwritten.log"))
    assert (est.family, est.iterations_done) == ("tensorflow", 300)
    assert est.iter_time_s == pytest.approx(0.02, rel=0.02)
    cnn = profile_file(str(LOGS / "tf_cnn_benchmarks.handwritten.log"))
    assert cnn.batch_size == 64 and cnn.iter_time_s == pytest.approx(64 / 255.72, rel=1e-3)
    hvd = profile_file(str(LOGS / "horovod_synthetic.handwritten.log"))
    assert hvd.batch_size == 32 and hvd.iter_time_s == pytest.approx(32 / 183.9, rel=1e-3)


@pytest.mark.parametrize("line,family", [
    ("Epoch: [3][ 10/500]\tTime  0.123 ( 0.150)\tData  0.001 ( 0.002)", "pytorch"),
    ("| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.10 | loss  5.1", "pytorch"),
    ("iter 10: loss=2.3, 0.05 s/it", "pytorch"),
    ("Epoch 3:  45%|####5     | 45/100 [00:01<00:01, 30.12it/s, v_num=0]", "lightning"),
    ("{'loss': 0.69, 'grad_norm': 0.6, 'learning_rate': 4e-05, 'epoch': 0.33}", "hf_trainer"),
    ("123/500 [=====>........................] - ETA: 1s - loss: 0.3", "keras"),
    ("INFO:tensorflow:global_step/sec: 12.3", "tensorflow"),
    ('{"gpufair": 1, "iteration": 3}', "reporter"),
])
def test_detection_of_single_lines(line: str, family: str) -> None:
    found = detect([line])
    assert found is not None and found.family == family


def test_keras2_epoch_summary_and_eta_lines() -> None:
    text = ("Epoch 1/2\n 10/100 [==>...........................] - ETA: 9s - loss: 2.1\n"
            "100/100 [==============================] - 5s 50ms/step - loss: 1.9\n"
            "Epoch 2/2\n 50/100 [==============>...............] - ETA: 2s - loss: 1.5\n"
            "100/100 [==============================] - 4s 40ms/step - loss: 1.2\n")
    stream = LogStream()
    samples = stream.feed(text.encode())
    assert stream.family == "keras"
    assert samples.step.tolist() == [10, 100, 150, 200]
    assert samples.iter_time_s[-1] == pytest.approx(0.04)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f.keywords])
def test_keyword_lines_that_do_not_parse_are_counted_malformed(family) -> None:
    stats = LineStats()
    junk = "".join(f"{k} ][ ||| garbage\n" for k in family.keywords)
    assert len(family().parse(junk.encode(), stats)) == 0
    assert stats.malformed == len(family.keywords)

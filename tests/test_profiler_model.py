"""Throughput model, robust estimates, regimes and the job-side reporter."""

from __future__ import annotations

import io
import json
import random

import pytest

from gpufair.model import Job, Progress
from gpufair.profiler import JobLog, Profiler
from gpufair.profiler.events import Sample
from gpufair.profiler.regimes import RegimeTracker
from gpufair.profiler.reporter import Reporter
from gpufair.profiler.robust import robust_mean
from gpufair.profiler.summary import Accumulator
from gpufair.profiler.throughput import SPREAD, SPREAD_PRIOR, ThroughputModel


def test_robust_mean_rejects_stalls() -> None:
    values = [0.10, 0.11, 0.09, 0.10, 0.10, 2.5, 0.105, 0.095]  # one checkpoint stall
    est = robust_mean(values)
    assert est is not None and est.value == pytest.approx(0.1, rel=0.02)
    assert est.rejected == 1 and 0 < est.confidence <= 1


def test_amdahl_fit_recovers_serial_fraction_and_extrapolates() -> None:
    model = ThroughputModel()
    t1, s = 1.0, 0.2
    for n in (1, 2, 4):
        for _ in range(5):
            model.observe("j", "v100", n, t1 * (s + (1 - s) / n))
    answer = model.iter_time("j", "v100", 8)
    assert answer is not None and answer.source == "scaled"
    assert answer.iter_time_s == pytest.approx(t1 * (s + (1 - s) / 8), rel=1e-6)
    assert model.iter_time("j", "v100", 4).source == "measured"


def test_single_count_uses_the_model_family_prior() -> None:
    model = ThroughputModel()
    model.observe("j", "v100", 1, 1.0, model="ResNet-50")
    two = model.iter_time("j", "v100", 2)
    assert two is not None and two.iter_time_s == pytest.approx(0.05 + 0.95 / 2)
    assert two.confidence < 0.5


def test_gpu_type_speedup_own_then_population() -> None:
    model = ThroughputModel()
    for job, (fast, slow) in {"a": (0.1, 0.3), "b": (0.2, 0.6)}.items():
        model.observe(job, "v100", 1, fast)
        model.observe(job, "k80", 1, slow)
    model.observe("c", "k80", 1, 0.9)  # c never ran on a V100
    assert model.speedup("a", "v100", "k80") == pytest.approx(3.0)
    assert model.speedup("c", "v100", "k80") == pytest.approx(3.0)
    guess = model.iter_time("c", "v100", 1)
    assert guess is not None and guess.source == "type_ratio"
    assert guess.iter_time_s == pytest.approx(0.3)
    assert model.remaining_time("a", 100, "v100", 1) == pytest.approx(10.0)


def test_spread_placement_costs_prior_then_measured() -> None:
    model = ThroughputModel()
    model.observe("j", "v100", 4, 1.0)
    assert model.iter_time("j", "v100", 4, SPREAD).iter_time_s == pytest.approx(SPREAD_PRIOR)
    model.observe("j", "v100", 4, 1.3, placement=SPREAD)
    model.observe("j", "v100", 2, 1.8)
    assert model.iter_time("j", "v100", 4, SPREAD).iter_time_s == pytest.approx(1.3)


def test_model_round_trips_through_json() -> None:
    model = ThroughputModel()
    model.observe("j", "v100", 2, 0.5, model="bert")
    again = ThroughputModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again.iter_time("j", "v100", 2) == model.iter_time("j", "v100", 2)


def test_throughput_shift_opens_a_regime_without_batch_sizes() -> None:
    tracker = RegimeTracker()
    rng = random.Random(0)
    for step in range(1, 41):
        base = 0.1 if step <= 20 else 0.2  # GNS doubled the batch, the log never said so
        tracker.observe_time(step, base * (1 + rng.uniform(-0.05, 0.05)))
    assert len(tracker.regimes) == 2
    assert tracker.regimes[1].cause == "throughput"
    assert tracker.regimes[1].start_step == 21
    assert tracker.regimes[1].estimate().value == pytest.approx(0.2, rel=0.05)


def test_noise_alone_opens_no_regime() -> None:
    tracker = RegimeTracker()
    rng = random.Random(1)
    for step in range(1, 200):
        tracker.observe_time(step, 0.1 * (1 + rng.uniform(-0.15, 0.15)))
    assert len(tracker.regimes) == 1


def test_duplicates_and_restart() -> None:
    acc = Accumulator()
    seq = [(1, 1.0), (1, 1.0), (2, 0.9), (2, 0.9), (3, 0.8), (4, 0.7), (2, 0.95), (3, 0.85)]
    acc.add(Sample(step=s, loss=loss, iter_time_s=0.1) for s, loss in seq)
    report = acc.report("pytorch")
    assert (report.duplicates, report.restarts, report.iterations_done) == (2, 1, 3)


def test_reporter_lines_are_parsed_exactly(tmp_path) -> None:
    out = io.StringIO()
    rep = Reporter(out, every=5)
    for it in range(1, 21):
        rep.step(it, epoch=it / 20, batch_size=64, total_iterations=100)
    rep.step(20, phase="eval", loss=0.5)
    log = tmp_path / "job.out"
    log.write_text("some stderr line\n" + out.getvalue())
    report = Profiler().round([JobLog("j", str(log))])["j"]
    assert report.family == "reporter"
    assert (report.iterations_done, report.iterations_total, report.batch_size) == (20, 100, 64)
    assert report.eval_samples == 1
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["iteration"] for r in records if "phase" not in r] == [5, 10, 15, 20]
    assert all("iter_time_s" in r for r in records[1:4])


def test_apply_fills_the_job_record(tmp_path) -> None:
    log = tmp_path / "job.out"
    log.write_text("".join(f"step {i}/50 loss 1.0 batch_size 32 time 200ms\n"
                           for i in range(1, 11)))
    prof = Profiler()
    prof.round([JobLog("j", str(log), gpu_type="v100", gpus=2, model="resnet50")])
    job = prof.apply(Job("j", gpus=2, progress=Progress(0, 50)), ["v100"], [1, 2, 4])
    assert job.progress.iterations_done == 10 and job.batch_size == 32
    assert job.throughput.rate("v100", 2) == pytest.approx(5.0)
    assert job.throughput.rate("v100", 4) > job.throughput.rate("v100", 2)

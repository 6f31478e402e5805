"""Shockwave's ``plan_throughput``: the market credits planned rounds at the predicted regimes'
speeds (paper eq. 7) or at τ̄, the mean exclusive epoch time of the epochs run so far and the
current one (the artifact's planned progress, spec §2.8). Oracles are hand-computed."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpufair.errors import InputError
from gpufair.model import Adaptation, ClusterState, Job, JobState, Node, Progress, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.shockwave.policy import Market, ShockwavePolicy, ShockwaveSettings

ROUND = 60.0
SAMPLES = 10_000  # per epoch: at 1 iteration/s, batch 100 → 100 s an epoch, batch 200 → 50 s


def make_job(batch: int, done: int, total: int = 10, adaptation=Adaptation.STATIC,
             rates=((100, 1.0), (200, 1.0)), maximum: int | None = None) -> Job:
    per_epoch = math.ceil(SAMPLES / batch)
    return Job(id="a", gpus=1, arrival_s=0.0, state=JobState.PENDING,
               progress=Progress(done * per_epoch, total * per_epoch, done, total),
               throughput=ThroughputProfile({("v100", 1): 1.0}), batch_size=batch,
               initial_batch_size=100, max_batch_size=maximum, adaptation=adaptation,
               samples_per_epoch=SAMPLES, batch_rates=rates)


def market_for(job: Job, history, mode: str, horizon: int = 8) -> Market:
    policy = ShockwavePolicy(PolicyConfig(round_s=ROUND, options={"plan_throughput": mode}))
    policy.state.regimes[job.id] = list(history)
    view = policy._view(job, 0.0, 1)
    return Market([view], 1, horizon, ROUND, policy.settings)


def expected_log_util(done: float, total: float, left: float, per_epoch: float,
                      rounds: int) -> list[float]:
    """log((F + min(left, s·D/τ)) / E) for s = 0..rounds."""
    return [math.log((done + min(left, s * ROUND / per_epoch)) / total)
            for s in range(rounds + 1)]


def test_past_epoch_plans_at_the_mean_of_the_epochs_run_and_the_current_one():
    # 4 epochs at batch 100 (100 s), 2 at batch 200 (50 s), the current epoch at 200 (50 s):
    # τ̄ = (400 + 100 + 50) / 7 = 550/7 s; 4 epochs left, 240 s of them at 50 s → S = 4 rounds
    job = make_job(200, done=6)
    market = market_for(job, [(100, 0.0), (200, 4.0)], "past_epoch")
    assert list(market.log_util[0]) == pytest.approx(
        expected_log_util(6, 10, 4, 550 / 7, 4))
    regimes = market_for(job, [(100, 0.0), (200, 4.0)], "regimes")
    assert list(regimes.log_util[0]) == pytest.approx(expected_log_util(6, 10, 4, 50.0, 4))
    # the remaining-time estimate is the regimes' in both readings: 4 × 50 s
    assert list(market.remaining[0]) == pytest.approx([200, 140, 80, 20, 0])
    assert list(regimes.remaining[0]) == pytest.approx(list(market.remaining[0]))


def test_a_half_done_epoch_counts_in_progress_and_caps_the_planned_epochs():
    # back at batch 100 (100 s) after 4 epochs at 200 (50 s), 6 epochs and 50 of the current
    # epoch's 100 iterations done: F = 6.5, 3.5 epochs left (350 s: S = 6 rounds);
    # τ̄ = (200 + 200 + 100) / 7 = 500/7 s plans 0.84 epochs a round, capped at 3.5
    job = dataclasses.replace(make_job(100, done=6),
                              progress=Progress(6 * 100 + 50, 10 * 100, 6, 10))
    market = market_for(job, [(200, 0.0), (100, 4.0)], "past_epoch")
    assert list(market.log_util[0]) == pytest.approx(
        expected_log_util(6.5, 10, 3.5, 500 / 7, 6))
    assert market.log_util[0][-1] == pytest.approx(0.0)  # done by the end of its rounds


def test_epochs_at_a_batch_size_of_unknown_rate_are_left_out_of_the_mean():
    # batch 50 was never measured: only the 2 + 1 epochs at batch 200 count, τ̄ = 50 s
    job = make_job(200, done=6, rates=((200, 1.0),))
    market = market_for(job, [(50, 0.0), (200, 4.0)], "past_epoch")
    assert list(market.log_util[0]) == pytest.approx(expected_log_util(6, 10, 4, 50.0, 4))


def test_a_fresh_gns_job_is_planned_at_its_current_speed_not_its_future_ones():
    # GNS 100 → 200, nothing run: regimes predict 5 epochs at 100 s then 5 at 50 s;
    # past_epoch plans all 10 at the current 100 s an epoch
    job = make_job(100, done=0, adaptation=Adaptation.GNS, maximum=200)
    past = market_for(job, [(100, 0.0)], "past_epoch", horizon=12)
    regimes = market_for(job, [(100, 0.0)], "regimes", horizon=12)
    eps = 1e-6
    assert list(past.log_util[0]) == pytest.approx(
        [math.log(max(eps, min(10, s * 0.6) / 10)) for s in range(13)])
    by_regimes = [min(5, s * 0.6) + max(0.0, min(5, (s * ROUND - 500) / 50)) for s in range(13)]
    assert list(regimes.log_util[0]) == pytest.approx(
        [math.log(max(eps, e / 10)) for e in by_regimes])
    assert list(past.remaining[0]) == pytest.approx(list(regimes.remaining[0]))


def best_split(per_round_a: float, rounds: int) -> int:
    """Brute force over job a's round count s_a (b gets the rest, one GPU): equal budgets,
    no makespan term. a: 6 of 10 epochs done, 4 left; b: 2 of 10 done, 0.6 epochs a round."""
    def welfare(s: int) -> float:
        return (math.log((6 + min(4, per_round_a * s)) / 10)
                + math.log((2 + 0.6 * (rounds - s)) / 10))
    return max(range(rounds + 1), key=welfare)


@pytest.mark.parametrize("mode, per_round_a", [("regimes", ROUND / 50), ("past_epoch",
                                                                          ROUND * 7 / 550)])
def test_the_reading_decides_the_split_of_the_window(mode, per_round_a):
    """One GPU, 4 rounds: at 1.2 epochs a round (regimes) job a is worth one round, at
    0.76 (past_epoch: τ̄ = 550/7 s) none — the plan's counts are the brute force's."""
    a = make_job(200, done=6)
    b = Job(id="b", gpus=1, arrival_s=0.0, state=JobState.PENDING,
            progress=Progress(200, 1000, 2, 10), throughput=ThroughputProfile({("v100", 1): 1.0}),
            batch_size=100, initial_batch_size=100, samples_per_epoch=SAMPLES,
            batch_rates=((100, 1.0),))
    state = ClusterState(time_s=0.0, nodes=(Node("n0", "v100", 1),), jobs=(a, b))
    policy = ShockwavePolicy(PolicyConfig(round_s=ROUND, options={
        "plan_throughput": mode, "window_rounds": 4, "makespan_weight": 0.0}))
    policy.state.regimes["a"] = [(100, 0.0), (200, 4.0)]
    policy.schedule(state, 0.0)
    counts = {job: sum(row) for job, row in policy.state.plan.items()}
    expected = best_split(per_round_a, 4)
    assert counts == {"a": expected, "b": 4 - expected}
    assert expected == (1 if mode == "regimes" else 0)


def test_bad_plan_throughput_is_an_input_error():
    assert ShockwaveSettings.from_options({}).plan_throughput == "regimes"
    with pytest.raises(InputError, match="plan_throughput"):
        ShockwaveSettings.from_options({"plan_throughput": "future"})
    with pytest.raises(InputError, match="plan_throughput"):
        ShockwaveSettings.from_options({"plan_throughput": 1})

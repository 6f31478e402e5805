"""Shockwave's core decisions pinned by hand-computed values (issue 21's surviving mutants).

ρ̂ (paper eq. 9 with the artifact's average contention), the market's utility (progress as a
share of all epochs, the epochs already done included) and the work-conserving fill (idle GPUs
go to the longest remaining jobs, spec §8.3). Every expected value is worked out in the
comments from the job's numbers, never taken from the policy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpufair.model import ClusterState, Job, JobState, Node, Progress, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.shockwave.policy import JobView, Market, ShockwavePolicy, ShockwaveSettings
from gpufair.policy.shockwave.regimes import Trajectory


def job(jid: str, epochs: int = 10, done: int = 0, attained: float = 0.0,
        arrival: float = 0.0) -> Job:
    # 10,000 samples per epoch at batch 100 = 100 iterations; 1 iteration/s: 100 s per epoch
    return Job(id=jid, gpus=1, arrival_s=arrival, attained_s=attained, state=JobState.PENDING,
               progress=Progress(done * 100.0, epochs * 100.0, done, epochs),
               throughput=ThroughputProfile({("v100", 1): 1.0}), batch_size=100,
               initial_batch_size=100, samples_per_epoch=10_000, batch_rates=((100, 1.0),))


def cluster(jobs: list[Job], gpus: int, now: float = 0.0) -> ClusterState:
    return ClusterState(time_s=now, nodes=tuple(Node(f"n{i}", "v100", 1) for i in range(gpus)),
                        jobs=tuple(jobs))


def test_rho_hat_scales_the_remaining_time_by_the_average_contention():
    """Arrived at 0, ran 100 s, now 400 (waited 300), 5 epochs left (500 s), contention 3:
    ρ̂ = (100 + 300 + 500·3) / ((100 + 500)·3) = 1900/1800 (without the factor: 900/600)."""
    policy = ShockwavePolicy(PolicyConfig(round_s=60.0))
    a = job("a", done=5, attained=100.0)
    policy.state.contention["a"] = (600.0, 200.0)   # 600 job-seconds of contention over 200 s
    view = policy._view(a, 400.0, 2)
    assert view.remaining_s == pytest.approx(500.0)
    assert view.rho_hat == pytest.approx(1900 / 1800)
    assert view.weight == pytest.approx((1900 / 1800) ** policy.settings.ftf_exponent)


def test_rho_hat_without_a_contention_record_uses_the_current_jobs_per_gpu():
    """No contention observed yet: 6 active jobs on 2 GPUs stand for it (3); the same ρ̂."""
    policy = ShockwavePolicy(PolicyConfig(round_s=60.0))
    policy.state.last_active = 6
    view = policy._view(job("a", done=5, attained=100.0), 400.0, 2)
    assert view.rho_hat == pytest.approx(1900 / 1800)
    policy.state.last_active = 1   # fewer jobs than GPUs: the factor is 1, not 1/2
    assert policy._view(job("a", done=5, attained=100.0), 400.0, 2).rho_hat == \
        pytest.approx(900 / 600)


def test_contention_is_accumulated_per_second_between_rounds():
    """4 jobs on 2 GPUs from t=0 to t=100: factor 2 over 100 s for each job."""
    policy = ShockwavePolicy(PolicyConfig(round_s=60.0))
    jobs = [job(f"j{i}") for i in range(4)]
    policy._observe(cluster(jobs, 2), jobs, 0.0, 2)
    policy._observe(cluster(jobs, 2, 100.0), jobs, 100.0, 2)
    assert policy.state.contention["j0"] == pytest.approx((200.0, 100.0))


def test_idle_gpus_go_to_the_longest_remaining_jobs():
    """The window's plan runs nobody this round: the one GPU goes to the job with the most
    time left (b: 9 epochs = 900 s), not to c (200 s) nor a (500 s)."""
    policy = ShockwavePolicy(PolicyConfig(round_s=60.0))
    jobs = [job("a", done=5), job("b", done=1), job("c", done=8)]
    state = cluster(jobs, 1)
    policy.schedule(state, 0.0)
    policy.state.plan = {j.id: [False] * 8 for j in jobs}   # planned for later rounds only
    plan = policy.schedule(state, 0.0)
    assert [a.job_id for a in plan.assignments] == ["b"]
    # two idle GPUs: b then a, the shortest waits
    policy = ShockwavePolicy(PolicyConfig(round_s=60.0))
    state = cluster(jobs, 2)
    policy.schedule(state, 0.0)
    policy.state.plan = {j.id: [False] * 8 for j in jobs}
    assert sorted(a.job_id for a in policy.schedule(state, 0.0).assignments) == ["a", "b"]


def test_market_utility_counts_the_epochs_already_done():
    """4 of 10 epochs done, one epoch per 60-s round: after s rounds the utility is
    log((4 + s)/10), s = 0..4; remaining time 360 - 60·s."""
    a = job("a", done=4)
    view = JobView(a, Trajectory((6.0,), (60.0,)), 360.0, 1.0, 1.0)
    market = Market([view], 1, 4, 60.0, ShockwaveSettings(window_rounds=4))
    expected = [math.log((4 + s) / 10) for s in range(5)]
    assert np.allclose(market.log_util[0], expected)
    assert np.allclose(market.remaining[0], [360.0, 300.0, 240.0, 180.0, 120.0])


def test_market_utility_of_a_job_without_epochs_is_its_share_of_the_time_left():
    """No epoch count: utility min(1, s·60/300) over a 300-s remainder (5 rounds)."""
    static = Job(id="s", gpus=1, state=JobState.PENDING, progress=Progress(0.0, 300.0),
                 throughput=ThroughputProfile({("v100", 1): 1.0}))
    view = JobView(static, Trajectory((1.0,), (300.0,)), 300.0, 1.0, 1.0)
    market = Market([view], 1, 6, 60.0, ShockwaveSettings(window_rounds=6))
    expected = [math.log(max(1e-300, min(1.0, s * 60 / 300))) for s in range(6)]
    assert np.allclose(market.log_util[0][1:], expected[1:])
    assert market.log_util[0][0] < -10   # the log of (almost) no progress

"""The canonical trace under artifact semantics against the artifact's recorded results.

Targets: SIMULATION.md §7 (32 V100, R = 120 s, seed 0). Issue acceptance: makespan and average
JCT within 3 %, worst ρ and unfair fraction at 1.1 within 10 % relative; the invariants of §7.
"""

from __future__ import annotations

import pytest

from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import ARTIFACT
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

# policy: makespan, avg JCT, worst rho, unfair >1.1 (%), utilization, rounds
RECORDED = {
    "max_min": (33208, 11274, 2.947, 21.7, 0.595, 277),
    "max_sum_throughput": (31909, 9655, 4.976, 22.5, 0.619, 266),
    "min_total_duration": (24205, 19807, 7.741, 71.7, 0.816, 204),
}


def run_canonical(trace, throughputs, policy_name):
    sim = TraceSimulator(trace, throughputs, parse_cluster_spec("v100:32"), ARTIFACT, 120.0)
    config = PolicyConfig(round_s=120.0, recompute_interval_s=1000.0, solver_backend="ecos")
    policy = create_policy(policy_name, config)
    rounds = Round(policy)
    gpus_per_round: list[int] = []
    run_to_end(sim, rounds, lambda: gpus_per_round.append(sim.gpus_in_use()))
    metrics = sim.metrics()
    return sim, policy, metrics, gpus_per_round


@pytest.fixture(scope="module", params=sorted(RECORDED))
def canonical_run(request, canonical_trace, tacc):
    return request.param, run_canonical(canonical_trace, tacc, request.param)


def test_matches_recorded_results(canonical_run):
    name, (sim, _, m, _) = canonical_run
    makespan, jct, worst, unfair, util, rounds = RECORDED[name]
    assert m.makespan_s == pytest.approx(makespan, rel=0.03)
    assert m.avg_jct_s == pytest.approx(jct, rel=0.03)
    assert m.worst_rho == pytest.approx(worst, rel=0.10)
    assert 100 * m.unfair_fraction["1.1"] == pytest.approx(unfair, rel=0.10)
    assert m.utilization == pytest.approx(util, abs=0.01)
    assert sim.rounds == pytest.approx(rounds, abs=3)


def test_invariants(canonical_run):
    _name, (sim, policy, m, gpus) = canonical_run
    # busy GPU time ≈ 175.6 GPU-h for every policy (175.59-175.75)
    assert sim.busy_gpu_s / 3600 == pytest.approx(175.67, abs=0.2)
    # the allocation throttle: 1 GPU in round 0, 6 in rounds 1-9, 27 in 10-18, 32 in 19
    assert gpus[:20] == [1] + [6] * 9 + [27] * 9 + [32]
    assert 14 <= policy.stats.recomputes <= 28
    # job 35 leaves after 5 zero-progress rounds; nobody else fails
    assert [j.id for j in sim.jobs if j.failed_out] == ["35"]
    assert m.num_jobs == 120

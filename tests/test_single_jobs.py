"""One job alone on 32 V100: completion times recorded from the unmodified artifact (§1.4),
as shipped in gpufair/data/artifact_results.json."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import ARTIFACT, CLEAN
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.data import artifact_results
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

RECORDED = artifact_results()["single_jobs"]["jobs"]
LINES = sorted(int(line) for line in RECORDED)
# trace line -> the batch size the job holds when it leaves
FINAL_BATCH = {0: 20, 1: 256, 2: 64, 22: 80, 25: 512, 35: 128, 113: 256}


def run_alone(trace_job, throughputs, semantics, policy="max_min"):
    job = replace(trace_job, index=0, arrival_s=0.0)
    sim = TraceSimulator([job], throughputs, parse_cluster_spec("v100:32"), semantics, 120.0)
    config = PolicyConfig(round_s=120.0,
                          recompute_interval_s=semantics.allocation_recompute_interval_s)
    run_to_end(sim, Round(create_policy(policy, config)))
    return sim


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize("policy", ["max_min", "fifo"])
def test_artifact_single_job_completion(canonical_trace, tacc, line, policy):
    recorded = RECORDED[str(line)]
    sim = run_alone(canonical_trace[line], tacc, ARTIFACT, policy)
    (outcome,) = sim.outcomes()
    assert outcome.finish_s == pytest.approx(recorded["completion_s"], abs=5e-4)
    assert sim.jobs[0].batch == FINAL_BATCH[line]
    assert outcome.failed is recorded["failed"]


def test_job35_fails_five_rounds_then_leaves(canonical_trace, tacc):
    sim = run_alone(canonical_trace[35], tacc, ARTIFACT)
    job = sim.jobs[0]
    assert job.failed_out and job.failures == 5


@pytest.mark.parametrize("line", LINES)
def test_clean_single_job_finishes_near_isolated_time(canonical_trace, tacc, line):
    """Clean semantics: no failure path, exact sample conversion, one 20 s start cost."""
    sim = run_alone(canonical_trace[line], tacc, CLEAN)
    (outcome,) = sim.outcomes()
    assert not outcome.failed
    job = sim.jobs[0]
    assert job.run == pytest.approx(job.total)
    # alone, the job runs every second after its 20 s start: JCT is its isolated run time
    assert outcome.finish_s < 1.01 * outcome.isolated_s + 20

"""The canonical avg-JCT gap to the Shockwave artifact, traced to the budget form
(docs/policies/shockwave.md): with the artifact's budget and makespan weight 1, gpufair's
Shockwave lands within 2 % of the artifact's recorded makespan and avg JCT (the oracle is
the artifact's own pickle, gpufair/data/artifact_results.json), and stays fairer than it.
Planning at past epoch times alone does not close the gap. Figures pinned both ways, so a
change that moves them is seen (artifact semantics, v100:32, R = 120 s, seed 0)."""

from __future__ import annotations

import pytest

from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import ARTIFACT
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.data import artifact_results
from gpufair.policy.base import PolicyConfig
from gpufair.policy.shockwave.policy import ShockwavePolicy


def run(canonical_trace, tacc, options):
    sim = TraceSimulator(canonical_trace, tacc, parse_cluster_spec("v100:32"), ARTIFACT, 120.0)
    run_to_end(sim, Round(ShockwavePolicy(PolicyConfig(round_s=120.0, seed=0,
                                                       options=options))))
    return sim.metrics()


def test_the_artifact_budget_at_weight_1_reaches_the_artifacts_point(canonical_trace, tacc):
    m = run(canonical_trace, tacc, {"budget": "artifact", "makespan_weight": 1.0})
    row = artifact_results()["canonical"]["rows"]["shockwave"]
    assert m.num_jobs == 120
    assert m.makespan_s == pytest.approx(row["makespan_s"], rel=0.02)
    assert m.avg_jct_s == pytest.approx(row["avg_jct_s"], rel=0.02)
    assert m.worst_rho < row["worst_rho"]
    assert 100 * m.unfair_fraction["1.1"] < row["unfair_1.1_pct"]
    assert (m.makespan_s, m.avg_jct_s) == pytest.approx((23814, 10129), rel=0.01)


def test_past_epoch_planning_alone_leaves_the_gap(canonical_trace, tacc):
    m = run(canonical_trace, tacc, {"plan_throughput": "past_epoch"})
    row = artifact_results()["canonical"]["rows"]["shockwave"]
    assert m.avg_jct_s > 1.05 * row["avg_jct_s"]
    # 23977 s / 10931 s before the certified market's dual bound replaced MILP fallbacks
    assert (m.makespan_s, m.avg_jct_s) == pytest.approx((23684, 10983), rel=0.01)

"""Finish-time fairness (THEMIS Eq. 1, Eq. 2) against the paper's worked examples."""

from __future__ import annotations

import math

import pytest

from gpufair.model import ClusterState, Node
from gpufair.policy.themis.ftf import (
    NAvgTracker,
    Phase,
    gang_makespan,
    lpt_makespan,
    rho,
    sh_t_shared,
    t_independent,
    t_shared,
)
from gpufair.policy.themis.topology import (
    SlowdownModel,
    Topology,
    slowdowns_from_unconsolidated,
)

# §4.3.3: 4 SH jobs (80, 100, 100, 120 s/iter), 3 phases of ~8, 16, 36 iterations,
# B = 10,000 GPU-s, 16 GPUs, N_avg = 4, job_demand_max = 8.
PHASES = (Phase((80.0, 100.0, 100.0, 120.0), 8), Phase((80.0, 100.0, 100.0, 120.0), 16, jobs=2),
          Phase((80.0, 100.0, 100.0, 120.0), 36, jobs=1))
T_ID = t_independent(10_000, r_c=16, demand_max=16, n_avg=4)


def test_table2_single_job_bids() -> None:
    # 2 GPUs offered, T_id = 400: one GPU → 200 s, both → 100 s (200 iterations of 1 s).
    assert rho(t_shared(0, 200, 1.0, 1, demand_max=2), 400) == pytest.approx(0.5)
    assert rho(t_shared(0, 200, 1.0, 2, demand_max=2), 400) == pytest.approx(0.25)
    assert t_shared(0, 200, 1.0, 0, demand_max=2) == math.inf


def test_table3_median_mode() -> None:
    assert round(T_ID, 6) == 2500
    bids = {g: round(rho(sh_t_shared(PHASES, g, demand_max=8), T_ID), 2)
            for g in (1, 2, 4, 8, 16)}
    assert bids == {1: 4.0, 2: 2.0, 4: 1.0, 8: 0.5, 16: 0.34}


def test_table3_exact_current_phase() -> None:
    t_sh = {g: sh_t_shared(PHASES, g, demand_max=8, current_exact=True) for g in (1, 2, 4, 8, 16)}
    assert t_sh == pytest.approx({1: 10000, 2: 5000, 4: 2660, 8: 1330, 16: 890})


def test_revised_estimate_erratum() -> None:
    # survivors 120 and 100 s/iter on 2 GPUs: phase 2 is 120·16 = 1920 s (paper: "3200"),
    # phase 3 is 120·36/2 = 2160 s.
    survivors = (Phase((120.0, 100.0), 16), Phase((120.0, 100.0), 36, jobs=1))
    assert sh_t_shared(survivors[:1], 2, 8, current_exact=True) == pytest.approx(1920)
    assert sh_t_shared(survivors[1:], 2, 8) == pytest.approx(2160)


def test_rho_flat_above_demand_cap_and_elapsed_counts() -> None:
    assert t_shared(100, 50, 2.0, 8, demand_max=8) == t_shared(100, 50, 2.0, 16, demand_max=8)
    assert t_shared(100, 50, 2.0, 4, demand_max=8) == pytest.approx(100 + 25)
    assert t_shared(100, 0, 2.0, 0, demand_max=8) == 100  # finished: no GPUs needed


def test_tid_modes() -> None:
    # paper-literal T_cluster · N_avg vs the 1/N_avg slice (spec U10)
    assert t_independent(1000, r_c=32, demand_max=1, n_avg=4) == pytest.approx(4000)
    assert t_independent(1000, r_c=32, demand_max=1, n_avg=4, mode="share_capped") == \
        pytest.approx(1000)
    assert t_independent(1000, r_c=32, demand_max=16, n_avg=4, mode="share_capped") == \
        pytest.approx(1000 / 8)
    with pytest.raises(ValueError):
        t_independent(1, 1, 1, 1, mode="bogus")


def test_lpt_and_gang_makespan() -> None:
    assert lpt_makespan([960, 800, 800, 640], 2) == 1600
    assert lpt_makespan([1.0], 0) == math.inf
    assert gang_makespan([], [(100.0, 2)], 2) == 100
    assert gang_makespan([], [(100.0, 4)], 2) == math.inf
    # a running 1-GPU job frees its GPU at 50 s; the waiting one runs after it
    assert gang_makespan([(50.0, 1)], [(100.0, 1)], 0) == 150
    assert gang_makespan([(50.0, 1)], [(100.0, 1), (30.0, 1)], 1) == pytest.approx(100)


def test_navg_time_weighted_and_roundtrip() -> None:
    tracker = NAvgTracker()
    tracker.update(0, {"a": 0.0})
    tracker.update(100, {"a": 0.0, "b": 100.0, "c": 100.0})
    tracker.update(200, {"a": 0.0, "b": 100.0, "c": 100.0})
    # a: 1 app for 100 s, then 3 apps for 100 s → 2
    assert tracker.n_avg("a", 200) == pytest.approx(2.0)
    assert tracker.n_avg("b", 200) == pytest.approx(3.0)
    assert tracker.n_avg("a", 300) == pytest.approx((100 + 300 + 300) / 300)
    copy = NAvgTracker.from_dict(tracker.to_dict())
    assert copy.n_avg("a", 300) == tracker.n_avg("a", 300)
    tracker.update(300, {"b": 100.0})
    assert "a" not in tracker.start


def test_slowdown_monotone_and_placement_level() -> None:
    nodes = (Node("n0", "v100", 4, rack="r0"), Node("n1", "v100", 4, rack="r0"),
             Node("n2", "v100", 4, rack="r1"))
    topo = Topology.of(ClusterState(0.0, nodes=nodes))
    assert topo.level(["n0:0", "n0:1"]) == "machine"
    assert topo.level(["n0:0", "n1:1"]) == "rack"
    assert topo.level(["n0:0", "n2:1"]) == "cluster"
    model = SlowdownModel(per_model={"vgg": {"machine": 1.0, "rack": 1.29, "cluster": 1.2}})
    values = [model.slowdown("vgg", lv, 2) for lv in ("machine", "rack", "cluster")]
    assert values == sorted(values) == [1.0, 1.29, 1.29]  # non-decreasing even if noisy
    assert model.slowdown("other", "cluster", 4) == 1.3  # footnote-3 defaults
    assert model.slowdown("vgg", "cluster", 1) == 1.0  # one GPU is never spread
    assert model.score("other", "rack", 2) == pytest.approx(1 / 1.1)
    # more GPUs on the same machines keep the same level, so the same S
    assert topo.level(["n0:0", "n1:0"]) == topo.level(["n0:0", "n0:1", "n1:0", "n1:1"])


def test_slowdowns_from_unconsolidated_table1() -> None:
    consolidated = {"p100": {("VGG16 (batch size 32)", 4): 103.6,
                             ("Inception-v3 (batch size 32)", 4): 242.0}}
    spread = {"p100": {("VGG16 (batch size 32)", 4): 80.4,
                       ("Inception-v3 (batch size 32)", 4): 243.0}}
    table = slowdowns_from_unconsolidated(consolidated, spread)
    assert table["VGG16"]["rack"] == pytest.approx(103.6 / 80.4)
    assert table["Inception-v3"]["rack"] == 1.0


def test_slowdowns_from_real_throughput_file(tacc) -> None:
    table = slowdowns_from_unconsolidated(tacc.isolated, tacc.unconsolidated)
    assert table and all(t["rack"] >= 1.0 for t in table.values())

"""The THEMIS policy: filtering, leases, leftovers, apps, state, and the canonical trace."""

from __future__ import annotations

import pytest

from gpufair.core.actions import plan_actions
from gpufair.core.simulation import SimulationSpec, simulate
from gpufair.data import artifact_results
from gpufair.errors import InputError
from gpufair.model import ClusterState, Job, JobState, Node, Progress, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import available_policies, create_policy
from gpufair.policy.themis.policy import ThemisPolicy

NODES = tuple(Node(f"n{i}", "v100", 2, rack="r0") for i in range(2))


def job(jid: str, gpus: int = 1, total: float = 1000.0, arrival: float = 0.0,
        held: tuple[str, ...] = (), app: str | None = None, done: float = 0.0) -> Job:
    return Job(id=jid, gpus=gpus, app=app, arrival_s=arrival,
               state=JobState.RUNNING if held else JobState.PENDING, gpus_held=held,
               progress=Progress(done, total),
               throughput=ThroughputProfile({("v100", gpus): 1.0}))


def policy(**options) -> ThemisPolicy:
    return ThemisPolicy(PolicyConfig(seed=0, options={"keep_log": True, **options}))


def state(t: float, *jobs: Job, nodes=NODES) -> ClusterState:
    return ClusterState(t, nodes=nodes, jobs=jobs)


def test_registered_and_options_validated() -> None:
    assert "themis" in available_policies()
    assert isinstance(create_policy("themis"), ThemisPolicy)
    with pytest.raises(InputError, match="unknown option"):
        policy(fairness=0.5)
    with pytest.raises(InputError, match=r"themis\.f' = 1\.5: must be <= 1"):
        policy(f=1.5)
    with pytest.raises(InputError, match=r"themis\.f' = 'abc': expected a number"):
        policy(f="abc")


@pytest.mark.parametrize(("f", "bidders"), [(0.8, 2), (0.5, 5), (1.0, 1), (0.0, 10)])
def test_filtering_takes_worst_rho_fraction(f: float, bidders: int) -> None:
    p = policy(f=f)
    jobs = [job(f"j{i}", total=1000 + 100 * i, arrival=-float(i)) for i in range(10)]
    p.schedule(state(0.0, *jobs), 0.0)
    log = p.rounds[-1]
    assert len(log.bidders) == bidders
    if f == 0.8:  # all starve (ρ = ∞); ties go to the longest-waiting relative to T_id
        assert log.bidders == ["job:j9", "job:j8"]


def test_conservation_and_no_double_grant() -> None:
    p = policy(f=0.5)
    jobs = [job(f"j{i}", gpus=1 + i % 2, total=500 + 300 * i) for i in range(6)]
    plan = p.schedule(state(0.0, *jobs), 0.0)
    gpus = [g for a in plan.assignments for g in a.gpu_ids]
    assert len(gpus) == len(set(gpus)) <= 4
    log = p.rounds[-1]
    assert sum(log.kept.values()) + log.leftover == log.offered == 4
    assert sum(log.leftover_to.values()) <= log.leftover
    assert all(0 < c <= 1 for c in log.c.values())
    by_id = {j.id: j for j in jobs}
    assert all(len(a.gpu_ids) == by_id[a.job_id].gpus for a in plan.assignments)


def test_leases_hold_until_expiry_then_renew_without_restart() -> None:
    p = policy(lease_s=600.0)
    first = p.schedule(state(0.0, job("a", gpus=4, total=5000)), 0.0)
    held = first.by_job()["a"].gpu_ids
    assert len(held) == 4
    running = job("a", gpus=4, total=5000, held=held, done=120)
    newcomer = job("b", gpus=1, total=100, arrival=100.0)
    # before expiry: the GPUs are not re-offered, whoever is waiting
    plan = p.schedule(state(120.0, running, newcomer), 120.0)
    assert plan.by_job()["a"].gpu_ids == held and "b" not in plan.by_job()
    assert len(p.rounds) == 1  # nothing was free: no auction ran
    # after expiry: re-auctioned; the lone holder re-wins its own GPUs, so nothing restarts
    alone = state(700.0, job("a", gpus=4, total=5000, held=held, done=700))
    plan = p.schedule(alone, 700.0)
    assert plan.by_job()["a"].gpu_ids == held
    assert plan_actions(alone, plan) == []
    assert p.leases[held[0]] == ("a", 700.0 + 600.0)


def test_finished_job_frees_gpus_at_once() -> None:
    p = policy()
    plan = p.schedule(state(0.0, job("a", gpus=4)), 0.0)
    held = plan.by_job()["a"].gpu_ids
    ended = Job(id="a", gpus=4, state=JobState.COMPLETED, progress=Progress(1000, 1000),
                throughput=ThroughputProfile({("v100", 4): 1.0}))
    plan = p.schedule(state(50.0, ended, job("b", gpus=2, arrival=10.0)), 50.0)
    assert set(plan.by_job()["b"].gpu_ids) <= set(held)  # the freed GPUs, before any expiry


def test_jobs_of_one_app_bid_as_one() -> None:
    p = policy(f=0.0)
    jobs = [job(f"s{i}", app="sweep", total=1000 * (i + 1)) for i in range(3)]
    jobs.append(job("solo", total=800))
    plan = p.schedule(state(0.0, *jobs), 0.0)
    assert sorted(p.rounds[-1].bidders) == ["job:solo", "sweep"]
    assert len(plan.assignments) == 4  # 4 GPUs, 4 one-GPU jobs: all run


def test_deterministic_and_state_roundtrip() -> None:
    jobs = [job(f"j{i}", gpus=1 + i % 2, total=400 + 250 * i) for i in range(7)]
    a, b = policy(f=0.5), policy(f=0.5)
    assert a.schedule(state(0.0, *jobs), 0.0) == b.schedule(state(0.0, *jobs), 0.0)
    restored = policy(f=0.5)
    restored.load_state_dict(a.state_dict())
    later = state(700.0, *jobs)
    assert restored.schedule(later, 700.0) == a.schedule(later, 700.0)


def test_unknown_holder_is_adopted_with_a_fresh_lease() -> None:
    p = policy()
    plan = p.schedule(state(0.0, job("a", gpus=2, held=("n0:0", "n0:1"))), 0.0)
    assert plan.by_job()["a"].gpu_ids == ("n0:0", "n0:1")
    assert p.leases["n0:0"] == ("a", 600.0)


def test_canonical_trace_artifact_beats_the_artifact_themis_row(bundled_data) -> None:
    """SIMULATION.md §7's finish_time_fairness row (artifact_results.json): 31929 s, worst ρ
    3.438, 28.3/22.5/17.5 %. Measured (seed 0, default f = 0.8 and lease 600 s): 29929 s,
    1.945, 4.2/4.2/4.2 %."""
    report = simulate(SimulationSpec(
        trace=str(bundled_data / "shockwave_120jobs_32gpus.trace"),
        throughputs=str(bundled_data / "tacc_throughputs.json"), cluster="v100:32",
        policy="themis", round_s=120, seed=0, semantics="artifact"), progress=False)
    m = report.metrics
    row = artifact_results()["canonical"]["rows"]["finish_time_fairness"]
    assert m.num_jobs == 120
    assert m.makespan_s <= row["makespan_s"]
    assert m.worst_rho < row["worst_rho"]
    assert 100 * m.unfair_fraction["1.0"] < row["unfair_1.0_pct"]
    assert 100 * m.unfair_fraction["1.1"] < row["unfair_1.1_pct"]
    assert m.makespan_s == pytest.approx(29929, rel=0.01)
    assert m.worst_rho == pytest.approx(1.945, abs=0.01)


def test_a_binding_work_budget_makes_the_plan_independent_of_the_wall_clock() -> None:
    """Issue 30: Themis's plan depended on the machine's load (a 4 s wall budget per
    auction). Two GPU types send the auction to the MILP; with the work budget binding
    (room for the PF solve of 14 columns only), a tiny wall budget and none give the same
    plan; unbudgeted, the same auction makes 7 solves."""
    nodes = (Node("a0", "a100", 4, rack="r0"), Node("v0", "v100", 4, rack="r1"))
    jobs = [Job(id=f"j{i}", gpus=1 + i % 2, arrival_s=-float(i),
                progress=Progress(0.0, 500.0 + 170.0 * i),
                throughput=ThroughputProfile({("a100", 1 + i % 2): 2.0 + 0.1 * i,
                                              ("v100", 1 + i % 2): 1.0}))
             for i in range(7)]
    plans = []
    for wall in (1e-9, None):
        p = policy(f=0.0, auction_work_budget=14, auction_budget_s=wall)
        plans.append(p.schedule(state(0.0, *jobs, nodes=nodes), 0.0).assignments)
        assert p.stats.solves == 1   # the PF MILP; every payment a greedy refill
    assert plans[0] == plans[1] and plans[0]


def test_the_default_auction_has_a_work_budget_and_no_wall_budget() -> None:
    """Reproducible by default: the wall clock is only a per-solve safety net."""
    s = policy().settings
    assert s.auction_work_budget and s.auction_budget_s is None
    assert s.auction_time_limit_s >= 60


def test_each_waiting_job_is_explained_in_the_auctions_terms() -> None:
    """Bidders that lost name the winners (sorted, the same string for each), jobs not
    bidding name the worst bidder's ρ; the reasons follow the round's log."""
    p = policy(f=0.5)
    jobs = [job(f"j{i}", gpus=2, total=500 + 300 * i, arrival=-float(i)) for i in range(8)]
    plan = p.schedule(state(0.0, *jobs), 0.0)
    log = p.rounds[-1]
    reasons = plan.explain()
    granted = {a.job_id for a in plan.assignments}
    app = {j.id: f"job:{j.id}" for j in jobs}
    lost = [j for j in reasons if j not in granted and app[j] in log.bidders]
    idle = [j for j in reasons if j not in granted and app[j] not in log.bidders]
    assert lost and idle and log.winners
    for j in lost:
        assert reasons[j].code == "themis.lost_auction"
        assert reasons[j].figures["winners"] == ",".join(sorted(log.winners))
    for j in idle:
        assert reasons[j].code == "themis.not_bidding"
        assert reasons[j].figures["bidders"] == len(log.bidders)
        assert reasons[j].figures["worst_bidder_rho"] == \
            min(reasons[b.removeprefix("job:")].figures["rho"] for b in log.bidders)

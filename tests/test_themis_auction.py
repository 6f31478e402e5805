"""The partial-allocation auction: spec §3.6 vectors and §9 properties on both MILP backends."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from gpufair.policy.solver import available_backends
from gpufair.policy.themis.auction import (
    AuctionOptions,
    Bid,
    BidRow,
    partial_allocation,
    rho_cap,
    round_share,
)
from gpufair.policy.themis.incentives import CAPACITY, make_bid, random_app

BACKENDS = ["highs"] + (["gurobi"] if "gurobi" in available_backends() else [])
MODES = [("brute", None)] + [("milp", b) for b in BACKENDS]


def _solve(bids, capacity, mode):
    kind, backend = mode
    if kind == "brute":
        return partial_allocation(bids, capacity, brute_force=True)
    result = partial_allocation(bids, capacity, AuctionOptions(backend=backend))
    assert result.backends == {backend}  # small models: no silent fallback
    return result


def _subset_rows(gpus, value):
    """Explicit-subset bids (one resource key per GPU), as the paper's Table 2 rows."""
    rows = []
    for k in range(1, len(gpus) + 1):
        for subset in itertools.combinations(gpus, k):
            v = value(subset)
            if v is not None:
                rows.append(BidRow({g: 1 for g in subset}, k, v, subset))
    return tuple(rows)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m[1] or m[0])
def test_t1_two_apps_two_gpus(mode) -> None:
    bids = [Bid("A1", 4.0, _subset_rows(("g1", "g2"), lambda s: {1: 2.0, 2: 1.0}[len(s)])),
            Bid("A2", 2.0, _subset_rows(("g1", "g2"), lambda s: {1: 1.5, 2: 1.2}[len(s)]))]
    result = _solve(bids, {"g1": 1, "g2": 1}, mode)
    assert result.chosen["A1"].tag == ("g1", "g2") and result.chosen["A2"] is None
    assert result.c == pytest.approx({"A1": 0.6, "A2": 1.0})
    assert result.objective == pytest.approx(math.log(1.0 / 1.0) + math.log(1 / 2.0))
    assert sum(result.expected_gpus().values()) == pytest.approx(1.2)  # 0.8 GPU leftover


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m[1] or m[0])
def test_t2_three_apps_two_machines(mode) -> None:
    machine = {1: "m0", 2: "m0", 3: "m1", 4: "m1"}

    def table(one, local, cross):
        def value(s):
            if len(s) == 1:
                return one
            if len(s) == 2:
                return local if machine[s[0]] == machine[s[1]] else cross
            return None
        return _subset_rows((1, 2, 3, 4), value)

    bids = [Bid("A", 3.0, table(1.5, 0.75, 0.97)), Bid("B", 2.0, table(1.2, 0.6, 0.62)),
            Bid("C", 1.5, table(1.0, 0.8, 0.8))]
    result = _solve(bids, {g: 1 for g in machine}, mode)
    bundles = {a: r.tag for a, r in result.chosen.items() if r}
    assert set(bundles) == {"A", "B"} and result.chosen["C"] is None
    assert {frozenset(b) for b in bundles.values()} == {frozenset({1, 2}), frozenset({3, 4})}
    assert result.c == pytest.approx({"A": 0.5333333, "B": 0.5333333, "C": 1.0})


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m[1] or m[0])
def test_t3_drf_counterexamples_keep_locality(mode) -> None:
    # Instance 1: two 4-GPU machines, two VGG16-like apps of 4 tasks: one machine each.
    def vgg(rho_local, rho_cross):
        return (BidRow({"m0": 4, "all": 4}, 4, rho_local, "m0"),
                BidRow({"m1": 4, "all": 4}, 4, rho_local, "m1"),
                BidRow({"all": 4}, 4, rho_cross, "spread"))
    capacity = {"m0": 4, "m1": 4, "all": 8}
    result = _solve([Bid("V1", 5.0, vgg(1.0, 1.29)), Bid("V2", 5.0, vgg(1.0, 1.29))],
                    capacity, mode)
    assert sorted(r.tag for r in result.chosen.values()) == ["m0", "m1"]
    # Instance 2: one 4-GPU and two 2-GPU machines; the sensitive app gets the 4-GPU machine.
    capacity = {"big": 4, "s0": 2, "s1": 2, "all": 8}
    inception = (BidRow({"big": 4, "all": 4}, 4, 1.0, "big"),
                 BidRow({"s0": 2, "s1": 2, "all": 4}, 4, 1.0, "smalls"))
    vgg16 = (BidRow({"big": 4, "all": 4}, 4, 1.0, "big"),
             BidRow({"s0": 2, "s1": 2, "all": 4}, 4, 1.29, "smalls"))
    result = _solve([Bid("I", 4.0, inception), Bid("V", 4.0, vgg16)], capacity, mode)
    assert result.chosen["V"].tag == "big" and result.chosen["I"].tag == "smalls"


def _random_bids(rng: random.Random, n: int) -> list[Bid]:
    return [make_bid(f"a{i}", random_app(rng)) for i in range(n)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_milp_matches_brute_force_and_properties(backend) -> None:
    """§9.2–9.3: PF optimum equals brute force (hence Pareto-efficient among bid rows),
    c_i ∈ (0, 1], c = 1 for empty bundles and lone bidders, capacities respected."""
    rng = random.Random(7)
    for trial in range(25):
        bids = _random_bids(rng, 1 + trial % 4)
        exact = partial_allocation(bids, CAPACITY, brute_force=True)
        milp = partial_allocation(bids, CAPACITY, AuctionOptions(backend=backend))
        assert milp.objective == pytest.approx(exact.objective, abs=1e-7)
        for app, c in milp.c.items():
            assert exact.c[app] == pytest.approx(c, abs=1e-6) or \
                milp.chosen[app] != exact.chosen[app]  # a tie picked another optimum
            assert 0 < c <= 1
            if milp.chosen[app] is None or len(bids) == 1:
                assert c == 1.0
        used: dict = {}
        for row in milp.chosen.values():
            for key, units in (row.uses if row else {}).items():
                used[key] = used.get(key, 0) + units
        assert all(used[k] <= CAPACITY[k] for k in used)
        # Pareto efficiency: no feasible profile of rows is at least as good for everybody
        # and strictly better for somebody (checked against every feasible combination).
        values = {b.app: (1 / milp.chosen[b.app].rho if milp.chosen[b.app] else 1 / b.rho_old)
                  for b in bids}
        for combo in itertools.product(*[[None, *b.rows] for b in bids]):
            use: dict = {}
            for row in combo:
                for key, units in (row.uses if row else {}).items():
                    use[key] = use.get(key, 0) + units
            if any(use[k] > CAPACITY[k] for k in use):
                continue
            other = {b.app: 1 / (r.rho if r else b.rho_old) for b, r in zip(bids, combo,
                                                                             strict=True)}
            better = [other[a] > values[a] * (1 + 1e-9) for a in values]
            worse = [other[a] < values[a] * (1 - 1e-9) for a in values]
            assert not (any(better) and not any(worse))


def test_rho_cap_makes_starving_apps_finite() -> None:
    bids = [Bid("s", math.inf, (BidRow({"g": 1}, 1, 2.0),)), Bid("t", 3.0, ())]
    assert rho_cap(bids, AuctionOptions()) == 1e3
    assert rho_cap(bids, AuctionOptions(rho_cap_abs=1.0)) == 30.0
    result = partial_allocation(bids, {"g": 1}, brute_force=True)
    assert result.chosen["s"] is not None and result.c["s"] == 1.0


def test_lone_bidder_pays_nothing() -> None:
    bid = Bid("a", 4.0, (BidRow({"g": 2}, 2, 1.0),))
    assert partial_allocation([bid], {"g": 2}, brute_force=True).c == {"a": 1.0}


def test_rounding_rules() -> None:
    rng = random.Random(0)
    draws = [round_share(0.6, 2, [1, 2], "stochastic", rng) for _ in range(20_000)]
    assert sum(draws) / len(draws) == pytest.approx(1.2, abs=0.02)  # E = c·n
    rigid = [round_share(0.3, 4, [4], "stochastic", rng) for _ in range(20_000)]
    assert set(rigid) == {0, 4} and sum(rigid) / len(rigid) == pytest.approx(1.2, abs=0.05)
    assert round_share(0.6, 2, [1, 2], "floor", rng) == 1
    assert round_share(0.3, 4, [4], "floor", rng) == 0
    assert round_share(0.75, 2, [1, 2], "nearest", rng) == 2
    assert round_share(1 - 1e-12, 3, [3], "floor", rng) == 3
    with pytest.raises(ValueError):
        round_share(0.5, 2, [1, 2], "bogus", rng)


def test_knapsack_dp_matches_brute_force_and_milp() -> None:
    """One pool (one GPU type, no placement rows): the DP's PF and c_i equal brute force."""
    rng = random.Random(11)
    for trial in range(30):
        bids = []
        for i in range(1 + trial % 5):
            old = rng.uniform(1.5, 6.0)
            rows = tuple(BidRow({"gpus": k}, k, old / (1 + k * rng.uniform(0.2, 1.5)), k)
                         for k in sorted(rng.sample((1, 2, 3, 4), rng.randint(1, 3))))
            bids.append(Bid(f"a{i}", old, rows))
        capacity = {"gpus": rng.randint(1, 6)}
        exact = partial_allocation(bids, capacity, brute_force=True)
        dp = partial_allocation(bids, capacity)
        milp = partial_allocation(bids, capacity, AuctionOptions(backend="highs",
                                                                 knapsack=False))
        assert dp.backends == {"knapsack"} and milp.backends == {"highs"}
        assert dp.objective == pytest.approx(exact.objective, abs=1e-9)
        assert milp.objective == pytest.approx(exact.objective, abs=1e-7)
        for app in exact.c:
            if dp.chosen[app] == exact.chosen[app]:
                assert dp.c[app] == pytest.approx(exact.c[app], abs=1e-9)
        assert sum(r.gpus for r in dp.chosen.values() if r) <= capacity["gpus"]


def test_t1_in_compact_form_on_the_knapsack_path() -> None:
    bids = [Bid("A1", 4.0, (BidRow({"m": 1}, 1, 2.0), BidRow({"m": 2}, 2, 1.0))),
            Bid("A2", 2.0, (BidRow({"m": 1}, 1, 1.5), BidRow({"m": 2}, 2, 1.2)))]
    result = partial_allocation(bids, {"m": 2})
    assert result.backends == {"knapsack"}
    assert result.chosen["A1"].gpus == 2 and result.chosen["A2"] is None
    assert result.c == pytest.approx({"A1": 0.6, "A2": 1.0})


def test_spent_budget_still_gives_a_feasible_round_with_generous_payments() -> None:
    """A budget too small for any solve: greedy start and greedy payment refills keep the
    round feasible; when the PF point is still optimal, c_i only errs towards the winner."""
    rng = random.Random(5)
    bids = _random_bids(rng, 4)
    exact = partial_allocation(bids, CAPACITY, brute_force=True)
    rushed = partial_allocation(bids, CAPACITY, AuctionOptions(backend="highs", budget_s=1e-9))
    assert rushed.inexact > 0
    used: dict = {}
    for row in rushed.chosen.values():
        for key, units in (row.uses if row else {}).items():
            used[key] = used.get(key, 0) + units
    assert all(used[k] <= CAPACITY[k] for k in used)
    assert rushed.objective <= exact.objective + 1e-9
    for app, c in rushed.c.items():
        assert 0 < c <= 1
        same_pf = abs(rushed.objective - exact.objective) < 1e-9
        if same_pf and rushed.chosen[app] is not None and rushed.chosen[app] == exact.chosen[app]:
            assert c >= exact.c[app] - 1e-9  # the refill is a lower bound on OPT(P \ i)


def _columns(bids: list[Bid]) -> int:
    """The PF MILP's column count: one per bid row (what one solve costs the work budget)."""
    return sum(len(b.rows) for b in bids)


@pytest.mark.parametrize("backend", BACKENDS)
def test_work_budget_decides_the_same_under_any_wall_budget(backend) -> None:
    """Issue 30: a round the work budget binds is the same whether the wall budget is tiny
    (a loaded machine) or ample: PF solved (it fits), every payment a greedy refill."""
    rng = random.Random(11)
    for _ in range(6):
        bids = _random_bids(rng, 5)
        pf_only = _columns(bids)   # room for the PF solve, none for a payment
        results = [partial_allocation(bids, CAPACITY, AuctionOptions(
            backend=backend, work_budget=pf_only, budget_s=wall)) for wall in (1e-9, None)]
        tiny, ample = results
        assert (tiny.chosen, tiny.c, tiny.objective) == \
            (ample.chosen, ample.c, ample.objective)
        winners = sum(row is not None for row in ample.chosen.values())
        assert ample.solves == 1 and ample.inexact == winners   # payments: all refills
        exact = partial_allocation(bids, CAPACITY, brute_force=True)
        assert ample.objective == pytest.approx(exact.objective)   # the PF solve was made


@pytest.mark.parametrize("backend", BACKENDS)
def test_work_budget_of_zero_is_the_greedy_point_and_never_wall_bound(backend) -> None:
    """No solve fits: PF is the greedy point and payments greedy refills, with no solver
    call, so a tiny wall budget (which would otherwise still run the PF MILP) cannot move
    it; the round stays feasible."""
    rng = random.Random(12)
    bids = _random_bids(rng, 5)
    tiny, ample = (partial_allocation(bids, CAPACITY, AuctionOptions(
        backend=backend, work_budget=0, budget_s=wall)) for wall in (1e-9, None))
    assert (tiny.chosen, tiny.c) == (ample.chosen, ample.c)
    assert ample.solves == 0 and ample.inexact >= 1
    used: dict = {}
    for row in ample.chosen.values():
        for key, units in (row.uses if row else {}).items():
            used[key] = used.get(key, 0) + units
    assert all(used[k] <= CAPACITY[k] for k in used)


def test_an_unreached_work_budget_changes_nothing() -> None:
    """Where the work budget is never hit the auction is the exact one, solve for solve."""
    rng = random.Random(13)
    for _ in range(6):
        bids = _random_bids(rng, 5)
        free = partial_allocation(bids, CAPACITY, AuctionOptions(backend="highs",
                                                                 budget_s=None))
        roomy = partial_allocation(bids, CAPACITY, AuctionOptions(
            backend="highs", budget_s=None, work_budget=_columns(bids) * len(bids)))
        assert (roomy.chosen, roomy.c, roomy.solves, roomy.inexact) == \
            (free.chosen, free.c, free.solves, 0)


def _placed_bids(rng: random.Random, n: int) -> tuple[list[Bid], dict]:
    """One GPU type, two racks of two 4-GPU machines: pool rows as the agent emits them."""
    machines = {"m0": "r0", "m1": "r0", "m2": "r1", "m3": "r1"}
    capacity = {"t": 16, "r0": 8, "r1": 8, **{m: 4 for m in machines}}
    bids = []
    for i in range(n):
        old = rng.uniform(1.5, 6.0)
        gang = rng.choice((1, 2, 4))
        spread = old / (1 + gang * rng.uniform(0.2, 1.5))
        rows = [BidRow({"t": gang}, gang, spread, "t")]
        if gang > 1 and rng.random() < 0.5:  # placement sensitive: rack and machine rows
            rows += [BidRow({"t": gang, r: gang}, gang, spread * 0.9, r) for r in ("r0", "r1")]
            rows += [BidRow({"t": gang, machines[m]: gang, m: gang}, gang, spread * 0.8, m)
                     for m in rng.sample(sorted(machines), 2)]
        bids.append(Bid(f"a{i}", old, tuple(rows)))
    return bids, capacity


def test_root_pool_relaxation_matches_brute_force_and_milp() -> None:
    """The relaxation path (certified knapsack bound, MILP fallback) gives the PF optimum
    and the c_i of brute force and of the MILP, and counts what it certified."""
    rng = random.Random(13)
    certified = 0
    for trial in range(20):
        bids, capacity = _placed_bids(rng, 2 + trial % 5)
        exact = partial_allocation(bids, capacity, brute_force=True)
        relaxed = partial_allocation(bids, capacity, AuctionOptions(relax_min_apps=1))
        milp = partial_allocation(bids, capacity, AuctionOptions(backend="highs",
                                                                 knapsack=False))
        assert relaxed.objective == pytest.approx(exact.objective, abs=1e-9)
        assert milp.objective == pytest.approx(exact.objective, abs=1e-7)
        assert relaxed.inexact == 0
        certified += relaxed.certified
        for app in exact.c:
            if relaxed.chosen[app] == exact.chosen[app]:
                assert relaxed.c[app] == pytest.approx(exact.c[app], abs=1e-9)
        used: dict = {}
        for row in relaxed.chosen.values():
            for key, units in (row.uses if row else {}).items():
                used[key] = used.get(key, 0) + units
        assert all(used[k] <= capacity[k] for k in used)
    assert certified > 0


def test_relaxation_falls_back_to_the_milp_when_it_cannot_place() -> None:
    """Two 2-GPU gangs whose best row is machine m0 (capacity 2): the root bound (both best
    rows in 4 GPUs) cannot be realised, so the MILP decides, and brute force agrees."""
    bids = [Bid("a", 3.0, (BidRow({"t": 2, "m0": 2}, 2, 1.0, "m0"),)),
            Bid("b", 2.5, (BidRow({"t": 2, "m0": 2}, 2, 1.0, "m0"),
                           BidRow({"t": 2, "m1": 2}, 2, 1.2, "m1")))]
    capacity = {"t": 4, "m0": 2, "m1": 2}
    exact = partial_allocation(bids, capacity, brute_force=True)
    relaxed = partial_allocation(bids, capacity, AuctionOptions(backend="highs",
                                                                relax_min_apps=1))
    assert relaxed.milp_fallbacks > 0 and "highs" in relaxed.backends
    assert relaxed.objective == pytest.approx(exact.objective, abs=1e-9)
    assert relaxed.c == pytest.approx(exact.c, abs=1e-9)

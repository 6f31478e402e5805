"""Shockwave's certified market: its acceptance tolerance ``certify_rel_gap`` and the bound it
stands on (the LP relaxation's value bounds the count MILP's optimum, so counts accepted within
the tolerance of it are within the tolerance of the optimum), checked against a brute force
over round counts that evaluates the paper's objective from the jobs' own numbers, not from
the market's tables; and the solver's objective scaling that keeps HiGHS from stopping with
"Unknown" on the market's tiny costs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp

from gpufair.errors import InputError
from gpufair.model import Job, JobState, Progress, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.shockwave.policy import JobView, Market, ShockwavePolicy, ShockwaveSettings
from gpufair.policy.shockwave.regimes import Trajectory
from gpufair.policy.solver import LinearProgram, Solution, SolveOptions, Status, solve

ROUND_S = 60.0


# -- the option ------------------------------------------------------------------------------
def test_certify_rel_gap_is_validated_and_separate_from_the_milp_gap():
    settings = ShockwaveSettings.from_options({"certify_rel_gap": 0.02,
                                               "solver_rel_gap": 1e-4})
    assert (settings.certify_rel_gap, settings.solver_rel_gap) == (0.02, 1e-4)
    assert ShockwaveSettings.from_options({"certify_rel_gap": 0}).certify_rel_gap == 0.0
    for bad in (-1e-3, 1.0, 2.0, "tight", None):
        with pytest.raises(InputError, match="certify_rel_gap"):
            ShockwaveSettings.from_options({"certify_rel_gap": bad})


# -- a tiny market the oracle can evaluate by itself -----------------------------------------
def _job(jid: str, gpus: int, epochs: int, done: int) -> Job:
    """A static job whose iterations are whole epochs (no fraction of an epoch done)."""
    return Job(id=jid, gpus=gpus, arrival_s=0.0, attained_s=0.0, state=JobState.PENDING,
               gpus_held=(), progress=Progress(done * 100.0, epochs * 100.0, done, epochs),
               throughput=ThroughputProfile({("v100", gpus): 1.0}), batch_size=100,
               initial_batch_size=100, samples_per_epoch=10_000, batch_rates=((100, 1.0),))


def _tiny(seed: int, n: int = 4, gpus: int = 3, horizon: int = 4, weight: float = 2.0
          ) -> tuple[list[tuple[int, int, int, float, float]], Market]:
    """Jobs (gang, E, F, seconds per epoch, budget) and the market built on them."""
    rng = np.random.default_rng(seed)
    raw, views = [], []
    for i in range(n):
        gang, epochs = int(rng.choice([1, 1, 2, 3])), int(rng.integers(2, 9))
        done = int(rng.integers(0, epochs))
        per, budget = float(rng.uniform(20.0, 150.0)), float(rng.uniform(0.2, 3.0))
        raw.append((gang, epochs, done, per, budget))
        left = epochs - done
        views.append(JobView(_job(f"j{i}", gang, epochs, done), Trajectory((float(left),),
                                                                         (per,)),
                             remaining_s=left * per, rho_hat=1.0, weight=budget))
    settings = ShockwaveSettings(window_rounds=horizon, makespan_weight=weight)
    return raw, Market(views, gpus, horizon, ROUND_S, settings)


def _oracle(raw, counts, gpus: int, weight: float) -> float:
    """Paper eq. 11 at integer round counts: Σ w log(progress) / (N M) - λ H / Z_0, with
    H = max(longest remaining time, total remaining time / M)."""
    utility, remaining = 0.0, []
    for (_, epochs, done, per, budget), s in zip(raw, counts, strict=True):
        ran = min(epochs - done, s * ROUND_S / per)
        utility += budget * math.log(max(1e-6, (done + ran) / epochs))
        remaining.append(max(0.0, (epochs - done) * per - s * ROUND_S))
    z0 = sum((e - d) * p for _, e, d, p, _ in raw)
    h = max(max(remaining), sum(remaining) / gpus)
    return utility / (len(raw) * gpus) - weight / z0 * h


def _optimum(raw, gpus: int, horizon: int, weight: float) -> float:
    """The best integer counts: each job 0..min(T, rounds it needs), Σ gang × count ≤ M T."""
    tops = [min(horizon, max(1, math.ceil((e - d) * p / ROUND_S))) for _, e, d, p, _ in raw]
    return max(_oracle(raw, c, gpus, weight)
               for c in itertools.product(*(range(t + 1) for t in tops))
               if sum(g * k for (g, *_), k in zip(raw, c, strict=True)) <= gpus * horizon)


def _policy(**options) -> ShockwavePolicy:
    return ShockwavePolicy(PolicyConfig(round_s=ROUND_S, options=options))


def _gap(market: Market) -> float:
    """The certified method's measure: (bound - rounded value) / |rounded value|, the bound
    the lower of the LP's and the dual bound."""
    relaxed = solve(market.count_problem(relaxed=True),
                    SolveOptions(backend="highs", scale_objective=True))
    value = market.value(market.round_counts(relaxed.x))
    bound = min(relaxed.objective, market.dual_bound(relaxed.duals))
    return (bound - value) / abs(value)


def test_the_oracle_agrees_with_the_exact_milp():
    """The brute force and the count MILP solved to optimality find the same optimum (so the
    oracle's reading of the objective is the market's)."""
    for seed in range(6):
        raw, market = _tiny(seed)
        exact = solve(market.count_problem(), SolveOptions(backend="highs", mip_gap=0.0))
        assert exact.objective == pytest.approx(_optimum(raw, 3, 4, 2.0), rel=1e-9)


@pytest.mark.parametrize("tolerance", [0.0, 1e-3, 1e-2, 5e-2, 0.2])
def test_accepted_counts_are_within_the_tolerance_of_the_true_optimum(tolerance):
    """Whatever the tolerance, counts the certified method accepts without the MILP lose at
    most that much (relative) against the brute-force optimum, and fit the capacity."""
    certified_losses = []
    for seed in range(40):
        raw, market = _tiny(seed)
        policy = _policy(certify_rel_gap=tolerance, window_rounds=4, makespan_weight=2.0)
        counts = policy._counts(market)
        assert sum(g * k for (g, *_), k in zip(raw, counts, strict=True)) <= 12
        value, best = _oracle(raw, counts, 3, 2.0), _optimum(raw, 3, 4, 2.0)
        assert value <= best + 1e-12
        if policy.solve_log[-1][3] == "certified":
            loss = (best - value) / max(abs(value), 1e-6)  # the policy's relative measure
            assert loss <= tolerance + 1e-9
            certified_losses.append(loss)
        else:  # the MILP's own gap
            assert best - value <= 1e-3 * abs(value) + 1e-12
    assert certified_losses  # the certified path ran
    if tolerance >= 5e-2:
        assert max(certified_losses) > 1e-3  # and a loose tolerance was used, not idle


def test_a_rounding_within_the_tolerance_skips_the_milp_and_one_outside_falls_back():
    """One solve (the LP) when the rounding's gap is within certify_rel_gap; the LP then the
    MILP when it is not. solver_rel_gap plays no part in the decision."""
    _, market = next(m for m in (_tiny(s) for s in range(40)) if _gap(m[1]) > 1e-3)
    gap = _gap(market)
    loose = _policy(certify_rel_gap=1.5 * gap, solver_rel_gap=0.0, window_rounds=4,
                    makespan_weight=2.0)
    loose._counts(market)
    assert loose.stats.solves == 1 and loose.solve_log[-1][3] == "certified"
    assert loose.solve_log[-1][2] == pytest.approx(gap, rel=1e-6)
    tight = _policy(certify_rel_gap=0.5 * gap, solver_rel_gap=0.5, window_rounds=4,
                    makespan_weight=2.0)
    tight._counts(market)
    assert tight.stats.solves == 2 and tight.solve_log[-1][3] != "certified"


def test_the_dual_bound_is_valid_for_any_prices_and_tighter_than_the_lp():
    """Any capacity price μ ≥ 0 and spread price ν ≥ 0 give a bound ≥ the brute-force
    optimum; at the LP's duals it is ≤ the LP's value, and below it on some markets."""
    rng = np.random.default_rng(7)
    tighter = 0
    # on one GPU the spread term Σ rem / M is H: the spread row's price matters there
    for seed, gpus in itertools.product(range(12), (3, 1)):
        raw, market = _tiny(seed, gpus=gpus)
        best = _optimum(raw, gpus, 4, 2.0)
        n = len(raw)
        for _ in range(20):
            duals = np.zeros(n + 2)
            duals[n + 1] = rng.choice([0.0, rng.exponential(0.05), rng.exponential(5.0)])
            duals[n] = rng.choice([0.0, rng.exponential(1e-4), rng.exponential(1e-2),
                                   1e3])  # λ is 2 / Z_0 ~ 1e-3: prices above it are cut to it
            assert market.dual_bound(duals) >= best - 1e-12 * abs(best)
        relaxed = solve(market.count_problem(relaxed=True), SolveOptions(backend="highs"))
        bound = market.dual_bound(relaxed.duals)
        assert best - 1e-12 * abs(best) <= bound <= relaxed.objective + 1e-9 * abs(best)
        tighter += bound < relaxed.objective - 1e-6 * abs(best)
    assert tighter >= 3


def test_the_exact_method_ignores_certify_rel_gap():
    _, market = _tiny(1)
    policy = _policy(market_method="exact", certify_rel_gap=0.5, window_rounds=4,
                     makespan_weight=2.0)
    policy._counts(market)
    assert policy.stats.solves == 1 and policy.solve_log[-1][3] != "certified"


# -- the solver's objective scaling ----------------------------------------------------------
def _tiny_cost_lp(scale: float) -> LinearProgram:
    """max scale·(3x + 2y + 1e-3 z) + scale·5, x + y + z ≤ 4, x ≤ 3, y ≤ 2, z ≤ 10:
    x = 3, y = 1, z = 0, objective scale·16."""
    a = sp.csr_array(np.array([[1.0, 1.0, 1.0]]))
    return LinearProgram(c=scale * np.array([3.0, 2.0, 1e-3]), A_ub=a, b_ub=np.array([4.0]),
                         lb=0.0, ub=np.array([3.0, 2.0, 10.0]), maximize=True,
                         constant=5.0 * scale)


@pytest.mark.parametrize("backend", ["highs", "gurobi"])
@pytest.mark.parametrize("sense", [True, False])
def test_lp_duals_are_the_objectives_rate_per_unit_of_right_hand_side(backend, sense):
    """Each row's dual matches the objective's change when that row's right-hand side moves
    a little (finite difference), in the problem's own sense, on both backends."""
    sign = 1.0 if sense else -1.0
    a_ub = sp.csr_array(np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 2.0]]))
    a_eq = sp.csr_array(np.array([[0.0, 1.0, -1.0]]))

    def lp(b_ub, b_eq):
        return LinearProgram(c=sign * np.array([3.0, 2.0, 1.0]), A_ub=a_ub, b_ub=b_ub,
                             A_eq=a_eq, b_eq=b_eq, lb=0.0, ub=np.array([3.0, 5.0, 5.0]),
                             maximize=sense)
    b_ub, b_eq = np.array([4.0, 6.0]), np.array([0.5])
    base = solve(lp(b_ub, b_eq), SolveOptions(backend=backend))
    assert base.duals is not None and len(base.duals) == 3
    for row in range(3):
        ub, eq = b_ub.copy(), b_eq.copy()
        if row < 2:
            ub[row] += 1e-3
        else:
            eq[0] += 1e-3
        moved = solve(lp(ub, eq), SolveOptions(backend=backend))
        assert base.duals[row] == pytest.approx((moved.objective - base.objective) / 1e-3,
                                                abs=1e-6)
    assert sign * base.duals[0] > 0  # the binding capacity row is worth something
    milp = solve(LinearProgram(c=np.ones(2), A_ub=np.ones((1, 2)), b_ub=[1.5], lb=0.0, ub=1.0,
                               integrality=np.ones(2, dtype=bool), maximize=True),
                 SolveOptions(backend=backend))
    assert milp.duals is None


@pytest.mark.parametrize("scale", [1e-9, 3e-7, 1.0, 7e4])
def test_scaled_objective_reports_the_models_own_objective(scale):
    found = solve(_tiny_cost_lp(scale), SolveOptions(backend="highs", scale_objective=True))
    assert found.status is Status.OPTIMAL
    assert found.x == pytest.approx([3.0, 1.0, 0.0])
    assert found.objective == pytest.approx(16.0 * scale, rel=1e-12)
    assert found.duals == pytest.approx([2.0 * scale])  # y's 2 per unit of the row


@pytest.mark.parametrize("scale", [3e-7, 1.0, 7e4])
def test_highs_own_objective_scale_reports_the_models_own_answer(scale, monkeypatch):
    """HiGHS scales the costs itself (``user_objective_scale``) and hands back the model's own
    objective, point and duals: the option reaches it, and nothing is left in its units.
    (Not at 1e-9: 16 times such costs is still under the dual tolerance, and highspy 1.12
    returns any feasible point there. That is what ``scale_objective``'s retry is for.)"""
    import gpufair.policy.solver as module

    made = []
    real = module._new_highs

    def recording():
        made.append(real())
        return made[-1]

    monkeypatch.setattr(module, "_new_highs", recording)
    found = solve(_tiny_cost_lp(scale), SolveOptions(backend="highs", highs_objective_scale=4))
    values = [h.getOptionValue("user_objective_scale") for h in made]   # (status, value) in
    assert [v[-1] if isinstance(v, tuple) else v for v in values] == [4]  # newer highspy
    assert found.status is Status.OPTIMAL
    assert found.x == pytest.approx([3.0, 1.0, 0.0])
    assert found.objective == pytest.approx(16.0 * scale, rel=1e-12)
    assert found.duals == pytest.approx([2.0 * scale])


def test_the_policy_solves_its_relaxation_with_highs_own_scale_and_the_milp_without(
        monkeypatch):
    """The count relaxation goes to HiGHS with its costs times 2**4 (docs: the constant's
    measurements); the MILP, when it runs, does not."""
    import gpufair.policy.shockwave.policy as module

    real = module.solve
    calls = []

    def spy(problem, options):
        calls.append((problem.is_mip, options.highs_objective_scale))
        if not problem.is_mip:   # force the MILP too: the relaxation "fails"
            real(problem, options)
            return Solution(Status.ERROR, None, None, "highs", 0.0, message="Unknown")
        return real(problem, options)

    _, market = _tiny(1)
    monkeypatch.setattr(module, "solve", spy)
    _policy(window_rounds=4, makespan_weight=2.0)._counts(market)
    assert calls == [(False, module._LP_OBJECTIVE_SCALE), (False, 0), (True, 0)]
    assert module._LP_OBJECTIVE_SCALE == 4


def test_scaled_objective_changes_nothing_but_the_units_on_a_milp():
    problem = _tiny_cost_lp(2e-8)
    problem = LinearProgram(c=problem.c, A_ub=problem.A_ub, b_ub=np.array([3.5]), lb=0.0,
                            ub=problem.ub, maximize=True, constant=problem.constant,
                            integrality=np.array([True, True, False]))
    found = solve(problem, SolveOptions(backend="highs", scale_objective=True, mip_gap=0.0))
    assert found.x == pytest.approx([3.0, 0.0, 0.5])
    assert found.objective == pytest.approx(2e-8 * (9.0 + 5e-4 + 5.0), rel=1e-12)


def test_a_relaxation_the_solver_gives_up_on_is_solved_again_with_its_objective_scaled(
        monkeypatch):
    """HiGHS stopped "Unknown" on one 314-job relaxation (costs 2e-8..4e-5, under its dual
    tolerance); the policy then solves the same LP with the objective scaled up before it
    falls back to the MILP, and certifies from that solution."""
    import gpufair.policy.shockwave.policy as module

    real = module.solve
    calls = []

    def flaky(problem, options):
        calls.append((problem.is_mip, options.scale_objective))
        if not problem.is_mip and not options.scale_objective:
            return Solution(Status.ERROR, None, None, "highs", 0.0, message="Unknown")
        return real(problem, options)

    _, market = _tiny(1)  # a market the first LP certifies
    expected = _policy(window_rounds=4, makespan_weight=2.0)._counts(market)
    monkeypatch.setattr(module, "solve", flaky)
    policy = _policy(window_rounds=4, makespan_weight=2.0)
    counts = policy._counts(market)
    assert calls == [(False, False), (False, True)]  # no MILP
    assert [s for *_, s in policy.solve_log] == ["error", "certified"]
    assert list(counts) == list(expected)

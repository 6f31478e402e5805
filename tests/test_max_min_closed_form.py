"""Max-min fairness on one GPU type: the closed form against an LP solved by SciPy.

When G/Σw ≤ s_j/w_j for every job the LP's optimum is unique (docs/policies/baselines.md), so
any exact solver returns it: SciPy's ``linprog`` — not gpufair's solver layer — is the oracle.
Otherwise the closed form must decline, and the policy solves its LP.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from gpufair.model import Job, JobState, Progress, ThroughputProfile
from gpufair.policy.max_min import MaxMinPolicy, one_type_max_min


def scipy_max_min(gangs: np.ndarray, weights: np.ndarray, gpus: float) -> np.ndarray:
    """max z s.t. z ≤ s_j·x_j / w_j, Σ s_j·x_j ≤ G, 0 ≤ x ≤ 1 (variables x, then z)."""
    n = len(gangs)
    a_ub = np.zeros((n + 1, n + 1))
    a_ub[:n, :n] = -np.diag(gangs / weights)
    a_ub[:n, n] = 1.0
    a_ub[n, :n] = gangs
    result = linprog(np.append(np.zeros(n), -1.0), A_ub=a_ub,
                     b_ub=np.append(np.zeros(n), gpus),
                     bounds=[(0, 1)] * n + [(0, None)], method="highs")
    assert result.status == 0
    return result.x


@pytest.mark.parametrize("seed", range(30))
def test_closed_form_is_the_lp_optimum_under_load(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    gangs = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    weights = rng.uniform(0.2, 3.0, n)
    gpus = float(rng.integers(1, 2 * n))
    x = one_type_max_min(gangs / weights, weights, gpus)
    reference = scipy_max_min(gangs, weights, gpus)
    if gpus / weights.sum() <= np.min(gangs / weights):
        assert x is not None
        np.testing.assert_allclose(x, reference[:n], atol=1e-7)
        assert float(np.min(gangs * x / weights)) == pytest.approx(reference[n], abs=1e-9)
    else:   # light load: the optimum is not unique, the LP decides
        assert x is None


def test_light_load_is_left_to_the_lp():
    # one GPU each would leave 4 of 10 idle: z* = 1 is capped by the 1-GPU jobs' x ≤ 1
    assert one_type_max_min(np.array([1.0, 1.0, 4.0]), np.ones(3), 10.0) is None
    # exactly full: G/Σw = 6/6 = 1 = s_j/w_j for the 1-GPU jobs, still the only optimum
    np.testing.assert_array_equal(
        one_type_max_min(np.array([1.0, 1.0, 4.0]), np.ones(3), 3.0), [1.0, 1.0, 0.25])


def test_policy_uses_it_and_gives_equal_jobs_equal_shares():
    """The LP's solvers return equal jobs' shares a rounding apart, and the walk then orders
    them by that noise; the closed form gives them the same number."""
    jobs = [Job(id=f"j{k}", gpus=1, progress=Progress(0.0, 100.0), state=JobState.PENDING,
                throughput=ThroughputProfile({("v100", 1): 3.0})) for k in range(7)]
    policy = MaxMinPolicy()
    alloc = policy.allocate(jobs, {"v100": 3}, 0.0)
    assert {alloc[j.id]["v100"] for j in jobs} == {3 / 7}
    assert policy.stats.solves == 0
    two_types = MaxMinPolicy()   # the LP
    two_types.allocate(jobs, {"v100": 3, "k80": 1}, 0.0)
    assert two_types.stats.solves == 1

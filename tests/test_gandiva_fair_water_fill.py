"""The array water-filling the policy uses is :func:`water_fill` to the bit (issue 30).

Gandiva_fair's placements compare loads and shares with ``<``/``max``: a last-bit difference
would move a job to another server, so equal to a tolerance is not enough.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.policy.gandiva_fair.tickets import water_fill, water_fill_arrays


def reference(capacity: float, weights: np.ndarray, demands: np.ndarray
              ) -> tuple[list[float], list[float]]:
    """(share, effective tickets) per entry from the dict version, 0 for non-users."""
    users = range(len(demands))
    share, effective = water_fill(capacity, {u: float(weights[u]) for u in users},
                                  {u: float(demands[u]) for u in users if demands[u] > 0})
    return [share.get(u, 0.0) for u in users], [effective.get(u, 0.0) for u in users]


def arrays(capacity: float, weights: np.ndarray, demands: np.ndarray
           ) -> tuple[list[float], list[float]]:
    share, level = water_fill_arrays(capacity, weights, demands)
    return share.tolist(), [s / level if d > 0 else 0.0
                            for s, d in zip(share.tolist(), demands.tolist(), strict=True)]


# tickets as the policy has them: entitlements (any float), 1e-9 for a user without one
tickets = st.one_of(st.just(1e-9), st.just(1.0), st.floats(0.01, 1000.0))


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 64), st.lists(st.tuples(tickets, st.integers(0, 40)), min_size=1,
                                    max_size=30))
def test_same_shares_and_tickets_to_the_bit(capacity, users):
    weights = np.array([w for w, _ in users])
    demands = np.array([float(d) for _, d in users])
    assert arrays(capacity, weights, demands) == reference(capacity, weights, demands)


@pytest.mark.parametrize(("capacity", "weights", "demands"), [
    (8, [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]),        # everybody satisfied: the largest ratio
    (8, [1.0, 1.0, 1.0], [8.0, 8.0, 8.0]),        # nobody: equal thirds
    (6, [1.0, 2.0, 1.0], [2.0, 4.0, 2.0]),        # exact fit, equal ratios (ties in order)
    (12, [0.1, 0.7, 0.2], [1.0, 20.0, 3.0]),      # tickets that do not add up exactly
    (4, [1e-9, 1.0, 1.0], [0.0, 0.0, 3.0]),       # users without demand are not users
    (4, [1e-9, 0.3, 0.3], [5.0, 1.0, 5.0]),       # a user without entitlement gets the rest
])
def test_the_edges(capacity, weights, demands):
    w, d = np.array(weights), np.array(demands)
    assert arrays(capacity, w, d) == reference(capacity, w, d)


def test_nobody_with_demand_gets_nothing():
    share, _ = water_fill_arrays(8.0, np.ones(3), np.zeros(3))
    assert share.tolist() == [0.0, 0.0, 0.0]


def test_a_user_with_demand_and_no_tickets_is_refused_as_before():
    with pytest.raises(ValueError, match="tickets > 0"):
        water_fill_arrays(8.0, np.array([1.0, 0.0]), np.array([1.0, 1.0]))

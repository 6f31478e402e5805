"""Shockwave's array-at-once market equals a straightforward per-job construction, bit for bit.

The fast path (tables for all jobs on one grid, the count problem from flat arrays, lexsort
orders in the layout) must not change a plan: the references below are the per-job loops it
replaced, and every table, matrix, bound and layout is compared exactly on random markets
with multi-regime trajectories, gangs, static jobs and both log forms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpufair.model import Job, JobState, Progress, ThroughputProfile
from gpufair.policy.shockwave.policy import (
    JobView,
    Market,
    ShockwaveSettings,
    _epoch_fraction,
    _epochs_after,
    _layout,
    _log,
    _pack,
    _rows,
    _with_ordering,
)
from gpufair.policy.shockwave.regimes import Trajectory


def _job(rng: np.random.Generator, i: int) -> Job:
    static = rng.random() < 0.15
    epochs = None if static else int(rng.integers(2, 60))
    done = 0 if static else int(rng.integers(0, epochs))
    batch = int(rng.choice([16, 32, 100]))
    iterations = float(done * math.ceil(10_000 / batch) + rng.integers(0, 50))
    held = ("g0",) if rng.random() < 0.3 else ()
    return Job(id=f"j{i}", gpus=int(rng.choice([1, 1, 2, 4, 8])),
               state=JobState.RUNNING if held else JobState.PENDING, gpus_held=held,
               progress=Progress(iterations, None, done, epochs),
               throughput=ThroughputProfile({("v100", 1): 1.0}), batch_size=batch,
               initial_batch_size=batch, samples_per_epoch=10_000,
               batch_rates=((batch, 1.0),))


def _trajectory(rng: np.random.Generator) -> Trajectory:
    regimes = int(rng.integers(0, 4))
    epochs = tuple(float(rng.choice([0.0, rng.uniform(0.1, 30)])) for _ in range(regimes))
    per = tuple(float(rng.choice([0.0, rng.uniform(5, 400)])) for _ in range(regimes))
    return Trajectory(epochs, per)


def random_views(seed: int, n: int) -> list[JobView]:
    rng = np.random.default_rng(seed)
    views = []
    for i in range(n):
        trajectory = _trajectory(rng)
        remaining = trajectory.remaining_seconds if rng.random() < 0.9 else \
            float(rng.uniform(0, 5000))
        rho = float(rng.uniform(0.5, 3.0))
        views.append(JobView(_job(rng, i), trajectory, remaining, rho, rho ** 5))
    return views


def reference_tables(market: Market) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The per-job, per-round tables the fast path replaced."""
    log_util, remaining = [], []
    d = market.round_s
    for view in market.views:
        s = np.arange(max(1, min(market.horizon, math.ceil(view.remaining_s / d))) + 1)
        progress = np.array([view.trajectory.epochs_after(k * d) for k in s])
        total = view.job.progress.epochs_total
        if total:
            done = view.job.progress.epochs_done + _epoch_fraction(view.job)
            util = (done + progress) / total
        else:
            util = np.minimum(1.0, s * d / max(view.remaining_s, d))
        log_util.append(_log(util, market.settings.log_approximation_bases))
        remaining.append(np.maximum(0.0, view.remaining_s - s * d))
    return log_util, remaining


def reference_count_problem(market: Market, relaxed: bool
                            ) -> tuple[np.ndarray, object, np.ndarray, float]:
    """c, A_ub, b_ub and the constant of the per-job construction."""
    log_util, remaining = reference_tables(market)
    offsets = np.concatenate([[0], np.cumsum([len(lu) - 1 for lu in log_util])])
    h = int(offsets[-1])
    c = np.zeros(h + 1)
    c[h] = market._h_weight()
    constant = 0.0
    ub_rows = []
    spread_cols, spread_vals, spread_rhs = [], [], 0.0
    capacity_cols, capacity_vals = [], []
    scale = market._scale
    for j, view in enumerate(market.views):
        lu, rem = log_util[j], remaining[j]
        cols = offsets[j] + np.arange(len(lu) - 1)
        c[cols] = view.weight * scale * np.diff(lu)
        constant += view.weight * scale * lu[0]
        drop = -np.diff(rem)
        ub_rows.append((np.append(cols, h), np.append(-drop, -1.0), -rem[0]))
        spread_cols.append(cols)
        spread_vals.append(-drop * market._width(view))
        spread_rhs -= rem[0] * market._width(view)
        capacity_cols.append(cols)
        capacity_vals.append(np.full(len(cols), float(view.job.gpus)))
    ub_rows.append((np.append(np.concatenate(spread_cols), h),
                    np.append(np.concatenate(spread_vals), -1.0), spread_rhs))
    ub_rows.append((np.concatenate(capacity_cols), np.concatenate(capacity_vals),
                    float(market.gpus * market.horizon)))
    a_ub, b_ub = _rows(ub_rows, h + 1)
    convex = np.array([relaxed and bool(np.all(np.diff(lu, 2) <= 0)) for lu in log_util],
                      dtype=bool)
    a_ub, b_ub = _with_ordering(a_ub, b_ub, offsets, skip=convex)
    return c, a_ub, b_ub, constant


def reference_pack(gang: np.ndarray, counts: np.ndarray, gpus: int, rounds: int,
                   priority: np.ndarray) -> np.ndarray | None:
    grid = np.zeros((len(gang), rounds), dtype=bool)
    free = np.full(rounds, gpus)
    for j in sorted(np.flatnonzero(counts > 0), key=lambda j: (-gang[j], -priority[j])):
        fits = [t for t in np.argsort(-free, kind="stable") if free[t] >= gang[j]]
        if len(fits) < counts[j]:
            return None
        grid[j, fits[: counts[j]]] = True
        free[fits[: counts[j]]] -= gang[j]
    return grid


def _settings(seed: int, horizon: int) -> ShockwaveSettings:
    bases = (0.25, 0.5, 0.75, 1.0) if seed % 3 == 0 else ()
    return ShockwaveSettings(window_rounds=horizon, log_approximation_bases=bases,
                             gang_aware_makespan=seed % 2 == 1,
                             makespan_weight_per_s=1e-4 if seed % 5 == 4 else None)


@pytest.mark.parametrize("seed", range(12))
def test_tables_equal_the_per_job_walk(seed):
    horizon = [1, 3, 20][seed % 3]
    market = Market(random_views(seed, 60), 16, horizon, 120.0, _settings(seed, horizon))
    log_util, remaining = reference_tables(market)
    for fast, slow in zip(market.log_util + market.remaining, log_util + remaining,
                          strict=True):
        assert fast.shape == slow.shape
        assert np.array_equal(fast, slow)


@pytest.mark.parametrize("seed", range(6))
def test_epochs_after_equals_the_scalar_walk(seed):
    rng = np.random.default_rng(seed)
    trajectories = [_trajectory(rng) for _ in range(40)]
    seconds = np.concatenate([np.arange(30) * 120.0, rng.uniform(0, 20_000, 30)])
    expected = np.array([[t.epochs_after(x) for x in seconds] for t in trajectories])
    assert np.array_equal(_epochs_after(trajectories, seconds), expected)


@pytest.mark.parametrize("relaxed", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_count_problem_equals_the_per_job_construction(seed, relaxed):
    horizon = [2, 6, 20][seed % 3]
    market = Market(random_views(seed, 50), 32, horizon, 120.0, _settings(seed, horizon))
    problem = market.count_problem(relaxed=relaxed)
    c, a_ub, b_ub, constant = reference_count_problem(market, relaxed)
    assert np.array_equal(problem.c, c)
    assert np.array_equal(problem.b_ub, b_ub)
    assert problem.constant == constant
    fast = problem.A_ub
    # same CSR arrays, entry for entry and in the same order (the solver sees the same model)
    assert fast.shape == a_ub.shape
    assert np.array_equal(fast.indptr, a_ub.indptr)
    assert np.array_equal(fast.indices, a_ub.indices)
    assert np.array_equal(fast.data, a_ub.data)


@pytest.mark.parametrize("seed", range(10))
def test_layout_order_equals_sorted_with_tuple_keys(seed):
    rng = np.random.default_rng(seed)
    n, gpus, rounds = 80, 32, 12
    gang = rng.choice([1, 1, 2, 4, 8], n)
    priority = np.round(rng.uniform(0, 3, n), 1)  # ties exercise the stable order
    counts = rng.integers(0, rounds + 1, n)
    while gang @ counts > gpus * rounds * 0.9:
        counts[rng.integers(n)] = 0
    fast, slow = _pack(gang, counts, gpus, rounds, priority), \
        reference_pack(gang, counts, gpus, rounds, priority)
    assert (fast is None) == (slow is None)
    if fast is not None:
        assert np.array_equal(fast, slow)


@pytest.mark.parametrize("seed", range(6))
def test_market_derived_values_match_the_tables(seed):
    """value(), the rounding's tables and the layout read the same numbers as the lists."""
    market = Market(random_views(seed, 30), 16, 6, 120.0, _settings(seed, 6))
    rng = np.random.default_rng(seed)
    counts = np.array([rng.integers(0, len(lu)) for lu in market.log_util])
    weights = np.array([v.weight for v in market.views]) * market._scale
    rem = np.array([r[k] for r, k in zip(market.remaining, counts, strict=True)])
    lu = np.array([t[k] for t, k in zip(market.log_util, counts, strict=True)])
    widths = np.array([market._width(v) for v in market.views])
    h = max(0.0, float(rem.max()), float(widths @ rem))
    assert market.value(counts) == float(weights @ lu) + market._h_weight() * h
    grid = _layout(market.views, counts, market.gpus, market.horizon)
    if grid is not None:
        assert list(grid.sum(axis=1)) == list(counts)

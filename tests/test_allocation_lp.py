"""The shared time-fraction LP skeleton, entry by entry on a hand-written case.

Five jobs on two types (2 V100s, 8 K80s): "a" runs on both; "b", a 2-GPU gang, only on the
V100s (exactly their number: still room); "c", a 4-GPU gang, has a V100 rate but too few
V100s, so a K80 column only; "d" only the K80; "e" has no rate anywhere, so no column. Columns
go job by job, type by type within a job, so the types interleave.
"""

from __future__ import annotations

import numpy as np

from gpufair.model import Job, ThroughputProfile
from gpufair.policy.allocation_lp import fraction_index

CAPACITY = {"v100": 2, "k80": 8}


def make(jid: str, gpus: int, rates: dict[str, float]) -> Job:
    return Job(id=jid, gpus=gpus,
               throughput=ThroughputProfile({(t, gpus): r for t, r in rates.items()}))


JOBS = [make("a", 1, {"v100": 3.0, "k80": 1.0}), make("b", 2, {"v100": 5.0}),
        make("c", 4, {"v100": 9.0, "k80": 4.0}), make("d", 1, {"k80": 2.0}), make("e", 1, {})]


def test_columns():
    index = fraction_index(JOBS, CAPACITY)
    assert index.jobs.tolist() == [0, 0, 1, 2, 3]
    assert [index.types[t] for t in index.type_index.tolist()] == \
        ["v100", "k80", "v100", "k80", "k80"]
    assert index.rates.tolist() == [3.0, 1.0, 5.0, 4.0, 2.0]
    assert index.gang.tolist() == [1.0, 1.0, 2.0, 4.0, 1.0]
    assert index.runnable.tolist() == [0, 1, 2, 3]


def test_rows():
    index = fraction_index(JOBS, CAPACITY)
    values = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    per_job = [[10, 20, 0, 0, 0], [0, 0, 30, 0, 0], [0, 0, 0, 40, 0], [0, 0, 0, 0, 50]]
    np.testing.assert_array_equal(index.per_job(values).toarray(), [*per_job, [0] * 5])
    np.testing.assert_array_equal(index.per_job(values, runnable_only=True).toarray(), per_job)
    rows, rhs = index.capacity_rows(CAPACITY)
    once = [[1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 0, 1], [0] * 5]
    np.testing.assert_array_equal(rows.toarray(), [
        [1, 0, 2, 0, 0],    # V100: Σ sf·x ≤ 2
        [0, 1, 0, 4, 1],    # K80: Σ sf·x ≤ 8
        *once])             # each job's Σ_t x ≤ 1
    assert rhs.tolist() == [2, 8, 1, 1, 1, 1, 1]


def test_no_jobs():
    index = fraction_index([], CAPACITY)
    assert index.size == 0 and index.runnable.size == 0
    assert index.capacity_rows(CAPACITY)[0].shape == (2, 0)

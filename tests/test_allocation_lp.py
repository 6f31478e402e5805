"""The shared time-fraction LP skeleton, entry by entry on a hand-written case.

Three jobs on two types: "a" runs on both, "b" only on the K80 (no V100 rate), "c" is a
4-GPU gang and the V100 type has 2 GPUs, so "c" has a K80 column only — and "d" has no
column at all (no rate anywhere). Columns go job by job, type by type within a job.
"""

from __future__ import annotations

import numpy as np

from gpufair.model import Job, ThroughputProfile
from gpufair.policy.allocation_lp import fraction_index

CAPACITY = {"v100": 2, "k80": 8}


def make(jid: str, gpus: int, rates: dict[str, float]) -> Job:
    return Job(id=jid, gpus=gpus,
               throughput=ThroughputProfile({(t, gpus): r for t, r in rates.items()}))


JOBS = [make("a", 1, {"v100": 3.0, "k80": 1.0}), make("b", 2, {"k80": 2.0}),
        make("c", 4, {"v100": 9.0, "k80": 4.0}), make("d", 1, {})]


def test_columns():
    index = fraction_index(JOBS, CAPACITY)
    assert index.jobs.tolist() == [0, 0, 1, 2]
    assert [index.types[t] for t in index.type_index.tolist()] == ["v100", "k80", "k80", "k80"]
    assert index.rates.tolist() == [3.0, 1.0, 2.0, 4.0]
    assert index.gang.tolist() == [1.0, 1.0, 2.0, 4.0]
    assert index.runnable.tolist() == [0, 1, 2]


def test_rows():
    index = fraction_index(JOBS, CAPACITY)
    values = np.array([10.0, 20.0, 30.0, 40.0])
    np.testing.assert_array_equal(index.per_job(values).toarray(),
                                  [[10, 20, 0, 0], [0, 0, 30, 0], [0, 0, 0, 40], [0, 0, 0, 0]])
    np.testing.assert_array_equal(index.per_job(values, runnable_only=True).toarray(),
                                  [[10, 20, 0, 0], [0, 0, 30, 0], [0, 0, 0, 40]])
    rows, rhs = index.capacity_rows(CAPACITY)
    np.testing.assert_array_equal(rows.toarray(), [
        [1, 0, 0, 0],       # V100: Σ sf·x ≤ 2
        [0, 1, 2, 4],       # K80: Σ sf·x ≤ 8
        [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]])   # each job's Σ_t x ≤ 1
    assert rhs.tolist() == [2, 8, 1, 1, 1, 1]


def test_no_jobs():
    index = fraction_index([], CAPACITY)
    assert index.size == 0 and index.runnable.size == 0
    assert index.capacity_rows(CAPACITY)[0].shape == (2, 0)

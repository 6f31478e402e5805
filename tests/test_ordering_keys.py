"""An ordering policy's fast one-argument key must order exactly as its ``sort_key`` (the
sort runs over every active job at every decision; issue 31 made FIFO's and LAS's cheaper).
Ties matter: the sort is stable, so equal keys keep the snapshot's order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.model import Job, JobState
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

_JOBS = st.lists(st.tuples(st.sampled_from([0.0, 5.0, 5.0, 120.5, 3600.0]),   # tied arrivals
                           st.sampled_from([0.0, 0.0, 99.9, 100.0, 450.0, 3600.0, 1e6]),
                           st.sampled_from([1, 2, 4, 8])), max_size=40)


def _jobs(rows: list[tuple[float, float, int]]) -> list[Job]:
    return [Job(id=f"j{k}", gpus=gpus, arrival_s=arrival, attained_s=attained,
                state=JobState.RUNNING if attained and k % 2 else JobState.PENDING)
            for k, (arrival, attained, gpus) in enumerate(rows)]


@pytest.mark.parametrize(("name", "options"), [
    ("fifo", {}), ("las", {}), ("las", {"queue_thresholds_gpu_s": [100.0, 400.0, 3600.0]}),
    ("srtf", {})])
@settings(max_examples=25, deadline=None)
@given(rows=_JOBS)
def test_order_key_sorts_as_sort_key_ties_included(name, options, rows) -> None:
    policy = create_policy(name, PolicyConfig(options=options))
    jobs, now = _jobs(rows), 7200.0
    fast = [j.id for j in sorted(jobs, key=policy.order_key(now))]
    assert fast == [j.id for j in sorted(jobs, key=lambda j: policy.sort_key(j, now))]

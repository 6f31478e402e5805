"""Themis with ``lengths = "attained"``: the length-unaware Themis the AFS paper compares
against (issue 36). It must be exactly Themis on the same jobs with their totals unknown, and
it must differ from the default, which knows them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_policy_contract import SNAPSHOTS, config

from gpufair.model import ClusterState
from gpufair.policy.registry import create_policy


def totals_hidden(state: ClusterState) -> ClusterState:
    return replace(state, jobs=tuple(
        replace(j, progress=replace(j.progress, iterations_total=None, epochs_total=None))
        for j in state.jobs))


def plan_of(state: ClusterState, **options: object) -> list[tuple[str, tuple[str, ...]]]:
    plan = create_policy("themis", config(**options)).schedule(state, state.time_s)
    return sorted((a.job_id, tuple(a.gpu_ids)) for a in plan.assignments)


@pytest.mark.parametrize("snapshot", sorted(SNAPSHOTS))
def test_attained_is_themis_without_the_totals(snapshot: str) -> None:
    state = SNAPSHOTS[snapshot]()
    assert plan_of(state, lengths="attained") == plan_of(totals_hidden(state))


def test_attained_changes_the_auction_where_lengths_matter() -> None:
    """Across the contract's snapshots, at least one is decided differently without the
    totals: the option is not ignored."""
    differ = [name for name, make in SNAPSHOTS.items()
              if plan_of(make(), lengths="attained") != plan_of(make())]
    assert differ

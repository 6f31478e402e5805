"""Allowed-node checks at site scale (issue 30): the binary search of ``all_allowed`` and
the translation's per-combination allowed nodes answer exactly as the sets they replace."""

from __future__ import annotations

import random
import re

import pytest

from gpufair.adapters.slurm.translate import _allowed_nodes, _Site
from gpufair.model import Job
from gpufair.model.allowed_nodes import all_allowed

NAMES = tuple(f"n{i:03d}" for i in range(40))


@pytest.mark.parametrize("allowed", [NAMES, NAMES[::-1], NAMES[:3], list(NAMES),
                                     NAMES[:20] + NAMES[10:30]],
                         ids=["sorted", "unsorted", "short", "list", "duplicates"])
@pytest.mark.parametrize("hosts", [(), ("n000",), ("n039",), ("n000", "n039", "n017"),
                                   ("m",), ("n040",), ("n",), ("n017", "x"), ("n0175",)])
def test_all_allowed_is_a_subset_check(allowed: tuple[str, ...], hosts: tuple[str, ...]
                                       ) -> None:
    assert all_allowed(hosts, allowed) == (set(hosts) <= set(allowed))


def test_all_allowed_random_against_sets() -> None:
    rng = random.Random(7)
    pool = [f"a{i}" for i in range(300)]
    for _ in range(300):
        allowed = tuple(sorted(rng.sample(pool, rng.randint(0, 120))))
        if rng.random() < 0.3:
            allowed = tuple(rng.sample(allowed, len(allowed)))   # shuffled: not sorted
        hosts = rng.sample(pool, rng.randint(0, 4))
        assert all_allowed(hosts, allowed) == (set(hosts) <= set(allowed))


def test_a_reused_id_is_not_taken_for_the_old_tuple() -> None:
    """The sortedness kept per tuple identity holds the tuple alive: a new tuple can never
    inherit a dead one's answer (sorted first, then an unsorted one of the same size)."""
    for _ in range(50):
        assert all_allowed(("n005",), tuple(NAMES))
        assert not all_allowed(("n041",), tuple(reversed(NAMES)))


def test_placement_problem_names_the_nodes_not_allowed() -> None:
    job = Job("1", gpus=2, allowed_nodes=NAMES[:20])
    assert job.placement_problem(("n001:0", "n019:1"), {}) is None
    assert job.placement_problem(("n001:0", "n020:1"), {}) == "nodes ['n020'] are not allowed"


def _old_allowed_nodes(site: _Site, parts: tuple[str, ...], wanted: str,
                       excluded: list[str], asked: tuple[str, ...]
                       ) -> tuple[str, ...] | None:
    """The rule as it was written before issue 30's 100,000-job work: the oracle."""
    allowed: set[str] | None = None
    if parts:
        allowed = set().union(*(site.partitions[p] for p in parts))
    if wanted:
        need = set(re.split(r"[&,]", wanted))
        having = {n for n, f in site.features.items() if need <= f}
        allowed = having if allowed is None else allowed & having
    if excluded:
        allowed = (set(site.features) if allowed is None else allowed) - set(excluded)
    if asked:
        allowed = set(asked) if allowed is None else allowed & set(asked)
    return None if allowed is None else tuple(sorted(allowed))


def test_allowed_nodes_match_the_set_rule() -> None:
    rng = random.Random(3)
    names = [f"gpu-{i:03d}" for i in range(60)]
    features = {n: frozenset(rng.sample(["a100", "ib", "big"], rng.randint(0, 2)))
                for n in names}
    partitions = {"p1": frozenset(names[:40]), "p2": frozenset(names[30:]),
                  "empty": frozenset()}
    site = _Site(features, partitions, {})
    for _ in range(400):
        parts = tuple(rng.sample(sorted(partitions), rng.randint(0, 2)))
        wanted = rng.choice(["", "a100", "ib&big", "a100,ib"])
        excluded = rng.sample([*names, "ghost"], rng.randint(0, 3) * rng.randint(0, 1))
        asked = tuple(rng.sample([*names, "elsewhere"], rng.randint(0, 3) * rng.randint(0, 1)))
        if excluded and rng.random() < 0.5:   # a node both asked for and excluded
            asked = (*asked, excluded[0])
        assert _allowed_nodes(site, parts, wanted, excluded, asked) == \
            _old_allowed_nodes(site, parts, wanted, excluded, asked), \
            (parts, wanted, excluded, asked)

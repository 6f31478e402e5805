"""Tenants' GPU shares as CapacityScheduler percentages: numbers worked out by hand, and the
emulator's limit (a fraction of the cluster, as the RM compares it) letting in exactly N."""

from __future__ import annotations

import pytest

from gpufair.adapters.yarn.enforce import QueueLayout, capacities, mutation
from gpufair.errors import InputError
from tests.yarn_emulator import Cluster, EmuNode

ROOT = QueueLayout("root", "root.rest")


def test_exact_shares() -> None:
    # 3 of 8 = 37.5 %, 4 of 8 = 50 %, rest 12.5 %
    assert capacities({"a": 3, "b": 4}, 8, ROOT) == {"root.a": "37.5", "root.b": "50",
                                                     "root.rest": "12.5"}


def test_thirds_round_up_and_the_rest_takes_the_remainder() -> None:
    # 100/3 = 33.3333333… → 33.333334 each; rest = 100 - 66.666668 = 33.333332
    assert capacities({"a": 1, "b": 1}, 3, ROOT) == {
        "root.a": "33.333334", "root.b": "33.333334", "root.rest": "33.333332"}
    # every GPU given: 3 × 33.333334 = 100.000002, within the RM's tolerance; rest 0
    assert capacities({"a": 1, "b": 1, "c": 1}, 3, ROOT)["root.rest"] == "0"


def test_parent_below_root_scales_up() -> None:
    # parent at 50 % of the cluster: 2 of 8 GPUs = 25 % of the cluster = 50 % of the parent
    layout = QueueLayout("root.gpu", "root.gpu.rest", parent_share=50.0)
    assert capacities({"t": 2}, 8, layout) == {"root.gpu.t": "50", "root.gpu.rest": "50"}
    with pytest.raises(InputError, match="only 50% of the cluster"):
        capacities({"t": 5}, 8, layout)


def test_impossible_shares_are_errors() -> None:
    with pytest.raises(InputError, match="gives 9 GPUs of 8"):
        capacities({"a": 9}, 8, ROOT)
    with pytest.raises(InputError, match="no GPUs"):
        capacities({"a": 0}, 0, ROOT)


@pytest.mark.parametrize("total", [3, 7, 8, 13])
def test_the_rm_limit_lets_in_exactly_the_share(total: int) -> None:
    """For every split of ``total`` GPUs into a and b, the emulator's limit for each queue
    (from the percentages the adapter writes) is exactly its share."""
    for a in range(total + 1):
        for b in range(total + 1 - a):
            cluster = Cluster([EmuNode("n", total)], {"root.a": (50, 50), "root.b": (50, 50),
                                                      "root.rest": (0, 0)})
            caps = capacities({"a": a, "b": b}, total, ROOT)
            cluster.queues = cluster.mutate(mutation({"": caps}))
            assert (cluster.gpu_limit("a"), cluster.gpu_limit("b")) == (a, b), (total, a, b)

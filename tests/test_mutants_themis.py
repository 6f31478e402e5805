"""Themis's filter pinned where the rounding matters (issue 21: ceil → floor survived).

Spec U4: the ceil((1 − f)·N) apps with the worst ρ bid. The older test's fractions all gave
whole numbers (0.2·10, 0.5·10), where ceil and floor agree; here (1 − f)·N is fractional.
"""

from __future__ import annotations

import pytest

from gpufair.model import ClusterState, Job, JobState, Node, Progress, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.themis.policy import ThemisPolicy

NODES = tuple(Node(f"n{i}", "v100", 2, rack="r0") for i in range(2))


def job(jid: str, total: float, arrival: float) -> Job:
    return Job(id=jid, gpus=1, arrival_s=arrival, state=JobState.PENDING,
               progress=Progress(0.0, total), throughput=ThroughputProfile({("v100", 1): 1.0}))


@pytest.mark.parametrize(("f", "bidders"), [
    (0.75, 3),    # 0.25·10 = 2.5 → 3 (floor: 2)
    (0.85, 2),    # 1.5 → 2
    (0.61, 4),    # 3.9 → 4
    (0.95, 1),    # 0.5 → 1
    (0.7, 3),     # 0.3·10 = 2.9999999999999996 in floating point: still 3, not 4
])
def test_the_filter_rounds_the_bidder_count_up(f: float, bidders: int) -> None:
    policy = ThemisPolicy(PolicyConfig(seed=0, options={"keep_log": True, "f": f}))
    jobs = tuple(job(f"j{i}", 1000 + 100 * i, -float(i)) for i in range(10))
    policy.schedule(ClusterState(0.0, nodes=NODES, jobs=jobs), 0.0)
    assert len(policy.rounds[-1].bidders) == bidders

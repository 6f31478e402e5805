"""The time-fraction walk's order, written out by hand: priority a / (τ / W) first, then the
deficit, then a, then the order the jobs came in; a job without a rate on the type never
takes its GPUs, whatever its share says (SIMULATION.md §2.6)."""

from __future__ import annotations

from gpufair.model import Job, JobState, Progress, ThroughputProfile
from gpufair.policy.max_min import MaxMinPolicy


def job(jid: str, rates: dict[str, float], gpus: int = 1) -> Job:
    return Job(id=jid, gpus=gpus, state=JobState.PENDING, progress=Progress(0.0, 100.0),
               throughput=ThroughputProfile({(t, gpus): r for t, r in rates.items()}))


def policy_with(shares: dict[str, dict[str, float]], tau: dict[str, dict[str, float]],
                deficit: dict[str, dict[str, float]], weight_sum: dict[str, float]
                ) -> MaxMinPolicy:
    policy = MaxMinPolicy()
    policy._alloc, policy._tau, policy._deficit = shares, tau, deficit
    policy._weight_sum = weight_sum
    return policy


def picked(policy: MaxMinPolicy, jobs: list[Job], capacity: dict[str, int]) -> list[str]:
    picks, _ = policy._walk(jobs, capacity, newcomers_run=True)
    return [j.id for j, _ in picks]


def test_equal_priority_goes_to_the_larger_deficit_before_the_larger_share() -> None:
    # x: 0.5 / (1 / 2) = 1.0, deficit 5; y: 1.0 / (2 / 2) = 1.0, deficit 1
    jobs = [job("y", {"v100": 1.0}), job("x", {"v100": 1.0})]
    policy = policy_with({"x": {"v100": 0.5}, "y": {"v100": 1.0}},
                         {"x": {"v100": 1.0}, "y": {"v100": 2.0}},
                         {"x": {"v100": 5.0}, "y": {"v100": 1.0}}, {"v100": 2.0})
    assert picked(policy, jobs, {"v100": 1}) == ["x"]


def test_equal_priority_and_deficit_go_to_the_larger_share_then_to_arrival_order() -> None:
    # all three at priority 1.0 and deficit 0; u has the larger share; v and w tie fully
    jobs = [job("v", {"v100": 1.0}), job("w", {"v100": 1.0}), job("u", {"v100": 1.0})]
    policy = policy_with({"u": {"v100": 0.8}, "v": {"v100": 0.4}, "w": {"v100": 0.4}},
                         {"u": {"v100": 1.6}, "v": {"v100": 0.8}, "w": {"v100": 0.8}},
                         {i: {"v100": 0.0} for i in "uvw"}, {"v100": 2.0})
    assert picked(policy, jobs, {"v100": 2}) == ["u", "v"]
    _, priorities = policy._walk(jobs, {"v100": 2}, newcomers_run=True)
    assert priorities == {"u": 1.0, "v": 1.0, "w": 1.0}


def test_a_share_without_a_rate_takes_no_gpus() -> None:
    # z has the larger share on the K80 but no rate there: the newcomer n takes the GPU
    jobs = [job("z", {"v100": 1.0}), job("n", {"k80": 1.0})]
    policy = policy_with({"z": {"k80": 1.0}}, {"z": {"k80": 1.0}, "n": {"k80": 60.0}},
                         {"z": {"k80": 0.0}, "n": {"k80": 0.0}}, {"k80": 2.0})
    assert picked(policy, jobs, {"k80": 1}) == ["n"]


def test_a_gang_too_large_is_skipped_and_smaller_ones_overtake() -> None:
    # priorities: big 3.0 (4 GPUs), a 2.0, b 1.0; 3 GPUs: big cannot fit, a and b run
    jobs = [job("a", {"v100": 1.0}), job("big", {"v100": 1.0}, gpus=4),
            job("b", {"v100": 1.0})]
    policy = policy_with({"a": {"v100": 0.2}, "big": {"v100": 0.3}, "b": {"v100": 0.1}},
                         {i: {"v100": 0.2} for i in ("a", "big", "b")},
                         {i: {"v100": 0.0} for i in ("a", "big", "b")}, {"v100": 2.0})
    assert picked(policy, jobs, {"v100": 3}) == ["a", "b"]

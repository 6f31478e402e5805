"""End to end in simulation: synthetic logs → profiler → measured speeds → policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import CLEAN
from gpufair.adapters.simulator.throughputs import load_throughputs
from gpufair.adapters.simulator.trace import load_trace
from gpufair.core.enrich import with_default_profiles
from gpufair.core.round import Round
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy
from gpufair.profiler import Profiler
from gpufair.profiler.synthetic import FORMATS, ProfiledAdapter, SyntheticLogWriter
from tests.conftest import BUNDLED


class _WithDefaults(ProfiledAdapter):
    """As the daemon does: neutral speeds for jobs the profiler has not measured yet."""

    def snapshot(self):
        return with_default_profiles(super().snapshot())


def _sim() -> TraceSimulator:
    trace = load_trace(BUNDLED / "demo_60jobs_16gpus.trace")[:10]
    return TraceSimulator(trace, load_throughputs(BUNDLED / "tacc_throughputs_v100.json"),
                          parse_cluster_spec("v100:4"), CLEAN, 120.0)


def _run(adapter, sim: TraceSimulator, policy: str) -> dict[str, float]:
    config = PolicyConfig(round_s=sim.round_s,
                          recompute_interval_s=sim.semantics.allocation_recompute_interval_s)
    rounds = Round(create_policy(policy, config))
    while not sim.finished:
        result = rounds.run(adapter.snapshot(), preemptive=sim.at_round_boundary)
        adapter.apply(result.actions)
        sim.advance()
    return {o.job_id: o.jct_s for o in sim.outcomes()}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_measured_speeds_match_the_simulated_ones(tmp_path: Path, fmt: str) -> None:
    sim = _sim()
    jobs = {j.id: j for j in sim.jobs}
    sf = {j.id: j.sf for j in sim.jobs}
    writer = SyntheticLogWriter(tmp_path, fmt)
    profiler = Profiler()
    adapter = _WithDefaults(sim, profiler, writer.write)
    jcts = _run(adapter, sim, "fifo")
    assert len(jcts) == 10
    checked = 0
    for job_id, job in jobs.items():
        measured = profiler.model.measured(job_id, "v100", sf[job_id])
        if measured is None:
            continue
        checked += 1
        rate = 1.0 / measured.iter_time_s
        # the speed at the last batch size the log showed (adaptive jobs change it, and the
        # profiler forgets the speeds of earlier regimes)
        true_rate = dict(job.batch_rates)[profiler.reports[job_id].batch_size]
        assert rate == pytest.approx(true_rate, rel=0.01), (job_id, rate, true_rate)
    assert checked >= 8


def test_policy_on_measured_speeds_schedules_like_on_true_ones(tmp_path: Path) -> None:
    sim_a = _sim()
    true_jcts = _run(sim_a, sim_a, "fifo")
    sim_b = _sim()
    adapter = _WithDefaults(sim_b, Profiler(), SyntheticLogWriter(tmp_path, "megatron").write)
    measured_jcts = _run(adapter, sim_b, "fifo")
    assert measured_jcts == pytest.approx(true_jcts)

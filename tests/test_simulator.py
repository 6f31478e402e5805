"""The simulator as an adapter: clean-semantics events, action checks, generated traces."""

from __future__ import annotations

import pytest

from gpufair.adapters.base import Adapter
from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.generate import format_trace, generate_trace
from gpufair.adapters.simulator.semantics import ARTIFACT, CLEAN
from gpufair.adapters.simulator.throughputs import throughputs_from_dict
from gpufair.adapters.simulator.trace import parse_trace
from gpufair.core.round import Round
from gpufair.core.simulation import run_to_end
from gpufair.errors import InputError
from gpufair.model import JobState, Preempt, Resize, Start
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

RATES = throughputs_from_dict({"v100": {"('A3C', 1)": {"null": 1.0},
                                        "('A3C', 2)": {"null": 1.5}}})


def line(steps, arrival, sf=1):
    return f"A3C\tcmd\t.\t--steps\t0\t{steps}\t{sf}\t1\t-1\t{arrival}"


def simulator(lines, gpus=2, semantics=CLEAN, round_s=120.0):
    trace = parse_trace("\n".join(lines))
    return TraceSimulator(trace, RATES, parse_cluster_spec(f"v100:{gpus}"), semantics, round_s)


def run(sim, policy="fifo"):
    config = PolicyConfig(round_s=sim.round_s,
                          recompute_interval_s=sim.semantics.allocation_recompute_interval_s)
    run_to_end(sim, Round(create_policy(policy, config)))
    return {o.job_id: o for o in sim.outcomes()}


def test_is_an_adapter():
    assert isinstance(simulator([line(100, 0)]), Adapter)


def test_clean_arrival_starts_mid_round_on_idle_gpu():
    out = run(simulator([line(100, 0), line(100, 30)]))
    # 20 s start cost, then 100 iterations at 1 it/s: no wait for the round boundary
    assert out["0"].finish_s == pytest.approx(120.0)
    assert out["1"].finish_s == pytest.approx(30 + 20 + 100)


def test_artifact_arrival_waits_for_round_boundary():
    out = run(simulator([line(100, 0), line(100, 30)], semantics=ARTIFACT))
    assert out["0"].finish_s == pytest.approx(100.0)  # round 0 is free of restart cost
    # admitted at the first boundary (t = 100, the round ended early); a 100 s round < R - 5
    # is free of the restart cost too
    assert out["1"].finish_s == pytest.approx(200.0)


def test_clean_completion_backfills_freed_gpu():
    out = run(simulator([line(50, 0), line(500, 0), line(40, 1)]))
    # job 2 waits for job 0 (done at 70 s) and starts then, not at the 120 s boundary
    assert out["2"].finish_s == pytest.approx(70 + 20 + 40)


def test_apply_checks_gangs_and_gpus():
    sim = simulator([line(100, 0, sf=2), line(100, 0)])
    results = sim.apply([Start("0", ("v100-0:0",)), Start("1", ("v100-0:0",)),
                         Start("1", ("v100-1:0",)), Resize("1", ("v100-0:0",)),
                         Start("9", ("v100-0:0",))])
    assert [r.ok for r in results] == [False, True, False, False, False]
    assert "gang of 2" in results[0].detail
    assert "already running" in results[2].detail
    state = sim.snapshot()
    assert state.job("1").state is JobState.RUNNING and state.job("1").gpus_held == ("v100-0:0",)
    sim.apply([Preempt("1")])
    assert sim.snapshot().job("1").state is JobState.PENDING


def test_idle_gap_jumps_to_next_arrival():
    sim = simulator([line(10, 0), line(10, 100000)])
    out = run(sim)
    assert out["1"].finish_s == pytest.approx(100000 + 30)
    assert sim.rounds < 10


def test_unsimulable_jobs_are_dropped_and_named():
    lines = [line(10, 0), "CycleGAN\tcmd\t.\t--steps\t0\t10\t8\t1\t-1\t5", line(10, 6, sf=4)]
    sim = simulator(lines)
    assert [(d.index, d.line) for d in sim.dropped] == [(1, 2), (2, 3)]
    assert "no throughput for ('CycleGAN', 8)" in sim.dropped[0].reason
    assert "needs 4 GPUs" in sim.dropped[1].reason or "no throughput" in sim.dropped[1].reason


def test_generated_trace_round_trips_and_is_seeded(canonical_trace):
    a = generate_trace(canonical_trace, 50, num_gpus=64, seed=1)
    b = generate_trace(canonical_trace, 50, num_gpus=64, seed=1)
    assert a == b and a != generate_trace(canonical_trace, 50, num_gpus=64, seed=2)
    again = parse_trace(format_trace(a))
    assert [(j.job_type, j.total_steps, j.scale_factor, j.mode, j.arrival_s) for j in again] == \
        [(j.job_type, j.total_steps, j.scale_factor, j.mode, j.arrival_s) for j in a]


@pytest.mark.parametrize("policy", ["fifo", "srtf", "las", "max_min", "max_sum_throughput",
                                    "min_total_duration"])
def test_every_policy_finishes_a_heterogeneous_msr_trace(bundled_data, policy):
    from gpufair.adapters.simulator.throughputs import load_throughputs
    from gpufair.adapters.simulator.trace import load_trace
    sim = TraceSimulator(load_trace(bundled_data / "gavel_msr_51b7ef.trace"),
                         load_throughputs(bundled_data / "gavel_simulator_throughputs.json"),
                         parse_cluster_spec("v100:8,p100:8,k80:8", "8"), CLEAN, 360.0)
    out = run(sim, policy)
    assert len(out) == 17 and len(sim.dropped) == 1
    assert all(o.finish_s > o.arrival_s for o in out.values())


def boundaries(sim):
    """(time, round boundary?) of each decision of a run with fifo."""
    rounds, seen = Round(create_policy("fifo", PolicyConfig(round_s=sim.round_s))), []
    while not sim.finished:
        seen.append((sim.now, sim.at_round_boundary))
        sim.apply(rounds.run(sim.snapshot(), preemptive=sim.at_round_boundary).actions)
        sim.advance()
    return seen


def test_round_phase_puts_boundaries_on_the_clock_not_after_the_first_arrival():
    # Slurm's backfill pass runs every bf_interval whenever jobs arrive: with a phase of 5 s
    # and rounds of 10 s the boundaries are 5, 15, 25 ..., also after an idle gap; an
    # arrival between them (t = 3, t = 1000) is an event like a job's end
    lines = [line(20, 3), line(20, 1000), line(5, 1015)]
    seen = boundaries(TraceSimulator(parse_trace("\n".join(lines)), RATES,
                                     parse_cluster_spec("v100:2"), CLEAN, 10.0,
                                     round_phase_s=5.0))
    assert [t for t, boundary in seen if boundary][:3] == [5.0, 15.0, 25.0]
    assert (3.0, False) in seen and (1000.0, False) in seen
    assert (1005.0, True) in seen and (1015.0, True) in seen   # an arrival on the grid
    assert all((t - 5.0) % 10.0 == 0 for t, boundary in seen if boundary)
    # without a phase (the default): every arrival that finds the cluster idle opens a round
    plain = boundaries(simulator(lines, round_s=10.0))
    assert (3.0, True) in plain and (13.0, True) in plain and (1000.0, True) in plain


@pytest.mark.parametrize("phase", [float("nan"), float("inf")])
def test_a_round_phase_must_be_finite(phase):
    with pytest.raises(InputError, match="round-phase"):
        TraceSimulator(parse_trace(line(10, 0)), RATES, parse_cluster_spec("v100:2"), CLEAN,
                       10.0, round_phase_s=phase)


def test_a_round_phase_needs_clean_semantics():
    with pytest.raises(InputError, match="clean"):
        TraceSimulator(parse_trace(line(10, 0)), RATES, parse_cluster_spec("v100:2"),
                       ARTIFACT, 10.0, round_phase_s=0.0)

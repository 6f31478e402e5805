"""Gangs that span GPU types (issue 36): what such a gang is worth (the model), how a policy
picks and places one (``policy/spanning``), how the simulator runs and accounts it, and
OEF's ``span_types`` option (off by default: nothing changes without it)."""

from __future__ import annotations

import pytest

from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import ARTIFACT, CLEAN
from gpufair.adapters.simulator.throughputs import throughputs_from_dict
from gpufair.adapters.simulator.trace import parse_trace
from gpufair.model import Assignment, ClusterState, Job, JobState, Node, Start, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy
from gpufair.policy.spanning import place_spans, span_mix


def job(jid: str = "j", gpus: int = 4, held: tuple[str, ...] = (), **rates: float) -> Job:
    return Job(id=jid, gpus=gpus, throughput=ThroughputProfile(
        {(t, gpus): r for t, r in rates.items()}), gpus_held=held,
        state=JobState.RUNNING if held else JobState.PENDING)


# -- the model: a gang on mixed types runs at its slowest type's rate -------------------------
def test_gang_rate_is_the_slowest_types_rate_at_the_gang_size() -> None:
    j = job(v100=10.0, p100=6.0, k80=2.0)
    assert j.gang_rate(["v100", "v100", "p100", "p100"]) == 6.0
    assert j.gang_rate(["v100", "k80"]) == 2.0
    assert j.gang_rate(["v100"]) == j.rate("v100") == 10.0
    assert j.gang_rate(["v100", "t4"]) == 0.0            # no rate on one of them: cannot run
    assert j.gang_rate([]) == 0.0
    # measured at 4 GPUs: a 2-GPU span of it is not known
    assert j.throughput.gang_rate(["v100", "p100"], 2) == 0.0


def test_gang_rate_respects_the_types_the_job_asked_for() -> None:
    j = Job(id="j", gpus=2, gpu_types=("v100", "p100"),
            throughput=ThroughputProfile({("v100", 2): 5.0, ("p100", 2): 3.0, ("k80", 2): 1.0}))
    assert j.gang_rate(["v100", "p100"]) == 3.0
    assert j.gang_rate(["v100", "k80"]) == 0.0


# -- span_mix: which types, how many of each ----------------------------------------------------
def test_no_span_when_one_type_holds_the_gang_exactly() -> None:
    assert span_mix(job(v100=10.0, k80=2.0), {"v100": 4, "k80": 3}) is None


def test_span_takes_the_fastest_types_that_hold_it_filled_from_the_slowest_up() -> None:
    j = job(gpus=8, v100=10.0, p100=6.0, k80=2.0)
    # v100 alone (6) is short; v100 + p100 hold 8: the gang runs at p100's rate, and takes
    # all 4 p100 first so that only 4 V100s wait on them (2 V100s stay free)
    assert span_mix(j, {"k80": 8, "p100": 4, "v100": 6}) is None   # k80 holds it alone
    assert span_mix(j, {"k80": 7, "p100": 4, "v100": 6}) == {"p100": 4, "v100": 4}
    # a type with no GPUs, or one the job has no rate on, is skipped, not a gap that stops it
    assert span_mix(job(gpus=8, v100=10.0, k80=2.0, p100=0.0),
                    {"v100": 5, "p100": 4, "t4": 0, "k80": 4}) == {"k80": 4, "v100": 4}


def test_no_span_when_the_usable_types_together_are_short() -> None:
    assert span_mix(job(gpus=8, v100=10.0, k80=2.0), {"v100": 4, "k80": 3, "p100": 9}) is None
    assert span_mix(job(gpus=1, v100=1.0), {"v100": 0, "k80": 4}) is None


def test_no_span_for_a_job_that_asks_an_exact_node_count() -> None:
    from dataclasses import replace
    assert span_mix(replace(job(gpus=4, v100=4.0, k80=1.0), nodes=2), {"v100": 2, "k80": 2}) \
        is None


# -- place_spans: GPU ids around what is placed -------------------------------------------------
NODES = (Node("v100-0", "v100", 4), Node("p100-0", "p100", 4), Node("k80-0", "k80", 4))


def test_place_spans_avoids_placed_gpus_and_keeps_a_span_where_it_runs() -> None:
    moving = job("moving", gpus=6, v100=9.0, p100=5.0)
    kept = job("kept", gpus=2, held=("p100-0:3", "k80-0:0"), p100=3.0, k80=1.0)
    state = ClusterState(time_s=0.0, nodes=NODES, jobs=(moving, kept))
    placed = (Assignment("other", ("v100-0:0", "p100-0:0")),)
    out = {a.job_id: a.gpu_ids for a in place_spans(
        state, placed, [(kept, {"p100": 1, "k80": 1}), (moving, {"p100": 2, "v100": 3})])}
    assert out["kept"] == ("p100-0:3", "k80-0:0")
    assert sorted(out["moving"]) == ["p100-0:1", "p100-0:2", "v100-0:1", "v100-0:2",
                                     "v100-0:3"]


def test_place_spans_leaves_out_a_span_that_no_longer_fits() -> None:
    j = job("j", gpus=6, v100=9.0, p100=5.0)
    state = ClusterState(time_s=0.0, nodes=NODES, jobs=(j,))
    placed = (Assignment("other", ("v100-0:0", "v100-0:1")),)
    assert place_spans(state, placed, [(j, {"p100": 2, "v100": 4})]) == ()


# -- the simulator: accepts a span, runs it at the slowest rate, counts its straggler cost ----
RATES = throughputs_from_dict({
    "v100": {"('A3C', 2)": {"null": 4.0}, "('A3C', 4)": {"null": 8.0}},
    "k80": {"('A3C', 2)": {"null": 1.0}, "('A3C', 4)": {"null": 2.0}},
})


def simulator(semantics=CLEAN) -> TraceSimulator:
    trace = parse_trace("A3C\tcmd\t.\t--steps\t0\t400\t4\t1\t-1\t0")
    return TraceSimulator(trace, RATES, parse_cluster_spec("v100:4,k80:4", "4"), semantics,
                          120.0)


def test_simulator_runs_a_gang_across_types_at_the_slowest_rate() -> None:
    sim = simulator()
    [result] = sim.apply([Start("0", ("v100-0:0", "v100-0:1", "k80-0:0", "k80-0:1"))])
    assert result.ok, result.detail
    while not sim.finished:
        sim.advance()
    [out] = sim.outcomes()
    # K80's rate at 4 GPUs (2 it/s) after the 20 s start cost, not V100's (8 it/s)
    assert out.finish_s == pytest.approx(20.0 + 400 / 2.0)
    assert sim.straggler_workers == 4
    # each V100 could do 8 it/s of the gang's pace and does 2: 3/4 of each of 2 GPUs idles
    assert sim.straggler_idle_gpu_s == pytest.approx(2 * 0.75 * 200.0)


def test_simulator_refuses_a_span_onto_a_type_without_a_rate() -> None:
    rates = throughputs_from_dict({"v100": {"('A3C', 2)": {"null": 4.0}},
                                   "k80": {"('A3C', 1)": {"null": 1.0}}})
    trace = parse_trace("A3C\tcmd\t.\t--steps\t0\t400\t2\t1\t-1\t0")
    sim = TraceSimulator(trace, rates, parse_cluster_spec("v100:2,k80:2", "2"), ARTIFACT, 120.0)
    [result] = sim.apply([Start("0", ("v100-0:0", "k80-0:0"))])
    assert not result.ok and "each of k80/v100" in result.detail


def test_single_type_gangs_count_no_straggler_cost() -> None:
    sim = simulator()
    sim.apply([Start("0", ("v100-0:0", "v100-0:1", "v100-0:2", "v100-0:3"))])
    while not sim.finished:
        sim.advance()
    assert sim.straggler_workers == 0 and sim.straggler_idle_gpu_s == 0.0


# -- OEF's span_types --------------------------------------------------------------------------
def oef_state() -> ClusterState:
    """One tenant's 6-GPU gang on 4 V100 + 4 K80: no single type holds it."""
    six = Job(id="six", gpus=6, throughput=ThroughputProfile({("v100", 6): 9.0,
                                                               ("k80", 6): 3.0}))
    nodes = (Node("v100-0", "v100", 4), Node("k80-0", "k80", 4))
    return ClusterState(time_s=0.0, nodes=nodes, jobs=(six,))


@pytest.mark.parametrize("mode", ["cooperative", "non_cooperative"])
def test_oef_spans_types_only_when_told(mode: str) -> None:
    state = oef_state()
    default = create_policy("oef", PolicyConfig(options={"mode": mode}))
    assert default.schedule(state, 0.0).assignments == ()
    spanning = create_policy("oef", PolicyConfig(options={"mode": mode, "span_types": True}))
    [a] = spanning.schedule(state, 0.0).assignments
    type_of = state.layout().type_of
    assert sorted(type_of[g] for g in a.gpu_ids) == ["k80"] * 4 + ["v100"] * 2


def test_oef_keeps_a_running_span_in_the_next_round() -> None:
    from dataclasses import replace
    state = oef_state()
    policy = create_policy("oef", PolicyConfig(options={"span_types": True}))
    [a] = policy.schedule(state, 0.0).assignments
    running = replace(state.jobs[0], state=JobState.RUNNING, gpus_held=a.gpu_ids)
    later = replace(state, time_s=300.0, jobs=(running,))
    assert policy.schedule(later, 300.0).assignments == (a,)


def test_oef_keeps_a_running_span_when_another_gang_is_placed_on_its_types() -> None:
    """The 2-GPU job placed on V100 in node order would land on the GPUs the span holds:
    the span's GPUs are reserved first, so the span is not restarted elsewhere."""
    span = ("v100-0:0", "v100-0:1", "k80-0:0", "k80-0:1", "k80-0:2", "k80-0:3")
    six = Job(id="six", gpus=6, state=JobState.RUNNING, gpus_held=span, start_s=0.0,
              throughput=ThroughputProfile({("v100", 6): 9.0, ("k80", 6): 3.0}))
    two = Job(id="two", gpus=2, throughput=ThroughputProfile({("v100", 2): 4.0,
                                                              ("k80", 2): 1.0}))
    nodes = (Node("v100-0", "v100", 4), Node("k80-0", "k80", 4))
    state = ClusterState(time_s=0.0, nodes=nodes, jobs=(six, two))
    plan = create_policy("oef", PolicyConfig(options={"span_types": True})).schedule(state, 0.0)
    placed = plan.by_job()
    assert placed["six"].gpu_ids == span
    assert placed["two"].gpu_ids == ("v100-0:2", "v100-0:3")


def test_place_leaves_reserved_gpus_alone() -> None:
    from gpufair.policy.placement import place
    nodes = (Node("v100-0", "v100", 4),)
    a = Job(id="a", gpus=2, throughput=ThroughputProfile({("v100", 2): 1.0}))
    b = Job(id="b", gpus=1, throughput=ThroughputProfile({("v100", 1): 1.0}))
    state = ClusterState(time_s=0.0, nodes=nodes, jobs=(a, b))
    out = place(state, [(a, "v100"), (b, "v100")], reserved=("v100-0:0", "v100-0:2"))
    # the 2-GPU gang takes the two GPUs left (largest first); the 1-GPU job finds none
    assert {x.job_id: x.gpu_ids for x in out} == {"a": ("v100-0:1", "v100-0:3")}

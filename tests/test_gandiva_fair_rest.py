"""Gandiva_fair keeps a job's home, pass and selection through a round it cannot see.

A live resource manager can hide a job for a round (Slurm has yet to start a job gpufair
released onto a server whose state cannot be told, a record there unreadable: the adapter
leaves the job out and drains the server for that round). The policy used to forget the job
(and unhome every job of that server): they came back as newcomers at the minimum pass. The
oracle is the same rounds with nothing hidden, on a stand-in cluster where jobs run where the
plans put them.
"""

from __future__ import annotations

from dataclasses import replace

from gpufair.model import ClusterState, Job, JobState, Node, NodeState, ThroughputProfile
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy

Q = 60.0
NODES = (Node("a", "v100", 4), Node("b", "v100", 4))


def _job(jid: str, user: str) -> Job:
    return Job(id=jid, tenant=user, gpus=2, arrival_s=float(jid[1:]),
               throughput=ThroughputProfile({("v100", 2): 1.0}))


def _policy():
    return create_policy("gandiva_fair", PolicyConfig(round_s=20.0,
                                                      options={"trading": False}))


def _control(rounds: int) -> tuple[list[ClusterState], list]:
    """Rounds every 20 s (quanta at 0, 60, 120 s...), jobs run where the plans put them."""
    pol = _policy()
    state = ClusterState(0.0, nodes=NODES, jobs=tuple(_job(f"j{i}", "UV"[i % 2])
                                                      for i in range(6)))
    states, plans = [], []
    for _ in range(rounds):
        plan = pol.schedule(state, state.time_s)
        states.append(state)
        plans.append(plan)
        held = {a.job_id: a.gpu_ids for a in plan.assignments}
        state = replace(state, time_s=state.time_s + 20.0, jobs=tuple(
            replace(j, gpus_held=held.get(j.id, ()),
                    state=JobState.RUNNING if j.id in held else JobState.PENDING)
            for j in state.jobs))
    return states, plans


def _tables(pol) -> dict:
    data = pol.state_dict()
    data.pop("resting_since")
    return data


def _hidden(state: ClusterState, job_id: str, server: str) -> ClusterState:
    """``job_id`` out of the snapshot and ``server`` drained, as the Slurm adapter shows a
    job it released onto a server whose state cannot be told."""
    return replace(state, jobs=tuple(j for j in state.jobs if j.id != job_id),
                   nodes=tuple(replace(n, state=NodeState.DRAIN) if n.name == server else n
                               for n in state.nodes))


def _on(state: ClusterState, server: str) -> list[str]:
    return [j.id for j in state.jobs if any(g.startswith(f"{server}:") for g in j.gpus_held)]


def test_a_job_hidden_for_a_round_continues_as_if_it_had_been_seen():
    states, plans = _control(10)
    hide = 4                                  # t = 80 s: between two quanta
    [hidden, *others] = _on(states[hide], "a")
    assert others                              # the server's other jobs are set aside too
    control = _policy()
    for state in states[:hide + 1]:
        control.schedule(state, state.time_s)
    pol = _policy()
    for k, state in enumerate(states):
        if k == hide:
            plan = pol.schedule(_hidden(state, hidden, "a"), state.time_s)
            assert not any(g.startswith("a:") for a in plan.assignments for g in a.gpu_ids)
            assert _tables(pol)["home"] == _tables(control)["home"]
            homed_on_a = {j for j, h in control.home.items() if "a" in h.parts}
            assert {hidden, *others} <= homed_on_a
            assert pol.state_dict()["resting_since"] == dict.fromkeys(homed_on_a,
                                                                      state.time_s)
            continue
        plan = pol.schedule(state, state.time_s)
        assert plan.assignments == plans[k].assignments, k
        if k == hide + 1:
            assert _tables(pol) == _tables(control)
    assert pol.quanta == 4 and pol.state_dict()["resting_since"] == {}
    # not vacuous: who runs changed at the quanta after the hidden round
    assert len({tuple(sorted(a.job_id for a in p.assignments)) for p in plans[hide:]}) > 1


def test_hidden_longer_than_a_quantum_it_is_forgotten_as_before():
    states, _ = _control(8)
    [hidden, *_] = _on(states[1], "a")
    pol = _policy()
    pol.schedule(states[0], 0.0)
    for state in states[1:6]:                 # 20 .. 100 s: hidden from 20 s on
        pol.schedule(replace(state, jobs=tuple(j for j in state.jobs if j.id != hidden)),
                     state.time_s)
        gone = state.time_s - 20.0 >= Q
        assert (hidden not in pol.home) is gone, state.time_s
        assert (hidden not in pol.local_pass) is gone


def test_an_ended_job_and_a_server_down_are_not_waited_for():
    states, _ = _control(3)
    [first, second] = _on(states[1], "a")
    pol = _policy()
    pol.schedule(states[0], 0.0)
    state = replace(states[1], jobs=tuple(replace(j, state=JobState.COMPLETED, gpus_held=())
                                          if j.id == first else j for j in states[1].jobs))
    pol.schedule(state, 20.0)
    assert first not in pol.home and first not in pol.state_dict()["resting_since"]
    down = replace(states[2], nodes=tuple(replace(n, state=NodeState.DOWN)
                                          if n.name == "a" else n for n in NODES))
    pol.schedule(down, 40.0)
    assert pol.home[second].servers != ("a",)     # placed again elsewhere
    assert pol.state_dict()["resting_since"] == {}

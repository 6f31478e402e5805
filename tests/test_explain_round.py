"""Each job's decision in a round: the policy's reason, and what the round made of it (an
action, a guard that held it back, a start on idle GPUs)."""

from __future__ import annotations

from fixed_policy import FixedPlan

from gpufair.core.round import Round, RoundRules
from gpufair.model import Assignment, ClusterState, Job, JobState, Node, Plan, Reason

NODES = tuple(Node(f"n{i}", "v100", 4) for i in range(3))   # 12 GPUs


def running(job_id: str, node: int, start: float) -> Job:
    return Job(job_id, gpus=4, state=JobState.RUNNING, start_s=start,
               gpus_held=tuple(f"n{node}:{g}" for g in range(4)))


def state() -> ClusterState:
    return ClusterState(100.0, nodes=NODES, jobs=(
        Job("old", gpus=8, arrival_s=0.0),
        running("young", 0, start=95.0),      # 5 s old: the minimum runtime keeps it
        running("settled", 1, start=0.0),
        Job("small", gpus=2, arrival_s=7.0),
        Job("one", gpus=1, arrival_s=8.0),
        Job("big", gpus=4, arrival_s=9.0),
        Job("gone", gpus=1, state=JobState.COMPLETED)))


def why(job_id: str) -> Reason:
    return Reason("fixed.order", {"position": ord(job_id[0])})


def plan(calls: list[int] | None = None) -> Plan:
    def explain() -> dict[str, Reason]:
        if calls is not None:
            calls.append(1)
        return {j: why(j) for j in ("old", "young", "settled", "small", "one", "big")}
    gpus = tuple(f"n{n}:{g}" for n in (0, 1) for g in range(4))
    return Plan((Assignment("old", gpus),), explain=explain)


def test_every_job_gets_its_outcome_and_the_policy_reason():
    rules = RoundRules(min_runtime_s=60.0, fill_idle=True)
    result = Round(FixedPlan(plan()), rules, explain=True).run(state())
    got = {j: (d.outcome, d.by.code if d.by else None) for j, d in result.decisions.items()}
    assert got == {
        "old": ("held", "guard.min_runtime"),      # needs the young job's GPUs
        "young": ("held", "guard.min_runtime"),
        # its preemption only made room for old's start, held back: it keeps running
        # (preempted, its GPUs would have idled until a later round)
        "settled": ("held", "guard.min_runtime"),
        "small": ("fill", "fill.idle"),            # n2 is idle: 2 + 1 of its 4 GPUs
        "one": ("fill", "fill.idle"),
        "big": ("wait", None),                     # 1 GPU left idle: does not fit
    }
    assert result.decisions["young"].by.figures == {"min_runtime_s": 60.0}
    assert result.decisions["small"].by.figures == {"idle_gpus_filled": 3}
    assert all(d.reason == why(j) for j, d in result.decisions.items())
    assert "gone" not in result.decisions
    assert result.decisions["big"].text() == "waiting — fixed.order: position 98"
    assert result.decisions["young"].text() == \
        "held back (guard.min_runtime: min runtime s 60) — fixed.order: position 121"


def test_the_preemption_cap_and_a_policy_without_reasons():
    rules = RoundRules(max_preempt_share=0.34)   # 4 of 12 GPUs: one victim
    bare = Plan(plan().assignments)              # no explain: a third-party policy
    result = Round(FixedPlan(bare), rules, explain=True).run(state())
    assert result.decisions["settled"].outcome == "held"
    assert result.decisions["settled"].by == Reason(
        "guard.preemption_cap", {"cap_gpus": 4, "freed_gpus": 4})
    # old needs both victims' GPUs: with settled held by the cap, young's preemption would
    # serve nothing, and is held back with it
    assert result.decisions["young"].outcome == "held"
    assert result.decisions["young"].by.code == "guard.preemption_cap"
    assert result.decisions["old"].outcome == "held"
    assert result.decisions["small"].outcome == "wait"    # no fill without [daemon] fill_idle
    assert {d.reason.code for d in result.decisions.values()} == {"fixed.unexplained"}


def test_a_round_that_does_not_explain_never_asks_the_policy():
    """The simulator's rounds: reasons cost nothing, not even the call."""
    calls: list[int] = []
    result = Round(FixedPlan(plan(calls)), RoundRules(min_runtime_s=60.0)).run(state())
    assert result.decisions == {} and calls == []
    Round(FixedPlan(plan(calls)), RoundRules(), explain=True).run(state())
    assert calls == [1]


def test_a_dry_run_shows_the_policy_reason_of_every_job(capsys):
    """The dry run is the daemon's round: its JSON gives each job the policy's reason (real
    squeue/sinfo output, tests/data/slurm)."""
    import json
    from pathlib import Path

    from gpufair.cli.main import main
    data = Path(__file__).parent / "data" / "slurm"
    assert main(["dry-run", "--squeue", str(data / "squeue.json"), "--sinfo",
                 str(data / "sinfo.json"), "--policy", "las", "--json"]) == 0
    jobs = {j["job_id"]: j for j in json.loads(capsys.readouterr().out)["jobs"]}
    assert jobs["1"]["reason"] == "las.position: position 1, of 3, queue 0, attained gpu s 6," \
        " next queue at gpu s 3600"
    assert jobs["3"]["reason"].startswith("las.position: position 3, of 3, queue 0, ")
    # jobs Slurm schedules itself (not gpufair's): no policy reason, as no policy decided
    assert [jobs[j]["reason"] for j in ("4", "5")] == ["", ""]

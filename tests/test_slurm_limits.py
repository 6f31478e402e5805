"""Slurm's association and QOS limits read ahead (issue 29): the parse of 22.05's
``scontrol show assoc_mgr flags=assoc,qos`` and the admission of waiting jobs under them.

``tests/data/slurm/assoc_mgr_22.05.txt`` is real output of the loopback Slurm with slurmdbd
(``up.sh --hard --accounting``), after::

    sacctmgr modify account research set GrpTRES=gres/gpu=2      # 2 GPUs in use by 2 jobs
    sacctmgr modify user root set MaxJobs=5
    sacctmgr modify qos normal set MaxTRESPerUser=gres/gpu=6 GrpJobs=10
    sacctmgr add account teamx; sacctmgr add account sub Parent=teamx
    sacctmgr add user root Account=sub
    sacctmgr modify account teamx set GrpJobs=3
    sacctmgr modify user root where account=sub set MaxJobs=1 GrpTRES=gres/gpu=4

with two 1-GPU jobs of root in account research running.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufair.adapters.slurm.limits import (
    BadLimits,
    admit,
    parse_assoc_mgr,
    read_limits,
    within_limits,
)
from gpufair.adapters.slurm.translate import SlurmJobInfo
from gpufair.adapters.slurm.transport import TransportError
from gpufair.model import ClusterState, Job, JobState, Node

TEXT = (Path(__file__).parent / "data" / "slurm" / "assoc_mgr_22.05.txt").read_text()
RESEARCH = ("research", "root", 0, "gpu", "normal")
SUB = ("sub", "root", 0, "gpu", "normal")


def _labels(budgets):
    return {(b.label, b.gpus, b.used_gpus, b.jobs, b.used_jobs) for b in budgets}


def test_the_limits_and_their_use_as_22_05_prints_them():
    limits = parse_assoc_mgr(TEXT)
    assert _labels(limits.budgets(*RESEARCH)) == {
        ("association (user root in account research)", None, 2, 5, 2),   # MaxJobs=5(2)
        ("association (account research)", 2, 2, None, 2),                # GrpTRES gpu=2(2)
        ("QOS normal", None, 2, 10, 2),                                    # GrpJobs=10(2)
        ("QOS normal per uid 0", 6, 2, None, 2),                           # MaxTRESPU gpu=6(2)
    }


def test_limits_of_every_parent_account_count():
    """sub's parent teamx has GrpJobs=3: a job in sub counts there (and in root, no limit)."""
    labels = {b.label for b in parse_assoc_mgr(TEXT).budgets(*SUB)}
    assert {"association (user root in account sub)", "association (account teamx)"} <= labels


def test_a_full_gpu_limit_keeps_the_waiting_job_out():
    kept = admit([("3", 1, RESEARCH)], [], parse_assoc_mgr(TEXT))
    assert kept == {"3": "a Slurm limit forbids its start now: association (account research) "
                         "GPU limit 2 (2 in use)"}


def test_jobs_admitted_together_are_charged_one_after_another():
    """MaxJobs=1 on root's association in sub: of two waiting jobs the first is admitted, the
    second kept out; the GPU limit of 4 then keeps a 4-GPU job out alone."""
    limits = parse_assoc_mgr(TEXT)
    assert admit([("a", 1, SUB), ("b", 1, SUB)], [], limits) == {
        "b": "a Slurm limit forbids its start now: association (user root in account sub) "
             "job limit 1 (1 running)"}
    assert set(admit([("big", 5, SUB)], [], limits)) == {"big"}
    assert admit([("four", 4, SUB)], [], limits) == {}
    # the limits read are not used up by a call
    assert admit([("a", 1, SUB)], [], limits) == {}


def test_jobs_released_but_not_yet_running_are_counted():
    assert set(admit([("a", 1, SUB)], [(1, SUB)], parse_assoc_mgr(TEXT))) == {"a"}


def test_no_limit_no_association_nothing_kept_out():
    limits = parse_assoc_mgr(TEXT)
    assert admit([("x", 4, ("vision", "root", 0, "gpu", "normal"))], [], limits) == {}
    assert admit([("y", 8, ("unknown", "nobody", 99, "gpu", ""))], [], limits) == {}
    assert parse_assoc_mgr("").budgets(*RESEARCH) == []


def test_a_partition_association_wins_over_the_plain_one():
    text = TEXT.replace("Account=research UserName=root(0) Partition= ",
                        "Account=research UserName=root(0) Partition=gpu ")
    labels = _labels(parse_assoc_mgr(text).budgets(*RESEARCH))
    assert ("association (user root in account research)", None, 2, 5, 2) in labels
    assert parse_assoc_mgr(text).budgets("research", "root", 0, "urgent", "") != []


@pytest.mark.parametrize("old, new, line", [
    ("GrpJobs=3(0)", "GrpJobs=3(x)", 93), ("GrpJobs=3(0)", "GrpJobs=lots", 93),
    ("gres/gpu=4(0)", "gres/gpu=four(0)", 123)])
def test_text_22_05_does_not_print_names_the_line(old, new, line):
    assert TEXT.splitlines()[line - 1].count(old) == 1
    with pytest.raises(BadLimits, match=f"assoc_mgr line {line}:"):
        parse_assoc_mgr(TEXT.replace(old, new))


def test_a_cluster_without_accounting_has_no_limits():
    """What 22.05 prints without slurmdbd (the hard-mode loopback cluster): nothing to keep out."""
    text = ("Current Association Manager state\n\nNo associations currently cached in Slurm."
            "\n\n\nNo QOS currently cached in Slurm.\n\n")
    limits = parse_assoc_mgr(text)
    assert limits.associations == {} and limits.qos == {}
    assert admit([("a", 8, RESEARCH)], [], limits) == {}


class _Cli:
    """A command line that answers with ``out`` or fails as an unreachable scontrol does."""

    def __init__(self, out: str | None) -> None:
        self.out = out
        self.asked: list[list[str]] = []

    def read_text(self, argv):
        self.asked.append(argv)
        if self.out is None:
            raise TransportError("scontrol: no answer in 10 s")
        return self.out


def test_the_read_fails_open_with_a_warning(caplog):
    """No command line (a saved snapshot's files), scontrol failing, or text 22.05 does not
    print: the round goes on without limits (Slurm's refusal is the guard, as before)."""
    assert read_limits(object()) is None
    cli = _Cli(TEXT)
    assert read_limits(cli).budgets(*RESEARCH) and cli.asked == [
        ["scontrol", "show", "assoc_mgr", "flags=assoc,qos"]]
    with caplog.at_level("WARNING", logger="gpufair.slurm"):
        assert read_limits(_Cli(None)) is None
        assert read_limits(_Cli(TEXT.replace("GrpJobs=3(0)", "GrpJobs=lots"))) is None
    assert [r.getMessage()[:68] for r in caplog.records] == [
        "Slurm's association/QOS limits not read (scontrol: no answer in 10 s",
        "Slurm's association/QOS limits not read (assoc_mgr line 93: not LIMI"]


def _info(job_id: str, raw_state: str) -> SlurmJobInfo:
    return SlurmJobInfo(job_id, raw_state, "gpu", "", False, True, 0.0, 0, "TresPerNode",
                        None, (), 1, counted_as=SUB)


def test_the_state_loses_the_jobs_kept_out_and_a_released_job_counts():
    """root's association in sub allows 1 running job: a job gpufair released that Slurm has
    not started (the state shows it running, Slurm pending) takes it, so the waiting one is
    left out of the state, with why."""
    released = Job("1", state=JobState.RUNNING, gpus_held=("n0:0",))
    waiting = Job("2")
    state = ClusterState(0.0, (Node("n0", "v100", 4),), (released, waiting))
    infos = {"1": _info("1", "PENDING"), "2": _info("2", "PENDING")}
    out, kept = within_limits(state, infos, parse_assoc_mgr(TEXT))
    assert [j.id for j in out.jobs] == ["1"]
    assert [(j.id, why.split(": ", 1)[1]) for j, why in kept] == [
        ("2", "association (user root in account sub) job limit 1 (1 running)")]
    # once Slurm runs it, assoc_mgr counts it (here: the text's 0 running): not charged twice
    infos["1"] = _info("1", "RUNNING")
    out, kept = within_limits(state, infos, parse_assoc_mgr(TEXT))
    assert [j.id for j in out.jobs] == ["1", "2"] and kept == ()

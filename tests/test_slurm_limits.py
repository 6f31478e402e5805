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

import json
import random
from pathlib import Path

import pytest

from gpufair.adapters.slurm.limits import (
    BadLimits,
    Demand,
    admit,
    demand,
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
    return {(b.label, c.name, c.tres, c.limit, c.used) for b in budgets for c in b.caps}


def _gpus(count: int) -> Demand:
    return Demand({"gres/gpu": count})


def test_the_limits_and_their_use_as_22_05_prints_them():
    limits = parse_assoc_mgr(TEXT)
    assert _labels(limits.budgets(*RESEARCH)) == {
        ("association (user root in account research)", "MaxJobs", "", 5, 2),
        ("association (account research)", "GrpTRES", "gres/gpu", 2, 2),
        ("QOS normal", "GrpJobs", "", 10, 2),
        ("QOS normal for uid 0", "MaxTRESPU", "gres/gpu", 6, 2),
    }


def test_limits_of_every_parent_account_count():
    """sub's parent teamx has GrpJobs=3: a job in sub counts there (and in root, no limit)."""
    labels = {b.label for b in parse_assoc_mgr(TEXT).budgets(*SUB)}
    assert {"association (user root in account sub)", "association (account teamx)"} <= labels


def test_a_full_gpu_limit_keeps_the_waiting_job_out():
    kept = admit([("3", _gpus(1), RESEARCH)], [], parse_assoc_mgr(TEXT))
    assert kept == {"3": "a Slurm limit forbids its start now: association (account research) "
                         "GrpTRES gres/gpu: 2 in use + 1 asked > 2"}


def test_jobs_admitted_together_are_charged_one_after_another():
    """MaxJobs=1 on root's association in sub: of two waiting jobs the first is admitted, the
    second kept out; the GPU limit of 4 then keeps a 4-GPU job out alone."""
    limits = parse_assoc_mgr(TEXT)
    assert admit([("a", _gpus(1), SUB), ("b", _gpus(1), SUB)], [], limits) == {
        "b": "a Slurm limit forbids its start now: association (user root in account sub) "
             "MaxJobs: 1 in use + 1 asked > 1"}
    assert set(admit([("big", _gpus(5), SUB)], [], limits)) == {"big"}
    assert admit([("four", _gpus(4), SUB)], [], limits) == {}
    # the limits read are not used up by a call
    assert admit([("a", _gpus(1), SUB)], [], limits) == {}


def test_jobs_released_but_not_yet_running_are_counted():
    assert set(admit([("a", _gpus(1), SUB)], [(_gpus(1), SUB)], parse_assoc_mgr(TEXT))) == {"a"}


def test_no_limit_no_association_nothing_kept_out():
    limits = parse_assoc_mgr(TEXT)
    assert admit([("x", _gpus(4), ("vision", "root", 0, "gpu", "normal"))], [], limits) == {}
    assert admit([("y", _gpus(8), ("unknown", "nobody", 99, "gpu", ""))], [], limits) == {}
    assert parse_assoc_mgr("").budgets(*RESEARCH) == []


def test_a_partition_association_wins_over_the_plain_one():
    text = TEXT.replace("Account=research UserName=root(0) Partition= ",
                        "Account=research UserName=root(0) Partition=gpu ")
    labels = _labels(parse_assoc_mgr(text).budgets(*RESEARCH))
    assert ("association (user root in account research)", "MaxJobs", "", 5, 2) in labels
    assert parse_assoc_mgr(text).budgets("research", "root", 0, "urgent", "") != []


@pytest.mark.parametrize("old, new, line, field", [
    ("GrpJobs=3(0)", "GrpJobs=3(x)", 93, "GrpJobs"), ("GrpJobs=3(0)", "GrpJobs=lots", 93,
                                                       "GrpJobs"),
    ("gres/gpu=4(0)", "gres/gpu=four(0)", 123, "GrpTRES")])
def test_text_22_05_does_not_print_names_the_line(old, new, line, field):
    assert TEXT.splitlines()[line - 1].count(old) == 1
    with pytest.raises(BadLimits, match=f"assoc_mgr line {line}: {field}: ") as caught:
        parse_assoc_mgr(TEXT.replace(old, new))
    assert caught.value.line == line


def test_a_cluster_without_accounting_has_no_limits():
    """What 22.05 prints without slurmdbd (the hard-mode loopback cluster): nothing to keep out."""
    text = ("Current Association Manager state\n\nNo associations currently cached in Slurm."
            "\n\n\nNo QOS currently cached in Slurm.\n\n")
    limits = parse_assoc_mgr(text)
    assert limits.associations == {} and limits.qos == {}
    assert admit([("a", _gpus(8), RESEARCH)], [], limits) == {}


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
        "Slurm's association/QOS limits not read (assoc_mgr line 93: GrpJobs:"]


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
        ("2", "association (user root in account sub) MaxJobs: 1 in use + 1 asked > 1")]
    # once Slurm runs it, assoc_mgr counts it (here: the text's 0 running): not charged twice
    infos["1"] = _info("1", "RUNNING")
    out, kept = within_limits(state, infos, parse_assoc_mgr(TEXT))
    assert [j.id for j in out.jobs] == ["1", "2"] and kept == ()


# ---- every TRES, per job and per node, TRES-minutes: real text of the loopback Slurm ------
#
# ``assoc_mgr_tres_22.05.txt``, ``squeue_limits_22.05.json`` and ``sinfo_limits_22.05.json``
# are one moment of the loopback Slurm with slurmdbd (``up.sh --accounting``, not hard mode:
# Slurm starts what it may), after::
#
#     sacctmgr modify account research set GrpTRES=gres/gpu:k80=1,cpu=8,mem=20000
#     sacctmgr modify qos normal set MaxTRESPerJob=gres/gpu=3 MaxTRESPerNode=cpu=6 \
#         MaxTRESPerUser=gres/gpu:v100=5 MaxWall=120
#     sacctmgr modify user root where account=vision set MaxTRESPerJob=gres/gpu=2,mem=30000 \
#         MaxTRESPerNode=gres/gpu=2 GrpTRESRunMins=gres/gpu=600 \
#         MaxTRESMinsPerJob=gres/gpu=300 MaxWall=90 MaxSubmitJobs=20
#     sacctmgr modify account nlp set GrpTRESMins=gres/gpu=100 GrpTRES=cpu=4
#     sacctmgr add account spent; sacctmgr add user root Account=spent
#     sacctmgr modify account spent set GrpTRESMins=gres/gpu=0 GrpTRES=mem=3000
#
# and 14 jobs: Slurm ran 7 and left 7 pending, each with a limit as its reason.

TRES_TEXT = (DATA := Path(__file__).parent / "data" / "slurm").joinpath(
    "assoc_mgr_tres_22.05.txt").read_text()
#: what Slurm 22.05 said of each job it did not start
SLURM_REFUSED = {"2": "AssocGrpGRES", "5": "QOSMaxGRESPerJob", "7": "AssocGrpCpuLimit",
                 "8": "QOSMaxWallDurationPerJobLimit", "11": "AssocGrpGRESRunMinutes",
                 "13": "AssocGrpGRESMinutes", "14": "AssocMaxMemPerJob"}
ANYONE_IN_NORMAL = ("elsewhere", "nobody", 5, "gpu", "normal")   # only QOS normal's limits
VISION = ("vision", "root", 0, "gpu", "normal")


def _loopback_view():
    from gpufair.adapters.slurm.translate import translate
    docs = [json.loads(DATA.joinpath(name).read_text())
            for name in ("squeue_limits_22.05.json", "sinfo_limits_22.05.json")]
    return translate(*docs, now=1.8e9)


def test_each_job_slurm_refused_for_a_limit_is_kept_out_ahead_and_no_other():
    """The oracle is Slurm itself: of the 7 pending jobs, all refused for a limit (typed GPU
    GrpTRES, CPU GrpTRES, MaxTRESPerJob on GPUs and memory, MaxWall, GrpTRESRunMins,
    GrpTRESMins), each is kept out, naming a limit it breaks; the old code (untyped GPUs and
    job counts only) kept out none of them."""
    view = _loopback_view()
    assert {j.id for j in view.state.jobs if j.state is JobState.PENDING} == set(SLURM_REFUSED)
    out, kept = within_limits(view.state, view.jobs, parse_assoc_mgr(TRES_TEXT))
    assert {j.id for j in out.jobs} == {"1", "3", "4", "6", "9", "10", "12"}
    why = {j.id: w.removeprefix("a Slurm limit forbids its start now: ") for j, w in kept}
    assert why == {
        "2": "association (account research) GrpTRES gres/gpu:k80: 2 in use + 1 asked > 1",
        "5": "association (user root in account vision) MaxTRESPerJob gres/gpu: the job "
             "asks 4, the limit is 2",
        "7": "association (account nlp) GrpTRES cpu: 2 in use + 4 asked > 4",
        "8": "association (user root in account vision) MaxTRESMinsPerJob gres/gpu: the job "
             "asks 400 (TRES-minutes), the limit is 300",
        "11": "association (user root in account vision) GrpTRESRunMins gres/gpu: 470 in "
              "use + 160 asked > 600",
        "13": "association (account spent) GrpTRESMins gres/gpu: 0 used of 0",
        "14": "association (user root in account vision) MaxTRESPerJob mem: the job asks "
              "40000, the limit is 30000"}


def test_an_untyped_request_is_not_held_to_a_typed_limit():
    """research's ``gres/gpu:k80=1`` is full (2 in use: 22.05 ran untyped job 3 on a k80
    beside typed job 1). A typed k80 job waits (job 2); an untyped one does not, as in Slurm;
    both count against ``gres/gpu``."""
    limits = parse_assoc_mgr(TRES_TEXT)
    research = ("research", "root", 0, "gpu", "normal")
    untyped = Demand({"cpu": 1, "mem": 1000, "gres/gpu": 1})
    typed = Demand({**untyped.tres, "gres/gpu:k80": 1})
    assert admit([("u", untyped, research)], [], limits) == {}
    assert set(admit([("t", typed, research)], [], limits)) == {"t"}


def test_a_typed_job_is_charged_for_its_type_and_for_gpus():
    """uid 0 in QOS normal: ``MaxTRESPU`` gres/gpu:v100=5(2); with gres/gpu=12 too (10 in
    use), a 2-GPU v100 job fits both and is charged in both: a 1-GPU v100 job after it then
    breaks gres/gpu; and a 3-GPU v100 job after a released 1-GPU one breaks gres/gpu:v100."""
    text = TRES_TEXT.replace("gres/gpu=N(10),gres/gpu:k80=N(8),gres/gpu:v100=5(2)",
                             "gres/gpu=12(10),gres/gpu:k80=N(8),gres/gpu:v100=5(2)")
    assert text != TRES_TEXT
    limits = parse_assoc_mgr(text)
    who = ("elsewhere", "root", 0, "gpu", "normal")

    def v100(n: int) -> Demand:
        return Demand({"gres/gpu": n, "gres/gpu:v100": n})
    assert admit([("a", v100(2), who), ("b", v100(1), who)], [], limits) == {
        "b": "a Slurm limit forbids its start now: QOS normal for uid 0 MaxTRESPerUser "
             "gres/gpu: 12 in use + 1 asked > 12"}
    assert admit([("c", Demand({"gres/gpu": 1}), who)], [(v100(2), who)], limits) != {}
    assert admit([("d", v100(3), who)], [(v100(1), who)], parse_assoc_mgr(TRES_TEXT)) == {
        "d": "a Slurm limit forbids its start now: QOS normal for uid 0 MaxTRESPerUser "
             "gres/gpu:v100: 3 in use + 3 asked > 5"}


@pytest.mark.parametrize("nodes, kept", [(1, True), (2, False)])
def test_a_per_node_limit_counts_the_request_over_its_nodes(nodes, kept):
    """QOS normal ``MaxTRESPerNode=cpu=6``: 8 CPUs on one node break it, on two (4 each) not."""
    demand = Demand({"cpu": 8, "gres/gpu": 2, "node": nodes}, nodes)
    why = admit([("j", demand, ANYONE_IN_NORMAL)], [], parse_assoc_mgr(TRES_TEXT))
    assert why == ({"j": "a Slurm limit forbids its start now: QOS normal MaxTRESPerNode "
                         "cpu: the job asks 8 per node, the limit is 6"} if kept else {})


def test_time_limits_and_the_minutes_they_make():
    """vision/root: ``MaxWall=90``, ``MaxTRESMinsPerJob=gres/gpu=300``, ``GrpTRESRunMins=
    gres/gpu=600`` with 470 in use. 1 GPU for 100 min breaks MaxWall only; 1 GPU for 60 min
    fits (60 run-minutes), and a second the same then not... (470 + 60 + 60 < 600: it fits
    too); 2 GPUs for 70 min (140) breaks the run-minutes after the first. A job without a
    time limit is not held to any of them (left to Slurm)."""
    limits = parse_assoc_mgr(TRES_TEXT)

    def job(gpus: int, minutes: float | None) -> Demand:
        return Demand({"gres/gpu": gpus}, 1, minutes)
    assert admit([("w", job(1, 100), VISION)], [], limits) == {
        "w": "a Slurm limit forbids its start now: association (user root in account vision)"
             " MaxWall: the job asks 100 (minutes), the limit is 90"}
    kept = admit([("a", job(1, 60), VISION), ("b", job(1, 60), VISION),
                  ("c", job(2, 70), VISION)], [], limits)
    assert kept == {"c": "a Slurm limit forbids its start now: association (user root in "
                         "account vision) GrpTRESRunMins gres/gpu: 590 in use + 140 asked "
                         "> 600"}
    assert admit([("n", job(2, None), VISION)], [], limits) == {}


def test_a_group_wall_or_minutes_limit_spent_stops_every_start():
    """``GrpWall`` reached (nlp: 10 minutes, 12.5 used) stops every job; ``GrpTRESMins`` only
    the jobs that ask that TRES (spent: gres/gpu=0 reached; mem is not limited in minutes)."""
    assert TRES_TEXT.count("GrpSubmitJobs=N(2) GrpWall=N(0.00)") >= 1
    text = TRES_TEXT.replace("GrpSubmitJobs=N(2) GrpWall=N(0.00)",
                             "GrpSubmitJobs=N(2) GrpWall=10(12.50)", 1)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "GrpWall=10(" in t)
    assert "Account=nlp UserName= " in text.splitlines()[line - 6]
    nlp = ("nlp", "root", 0, "gpu", "normal")
    assert admit([("a", Demand({"cpu": 1}), nlp)], [], parse_assoc_mgr(text)) == {
        "a": "a Slurm limit forbids its start now: association (account nlp) GrpWall: 12 used"
             " of 10"}
    spent = ("spent", "root", 0, "gpu", "normal")
    limits = parse_assoc_mgr(TRES_TEXT)
    assert admit([("m", Demand({"mem": 100}), spent)], [], limits) == {}
    assert set(admit([("g", Demand({"mem": 100, "gres/gpu": 1}), spent)], [], limits)) == {"g"}


def test_the_demand_is_slurms_request_with_the_models_gpus():
    """``tres_req_str`` as 22.05 prints it (memory with a unit); the GPUs and their type as the
    model has them (an array task's, a record without ``gres/gpu`` in its string); a TRES in
    a form not known here is not counted rather than guessed."""
    info = SlurmJobInfo("7", "PENDING", "gpu", "", True, True, 0.0, 0, "TresPerNode", "k80",
                        (), 2, tres_req="cpu=2,mem=125G,node=2,billing=2,gres/gpu=1,"
                                        "license/matlab=1.5,gres/gpu:k80=1")
    got = demand(Job("7", gpus=2, time_limit_s=1800.0), info)
    assert got == Demand({"cpu": 2, "mem": 128000, "node": 2, "billing": 2, "gres/gpu": 2,
                          "gres/gpu:k80": 2}, 2, 30.0)
    bare = demand(Job("8", gpus=3), SlurmJobInfo("8", "PENDING", "gpu", "", True, True, 0.0,
                                                 0, "TresPerNode", None, (), 1))
    assert bare == Demand({"gres/gpu": 3}, 1, None)


@pytest.mark.parametrize("old, new, field", [
    ("MaxTRESPJ=mem=30000,gres/gpu=2", "MaxTRESPJ=mem=30000,gres/gpu=two", "MaxTRESPJ"),
    ("MaxWallPJ=90", "MaxWallPJ=1:30:00", "MaxWallPJ"),
    ("gres/gpu=600(470)", "gres/gpu=600(470", "GrpTRESRunMins"),
    ("QOS=normal(1)", "QOS= ", "QOS record without a name")])
def test_an_unreadable_new_limit_names_its_line_and_field(old, new, field):
    assert TRES_TEXT.count(old) == 1
    line = next(n for n, t in enumerate(TRES_TEXT.splitlines(), 1) if old in t)
    with pytest.raises(BadLimits, match=f"assoc_mgr line {line}: .*{field}"):
        parse_assoc_mgr(TRES_TEXT.replace(old, new))


def _held_for_gpufair(tmp_path: Path) -> list[str]:
    """The recorded squeue with its pending jobs as job_submit.lua leaves them in hard mode
    (marked, held), and a hard-mode config: the dry run's argv without the limits."""
    docs = json.loads(DATA.joinpath("squeue_limits_22.05.json").read_text())
    for raw in docs["jobs"]:
        if raw["job_state"] == "PENDING":
            raw.update(admin_comment="gpufair:managed", priority=0, state_reason="JobHeldUser")
    (tmp_path / "squeue.json").write_text(json.dumps(docs))
    (tmp_path / "g.toml").write_text('[daemon]\nmode = "hard"\n\n[slurm]\n'
                                     'managed_partitions = ["gpu"]\n')
    return ["dry-run", "--squeue", str(tmp_path / "squeue.json"), "--sinfo",
            str(DATA / "sinfo_limits_22.05.json"), "--config", str(tmp_path / "g.toml"),
            "--policy", "fifo", "--json"]


def test_the_dry_run_of_saved_files_reads_the_saved_limits(tmp_path, capsys):
    """``--assoc-mgr``: the jobs a limit forbids wait, each with the limit (here all the
    pending ones, as Slurm said; without it the dry run starts four of them: 7, 8, 11, 13)."""
    from gpufair.cli.main import main
    argv = _held_for_gpufair(tmp_path)
    assert main([*argv, "--assoc-mgr", str(DATA / "assoc_mgr_tres_22.05.txt")]) == 0
    out = capsys.readouterr()
    rows = {r["job_id"]: r for r in json.loads(out.out)["jobs"]}
    assert {j: rows[j]["decision"] for j in SLURM_REFUSED} == dict.fromkeys(SLURM_REFUSED,
                                                                            "waits")
    assert rows["5"]["why"] == ("a Slurm limit forbids its start now: association (user root "
                                "in account vision) MaxTRESPerJob gres/gpu: the job asks 4, "
                                "the limit is 2")
    assert "not read" not in out.err       # no warning for the reservations not saved


def test_a_saved_limits_file_slurm_does_not_print_is_an_error_naming_its_line(
        tmp_path, capsys):
    from gpufair.cli.main import main
    bad = tmp_path / "assoc.txt"
    bad.write_text(TRES_TEXT.replace("MaxWallPJ=90", "MaxWallPJ=ninety"))
    line = next(n for n, t in enumerate(TRES_TEXT.splitlines(), 1) if "MaxWallPJ=90" in t)
    assert main([*_held_for_gpufair(tmp_path), "--assoc-mgr", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{line}: MaxWallPJ: not minutes: 'ninety'" in err and "Traceback" not in err
    assert main(["dry-run", "snap.json", "--assoc-mgr", str(bad)]) == 2
    assert "--assoc-mgr goes with --squeue" in capsys.readouterr().err


def test_a_type_no_limit_names_and_a_limit_of_zero():
    """A typed request of a type no TRES names (no ``gres/gpu:a100`` configured) is held to
    ``gres/gpu`` only; a limit of 0 refuses any job asking that TRES, and none that does
    not (spent: ``GrpTRES=mem=3000`` has room, a CPU-only count is not asked)."""
    limits = parse_assoc_mgr(TRES_TEXT.replace("GrpTRES=cpu=N(0),mem=3000(0)",
                                               "GrpTRES=cpu=0(0),mem=3000(0)"))
    research = ("research", "root", 0, "gpu", "normal")
    assert admit([("a", Demand({"gres/gpu": 1, "gres/gpu:a100": 1}), research)], [],
                 limits) == {}
    spent = ("spent", "root", 0, "gpu", "normal")
    assert admit([("c", Demand({"cpu": 1, "mem": 3000}), spent)], [], limits) == {
        "c": "a Slurm limit forbids its start now: association (account spent) GrpTRES cpu: "
             "0 in use + 1 asked > 0"}
    assert admit([("m", Demand({"mem": 3000}), spent)], [], limits) == {}


def test_any_damage_to_the_text_is_bad_limits_or_read_never_another_error():
    """Characters of the real text replaced, dropped or doubled at random (seeded): the parse
    reads it or raises BadLimits naming a line, never anything else (the round then goes on
    without limits)."""
    rng = random.Random(29)
    alphabet = "=(),N0123456789 ax/:.-\n"
    for _ in range(300):
        text = list(TRES_TEXT)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(text))
            how = rng.choice(("replace", "drop", "double"))
            if how == "replace":
                text[at] = rng.choice(alphabet)
            elif how == "drop":
                del text[at]
            else:
                text.insert(at, text[at])
        try:
            parse_assoc_mgr("".join(text))
        except BadLimits as exc:
            assert 1 <= exc.line <= len(TRES_TEXT.splitlines()) + 4

"""Saved ``sacct --parsable2`` histories → the history rules → the trace (issue 31).

Hand-written sacct tables in the shape Slurm 22.05 prints (``sacct -X -D --parsable2``), each
row chosen to exercise one rule of docs/replay.md; the real recorded outputs of the loopback
slurmdbd are read by tests/test_replay_recorded.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufair.adapters.history.convert import history_to_trace, inferred_cluster
from gpufair.adapters.history.table import peak_use
from gpufair.adapters.simulator.engine import TraceSimulator
from gpufair.adapters.simulator.semantics import semantics_named
from gpufair.adapters.slurm.sacct_saved import read_sacct_text
from gpufair.cli.main import main
from gpufair.core.replay import as_run_report

HEADER = "JobID|User|Account|QOS|Partition|Submit|Start|End|State|AllocTRES|ReqTRES|NNodes|JobName"


def row(job: str, user: str, account: str, submit: str, start: str, end: str, state: str,
        alloc: str, req: str = "", nodes: str = "1", name: str = "train") -> str:
    return "|".join([job, user, account, "normal", "gpu", f"2026-01-01T{submit}",
                     start if start in ("Unknown", "None") else f"2026-01-01T{start}",
                     end if end in ("Unknown", "None") else f"2026-01-01T{end}", state,
                     alloc, req, nodes, name])


ROWS = [
    row("100", "alice", "vision", "00:00:00", "00:00:00", "01:00:00", "COMPLETED",
        "billing=4,cpu=4,gres/gpu:a100=4,gres/gpu=4,mem=4G,node=1"),
    row("101", "bob", "nlp", "00:10:00", "01:00:00", "01:30:00", "FAILED",
        "cpu=4,gres/gpu=2,mem=4G,node=1"),
    row("102", "bob", "nlp", "00:20:00", "Unknown", "00:30:00", "CANCELLED by 1000", "",
        "cpu=4,gres/gpu=2"),
    row("103", "carol", "vision", "00:20:00", "00:20:00", "00:50:00", "COMPLETED",
        "cpu=4,mem=4G,node=1"),
    row("104_[3-7%2]", "carol", "vision", "00:20:00", "None", "Unknown", "PENDING", "",
        "cpu=1,gres/gpu=1"),
    row("105", "dave", "nlp", "00:30:00", "00:40:00", "Unknown", "RUNNING",
        "cpu=1,gres/gpu=1,node=1"),
    row("106_2", "dave", "nlp", "00:31:00", "01:30:00", "02:00:00", "TIMEOUT",
        "cpu=2,gres/gpu:v100=2,gres/gpu=2,node=1"),
]


def write(tmp_path: Path, rows: list[str], header: str = HEADER, name: str = "h.txt") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_rules_count_what_is_left_out(tmp_path):
    history = read_sacct_text(write(tmp_path, ROWS))
    assert history.jobs["job_id"].tolist() == ["100", "101", "106_2"]
    assert history.excluded == {"cancelled_before_start": 1, "never_started": 5,
                                "no_gpus": 1, "unfinished": 1}
    jobs = history.jobs.set_index("job_id")
    assert jobs.loc["100", "gpu_type"] == "a100" and jobs.loc["100", "gpus"] == 4
    assert jobs.loc["101", "gpu_type"] == "" and jobs.loc["101", "gpus"] == 2
    assert jobs.loc["106_2", "attained_s"] == 1800
    assert jobs["tenant"].tolist() == ["vision", "nlp", "nlp"]


def test_tenant_column_is_chosen(tmp_path):
    history = read_sacct_text(write(tmp_path, ROWS), tenant="user")
    assert history.jobs["tenant"].tolist() == ["alice", "bob", "dave"]


def test_fields_in_any_order_and_parsable_with_trailing_bar(tmp_path):
    header = HEADER.split("|")
    order = list(reversed(range(len(header))))
    rows = ["|".join(r.split("|")[i] for i in order) + "|" for r in ROWS]
    path = write(tmp_path, rows, header="|".join(header[i] for i in order) + "|")
    history = read_sacct_text(path)
    assert history.jobs["job_id"].tolist() == ["100", "101", "106_2"]
    assert history.excluded["never_started"] == 5


def test_requeued_incarnations_merge_out_of_order(tmp_path):
    """sacct -D prints each start of a requeued job; rows out of order still merge, and the
    job's attained time is the sum of its runs."""
    rows = [
        row("200", "erin", "vision", "00:05:00", "00:30:00", "00:50:00", "COMPLETED",
            "gres/gpu=1"),
        row("200", "erin", "vision", "00:00:00", "00:00:00", "00:10:00", "REQUEUED",
            "gres/gpu=1"),
        row("201", "erin", "vision", "00:00:00", "00:00:00", "00:10:00", "COMPLETED",
            "gres/gpu=1"),
    ]
    history = read_sacct_text(write(tmp_path, rows))
    job = history.jobs.set_index("job_id").loc["200"]
    assert (job["attained_s"], job["incarnations"], job["state"]) == (1800, 2, "COMPLETED")
    assert job["start"] - job["submit"] == 0 and job["end"] - job["submit"] == 3000
    assert history.merged_requeues == 1


def test_inferred_cluster_is_peak_use_per_type_exact_fit(tmp_path):
    """Back-to-back jobs (one ends the second the next starts) share GPUs: the peak counts
    an end before a start at the same time."""
    rows = [
        row("1", "a", "x", "00:00:00", "00:00:00", "01:00:00", "COMPLETED",
            "gres/gpu:a100=4,gres/gpu=4"),
        row("2", "a", "x", "00:00:00", "01:00:00", "02:00:00", "COMPLETED",
            "gres/gpu:a100=4,gres/gpu=4"),
        row("3", "a", "x", "00:00:00", "00:30:00", "01:30:00", "COMPLETED",
            "gres/gpu:v100=2,gres/gpu=2"),
        row("4", "a", "x", "00:00:00", "00:30:00", "00:40:00", "COMPLETED", "gres/gpu=1"),
    ]
    history = read_sacct_text(write(tmp_path, rows))
    assert peak_use(history) == {"": 1, "a100": 4, "v100": 2}
    assert inferred_cluster(history) == "a100:5,v100:2"


def test_trace_keeps_work_tenant_and_type(tmp_path):
    history = read_sacct_text(write(tmp_path, ROWS))
    converted = history_to_trace(history, "a100:4,v100:4")
    assert [(j.scale_factor, j.total_steps, j.tenant, j.arrival_s) for j in converted.trace] \
        == [(4, 3600, "vision", 0.0), (2, 1800, "nlp", 600.0), (2, 1800, "nlp", 1860.0)]
    rates = converted.throughputs
    assert rates.rate("a100", "history:a100", 4) == 1.0
    assert rates.rate("v100", "history:a100", 4) is None       # it asked for an a100
    assert rates.rate("v100", "history", 2) == rates.rate("a100", "history", 2) == 1.0
    sim = TraceSimulator(converted.trace, converted.throughputs, converted.nodes,
                         semantics_named("clean"), 120.0)
    assert {j.id: j.tenant for j in sim.snapshot().jobs} == {"0": "vision"}


def test_a_type_the_cluster_lacks_is_dropped_with_its_reason(tmp_path):
    history = read_sacct_text(write(tmp_path, ROWS))
    converted = history_to_trace(history, "v100:4")
    sim = TraceSimulator(converted.trace, converted.throughputs, converted.nodes,
                         semantics_named("clean"), 120.0)
    assert [d.index for d in sim.dropped] == [0]
    assert "no throughput" in sim.dropped[0].reason


def test_as_run_is_the_recorded_waits_and_jcts(tmp_path):
    history = read_sacct_text(write(tmp_path, ROWS))
    report = as_run_report(history, history_to_trace(history), "clean")
    by_id = {o.job_id: o for o in report.outcomes}
    assert by_id["101"].jct_s == 4800 and by_id["106_2"].jct_s == 5340
    assert report.metrics.avg_jct_s == pytest.approx((3600 + 4800 + 5340) / 3)
    assert report.busy_gpu_s == 4 * 3600 + 2 * 1800 + 2 * 1800


def test_replay_command_json(tmp_path, capsys):
    path = write(tmp_path, ROWS)
    assert main(["replay", str(path), "--policies", "fifo,las", "--json", "--seed", "3"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line.get("policy") for line in lines[:3]] == ["as_run", "fifo", "las"]
    tail = lines[3]
    assert tail["history"]["excluded"]["never_started"] == 5
    assert tail["history"]["cluster"] == "a100:6,v100:2"   # untyped use: the busiest type
    fifo = {r["tenant"]: r for r in tail["tenants"] if r["run"] == "fifo"}
    assert fifo["nlp"]["jobs"] == 2 and fifo["vision"]["jobs"] == 1
    as_run = {r["tenant"]: r for r in tail["tenants"] if r["run"] == "as_run"}
    assert as_run["nlp"]["mean_wait_s"] == (3000 + 3540) / 2
    assert as_run["vision"]["gpu_hours"] == 4.0


def test_replay_command_table(tmp_path, capsys):
    assert main(["replay", str(write(tmp_path, ROWS)), "--policies", "fifo"]) == 0
    out = capsys.readouterr().out
    assert "as_run" in out and "fifo" in out
    assert "left out: 1 no gpus, 5 never started, 1 cancelled before start, 1 unfinished" \
        in out
    assert "cluster inferred" in out


# ---- bad histories: exit 2, file, line and field named, no traceback -----------------------

BAD = {
    "end before start": (
        [row("1", "a", "x", "00:00:00", "01:00:00", "00:30:00", "COMPLETED", "gres/gpu=1")],
        HEADER, ":2: field 'End'", "ends before it starts"),
    "negative gpus": (
        [ROWS[0], row("1", "a", "x", "00:00:00", "00:00:00", "00:30:00", "COMPLETED",
                      "gres/gpu=-2")], HEADER, ":3: field 'AllocTRES'", "negative"),
    "huge gpus": (
        [row("1", "a", "x", "00:00:00", "00:00:00", "00:30:00", "COMPLETED",
             "gres/gpu=99999999999999999999")], HEADER, ":2: field 'AllocTRES'", "4096"),
    "gpu count not a number": (
        [row("1", "a", "x", "00:00:00", "00:00:00", "00:30:00", "COMPLETED",
             "gres/gpu=two")], HEADER, ":2: field 'AllocTRES'", "whole number"),
    "duplicate job id": (
        [ROWS[0], ROWS[1], ROWS[0]], HEADER, ":4: field 'JobID'", "appears twice"),
    "bad time": (
        [row("1", "a", "x", "00:00:00", "00:00:00", "25:61:00", "COMPLETED", "gres/gpu=1")],
        HEADER, ":2: field 'End'", "expected a time"),
    "wrong delimiter": (
        [r.replace("|", ",") for r in ROWS], HEADER.replace("|", ","), ":1", "','"),
    "missing header": (ROWS, ROWS[1], ":1", "no header"),
    "header lacks End": (
        ["|".join(r.split("|")[:7] + r.split("|")[8:]) for r in ROWS],
        "|".join(HEADER.split("|")[:7] + HEADER.split("|")[8:]), ":1", "End"),
    "too many fields": ([ROWS[0], ROWS[1] + "|extra"], HEADER, ":3", "fields like the header"),
    "every line too long": ([r + "|extra" for r in ROWS], HEADER, ":2", "found 14"),
    "truncated": ([ROWS[0], ROWS[1][:40]], HEADER, ":3: field 'Start'", "truncated"),
    "end in the future": (
        [row("1", "a", "x", "00:00:00", "00:00:00", "00:30:00", "COMPLETED",
             "gres/gpu=1").replace("2026-01-01T00:30:00", "2999-01-01T00:30:00")],
        HEADER, ":2: field 'End'", "future"),
    "no job with gpus": ([ROWS[3]], HEADER, "", "no finished job with GPUs"),
    "header only": ([], HEADER, "", "no jobs"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_history_exits_2_naming_where(case, tmp_path, capsys):
    rows, header, where, problem = BAD[case]
    path = write(tmp_path, rows, header=header)
    assert main(["replay", str(path), "--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpufair: error: {path}{where}"), err
    assert problem in err and "Traceback" not in err


def test_non_utf8_in_a_field_read_is_named(tmp_path, capsys):
    path = tmp_path / "h.txt"
    data = "\n".join([HEADER, *ROWS]).encode()
    path.write_bytes(data.replace(b"|nlp|", b"|nl\xff|", 1))
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3: field 'Account'" in err and "not UTF-8" in err


def test_non_utf8_in_a_job_name_is_accepted(tmp_path, capsys):
    """A user's job name may be any bytes; the replay does not read it."""
    path = tmp_path / "h.txt"
    data = "\n".join([HEADER, *ROWS]).encode()
    path.write_bytes(data.replace(b"|train", b"|tr\xe9in\xff", 2))
    assert main(["replay", str(path), "--policies", "fifo", "--json"]) == 0


def test_unknown_tenant_column_is_named(tmp_path, capsys):
    assert main(["replay", str(write(tmp_path, ROWS)), "--tenant", "vc"]) == 2
    err = capsys.readouterr().err
    assert "--tenant vc" in err and "field 'vc'" in err


def test_the_daemon_does_not_import_pandas():
    """``gpufair serve`` goes through the same entry point: building every command's parser
    and the daemon's wiring must not load pandas (replay imports it when it runs)."""
    import subprocess
    import sys
    code = ("import sys, gpufair.cli.main as m, gpufair.plugin.service; m.build_parser(); "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_fifo_on_an_uncontended_history_is_as_run(tmp_path, capsys):
    """Jobs that never waited, on a cluster as large as their peak use: FIFO starts each at
    its submit and it runs its recorded time, so every JCT is the recorded one exactly (a
    history's run time already holds its start-up: no overhead on a first start)."""
    rows = [row(str(i), "a", "x", f"00:{i:02d}:00", f"00:{i:02d}:00", f"01:{i:02d}:{i:02d}",
                "COMPLETED", f"gres/gpu={1 + i % 3}") for i in range(12)]
    path = write(tmp_path, rows)
    assert main(["replay", str(path), "--policies", "fifo", "--json"]) == 0
    as_run, fifo = (json.loads(line) for line in capsys.readouterr().out.splitlines()[:2])
    for key in ("avg_jct_s", "p90_jct_s", "makespan_s", "worst_rho", "utilization"):
        assert fifo[key] == pytest.approx(as_run[key], abs=1e-9), key
    assert fifo["semantics"] == "clean-history"


def test_crlf_lines_and_no_tenant_columns(tmp_path):
    """A file saved on Windows (CRLF) reads the same; a history with no account, vc or user
    column is one tenant, said so."""
    header = "JobID|Submit|Start|End|State|AllocTRES"
    rows = ["1|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T00:10:00|COMPLETED|"
            "gres/gpu=1", "2|2026-01-01T00:00:00|2026-01-01T00:05:00|2026-01-01T00:10:00|"
            "COMPLETED|gres/gpu=2"]
    path = tmp_path / "h.txt"
    path.write_bytes(("\r\n".join([header, *rows]) + "\r\n").encode())
    history = read_sacct_text(path)
    assert history.jobs["gpus"].tolist() == [1, 2]
    assert history.jobs["tenant"].tolist() == ["(none)", "(none)"]
    assert "one tenant" in history.notes[-1]


def test_real_22_05_shapes_cancel_while_pending_and_mixed_types(tmp_path):
    """Two rows as the loopback slurmdbd (22.05.8) records them: a job cancelled while held
    pending has Start = End (the cancel time) and an empty AllocTRES; an untyped request
    given GPUs of two types names both types (it may run on any)."""
    header = ("JobID|JobIDRaw|JobName|User|Account|Submit|Start|End|State|AllocTRES|ReqTRES|"
              "NNodes|NodeList")
    rows = ["9|9|cancel-pending|root|vision|2026-11-28T09:00:59|2026-11-28T09:01:00|"
            "2026-11-28T09:01:00|CANCELLED by 0||billing=1,cpu=1,gres/gpu=2,mem=4000M,node=1|"
            "1|None assigned",
            "20|20|burst-08|gpf-bob|nlp|2026-11-28T09:01:09|2026-11-28T09:01:44|"
            "2026-11-28T09:02:07|COMPLETED|billing=2,cpu=2,gres/gpu:k80=4,gres/gpu:v100=4,"
            "gres/gpu=8,mem=8000M,node=2|billing=2,cpu=2,gres/gpu=8,mem=8000M,node=2|2|"
            "gpu-k80-2,gpu-v100-2"]
    history = read_sacct_text(write(tmp_path, rows, header=header))
    assert history.excluded["cancelled_before_start"] == 1
    job = history.jobs.set_index("job_id").loc["20"]
    assert (job["gpus"], job["gpu_type"], job["attained_s"]) == (8, "", 23)


def test_time_limit_marks_the_run_partial_and_exits_3(tmp_path, capsys):
    rows = [row(str(i), "a", "x", "00:00:00", "00:00:00", "01:00:00", "COMPLETED",
                "gres/gpu=1") for i in range(40)]
    path = write(tmp_path, rows)
    assert main(["replay", str(path), "--policies", "las", "--cluster", "gpu:1", "--json",
                 "--time-limit", "0.001"]) == 3
    las = [json.loads(line) for line in capsys.readouterr().out.splitlines()][1]
    assert las["policy"] == "las" and las["partial"] is True
    assert las["num_jobs"] < las["trace_jobs"] == 40


def test_round_phase_puts_slurm_backfill_passes_on_the_historys_clock(tmp_path, capsys):
    """``--round-phase``: rounds begin at that second of the history's clock (mod the round),
    as Slurm's backfill passes do. With ``backfill_at_boundaries`` job 3 (tenant c) can
    only be backfilled past the blocked job 2 at a boundary: 50 s past the round's multiple
    it waits 30 s; without a phase the first round begins at the first submission and it
    waits 100 s; a phase exactly on its submission starts it at once (an exact fit)."""
    rows = [row("1", "u", "a", "00:00:00", "00:00:00", "00:20:00", "COMPLETED", "gres/gpu=2"),
            row("2", "u", "b", "00:00:10", "00:20:00", "00:30:00", "COMPLETED", "gres/gpu=3"),
            row("3", "u", "c", "00:00:20", "00:02:00", "00:04:00", "COMPLETED", "gres/gpu=1")]
    path = write(tmp_path, rows)
    config = tmp_path / "gpufair.toml"
    config.write_text("[policies.slurm_backfill]\nbackfill_at_boundaries = true\n"
                      "reservations = 1\nwhole_nodes = false\n", encoding="utf-8")
    t0 = read_sacct_text(path).t0

    def wait_of_c(*phase: str) -> float:
        assert main(["replay", str(path), "--policies", "slurm_backfill", "--json",
                     "--cluster", "gpu:4", "--gpus-per-server", "2", "--config", str(config),
                     *phase]) == 0
        tenants = json.loads(capsys.readouterr().out.splitlines()[-1])["tenants"]
        return next(r["mean_wait_s"] for r in tenants
                    if r["run"] == "slurm_backfill" and r["tenant"] == "c")

    assert wait_of_c("--round-phase", str(t0 + 50)) == pytest.approx(30.0)
    assert wait_of_c("--round-phase", str(t0 + 20 + 120 * 7)) == pytest.approx(0.0)
    assert wait_of_c() == pytest.approx(100.0)

"""Published cluster traces through the bundled column maps (issue 31).

The Helios (DIR-LAB cut) and NREL Eagle files are real third-party data (tests/data/histories/
README.md); the Slurm-database and Helios/Acme tables are written here in those shapes, each
row exercising one rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufair.adapters.history.published import bundled_maps, read_published
from gpufair.cli.main import main

DATA = Path(__file__).parent / "data" / "histories"
HELIOS = DATA / "helios_dirlab_300.csv"
EAGLE = DATA / "nrel_eagle_24.csv"

DB_HEADER = ("id_job,id_array_job,id_array_task,id_user,account,partition,id_qos,"
             "time_submit,time_start,time_end,state,tres_alloc,tres_req,nodes_alloc")
T = 1_600_000_000
# TRES strings hold commas, so an export of the table quotes them, as CSV writers do
DB_ROWS = [
    f'1,0,4294967294,1001,ml,gpu,1,{T},{T},{T + 3600},3,"1=20,2=170000,4=1,1001=2","1=20",1',
    f'2,0,4294967294,1002,bio,gpu,1,{T + 60},{T + 3600},{T + 4000},5,"1=4,4=1,1001=1","1=4",1',
    f'5,4,7,1002,bio,gpu,1,{T + 70},{T + 100},{T + 200},3,"1=4,4=1,1001=1","1=4",1',
    f'6,0,4294967294,1002,bio,gpu,1,{T + 80},0,0,4,"","1=4,1001=1",1',
    f'7,0,4294967294,1003,ml,gpu,1,{T + 90},{T + 95},{T + 300},1027,"1=4,4=1","1=4",1',
]


def db_file(tmp_path: Path, rows=DB_ROWS) -> Path:
    path = tmp_path / "job_table.csv"
    path.write_text("\n".join([DB_HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def test_helios_dirlab_cut_has_no_starts(tmp_path):
    history = read_published(HELIOS)
    assert history.notes[0] == "read with the dirlab column map"
    assert not history.starts_known and history.tenant_key == "user"
    jobs = history.jobs
    first = jobs.iloc[:3]
    assert (first["submit"] - history.t0).tolist() == [0, 94, 245]    # cumulated intervals
    assert (first["end"] - first["start"]).tolist() == [84, 87, 83]   # run_time
    assert (jobs["start"] == jobs["submit"]).all()
    assert history.excluded["no_gpus"] == 300 - len(jobs)


def test_helios_replay_has_no_as_run(capsys):
    assert main(["replay", str(HELIOS), "--policies", "fifo", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line.get("policy") for line in lines[:-1]] == ["fifo"]
    assert any("'as run' is not measured" in n for n in lines[-1]["history"]["notes"])


def test_nrel_eagle_real_rows(capsys):
    history = read_published(EAGLE)
    assert history.tenant_key == "account"
    assert len(history.jobs) == 4 and history.excluded["no_gpus"] == 20
    assert history.jobs["gpus"].tolist() == [2, 2, 2, 16]
    assert main(["replay", str(EAGLE), "--policies", "fifo,las", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    as_run = lines[0]
    assert as_run["policy"] == "as_run" and as_run["num_jobs"] == 4


def test_slurm_db_table(tmp_path):
    history = read_published(db_file(tmp_path))
    jobs = history.jobs.set_index("job_id")
    assert sorted(jobs.index) == ["1", "2", "4_7"]
    assert jobs.loc["1", "gpus"] == 2 and jobs.loc["2", "state"] == "FAILED"
    assert jobs.loc["4_7", "end"] - jobs.loc["4_7", "start"] == 100
    assert history.excluded == {"no_gpus": 1, "never_started": 0,
                                "cancelled_before_start": 1, "unfinished": 0}


def test_slurm_db_unknown_tres_id_is_named(tmp_path, capsys):
    rows = [DB_ROWS[0].replace("1001=2", "1002=2")]
    path = db_file(tmp_path, rows)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: field 'tres_alloc'" in err and "unknown TRES id '1002'" in err


def test_a_site_map_names_its_tres_ids(tmp_path):
    """MIT Supercloud's tables count GPUs under a site id (1002 in the issue's example)."""
    site = tmp_path / "site.toml"
    maps = bundled_maps()
    base = maps["slurm-db"]
    lines = ['["supercloud"]', f"detect = {json.dumps(list(base.detect))}",
             'times = "epoch"', '["supercloud".columns]']
    lines += [f"{k} = {json.dumps(v)}" for k, v in base.columns.items()]
    lines += ['["supercloud".states]'] + [f'"{k}" = "{v}"' for k, v in base.states.items()]
    lines += ['["supercloud".tres_ids]'] + [f'"{k}" = "{v}"' for k, v in base.tres_ids.items()
                                             if k != "1001"]
    lines += ['"1002" = "gres/gpu:volta"']
    site.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = [r.replace("1001=", "1002=") for r in DB_ROWS]
    path = db_file(tmp_path, rows)
    assert main(["replay", str(path), "--format", "supercloud", "--column-map", str(site),
                 "--policies", "fifo", "--json"]) == 0


def test_helios_acme_shape_tenant_is_vc(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
        "duration,queue\n"
        "a1,u1,vcA,8,64,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:10:00,"
        "2020-04-01 02:10:00,7200,600\n"
        "a2,u2,vcB,1,8,1,FAILED,2020-04-01 00:05:00,2020-04-01 00:05:00,"
        "2020-04-01 00:35:00,1800,0\n"
        "a3,u2,vcB,0,8,1,COMPLETED,2020-04-01 00:05:00,2020-04-01 00:05:00,"
        "2020-04-01 00:35:00,1800,0\n", encoding="utf-8")
    history = read_published(path)
    assert history.tenant_key == "vc"
    assert history.jobs["tenant"].tolist() == ["vcA", "vcB"]
    assert history.jobs["start"].sub(history.jobs["submit"]).tolist() == [600, 0]


BAD = {
    "unknown shape": ("a,b,c\n1,2,3\n", ":1", "matches no column map"),
    "gpus not a number": (
        "job_id,user,account,partition,qos,gpus_req,nodes_req,submit_time,start_time,"
        "end_time,state\n1,u,a,p,q,two,1,2019-01-01 00:00:00,2019-01-01 00:00:01,"
        "2019-01-01 00:10:00,COMPLETED\n", ":2: field 'gpus_req'", "expected a number"),
    "truncated": (
        "job_id,user,account,partition,qos,gpus_req,nodes_req,submit_time,start_time,"
        "end_time,state\n1,u,a,p,q,1,1,2019-01-01 00:00:00,2019-01-01 00:00:01,"
        "2019-01-01 00:10:00,COMPLETED\n2,u,a,p,q,1,1,2019-01-01 00:0",
        ":3: field 'start_time'", "truncated"),
    "end before start": (
        "job_id,user,account,partition,qos,gpus_req,nodes_req,submit_time,start_time,"
        "end_time,state\n1,u,a,p,q,1,1,2019-01-01 00:00:00,2019-01-01 00:20:01,"
        "2019-01-01 00:10:00,COMPLETED\n", ":2: field 'end_time'", "ends before"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_published_history(case, tmp_path, capsys):
    text, where, problem = BAD[case]
    path = tmp_path / "h.csv"
    path.write_text(text, encoding="utf-8")
    assert main(["replay", str(path), "--policies", "fifo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpufair: error: {path}{where}"), err
    assert problem in err


def test_unknown_format_is_named(capsys):
    assert main(["replay", str(EAGLE), "--format", "philly"]) == 2
    assert "--format" in capsys.readouterr().err


def test_bundled_history_by_name(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "helios_dirlab_1k", "--policies", "fifo", "--json", "-q"]) == 0
    tail = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert tail["history"]["jobs"] > 600


PHILLY = DATA / "philly_dirlab_500.csv"
ALIBABA = DATA / "alibaba_openb_500.csv"
#: (history, lines kept, round s): small cuts, rounds long enough for a few hundred rounds
EVERY_POLICY = {"nrel-eagle": (EAGLE, 25, 600), "helios": (HELIOS, 30, 600),
                "philly": (PHILLY, 14, 21600), "alibaba": (ALIBABA, 16, 86400)}


@pytest.mark.parametrize("name", sorted(EVERY_POLICY))
def test_every_policy_replays_a_real_history(name, tmp_path, capsys):
    """Each real history, cut small, through all eleven policies to the end."""
    from gpufair.policy.registry import available_policies
    source, keep, round_s = EVERY_POLICY[name]
    cut = tmp_path / source.name
    cut.write_text("".join(source.read_text(encoding="utf-8").splitlines(True)[:keep + 1]),
                   encoding="utf-8")
    policies = available_policies()
    assert len(policies) >= 11
    assert main(["replay", str(cut), "--policies", ",".join(policies), "--round",
                 str(round_s), "--json", "-q"]) == 0
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:-1]
    simulated = [r for r in runs if r["policy"] != "as_run"]
    assert [r["policy"] for r in simulated] == list(policies)
    assert all(r["num_jobs"] == r["trace_jobs"] > 0 and not r["partial"] for r in simulated)
    assert (runs[0]["policy"] == "as_run") == (name in ("nrel-eagle", "alibaba"))


def test_philly_and_alibaba_cuts_read():
    philly = read_published(PHILLY)
    assert philly.notes[0] == "read with the dirlab column map" and len(philly.jobs) == 500
    alibaba = read_published(ALIBABA)
    assert alibaba.tenant_key == "qos"
    assert alibaba.excluded == {"no_gpus": 35, "never_started": 0,
                                "cancelled_before_start": 35, "unfinished": 0}
    first = alibaba.jobs.iloc[0]
    assert (first["job_id"], first["submit"], first["start"], first["end"]) == \
        ("openb-pod-0000", 0, 0, 12537496)

"""gpufair/results: the one writer and reader of results directories (docs/FORMATS.md §9).

What a reader of a results directory relies on: a directory under the final name is whole
(written elsewhere, renamed in, meta.json last), every byte is vouched for by meta.json, and
what cannot be trusted — missing, unfinished, truncated, other version, two workloads mixed —
is refused with the directory and file named.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from gpufair.errors import InputError
from gpufair.results import (
    TABLES,
    VERSION,
    ResultsWriter,
    input_file,
    parquet_available,
    read_results,
    scalar_metrics,
)
from gpufair.results import writer as writer_module


@pytest.fixture()
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "a.trace"
    path.write_text("job one\n")
    return path


def _writer(out: Path, trace: Path, runs=("fifo", "themis")) -> ResultsWriter:
    w = ResultsWriter(out, kind="compare", command=["gpufair", "compare"],
                      inputs={"trace": input_file(trace), "round_s": 360.0, "seed": 0})
    for i, run in enumerate(runs):
        w.add_run(run, {"policy": run, "avg_jct_s": 100.0 + i, "worst_rho": math.nan,
                        "unfair_fraction": {"1.0": 0.5, "1.1": 0.25},
                        "dropped_jobs": [{"index": 1}], "partial": False})
        w.add_rows("jobs", [
            ("007", "NA", 0.0, 10.0, 50.0, 10.0, 50.0, 2, "v100;k80", 1.25, "finished"),
            ("8", "team b", 5.0, math.nan, math.nan, math.nan, math.nan, 1, "",
             math.nan, "never_started"),
        ], run=run)
        w.add_rows("allocations", [{"job_id": "007", "start_s": 10.0, "end_s": 30.0,
                                    "gpu_type": "v100", "gpus": 1},
                                   {"job_id": "007", "start_s": 30.0, "end_s": 50.0,
                                    "gpu_type": "k80", "gpus": 1}], run=run)
        w.add_rows("cluster", [(0.0, "v100", 4, 1, 1), (0.0, "k80", 0, 0, 1)], run=run)
        w.add_rows("tenants", [(0.0, "NA", 1.0, 2.0)], run=run)
    return w


def test_round_trip_keeps_types_names_and_order(tmp_path, trace):
    out = _writer(tmp_path / "res", trace).commit()
    got = read_results(out)
    assert got.runs == ["fifo", "themis"]
    assert got.kinds == ["compare"]
    jobs = got.jobs
    assert list(jobs.columns) == TABLES["jobs"].names
    assert jobs["job_id"].tolist() == ["007", "8", "007", "8"]     # ids stay text
    assert jobs["tenant"].tolist()[:2] == ["NA", "team b"]          # "NA" is not missing
    assert jobs["gpu_types"].tolist()[:2] == ["v100;k80", ""]
    assert jobs["gpus"].dtype == "int64"
    assert math.isnan(jobs["start_s"].iloc[1])
    assert got.cluster[got.cluster.gpu_type == "k80"]["total"].tolist() == [0, 0]
    metrics = got.metrics.set_index("run")
    assert metrics.loc["themis", "avg_jct_s"] == 101.0
    assert metrics.loc["fifo", "unfair_fraction.1.1"] == 0.25
    assert math.isnan(metrics.loc["fifo", "worst_rho"])
    assert "dropped_jobs" not in metrics.columns
    assert got.actions.empty and list(got.actions.columns) == TABLES["actions"].names
    meta = json.loads((out / "meta.json").read_text())
    assert meta["version"] == VERSION and meta["runs"] == ["fifo", "themis"]
    assert meta["inputs"]["trace"]["sha256"] == input_file(trace)["sha256"]


def test_csv_alone_reads_the_same_as_with_parquet(tmp_path, trace, monkeypatch):
    monkeypatch.setattr(writer_module, "parquet_available", lambda: False)
    csv_only = _writer(tmp_path / "csv", trace).commit()
    assert not list(csv_only.glob("*.parquet"))
    monkeypatch.undo()
    if not parquet_available():
        pytest.skip("pyarrow is not installed: no Parquet twins to compare with")
    both = _writer(tmp_path / "both", trace).commit()
    assert sorted(p.name for p in both.glob("*.parquet")) == \
        sorted(f"{t}.parquet" for t in TABLES)
    for name in TABLES:
        pd.testing.assert_frame_equal(read_results(csv_only).tables[name],
                                      read_results(both).tables[name], check_dtype=False)


def test_meta_is_written_last_and_nothing_appears_before_the_rename(tmp_path, trace,
                                                                   monkeypatch):
    written = []
    real_dump = json.dump

    def spy(obj, f, **kw):
        written.append(sorted(p.name for p in Path(f.name).parent.iterdir()))
        assert not (tmp_path / "res").exists(), "visible under its final name too early"
        return real_dump(obj, f, **kw)

    monkeypatch.setattr(writer_module.json, "dump", spy)
    _writer(tmp_path / "res", trace).commit()
    assert "meta.json" in written[0] and "jobs.csv" in written[0]   # the others were there


def test_a_failed_write_leaves_nothing_and_keeps_the_earlier_directory(tmp_path, trace,
                                                                     monkeypatch):
    out = _writer(tmp_path / "res", trace, runs=("fifo",)).commit()
    before = (out / "meta.json").read_text()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(writer_module.json, "dump", crash)
    with pytest.raises(OSError, match="disk full"):
        _writer(tmp_path / "res", trace).commit()
    assert (out / "meta.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.trace", "res"]   # no debris


def test_rewriting_replaces_an_earlier_results_directory(tmp_path, trace):
    out = _writer(tmp_path / "res", trace, runs=("fifo",)).commit()
    _writer(out, trace, runs=("las",)).commit()
    assert read_results(out).runs == ["las"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.trace", "res"]


@pytest.mark.parametrize("make", [
    lambda d: (d / "notes.txt").write_text("mine"),
    lambda d: (d / "meta.json").write_text('{"format": "something else"}'),
])
def test_never_overwrites_a_directory_that_is_not_results(tmp_path, trace, make):
    target = tmp_path / "res"
    target.mkdir()
    make(target)
    with pytest.raises(InputError, match="res: exists and is not a gpufair results"):
        _writer(target, trace).commit()
    assert len(list(target.iterdir())) == 1


def test_an_empty_directory_and_a_new_nested_path_are_fine(tmp_path, trace):
    (tmp_path / "empty").mkdir()
    _writer(tmp_path / "empty", trace).commit()
    _writer(tmp_path / "x" / "y" / "z", trace).commit()
    assert read_results(tmp_path / "x" / "y" / "z").runs == ["fifo", "themis"]


def test_writer_refuses_its_callers_mistakes(tmp_path, trace):
    w = _writer(tmp_path / "res", trace)
    with pytest.raises(ValueError, match="given twice"):
        w.add_run("fifo")
    with pytest.raises(ValueError, match="columns missing"):
        w.add_rows("jobs", [{"job_id": "1"}], run="fifo")
    w.add_rows("cluster", [(0.0, "v100", 4, 1, 0)], run="srtf")   # srtf never added
    with pytest.raises(ValueError, match=r"cluster\.csv: rows of runs never added"):
        w.commit()
    assert not (tmp_path / "res").exists()
    with pytest.raises(ValueError, match="kind"):
        ResultsWriter(tmp_path / "r", kind="guess", command=[], inputs={})


# ---- refusals ------------------------------------------------------------------------------

def test_missing_and_not_a_directory(tmp_path):
    with pytest.raises(InputError, match="nope: no such results directory"):
        read_results(tmp_path / "nope")
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="f: not a directory"):
        read_results(tmp_path / "f")
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match=r"d: incomplete results directory: no meta\.json"):
        read_results(tmp_path / "d")


@pytest.mark.parametrize("name", ["jobs.csv", "allocations.csv", "metrics.csv"])
def test_a_truncated_file_is_named(tmp_path, trace, name):
    out = _writer(tmp_path / "res", trace).commit()
    data = (out / name).read_bytes()
    (out / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=rf"res/{name}: truncated or changed after"):
        read_results(out)


def test_a_listed_file_that_is_gone_is_named(tmp_path, trace):
    out = _writer(tmp_path / "res", trace).commit()
    (out / "tenants.csv").unlink()
    with pytest.raises(InputError, match=r"res/tenants\.csv: missing from the results"):
        read_results(out)


@pytest.mark.parametrize("version", [2, 0, "1", True, None])
def test_another_version_is_refused(tmp_path, trace, version):
    out = _writer(tmp_path / "res", trace).commit()
    meta = json.loads((out / "meta.json").read_text())
    meta["version"] = version
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"res/meta\.json: field 'version'.*reads version 1"):
        read_results(out)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda m: m.update(format="other"), "field 'format'"),
    (lambda m: m.pop("runs"), "field 'runs'"),
    (lambda m: m.update(kind="guess"), "field 'kind'"),
    (lambda m: m["files"].update({"../a.trace": "0"}), "missing from the results"),
])
def test_a_damaged_meta_is_named(tmp_path, trace, edit, message):
    out = _writer(tmp_path / "res", trace).commit()
    meta = json.loads((out / "meta.json").read_text())
    edit(meta)
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=message):
        read_results(out)


def test_broken_meta_json_names_the_line(tmp_path, trace):
    out = _writer(tmp_path / "res", trace).commit()
    (out / "meta.json").write_text('{\n "format": \n')
    with pytest.raises(InputError, match=r"res/meta\.json:3: invalid JSON"):
        read_results(out)


def _tamper(out: Path, name: str, text: str) -> None:
    """Replace a CSV and vouch for it in meta.json, as a hand edit with a fixed sha would:
    what is left to catch is the content itself."""
    import hashlib
    (out / name).write_text(text)
    (out / name.replace(".csv", ".parquet")).unlink(missing_ok=True)
    meta = json.loads((out / "meta.json").read_text())
    meta["files"].pop(name.replace(".csv", ".parquet"), None)
    meta["files"][name] = hashlib.sha256(text.encode()).hexdigest()
    (out / "meta.json").write_text(json.dumps(meta))


def test_a_bad_value_is_named_by_line_and_column(tmp_path, trace):
    out = _writer(tmp_path / "res", trace).commit()
    _tamper(out, "cluster.csv", "run,t_s,gpu_type,total,busy,queued_jobs\n"
            "fifo,0,v100,4,1,1\nfifo,360,v100,4,1.5,1\n")
    with pytest.raises(InputError, match=r"cluster\.csv:3: field 'busy' = '1\.5'"):
        read_results(out)
    _tamper(out, "cluster.csv", "run,t_s,gpu_type,total,busy\nfifo,0,v100,4,1\n")
    with pytest.raises(InputError, match=r"cluster\.csv:1: missing column\(s\) queued_jobs"):
        read_results(out)
    _tamper(out, "cluster.csv", "run,t_s,gpu_type,total,busy,queued_jobs\nsrtf,0,v100,4,1,0\n")
    with pytest.raises(InputError, match=r"cluster\.csv: field 'run'.*'srtf'.*does not list"):
        read_results(out)
    _tamper(out, "cluster.csv", "")
    with pytest.raises(InputError, match=r"cluster\.csv: empty"):
        read_results(out)


def test_several_directories_read_side_by_side(tmp_path, trace):
    a = _writer(tmp_path / "a", trace, runs=("fifo",)).commit()
    b = _writer(tmp_path / "b", trace, runs=("themis", "las")).commit()
    got = read_results([a, b])
    assert got.runs == ["fifo", "themis", "las"]
    assert got.run_dirs["las"] == b
    assert sorted(set(got.jobs["run"])) == ["fifo", "las", "themis"]


def test_mixed_workloads_are_refused_naming_both(tmp_path, trace):
    other = tmp_path / "b.trace"
    other.write_text("job two\n")
    a = _writer(tmp_path / "a", trace, runs=("fifo",)).commit()
    b = _writer(tmp_path / "b", other, runs=("las",)).commit()
    with pytest.raises(InputError, match=r"/b: mixed results: its trace \(.*b\.trace\) "
                       r"differs from the trace of .*/a"):
        read_results([a, b])


def test_the_same_run_twice_is_refused(tmp_path, trace):
    a = _writer(tmp_path / "a", trace, runs=("fifo",)).commit()
    b = _writer(tmp_path / "b", trace, runs=("fifo",)).commit()
    with pytest.raises(InputError, match=r"/b: field 'runs'.*'fifo' is also in .*/a"):
        read_results([a, b])


def test_scalar_metrics_flattens_dicts_and_drops_lists():
    assert scalar_metrics({"a": 1, "b": {"1.0": 0.5, "x": [1]}, "c": [1, 2], "d": None}) == \
        {"a": 1, "b.1.0": 0.5, "d": None}


def test_a_failed_rename_keeps_the_earlier_directory_whole(tmp_path, trace, monkeypatch):
    out = _writer(tmp_path / "res", trace, runs=("fifo",)).commit()
    real_rename = writer_module.os.rename

    def rename(src, dst):
        if Path(src).name.endswith(".tmp"):   # the new directory into place
            raise OSError("rename refused")
        return real_rename(src, dst)

    monkeypatch.setattr(writer_module.os, "rename", rename)
    with pytest.raises(OSError, match="rename refused"):
        _writer(out, trace, runs=("las",)).commit()
    monkeypatch.undo()
    assert read_results(out).runs == ["fifo"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.trace", "res"]

"""Traces, throughput files and cluster specs: the three formats, and bad input named precisely."""

from __future__ import annotations

import json

import pytest

from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
from gpufair.adapters.simulator.throughputs import load_throughputs, throughputs_from_dict
from gpufair.adapters.simulator.trace import load_trace, parse_trace
from gpufair.errors import InputError
from gpufair.model import Adaptation

LINE12 = ("ResNet-18 (batch size 32)\tpython3 main.py\timage_classification/cifar10\t--num_steps"
          "\t1\t143450\t1\taccordion\t1\t-1.000000\t3338\t55")
LINE10 = "LM (batch size 20)\tpython3 main.py\tlm\t--steps\t1\t5000\t2\t1\t-1\t100"
LINE7 = "Transformer (batch size 128)\tcd %s && python3 train.py\t-step\t1\t246378\t0.000000\t8"


def test_parse_three_formats():
    (j12,) = parse_trace(LINE12)
    assert (j12.model, j12.batch_size, j12.total_steps, j12.scale_factor, j12.mode,
            j12.arrival_s, j12.duration_s) == ("ResNet-18", 32, 143450, 1, Adaptation.ACCORDION,
                                               55.0, 3338.0)
    (j10,) = parse_trace(LINE10)
    assert (j10.model, j10.scale_factor, j10.arrival_s, j10.mode) == ("LM", 2, 100.0,
                                                                      Adaptation.STATIC)
    (j7,) = parse_trace(LINE7)
    assert (j7.total_steps, j7.arrival_s, j7.scale_factor) == (246378, 0.0, 8)


def test_shipped_traces_load(canonical_trace, bundled_data):
    assert len(canonical_trace) == 120
    assert sum(j.scale_factor for j in canonical_trace) == 92 + 40 + 32
    msr = load_trace(bundled_data / "gavel_msr_51b7ef.trace")
    assert len(msr) == 18


@pytest.mark.parametrize(("text", "needle"), [
    ("a\tb\tc", ":1: expected 12 (Shockwave), 10 (Gavel) or 7 (MSR)"),
    (LINE12 + "\n" + LINE10, ":2: expected 12 tab-separated columns"),
    (LINE12.replace("143450", "lots"), "field 'total_steps' = 'lots'"),
    (LINE12.replace("accordion", "turbo"), "field 'mode' = 'turbo'"),
    (LINE12.replace("\t1\taccordion", "\t0\taccordion"), "field 'scale_factor' = 0"),
    (LINE12 + "\n" + LINE12.replace("\t55", "\t54"), ":2: field 'arrival_time' = 54.0"),
    (LINE12.replace("\t55", "\tnan"), "field 'arrival' = 'nan': must be finite"),
    ("", "the trace has no jobs"),
])
def test_bad_trace_lines_are_named(text, needle):
    with pytest.raises(InputError) as err:
        parse_trace(text, "t.trace")
    assert needle in str(err.value)
    assert str(err.value).startswith("t.trace")


def test_binary_trace_is_rejected_with_line(tmp_path):
    path = tmp_path / "bin.trace"
    path.write_bytes(LINE12.encode() + b"\n\xff\xfe\x00junk\n")
    with pytest.raises(InputError, match=r"bin.trace:2: not UTF-8"):
        load_trace(path)


def test_throughputs_load_and_errors(tmp_path, tacc):
    assert tacc.rate("v100", "ResNet-18 (batch size 32)", 1) == pytest.approx(42.97, abs=0.01)
    assert "v100" in tacc.unconsolidated
    with pytest.raises(InputError, match=r"field 'v100\.oops'"):
        throughputs_from_dict({"v100": {"oops": {"null": 1}}}, "x.json")
    with pytest.raises(InputError, match=r"null' = -1"):
        throughputs_from_dict({"v100": {"('A', 1)": {"null": -1}}}, "x.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"v100": {\n  "x": }')
    with pytest.raises(InputError, match=r"bad.json:2: invalid JSON"):
        load_throughputs(bad)
    with pytest.raises(InputError, match="cannot read"):
        load_throughputs(tmp_path / "missing.json")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({}))
    with pytest.raises(InputError, match="non-empty"):
        load_throughputs(empty)


def test_cluster_specs():
    nodes = parse_cluster_spec("v100:32")
    assert len(nodes) == 32 and nodes[0].gpus == 1 and nodes[0].name == "v100-0"
    nodes = parse_cluster_spec("v100:8,p100:8,k80:8", "4")
    assert [(n.gpu_type, n.gpus) for n in nodes][::2] == [("v100", 4), ("p100", 4), ("k80", 4)]
    nodes = parse_cluster_spec("32:0:0")
    assert {n.gpu_type for n in nodes} == {"v100"} and len(nodes) == 32
    nodes = parse_cluster_spec("v100:8/4,k80:4")
    assert [n.gpus for n in nodes] == [4, 4, 1, 1, 1, 1]
    nodes = parse_cluster_spec("v100:8,k80:8", "v100:8,k80:2")
    assert [n.gpus for n in nodes] == [8, 2, 2, 2, 2]


@pytest.mark.parametrize(("spec", "per", "needle"), [
    ("v100", None, "field 'cluster' = 'v100'"),
    ("v100:32,v100:8", None, "listed twice"),
    ("v100:10", "4", "do not split into servers of 4"),
    ("v100:0", None, "no GPUs"),
    ("v100:8", "x:y", "field 'gpus_per_server'"),
])
def test_bad_cluster_specs(spec, per, needle):
    with pytest.raises(InputError, match=needle):
        parse_cluster_spec(spec, per)

"""Write the bad-input corpus: the input files under ``files/`` and ``cases.toml``.

Each case is one command line on one (usually malformed) input, the exit code the contract
asks for, and a substring the one-line error must contain. The files are made from a few
valid inputs by named mutations, so that every case differs from a working input in exactly
the way its name says. The output is committed; ``test_bad_inputs.py`` checks that running
this script again changes nothing (edit this script, not the files).

    python tests/bad_inputs/make_corpus.py [OUT_DIR]
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SLURM = REPO / "tests" / "data" / "slurm"

# ---- the valid inputs the mutations start from ----------------------------------------------

_COLS = ["ResNet-18 (batch size 32)", "python3 main.py", "image_classification/cifar10",
         "--num_steps", "1", "2000", "1", "static", "1", "-1.000000", "47", "0"]
_COLS2 = ["LM (batch size 20)", "python3 main.py", "language_modeling", "--steps", "1",
          "1000", "1", "static", "1", "-1.000000", "15", "10"]
#: column of each field in the 12-column (Shockwave) format
_FIELD = {"job_type": 0, "total_steps": 5, "scale_factor": 6, "mode": 7, "priority_weight": 8,
          "slo": 9, "duration": 10, "arrival": 11}


def trace(**changes: str) -> bytes:
    """The two-job base trace with fields of the first job replaced."""
    first = list(_COLS)
    for name, value in changes.items():
        first[_FIELD[name]] = value
    return ("\t".join(first) + "\n" + "\t".join(_COLS2) + "\n").encode()


THROUGHPUTS: dict[str, Any] = {"v100": {"('ResNet-18 (batch size 32)', 1)": {"null": 42.97},
                                        "('LM (batch size 20)', 1)": {"null": 68.05}}}


def throughputs(rate: Any = 42.97, *, key: str = "('ResNet-18 (batch size 32)', 1)",
                worker: str = "v100") -> bytes:
    data = {worker: {key: {"null": rate}, "('LM (batch size 20)', 1)": {"null": 68.05}}}
    return json.dumps(data).encode()


def snapshot(change: Callable[[dict[str, Any]], object] | None = None) -> bytes:
    data = json.loads((REPO / "gpufair" / "deploy" / "snapshot.example.json").read_text())
    if change is not None:
        change(data)
    return json.dumps(data, indent=1).encode()


def squeue(change: Callable[[dict[str, Any]], object] | None = None) -> bytes:
    data = json.loads((SLURM / "squeue.json").read_text())
    if change is not None:
        change(data)
    return json.dumps(data).encode()


def sinfo(change: Callable[[dict[str, Any]], object] | None = None) -> bytes:
    data = json.loads((SLURM / "sinfo.json").read_text())
    if change is not None:
        change(data)
    return json.dumps(data).encode()


def deep(depth: int = 20_000, open_: str = "[", close: str = "]") -> bytes:
    return (open_ * depth + close * depth).encode()


def set_path(*path: Any, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


# ---- cases ----------------------------------------------------------------------------------

CASES: list[dict[str, Any]] = []
FILES: dict[str, bytes] = {}


def case(name: str, argv: list[str], exit: int, message: str = "", *,
         files: dict[str, bytes] | None = None, names: str | None = None, lines: str = "one",
         env: dict[str, str] | None = None) -> None:
    """One case; ``{f}`` in ``argv`` is the first of ``files`` (written under files/)."""
    paths = {}
    for rel, data in (files or {}).items():
        FILES[rel] = data
        paths[rel] = f"{{here}}/files/{rel}"
    first = next(iter(paths.values()), "")
    argv = [a.replace("{f}", first) for a in argv]
    if names is None and first and exit != 0:
        names = first.rsplit("/", 1)[-1]
    entry: dict[str, Any] = {"name": name, "argv": argv, "exit": exit, "message": message}
    if names:
        entry["names"] = names
    if lines != "one":
        entry["lines"] = lines
    if env:
        entry["env"] = env
    CASES.append(entry)


SIM = ["simulate", "--policy", "fifo", "--cluster", "v100:2", "--no-progress"]


def trace_cases() -> None:
    sim = [*SIM, "--trace", "{f}"]
    case("trace-ok", sim, 0, files={"trace/ok.trace": trace()})
    case("trace-ok-json", [*sim, "--json"], 0, files={"trace/ok.trace": trace()})
    case("trace-crlf", sim, 0, files={"trace/crlf.trace": trace().replace(b"\n", b"\r\n")})
    case("trace-comments-only", sim, 2, "no jobs", files={"trace/comments.trace": b"# x\n\n"})
    case("trace-empty", sim, 2, "no jobs", files={"trace/empty.trace": b""})
    case("trace-five-columns", sim, 2, "found 5",
         files={"trace/five.trace": b"a\tb\tc\td\te\n"})
    case("trace-mixed-columns", sim, 2, ":2: expected 12 tab-separated columns",
         files={"trace/mixed.trace": trace().splitlines()[0] + b"\nA\t1\t2\n"})
    case("trace-spaces-not-tabs", sim, 2, "tab-separated",
         files={"trace/spaces.trace": trace().replace(b"\t", b"  ")})
    bad_numbers = {
        "total_steps": ["lots", "", "-5", "0", "1.5", "1e308", "1e400", "nan", "inf",
                        "99999999999999999999", "0x10", "1e11"],
        "scale_factor": ["0", "-1", "2.5", "abc", "1e308", "1000000", "nan"],
        "arrival": ["-1", "nan", "inf", "-inf", "1e308", "1e10", "abc", "1e400"],
        "priority_weight": ["0", "-1", "1e308", "nan", "inf", "x"],
        "slo": ["nan", "1e308", "abc"],
        "duration": ["nan", "-5", "1e308", "inf", "abc"],
    }
    for fieldname, values in bad_numbers.items():
        for value in values:
            slug = value.replace(".", "_").replace("-", "m") or "empty"
            case(f"trace-{fieldname}-{slug}", sim, 2,
                 f"field '{'arrival' if fieldname == 'arrival' else fieldname}",
                 files={f"trace/{fieldname}_{slug}.trace": trace(**{fieldname: value})})
    case("trace-mode-unknown", sim, 2, "expected static, accordion or gns",
         files={"trace/mode.trace": trace(mode="turbo")})
    case("trace-mode-empty", sim, 2, "field 'mode'", files={"trace/mode_empty.trace":
                                                             trace(mode="")})
    case("trace-job-type-empty", sim, 2, "empty job type",
         files={"trace/job_type_empty.trace": trace(job_type=" ")})
    case("trace-job-type-unknown", sim, 0,
         files={"trace/job_type_unknown.trace": trace(job_type="Nope (batch size 7)")})
    case("trace-no-job-runnable", sim, 2, "no job of the trace can run",
         files={"trace/none_runnable.trace":
                trace(job_type="Nope").replace(b"LM (batch size 20)", b"Nope2")})
    case("trace-arrival-decreasing", sim, 2, "non-decreasing",
         files={"trace/decreasing.trace": trace(arrival="100")})
    case("trace-gang-too-big", sim, 0, files={"trace/gang.trace": trace(scale_factor="64")})
    case("trace-not-utf8", sim, 2, ":2: not UTF-8",
         files={"trace/latin1.trace": trace().splitlines()[0] + b"\n\xff\xfe caf\xe9\n"})
    case("trace-utf16", sim, 2, "not UTF-8",
         files={"trace/utf16.trace": trace().decode().encode("utf-16")})
    case("trace-nul-bytes", sim, 2, "", files={"trace/nul.trace": b"\x00" * 64})
    case("trace-binary", sim, 2, "", files={"trace/binary.trace": bytes(range(256)) * 8})
    case("trace-json-instead", sim, 2, "columns", files={"trace/json.trace": throughputs()})
    case("trace-huge-line", sim, 2, "field", files={"trace/huge.trace": trace(
        job_type="ResNet-18 (batch size 32)", total_steps="9" * 5_000)})
    case("trace-unicode-job-type", sim, 0,
         files={"trace/unicode.trace": trace(job_type="Réseau‮ (batch size 32)")})
    case("trace-missing", [*SIM, "--trace", "{here}/files/trace/does-not-exist.trace"], 2,
         "cannot read trace", names="does-not-exist.trace")
    case("trace-directory", [*SIM, "--trace", "{here}/files/trace"], 2, "cannot read trace",
         names="trace")


def throughput_cases() -> None:
    sim = [*SIM, "--trace", "{here}/files/trace/ok.trace", "--throughputs", "{f}"]
    FILES["trace/ok.trace"] = trace()
    case("tput-ok", sim, 0, files={"tput/ok.json": throughputs()})
    for slug, data, needle in [
        ("not-json", b"v100: fast", "invalid JSON"),
        ("truncated", throughputs()[:-7], "invalid JSON"),
        ("empty-file", b"", "invalid JSON"),
        ("list", b"[]", "non-empty JSON object"),
        ("empty-object", b"{}", "non-empty JSON object"),
        ("null", b"null", "non-empty JSON object"),
        ("string", b'"v100"', "non-empty JSON object"),
        ("worker-list", b'{"v100": []}', "expected an object of job entries"),
        ("bad-key", json.dumps({"v100": {"ResNet": {"null": 1}}}).encode(), "expected a key"),
        ("no-null", json.dumps({"v100": {"('A', 1)": {"x": 1}}}).encode(), "'null'"),
        ("entry-number", json.dumps({"v100": {"('A', 1)": 3}}).encode(), "'null'"),
        ("negative", throughputs(-1), "throughput must be"),
        ("text", throughputs("fast"), "throughput must be"),
        ("bool", throughputs(True), "throughput must be"),
        ("nan", throughputs(float("nan")), "throughput must be"),
        ("infinity", throughputs(float("inf")), "throughput must be"),
        ("huge", throughputs(1e308), "throughput must be"),
        ("overflow-literal", throughputs().replace(b"42.97", b"1e400"), "throughput must be"),
        ("tiny", throughputs(1e-300), "throughput must be"),
        ("sf-zero", throughputs(key="('ResNet-18 (batch size 32)', 0)"), "gang"),
        ("sf-huge", throughputs(key="('ResNet-18 (batch size 32)', 99999999999999999999)"),
         "gang"),
        ("only-unconsolidated", throughputs(worker="v100_unconsolidated").replace(
            b'"v100_unconsolidated"', b'"v100_unconsolidated"'), "no consolidated GPU type"),
        ("deep-nesting", deep(), "nested"),
        ("deep-objects", deep(10_000, '{"a":', "}"), "nested"),
        ("not-utf8", throughputs().replace(b"v100", b"v\xff00"), "not UTF-8"),
        ("duplicate-key", b'{"v100": {"(\'LM (batch size 20)\', 1)": {"null": 1}, '
                          b'"(\'LM (batch size 20)\', 1)": {"null": 2}}}', "twice"),
    ]:
        case(f"tput-{slug}", sim, 2, needle, files={f"tput/{slug}.json": data})
    case("tput-zero-rate", sim, 0, files={"tput/zero.json": throughputs(0)})
    case("tput-missing", [*SIM, "--throughputs", "{here}/files/tput/nope.json"], 2,
         "cannot read", names="nope.json")


def config_cases() -> None:
    check = ["config", "{f}"]
    FILES["trace/ok.trace"] = trace()
    ok_trace = [*SIM, "--trace", "{here}/files/trace/ok.trace"]
    sim = [*ok_trace, "--config", "{f}"]
    good = b'[daemon]\npolicy = "las"\nround_s = 60\n'
    case("config-ok", check, 0, files={"config/ok.toml": good})
    case("config-ok-simulate", sim, 0, files={"config/ok.toml": good})
    tomls = [
        ("invalid", b"[daemon\n", "invalid TOML"),
        ("unknown-section", b"[daemonn]\n", "unknown section"),
        ("unknown-key", b"[daemon]\npolicyy = 'las'\n", "unknown option"),
        ("policy-unknown-key", b"[policies.max_min]\nheterogeneity = true\n",
         "unknown option"),
        ("policy-unknown-key-las", b"[policies.las]\nthresholds = [1]\n", "unknown option"),
        ("policy-unknown", b"[policies.nope]\n", "unknown policy"),
        ("policies-not-table", b"policies = 5\n", "policies"),
        ("policy-not-table", b"[policies]\nmax_min = 3\n", "expected a table"),
        ("wrong-type", b"[daemon]\nround_s = 'fast'\n", "expected a number"),
        ("round-zero", b"[daemon]\nround_s = 0\n", "must be >"),
        ("round-negative", b"[daemon]\nround_s = -5\n", "must be >"),
        ("round-nan", b"[daemon]\nround_s = nan\n", "finite"),
        ("round-inf", b"[daemon]\nround_s = inf\n", "finite"),
        ("round-huge", b"[daemon]\nround_s = 1e308\n", "round_s"),
        ("share-two", b"[daemon]\nmax_preempt_share = 2\n", "must be <= 1"),
        ("seed-negative", b"[daemon]\nseed = -1\n", "must be >= 0"),
        ("seed-huge", b"[daemon]\nseed = 99999999999999999999\n", "seed"),
        ("port-huge", b"[daemon]\nmetrics_port = 70000\n", "must be <= 65535"),
        ("mode-bad", b"[daemon]\nmode = 'medium'\n", "expected one of"),
        ("bool-as-text", b"[daemon]\nfill_idle = 'yes'\n", "expected true or false"),
        ("daemon-policy-unknown", b"[daemon]\npolicy = 'nope'\n", "unknown policy"),
        ("backend-bad", b"[solver]\nbackend = 'cplex'\n", "expected one of"),
        ("threads-zero", b"[solver]\nthreads = 0\n", "must be >= 1"),
        ("time-limit-nan", b"[solver]\ntime_limit_s = nan\n", "finite"),
        ("partitions-not-list", b"[slurm]\nmanaged_partitions = 'gpu'\n", "expected a list"),
        ("retries-zero", b"[slurm]\nretries = 0\n", "must be >= 1"),
        ("event-half", b"[daemon]\nevent_listen = '127.0.0.1:1'\n", "go together"),
        ("not-utf8", b"[daemon]\npolicy = 'l\xe9s'\n", "not UTF-8"),
        ("deep-array", b"x = " + deep(5000), "nested"),
        ("deep-table", b"x = " + deep(5000, "{a=", "}").replace(b"{a=}", b"{a=1}"),
         "nested"),
        ("binary", bytes(range(256)), ""),
        ("empty-key-policy", b"[policies.'']\n", "policy"),
    ]
    for slug, data, needle in tomls:
        case(f"config-{slug}", check, 2, needle, files={f"config/{slug}.toml": data})
    for slug in ("unknown-key", "policy-unknown-key", "round-nan", "not-utf8", "deep-array"):
        case(f"config-simulate-{slug}", sim, 2, dict((s, n) for s, _, n in tomls)[slug],
             files={f"config/{slug}.toml": dict((s, d) for s, d, _ in tomls)[slug]})
    jsons = [
        ("json-invalid", b"{", "invalid JSON"),
        ("json-list", b"[1]", "expected a JSON object"),
        ("json-deep", deep(), "nested"),
        ("json-not-utf8", b'{"a": "\xff"}', "not UTF-8"),
        ("json-unknown-key", b'{"window": 3}', "unknown option"),
        ("json-nan", b'{"queue_thresholds_gpu_s": [NaN]}', "finite"),
    ]
    for slug, data, needle in jsons:
        case(f"config-{slug}", [*ok_trace, "--policy", "las", "--config", "{f}"], 2, needle,
             files={f"config/{slug}.json": data})
    case("config-missing", ["config", "{here}/files/config/none.toml"], 2, "cannot read",
         names="none.toml")
    case("config-no-file", ["config"], 2, "give a gpufair.toml", names="config")
    case("config-describe", ["config", "--describe"], 0)


def snapshot_cases() -> None:
    variants: list[tuple[str, bytes, str]] = [
        ("not-json", b"snapshot", "invalid JSON"),
        ("empty", b"", "invalid JSON"),
        ("list", b"[]", "must be a JSON object"),
        ("not-utf8", snapshot().replace(b"vision", b"visi\xf3n", 1), "not UTF-8"),
        ("deep", deep(), "nested"),
        ("deep-objects", deep(10_000, '{"a":', "}"), "nested"),
        ("wrong-format", snapshot(set_path("format", value="other")), "not a gpufair snapshot"),
        ("future-version", snapshot(set_path("version", value=99)), "unsupported"),
        ("gpus-negative", snapshot(set_path("jobs", 0, "gpus", value=-2)), "jobs[0].gpus"),
        ("gpus-huge", snapshot(set_path("jobs", 3, "gpus", value=10 ** 30)), "jobs[3].gpus"),
        ("gpus-text", snapshot(set_path("jobs", 3, "gpus", value="4")), "jobs[3].gpus"),
        ("time-nan", snapshot().replace(b'"time_s": 7200.0', b'"time_s": NaN'), "time_s"),
        ("time-inf", snapshot().replace(b'"time_s": 7200.0', b'"time_s": Infinity'),
         "time_s"),
        ("time-huge", snapshot(set_path("time_s", value=1e308)), "time_s"),
        ("time-overflow", snapshot().replace(b'"time_s": 7200.0', b'"time_s": 1e400'),
         "time_s"),
        ("arrival-huge", snapshot(set_path("jobs", 3, "arrival_s", value=1e300)),
         "arrival_s"),
        ("rate-huge", snapshot(set_path("jobs", 0, "throughput", 0, "iterations_per_s",
                                        value=1e308)), "iterations_per_s"),
        ("node-gpus-huge", snapshot(set_path("nodes", 0, "gpus", value=10 ** 9)),
         "nodes[0].gpus"),
        ("iterations-huge", snapshot(set_path("jobs", 3, "progress", "iterations_total",
                                              value=1e300)), "iterations_total"),
        ("unknown-field", snapshot(set_path("jobs", 0, "gpu", value=4)), "unknown field"),
        ("duplicate-key", snapshot().replace(b'"time_s": 7200.0',
                                             b'"time_s": 7200.0, "time_s": 1'), "twice"),
        ("held-unknown-node", snapshot(set_path("jobs", 0, "gpus_held", 0,
                                                value="nowhere:0")), "no node named"),
        ("missing-id", snapshot(lambda d: d["jobs"][0].pop("id")), "required field"),
        ("jobs-not-list", snapshot(set_path("jobs", value={})), "jobs"),
        ("state-bad", snapshot(set_path("jobs", 0, "state", value="zombie")), "must be one of"),
        ("bool-gpus", snapshot(set_path("jobs", 0, "gpus", value=True)), "jobs[0].gpus"),
        ("surrogate-id", snapshot().replace(b'"41023"', b'"\\ud800"'), ""),
    ]
    for slug, data, needle in variants:
        case(f"validate-{slug}", ["validate", "{f}"], 2, needle,
             files={f"snapshot/{slug}.json": data}, lines="many")
        case(f"dry-run-{slug}", ["dry-run", "{f}"], 2, needle,
             files={f"snapshot/{slug}.json": data})
    case("validate-ok", ["validate", "{f}"], 0, files={"snapshot/ok.json": snapshot()})
    case("dry-run-ok", ["dry-run", "{f}", "--json"], 0, files={"snapshot/ok.json": snapshot()})
    case("validate-missing", ["validate", "{here}/files/snapshot/none.json"], 2,
         "cannot read", names="none.json")
    case("validate-one-good-one-bad", ["validate", "{here}/files/snapshot/ok.json", "{f}"], 2,
         "jobs[0].gpus", files={"snapshot/gpus-negative.json":
                                snapshot(set_path("jobs", 0, "gpus", value=-2))})


def _bad_gres(data: dict[str, Any]) -> None:
    data["nodes"][2]["gres"] = "gpu:v100:(((("


def slurm_cases() -> None:
    FILES["slurm/squeue.json"] = squeue()
    FILES["slurm/sinfo.json"] = sinfo()
    sq, si = "{here}/files/slurm/squeue.json", "{here}/files/slurm/sinfo.json"
    case("dry-run-raw-ok", ["dry-run", "--squeue", sq, "--sinfo", si, "--json"], 0)
    case("dry-run-raw-no-sinfo", ["dry-run", "--squeue", sq], 2, "--sinfo", names="dry-run")
    case("dry-run-nothing", ["dry-run"], 2, "give a snapshot file", names="dry-run")
    jobs = [
        ("not-json", b"squeue: error", "invalid JSON", 2),
        ("empty", b"", "invalid JSON", 2),
        ("list", b"[]", "'jobs'", 2),
        ("jobs-null", b'{"jobs": null}', "'jobs'", 2),
        ("deep", deep(), "nested", 2),
        ("deep-in-record", b'{"jobs": [' + deep(10_000) + b"]}", "nested", 2),
        ("not-utf8-name", squeue(set_path("jobs", 0, "name", value="x")).replace(
            b'"name": "x"', b'"name": "caf\xe9"'), "", 0),
        ("not-utf8-structure", squeue().replace(b'"jobs"', b'"j\xffobs"'), "'jobs'", 2),
        ("record-garbage", squeue(lambda d: d["jobs"].append(17)), "", 0),
        ("job-id-huge", squeue(set_path("jobs", 0, "job_id", value=10 ** 40)), "", 0),
        ("time-huge", squeue(set_path("jobs", 0, "start_time", value=1e308)), "", 0),
        ("time-overflow", squeue().replace(b'"submit_time": ', b'"submit_time": 1e400, "x": ',
                                           1), "", 0),
        ("nan-priority", squeue().replace(b'"priority": ', b'"priority": NaN, "y": ', 1), "",
         0),
        ("gres-detail-bad", squeue(set_path("jobs", 0, "gres_detail", value=["gpu:k80:("])),
         "", 0),
        ("nodes-absurd", squeue(set_path("jobs", 0, "nodes", value="n[0-999999999]")), "", 0),
    ]
    for slug, data, needle, code in jobs:
        case(f"squeue-{slug}", ["dry-run", "--squeue", "{f}", "--sinfo", si, "--json"], code,
             needle, files={f"slurm/squeue_{slug}.json": data})
    nodes = [
        ("not-json", b"sinfo: error", "invalid JSON", 2),
        ("deep", deep(), "nested", 2),
        ("nodes-dict", b'{"nodes": {}}', "'nodes'", 2),
        ("gres-unreadable", sinfo(_bad_gres), "", 0),
        ("gres-huge", sinfo(set_path("nodes", 0, "gres", value="gpu:k80:99999999999")), "", 0),
        ("name-missing", sinfo(lambda d: d["nodes"][0].pop("name")), "", 0),
        ("state-weird", sinfo(set_path("nodes", 1, "state", value=["??"])), "", 0),
        ("not-utf8-feature", sinfo().replace(b'"gpu-k80-1"', b'"gpu-k80-\xff"', 1), "", 0),
    ]
    for slug, data, needle, code in nodes:
        case(f"sinfo-{slug}", ["dry-run", "--squeue", sq, "--sinfo", "{f}", "--json"], code,
             needle, files={f"slurm/sinfo_{slug}.json": data})
    case("dry-run-store-garbage", ["dry-run", "{here}/files/snapshot/ok.json", "--store",
                                   "{f}"], 2, "state store",
         files={"slurm/store.db": b"not a database" * 100})
    case("dry-run-seed-negative", ["dry-run", "{here}/files/snapshot/ok.json", "--seed",
                                   "-1"], 2, "seed", names="--seed")
    case("dry-run-policy-unknown", ["dry-run", "{here}/files/snapshot/ok.json", "--policy",
                                    "nope"], 2, "unknown policy", names="")
    case("dry-run-partitions-empty", ["dry-run", "--squeue", sq, "--sinfo", si,
                                      "--partitions", ",,,"], 0)
    # `snapshot --slurm` reads squeue/sinfo through fake commands that print corpus files
    fake_env = {"PATH": "{here}/bin:/usr/bin:/bin", "GF_SQUEUE": sq, "GF_SINFO": si}
    FILES["slurm/fast.toml"] = b"[slurm]\nretries = 1\nbackoff_s = 0\ntimeout_s = 5\n"
    snap = ["snapshot", "--slurm", "--config", "{here}/files/slurm/fast.toml"]
    case("snapshot-ok", snap, 0, env=fake_env)
    # Slurm printing garbage is Slurm unavailable (exit 1, as `serve` skips the round), after
    # the adapter's warning of each failed read: not one line, and not bad input of the user
    for slug, data, code, needle in [
        ("garbage", b"\xff\xfe not json", 1, "Slurm unavailable"),
        ("deep", deep(), 1, "Slurm unavailable"),
        ("not-utf8-name", squeue().replace(b'"root"', b'"r\xf6\xf6t"'), 0, ""),
        ("record-garbage", squeue(lambda d: d["jobs"].append("x")), 0, ""),
    ]:
        case(f"snapshot-squeue-{slug}", snap, code, needle, lines="many" if code else "one",
             files={f"slurm/snap_squeue_{slug}.json": data},
             env={**fake_env, "GF_SQUEUE": f"{{here}}/files/slurm/snap_squeue_{slug}.json"},
             names="")
    case("snapshot-sinfo-gres-unreadable", snap, 0,
         files={"slurm/snap_sinfo_gres.json": sinfo(_bad_gres)},
         env={**fake_env, "GF_SINFO": "{here}/files/slurm/snap_sinfo_gres.json"})


def argument_cases() -> None:
    for value, needle in [("nan", "finite"), ("inf", "finite"), ("1e-9", "from 1 to 86400"),
                          ("0", "from 1 to"), ("-1", "from 1 to"), ("1e308", "from 1 to"),
                          ("abc", "round"),
                          ("", "round")]:
        case(f"arg-round-{value or 'empty'}", [*SIM, "--round", value], 2, needle,
             names="round")
    case("arg-round-ok", [*SIM, "--round", "60"], 0)
    for value, needle in [("-1", "seed"), ("99999999999999999999999", "seed"),
                          ("x", "seed")]:
        case(f"arg-seed-{value[:6]}", [*SIM, "--seed", value], 2, needle, names="seed")
    for value, needle in [("v100", "cluster"), ("v100:99999999999", "cluster"),
                          ("v100:1/0", "gpus_per_server"), ("v100:0", "no GPUs"),
                          ("", "must not be empty"), (",,,", "no GPUs"), ("0:0:0", "no GPUs"),
                          ("v100:-1", "cluster"), ("é:4", "cluster")]:
        case(f"arg-cluster-{value[:12] or 'empty'}", ["simulate", "--policy", "fifo",
                                                      "--no-progress", "--cluster", value],
             2, needle, names="cluster")
    for value, needle in [("0", "gpus_per_server"), ("x", "gpus_per_server"),
                          ("99999999999", "gpus_per_server"), ("v100:0", "gpus_per_server"),
                          ("-1", "gpus_per_server")]:
        case(f"arg-gps-{value}", [*SIM, "--gpus-per-server", value], 2, needle,
             names="gpus_per_server")
    case("arg-policy-unknown", ["simulate", "--policy", "nope"], 2, "unknown policy",
         names="")
    case("arg-policies-empty", ["compare", "--policies", ",", "--no-progress"], 2,
         "policies", names="policies")
    case("arg-policies-unknown", ["compare", "--policies", "fifo,nope", "--no-progress"], 2,
         "unknown policy", names="")
    case("arg-semantics", [*SIM, "--semantics", "weird"], 2, "semantics", names="semantics")
    case("arg-unknown-option", [*SIM, "--bogus"], 2, "--bogus", names="")
    case("arg-no-command", [], 2, "COMMAND", names="")
    case("arg-unknown-command", ["frobnicate"], 2, "frobnicate", names="")
    case("policies", ["policies"], 0)
    case("hook-bad-kind", ["hook", "sideways"], 2, "sideways", names="")


def profile_cases() -> None:
    logs = REPO / "tests" / "fixtures" / "logs"
    case("profile-ok", ["profile", "{f}", "--json"], 0,
         files={"logs/ok.log": (logs / "pytorch_imagenet.log").read_bytes()})
    for slug, data in [
        ("empty", b""),
        ("binary", bytes(range(256)) * 64),
        ("not-utf8", b"Epoch: [0][ 10/500]\tTime 0.5 (0.5)\xff\xfe\n" * 20),
        ("nan-times", b"Epoch: [0][ 10/500]\tTime nan (nan)\tData 0.1 (0.1)\n" * 20),
        ("inf-times", b"Epoch: [0][ 10/500]\tTime inf (inf)\tData 0.1 (0.1)\n" * 20),
        ("huge-numbers", b"Epoch: [0][ 10/500]\tTime 1e308 (1e308)\tData 1e308 (1e308)\n"
                         * 20),
        ("huge-iters", b"Epoch: [0][ 99999999999999999999/1]\tTime 0.5 (0.5)\n" * 20),
        ("long-line", b"x" * 100_000 + b"\n"),
        ("nul", b"\x00" * 4096),
        ("step-lines", b"".join(b"step %d loss=nan lr=inf\n" % i for i in range(50))),
        ("json-lines", b"".join(b'{"step": %d, "loss": NaN, "time": Infinity}\n' % i
                                for i in range(50))),
    ]:
        case(f"profile-{slug}", ["profile", "{f}", "--json"], 0, files={f"logs/{slug}.log":
                                                                       data})
        case(f"profile-table-{slug}", ["profile", "{f}"], 0,
             files={f"logs/{slug}.log": data})
    case("profile-missing", ["profile", "{here}/files/logs/none.log"], 2, "no such log file",
         names="none.log")
    case("profile-directory", ["profile", "{here}/files/logs"], 2, "no such log file",
         names="logs")
    case("profile-tensorboard-garbage", ["profile", "--format", "tensorboard", "{f}"], 0,
         "", files={"logs/garbage.tfevents": b"\x00\x01garbage" * 100})


def hook_cases() -> None:
    spool = {"GPUFAIR_HOOK_DIR": "{tmp}/spool"}
    for slug, env in [
        ("plain", {"SLURM_JOB_ID": "12"}),
        ("no-job-id", {}),
        ("job-id-garbage", {"SLURM_JOB_ID": "'; rm -rf /"}),
        ("job-id-huge", {"SLURM_JOB_ID": "9" * 5000}),
        ("bad-event-addr", {"SLURM_JOB_ID": "1", "GPUFAIR_EVENT_ADDR": "nowhere:xx",
                            "GPUFAIR_EVENT_KEY": "{tmp}/nokey"}),
        ("spool-is-file", {"SLURM_JOB_ID": "1", "GPUFAIR_HOOK_DIR": "/dev/null/x"}),
    ]:
        for kind in ("prolog", "epilog-slurmctld"):
            case(f"hook-{kind}-{slug}", ["hook", kind], 0, env={**spool, **env})


def write(out: Path = HERE) -> None:
    """The files under ``out/files`` and ``out/cases.toml`` (``out``: this directory, or a
    scratch one to compare with it)."""
    for maker in (trace_cases, throughput_cases, config_cases, snapshot_cases, slurm_cases,
                  argument_cases, profile_cases, hook_cases):
        maker()
    names = [c["name"] for c in CASES]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise SystemExit(f"duplicate case names: {sorted(duplicates)}")
    shutil.rmtree(out / "files", ignore_errors=True)
    for rel, data in FILES.items():
        path = out / "files" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (out / "cases.toml").write_text(render(CASES), encoding="utf-8")


def render(cases: list[dict[str, Any]]) -> str:
    """TOML by hand (no writer in the standard library): JSON strings are TOML strings."""
    out = ["# Written by make_corpus.py: edit that, then run it. One [[case]] per command.",
           "# argv: {here} is this directory, {tmp} a scratch directory of the case.",
           "# exit: the exit code the contract asks for; message: a substring of the error",
           "# line; names: what the error must name; lines = 'many': validate lists them all.",
           ""]
    for c in cases:
        out.append("[[case]]")
        for key, value in c.items():
            if isinstance(value, dict):
                items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
                out.append(f"{key} = {{ {items} }}")
            else:
                out.append(f"{key} = {json.dumps(value, ensure_ascii=False)}")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    print(f"{len(CASES)} cases, {len(FILES)} files")

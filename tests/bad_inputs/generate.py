"""Malformed inputs made at random: the cases beyond the corpus.

Each maker takes a :class:`random.Random` and a scratch directory, writes one input file
derived from a valid one (a field set to an absurd value, bytes flipped or cut, a document
nested or truncated) and returns the :class:`Case` that runs a command on it. The property
tests drive the same makers with Hypothesis's ``randoms()`` (so failures shrink and replay);
``bench/bad_inputs.py`` drives them with a seeded ``random.Random``. One set of makers, two
drivers: the benchmark measures exactly what the tests check.

A generated case rarely knows whether its input is still valid, so it accepts exit 0 or 2
(``exit=None``); the contract's other promises (no traceback, no hang, one line naming the
input, strict JSON) hold either way. Where the mutation is invalid for certain (an absurd
number in a trace's numeric field), the case asks for exit 2.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bad_inputs import make_corpus as corpus
from bad_inputs.contract import Case

HERE = Path(__file__).resolve().parent
SIM = ["simulate", "--policy", "fifo", "--cluster", "v100:2", "--no-progress"]

#: values that break a number field for certain (text form, as a trace would hold it)
ABSURD_TEXT = ["nan", "inf", "-inf", "1e308", "-1e308", "1e400", "x", "", "0x1f", "1e20",
               "-0.5", "9" * 400, "١٢", "1_0"]
#: values for any JSON field: wrong types, extremes, text no output can encode
JSON_VALUES: list[Any] = [None, True, False, 0, -1, 1.5, 1e308, -1e308, 10**30, 2**63,
                          float("nan"), float("inf"), "", "x", "\ud800", "\x00\x1b[31m",
                          "9" * 1000, [], {}, [[[[[]]]]], {"a": {"b": {}}}, "é" * 50]


def _write(scratch: Path, name: str, data: bytes) -> str:
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / name
    path.write_bytes(data)
    return str(path)


def mangle_bytes(rng: random.Random, data: bytes) -> bytes:
    """Flip, insert, delete or cut bytes: what a bad disk, a wrong encoding or a killed
    writer leaves."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(("flip", "insert", "delete", "cut", "dup"))
        at = rng.randrange(len(data) + 1) if data else 0
        if kind == "flip" and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif kind == "insert":
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == "delete":
            del data[at:at + rng.randint(1, 16)]
        elif kind == "cut":
            del data[at:]
        else:
            data[at:at] = data[max(0, at - 40):at]
    return bytes(data)


def mutate_json(rng: random.Random, doc: Any) -> Any:
    """``doc`` with one value somewhere in it replaced by one of :data:`JSON_VALUES`, or a key
    added, or a list element duplicated."""
    doc = json.loads(json.dumps(doc))
    parent: Any = None
    key: Any = None
    node = doc
    for _ in range(rng.randint(0, 6)):
        if isinstance(node, dict) and node:
            parent, key = node, rng.choice(sorted(node))
        elif isinstance(node, list) and node:
            parent, key = node, rng.randrange(len(node))
        else:
            break
        node = parent[key]
    value = rng.choice(JSON_VALUES)
    if parent is None:
        return value if rng.random() < 0.2 else {**doc, "unexpected": value} \
            if isinstance(doc, dict) else value
    action = rng.choice(("set", "set", "add", "dup"))
    if action == "set":
        parent[key] = value
    elif action == "add" and isinstance(parent, dict):
        parent[rng.choice(["x", "gpus", "name", "state", "\ud800"])] = value
    elif isinstance(parent, list):
        parent.insert(key, parent[key])
    else:
        parent[key] = value
    return doc


def json_bytes(rng: random.Random, doc: Any) -> bytes:
    """A mutated document as bytes; sometimes mangled further at the byte level."""
    text = json.dumps(mutate_json(rng, doc), ensure_ascii=rng.random() < 0.5)
    data = text.encode("utf-8", "surrogatepass")
    return mangle_bytes(rng, data) if rng.random() < 0.3 else data


# ---- makers: one per input kind -------------------------------------------------------------

def trace_case(rng: random.Random, scratch: Path) -> Case:
    base = corpus.trace()
    if rng.random() < 0.5:
        fieldname = rng.choice(sorted(corpus._FIELD))
        value = rng.choice(ABSURD_TEXT)
        data = corpus.trace(**{fieldname: value})
        # any text is a job type, and a negative SLO means "none"; every other field
        # holding one of these values is invalid for certain
        certain = fieldname != "job_type" and not (fieldname == "slo" and value == "-0.5")
        exit_code = 2 if certain else None
    else:
        data, exit_code = mangle_bytes(rng, base), None
    path = _write(scratch, "t.trace", data)
    return Case("gen-trace", (*SIM, "--trace", path), exit=exit_code, names="t.trace")


def throughputs_case(rng: random.Random, scratch: Path) -> Case:
    trace = _write(scratch, "ok.trace", corpus.trace())
    path = _write(scratch, "tput.json", json_bytes(rng, corpus.THROUGHPUTS))
    return Case("gen-throughputs", (*SIM, "--trace", trace, "--throughputs", path),
                exit=None, names="tput.json")


def snapshot_case(rng: random.Random, scratch: Path) -> Case:
    path = _write(scratch, "snap.json", json_bytes(rng, json.loads(corpus.snapshot())))
    if rng.random() < 0.5:
        return Case("gen-validate", ("validate", path), exit=None, names="snap.json",
                    lines="many")
    return Case("gen-dry-run", ("dry-run", path, "--json"), exit=None, names="snap.json")


def slurm_case(rng: random.Random, scratch: Path) -> Case:
    squeue, sinfo = json.loads(corpus.squeue()), json.loads(corpus.sinfo())
    if rng.random() < 0.5:
        sq = _write(scratch, "sq.json", json_bytes(rng, squeue))
        si = _write(scratch, "si.json", json.dumps(sinfo).encode())
        name = "sq.json"
    else:
        sq = _write(scratch, "sq.json", json.dumps(squeue).encode())
        si = _write(scratch, "si.json", json_bytes(rng, sinfo))
        name = "si.json"
    return Case("gen-slurm", ("dry-run", "--squeue", sq, "--sinfo", si, "--json"), exit=None,
                names=name)


_SECTIONS = ["daemon", "solver", "slurm", "store", "policies.las", "policies.max_min",
             "policies.themis", "policies.shockwave", "policies.nope", "daemonn"]
_KEYS = ["policy", "round_s", "seed", "mode", "max_preempt_share", "backend", "threads",
         "time_limit_s", "managed_partitions", "retries", "path", "queue_thresholds_gpu_s",
         "heterogeneity_aware", "lease_s", "window_rounds", "x", "round"]
_TOML_VALUES = ["nan", "inf", "-inf", "1e308", "-1", "0", "1", "99999999999999999999",
                '"x"', '""', "true", "[1, 2]", "[]", "{a = 1}", '"las"', "0.5", "3600",
                '"\\u00e9"', "[[1], [2]]", "1979-05-27T07:32:00Z"]


def config_case(rng: random.Random, scratch: Path) -> Case:
    lines = []
    for _ in range(rng.randint(1, 4)):
        lines.append(f"[{rng.choice(_SECTIONS)}]")
        for _ in range(rng.randint(0, 3)):
            lines.append(f"{rng.choice(_KEYS)} = {rng.choice(_TOML_VALUES)}")
    data = "\n".join(lines).encode()
    if rng.random() < 0.2:
        data = mangle_bytes(rng, data)
    path = _write(scratch, "g.toml", data)
    return Case("gen-config", ("config", path), exit=None, names="g.toml")


_LOG_LINES = [
    "Epoch: [{e}][{i}/{n}]\tTime {t} ({t})\tData {t} ({t})\tLoss {x} ({x})",
    "step {i}/{n} loss={x} lr={x} it/s={t}",
    "{{\"step\": {i}, \"loss\": {x}, \"time\": {t}}}",
    "Epoch {e}: {i}/{n} [00:{t}<00:00, {t}it/s, loss={x}]",
    "| epoch {e} | {i}/{n} batches | ms/batch {t} | loss {x} | ppl {x}",
    "{x}",
]
_LOG_NUMBERS = ["0", "1", "0.5", "nan", "inf", "-inf", "1e308", "-1", "99999999999999999999",
                "1e-320", "NaN", "Infinity", "x"]


def log_case(rng: random.Random, scratch: Path) -> Case:
    lines = []
    for i in range(rng.randint(1, 60)):
        template = rng.choice(_LOG_LINES)
        lines.append(template.format(e=rng.choice(_LOG_NUMBERS), i=i,
                                     n=rng.choice(_LOG_NUMBERS), t=rng.choice(_LOG_NUMBERS),
                                     x=rng.choice(_LOG_NUMBERS)))
    data = "\n".join(lines).encode()
    if rng.random() < 0.3:
        data = mangle_bytes(rng, data)
    path = _write(scratch, "job.log", data)
    return Case("gen-log", ("profile", path, "--json"), exit=0)


_ROUNDS = ["nan", "inf", "0", "-1", "1e-9", "0.5", "1", "60", "86400", "86401", "1e308", "x"]
_CLUSTERS = ["v100:2", "v100:0", "v100:2/2", "v100:2/0", "v100:2,v100:2", "2:0:0", "k80:2",
             "v100:99999999999", "v100", "", "v100:2,k80:1"]


def argument_case(rng: random.Random, scratch: Path) -> Case:
    trace = _write(scratch, "ok.trace", corpus.trace())
    argv = ["simulate", "--policy", rng.choice(["fifo", "las", "srtf", "nope"]),
            "--no-progress", "--trace", trace, "--round", rng.choice(_ROUNDS),
            "--cluster", rng.choice(_CLUSTERS), "--seed", rng.choice(["0", "-1", "7", "x",
                                                                      "4294967296"])]
    if rng.random() < 0.3:
        argv += ["--gpus-per-server", rng.choice(["0", "1", "2", "x", "v100:1", "-1"])]
    return Case("gen-args", tuple(argv), exit=None, names="")


MAKERS: dict[str, Callable[[random.Random, Path], Case]] = {
    "trace": trace_case, "throughputs": throughputs_case, "snapshot": snapshot_case,
    "slurm": slurm_case, "config": config_case, "log": log_case, "args": argument_case,
}

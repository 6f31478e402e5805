"""Every command on every input of the bad-input corpus (tests/bad_inputs/cases.toml) keeps
the input contract: exit 0 with a result, or exit 2 with one line naming the input and what
was expected; no traceback, no hang, strict JSON. A failure prints the case's command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bad_inputs.contract import HERE, Case, judge, load_cases, run

CASES = load_cases("/nonexistent-scratch")   # only for the ids; each test reloads with tmp


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_corpus_case(name: str, tmp_path: Path) -> None:
    case = next(c for c in load_cases(str(tmp_path)) if c.name == name)
    result = run(case.argv, env=case.env)
    verdict, why = judge(case, result)
    assert verdict == "ok", f"{verdict}: {why}\n  gpufair {' '.join(case.argv)}\n" \
                            f"  stderr: {result.stderr[-2000:]}"


def test_the_corpus_is_what_make_corpus_writes(tmp_path: Path) -> None:
    """The committed files and manifest are the script's output (edit the script)."""
    subprocess.run([sys.executable, str(Path(HERE) / "make_corpus.py"), str(tmp_path)],
                   check=True, capture_output=True)

    def tree(root: Path) -> dict[Path, bytes]:
        return {p.relative_to(root): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and ("files" in p.relative_to(root).parts
                                    or p.name == "cases.toml")}
    committed, written = tree(Path(HERE)), tree(tmp_path)
    assert committed.keys() == written.keys()
    assert [k for k in committed if committed[k] != written[k]] == []


@pytest.mark.parametrize(("result_kwargs", "verdict"), [
    ({"code": 2, "stderr": "gpufair: error: t.trace:3: bad\n"}, "ok"),
    ({"code": 2, "stderr": "gpufair: error: t.trace: bad\nmore\n"}, "unclear message"),
    ({"code": 2, "stderr": "gpufair: error: other: bad\n"}, "unclear message"),
    ({"code": 0, "stderr": ""}, "silent acceptance"),
    ({"code": 1, "stderr": "x\n"}, "wrong exit code"),
    ({"code": None, "stderr": "", "hung": True}, "hang"),
    ({"code": None, "stderr": "", "crash": "Traceback ...\nKeyError: 'x'"}, "traceback"),
])
def test_judge_tells_each_failure(result_kwargs: dict, verdict: str) -> None:
    """The judge itself can fail a run: each kind of broken promise is named."""
    from bad_inputs.contract import Run
    case = Case("c", ("simulate", "--trace", "t.trace"), exit=2, message="bad",
                names="t.trace")
    kwargs = {"stdout": "", "seconds": 0.0, **result_kwargs}
    assert judge(case, Run(**kwargs))[0] == verdict


def test_a_hang_is_cut_off() -> None:
    """The time bound stops a run that never returns, and says so."""
    import gpufair.cli.main as cli

    def forever(argv: object) -> int:
        while True:
            pass
    original = cli.main
    cli.main = forever
    try:
        result = run(["simulate"], bound_s=0.3)
    finally:
        cli.main = original
    assert result.hung and result.seconds < 5

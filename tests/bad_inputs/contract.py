"""The input contract, as one function: run a ``gpufair`` command line in this process and say
whether it kept its promise.

The promise (issue 13): every command, on every input, either exits 0 with a result or exits
2 with ONE line on stderr naming the input and what was expected. Never a traceback, never a
hang, never a silent acceptance of something absurd, and ``--json`` output is strict JSON.
The test suite and ``bench/bad_inputs.py`` both judge runs with :func:`judge`, so the table
the benchmark prints and the assertions of the tests cannot drift apart.

A run is in-process (through :func:`gpufair.cli.main.main`) rather than a subprocess: 400
interpreter start-ups with numpy and scipy would take minutes on a shared 2-core machine.
The time bound uses ``SIGALRM`` when it can, raising :class:`Hang` (a ``BaseException``, so
no ``except Exception`` in the code under test swallows it) in the hung loop itself.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

#: seconds one case may take before it counts as a hang
TIME_BOUND_S = 20.0

#: the verdicts, in the order the benchmark's table lists them
VERDICTS = ("ok", "traceback", "wrong exit code", "hang", "silent acceptance",
            "unclear message", "non-strict JSON")


class Hang(BaseException):
    """Raised by the alarm in a run that took longer than its bound."""


@dataclass
class Run:
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    crash: str | None = None     # the traceback of an exception that escaped main()
    hung: bool = False


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    exit: int | None = 2          # None: 0 or 2 are both fine (generated cases)
    message: str = ""             # a substring the error line must contain
    names: str | None = None      # the input the error line must name ("" = no check)
    lines: str = "one"            # "one", or "many" (validate lists every problem)
    env: Mapping[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield    # no signals off the main thread: the caller's own timeout must do
        return

    def ring(signum: int, frame: object) -> None:
        raise Hang(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
        bound_s: float = TIME_BOUND_S) -> Run:
    """``gpufair ARGV`` in this process: exit code, stdout, stderr (log lines included)."""
    from gpufair.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    started = time.perf_counter()
    code: int | None = None
    crash = None
    hung = False
    try:
        with _environment(env or {}), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err), _alarm(bound_s):
            try:
                code = main(list(argv))
            except SystemExit as exc:   # argparse, --help
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None
                                                                   else 1)
    except Hang:
        hung = True
    except Exception:
        crash = traceback.format_exc()
    finally:
        root.removeHandler(handler)
    return Run(code, out.getvalue(), err.getvalue(), time.perf_counter() - started, crash, hung)


def _strict_json(text: str) -> bool:
    """Every non-empty stdout line (or the whole of it) is JSON without NaN or Infinity."""
    def refuse(constant: str) -> None:
        raise ValueError(constant)
    try:
        json.loads(text, parse_constant=refuse)
        return True
    except ValueError:
        pass
    try:
        for line in filter(str.strip, text.splitlines()):
            json.loads(line, parse_constant=refuse)
    except ValueError:
        return False
    return True


def judge(case: Case, result: Run) -> tuple[str, str]:
    """(verdict, why): one of :data:`VERDICTS`, and what was wrong in a few words."""
    if result.hung:
        return "hang", f"no answer within {TIME_BOUND_S:g} s"
    if result.crash is not None or "Traceback (most recent call last)" in result.stderr:
        last = (result.crash or result.stderr).strip().splitlines()[-1]
        return "traceback", last[:200]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if result.code == 0:
        if case.exit not in (None, 0):
            return "silent acceptance", f"exit 0, expected {case.exit}"
        if "--json" in case.argv and not _strict_json(result.stdout):
            return "non-strict JSON", "stdout is not strict JSON"
        return "ok", ""
    if result.code != case.exit and not (case.exit is None and result.code == 2):
        return "wrong exit code", f"exit {result.code}, expected {case.exit}: " \
                                  f"{' | '.join(lines)[:200]}"
    if not lines:
        return "unclear message", "nothing on stderr"
    if case.lines == "one" and len(lines) != 1:
        return "unclear message", f"{len(lines)} lines on stderr: {' | '.join(lines)[:200]}"
    text = "\n".join(lines)
    if case.message and case.message not in text:
        return "unclear message", f"{case.message!r} not in {text[:200]!r}"
    if case.names and case.names not in text:
        return "unclear message", f"does not name {case.names!r}: {text[:200]!r}"
    return "ok", ""


HERE = os.path.dirname(os.path.abspath(__file__))


def load_cases(scratch: str) -> list[Case]:
    """The corpus of ``cases.toml``, with ``{here}`` and ``{tmp}`` filled in (``{tmp}``: a
    directory of its own per case, under ``scratch``)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with open(os.path.join(HERE, "cases.toml"), "rb") as f:
        raw = tomllib.load(f)["case"]
    cases = []
    for entry in raw:
        tmp = os.path.join(scratch, entry["name"])

        def fill(text: str, tmp: str = tmp) -> str:
            return text.replace("{here}", HERE).replace("{tmp}", tmp)
        cases.append(Case(
            name=entry["name"], argv=tuple(fill(a) for a in entry["argv"]),
            exit=entry["exit"], message=entry.get("message", ""),
            names=entry.get("names"), lines=entry.get("lines", "one"),
            env={k: fill(v) for k, v in entry.get("env", {}).items()}))
    return cases

"""The README's "A short tour" runs verbatim, from a directory that is not the repository.

The tour is the first thing a new user copies; it must work on a bare install with nothing
beside it (no ../shared, no checkout), so each command runs from an empty directory.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from gpufair.cli.main import main

README = Path(__file__).resolve().parents[1] / "README.md"


def tour_commands(text: str) -> list[str]:
    """The commands of the first fenced block under "## A short tour", continuation lines
    joined and comments dropped."""
    section = text.split("\n## A short tour\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    joined = block.replace("\\\n", " ")
    return [" ".join(shlex.split(line, comments=True)) for line in joined.splitlines()
            if shlex.split(line, comments=True)]


COMMANDS = tour_commands(README.read_text(encoding="utf-8"))


def test_the_tour_is_found_and_names_no_outside_file() -> None:
    assert len(COMMANDS) >= 5
    assert all(command.startswith("gpufair ") for command in COMMANDS)
    assert not any("../" in command for command in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_tour_command_runs(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(command)[1:]
    try:
        status = main(argv)
    except SystemExit as done:  # --help exits through argparse
        status = done.code
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.strip()
    if "--json" in argv:
        assert all(isinstance(json.loads(line), dict) for line in out.splitlines())

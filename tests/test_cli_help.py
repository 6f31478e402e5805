"""What a newcomer sees first: ``--version``, a line per command, help on every option."""

from __future__ import annotations

import argparse
import importlib.metadata

import pytest

from gpufair.cli.main import build_parser, main


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("gpufair",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def test_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == \
        f"gpufair {importlib.metadata.version('gpufair')}"


def test_help_lists_every_command_with_a_line(capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    names = [p[-1] for p, _ in _commands(parser) if len(p) == 2]
    assert len(names) >= 10
    for name in names:
        line = next((ln for ln in text.splitlines() if ln.strip().startswith(name + " ")), "")
        assert len(line.split()) > 2, f"'{name}' has no description line in gpufair --help"


def test_every_option_has_help_and_says_its_default(capsys):
    missing = []
    for path, parser in _commands(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not action.help:
                missing.append(f"{' '.join(path)} {action.option_strings or action.dest}")
        text = parser.format_help()
        for action in parser._actions:
            if action.option_strings and action.default not in (None, False,
                                                                 argparse.SUPPRESS) \
                    and not isinstance(action, argparse._VersionAction):
                shown = {str(action.default)} | ({f"{action.default:g}"} if isinstance(
                    action.default, float) else set())
                assert any(s in text for s in shown), (path, action.option_strings)
    assert missing == []


@pytest.mark.parametrize("argv, shown", [([], True), (["--json"], False), (["-q"], False),
                                         (["--no-progress"], False)])
def test_a_progress_bar_only_for_a_person_at_a_terminal(monkeypatch, argv, shown):
    import gpufair.cli.simulate as cli_simulate

    seen: list[bool | None] = []

    def fake(spec, *, progress=None, time_limit_s=None, capture=False):
        seen.append(progress)
        raise SystemExit(0)

    monkeypatch.setattr(cli_simulate, "simulate", fake)
    with pytest.raises(SystemExit):
        main(["simulate", *argv])
    assert seen == [None if shown else False]


def test_the_bar_needs_both_streams_on_a_terminal(monkeypatch):
    import sys

    from gpufair.core import simulation

    class Tty:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

        def write(self, text: str) -> int:
            return len(text)

        def flush(self) -> None:
            pass

    for out, err, want in [(True, True, True), (False, True, False), (True, False, False)]:
        monkeypatch.setattr(sys, "stdout", Tty(out))
        monkeypatch.setattr(sys, "stderr", Tty(err))
        bar = simulation._progress_bar(3, "x", None)
        assert (bar is not None) == want
        if bar is not None:
            bar.close()

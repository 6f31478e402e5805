"""The `gpufair` command line: simulate and compare policies, validate snapshots and
configuration, profile job logs, run the Slurm daemon and its hooks, take snapshots and
dry-run the daemon's decisions."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import gpufair
from gpufair.cli import (
    admin,
    dry_run,
    explain,
    profile,
    replay,
    report,
    shadow,
    simulate,
    slurm,
    sweep,
)
from gpufair.cli import config as config_cli
from gpufair.errors import EXIT_INPUT, InputError, RefusedToStart

EXIT_BROKEN_PIPE = 141


class OneLineErrors(argparse.ArgumentParser):
    """A wrong command line is bad input like any other: one line on stderr, exit 2 (not
    argparse's usage block, which buries the message under the synopsis)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class HelpWithDefaults(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, when it has one worth saying, so that
    ``--help`` alone tells a newcomer what a bare command does."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, False, argparse.SUPPRESS) or \
                action.option_strings == [] or isinstance(action, argparse._VersionAction):
            return text
        return f"{text} (default: %(default)s)"

    def add_argument(self, action: argparse.Action) -> None:
        """argparse counts a command's name two columns shallower than it prints it, so a
        name as long as ``shadow-report`` had its help pushed to the next line."""
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction) and action.choices:
            longest = max(len(name) for name in action.choices) + self._current_indent + 4
            self._action_max_length = max(self._action_max_length, longest)


def version() -> str:
    """The one version string (``gpufair.__version__``, which the package metadata reads too),
    so a source tree and an install agree."""
    return gpufair.__version__


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(prog="gpufair", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log at INFO (solver fallbacks, skipped inputs) on stderr")
    parser.add_argument("--version", action="version", version=f"gpufair {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (simulate, replay, config_cli, profile, slurm, dry_run, explain, shadow,
                  admin, sweep, report):
        group.add_parsers(sub)
    for command in every_parser(parser):
        command.formatter_class = HelpWithDefaults
    return parser


def every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and its subcommands' parsers, nested ones too (``gpufair admin ...``)."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                found += every_parser(command)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # the command as given, for what records it (a results directory's meta.json)
    args.argv = ["gpufair", *(sys.argv[1:] if argv is None else argv)]
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        status = int(args.func(args))
        sys.stdout.flush()   # a closed pipe shows here, inside the handler, not at exit
        return status
    except BrokenPipeError:
        # the reader went away (``gpufair simulate | head``): it took what it wanted. Point
        # stdout at /dev/null so the interpreter's final flush stays quiet; 141 = SIGPIPE's
        # shell status, what a plain Unix tool would have died with.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except InputError as exc:
        print(f"gpufair: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except RefusedToStart as exc:
        print(f"gpufair: error: {exc}", file=sys.stderr)
        return 1
    except RecursionError:   # JSON or TOML nested deeper than a reader without its own check
        files = [v for v in vars(args).values() if isinstance(v, str) and Path(v).is_file()]
        print(f"gpufair: error: {', '.join(files) or 'input'}: nested too deeply to read "
              "(lists or tables inside each other thousands of levels deep)", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

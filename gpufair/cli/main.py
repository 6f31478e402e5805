"""The `gpufair` command line: simulate and compare policies, validate snapshots and
configuration, profile job logs, run the Slurm daemon and its hooks, take snapshots and
dry-run the daemon's decisions."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from gpufair.cli import config as config_cli
from gpufair.cli import dry_run, profile, simulate, slurm
from gpufair.errors import InputError, RefusedToStart

EXIT_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpufair", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (simulate, config_cli, profile, slurm, dry_run):
        group.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"gpufair: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except RefusedToStart as exc:
        print(f"gpufair: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

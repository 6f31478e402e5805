"""What a site checks before it runs anything: ``validate`` (snapshots), ``policies``, and
``config`` (check a gpufair.toml; ``--describe`` prints every option with its default)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpufair.errors import EXIT_INPUT, InputError


def add_parsers(sub: argparse._SubParsersAction) -> None:
    val = sub.add_parser("validate", help="check snapshot files")
    val.add_argument("snapshot", nargs="+", help="gpufair snapshot JSON file(s)")
    val.set_defaults(func=lambda args: validate(args.snapshot))
    pol = sub.add_parser("policies", help="list the installed policies")
    pol.set_defaults(func=lambda args: policies())
    cfg = sub.add_parser("config", help="check a gpufair.toml, or describe every option")
    cfg.add_argument("file", nargs="?", help="gpufair.toml to check")
    cfg.add_argument("--describe", action="store_true",
                     help="print every section's options, types and defaults")
    cfg.set_defaults(func=check_config)


def validate(paths: Sequence[str]) -> int:
    """Every problem of every file, one line each; exit 2 (bad input, like every command)
    when there is any, so that a script tells "invalid" from "gpufair failed" (1)."""
    from gpufair.model.snapshot import read_snapshot_json, validate_snapshot
    status = 0
    for path in paths:
        try:
            problems = validate_snapshot(read_snapshot_json(path), path)
        except InputError as exc:
            problems = [str(exc)]
        for problem in problems:
            print(f"gpufair: error: {problem}", file=sys.stderr)
        if problems:
            status = EXIT_INPUT
        else:
            print(f"{path}: ok")
    return status


def policies() -> int:
    from gpufair.policy.registry import available_policies
    print("\n".join(available_policies()))
    return 0


def check_config(args: argparse.Namespace) -> int:
    from gpufair.core.config import load_config, schema_rows
    if args.describe:
        for key, kind, default, doc in schema_rows():
            print(f"{key:45} {kind:28} {default!r:22} {doc}")
        return 0
    if args.file is None:
        raise InputError("config", "give a gpufair.toml to check, or --describe")
    load_config(args.file)
    print(f"{args.file}: ok")
    return 0

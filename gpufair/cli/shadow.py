"""``gpufair shadow-report``: what a shadow run (``gpufair serve --shadow``) saw, in figures,
and its results directory (docs/shadow.md)."""

from __future__ import annotations

import argparse
import sys

from gpufair.errors import EXIT_INPUT


def add_parsers(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("shadow-report", help="a shadow run's figures: idle GPU-seconds"
                            " while a fitting job waited, tenants' GPUs against the policy's,"
                            " jobs gpufair would have started earlier, would-be preemptions")
    where = report.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", help="gpufair.toml: the daemon's [store] path")
    where.add_argument("--store", help="the daemon's state store")
    report.add_argument("--out", help="write the results directory here (FORMATS.md §9)")
    report.set_defaults(func=run_shadow_report)


def run_shadow_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gpufair.plugin.store import Store, scratch_copy
    from gpufair.shadow.report import figures, summary, write
    if args.config:
        from gpufair.core.config import load_config
        path = load_config(args.config).store.path
    else:
        path = args.store
    if not Path(path).is_file():
        print(f"gpufair: error: {path}: no state store there", file=sys.stderr)
        return EXIT_INPUT
    store: Store
    with scratch_copy(path) as store:   # a copy: the daemon may be writing its store
        try:
            shadow = figures(store)
        except ValueError as exc:
            print(f"gpufair: error: {path}: {exc}", file=sys.stderr)
            return EXIT_INPUT
    print(summary(shadow))
    if args.out:
        write(args.out, shadow, command=sys.argv, store_path=str(path))
        print(f"results: {args.out}")
    return 0

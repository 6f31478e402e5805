"""``gpufair report DIR… -o report.html``: one self-contained HTML report of results
directories (``--out`` of simulate, compare, dry-run, replay…), side by side."""

from __future__ import annotations

import argparse


def add_parsers(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="an HTML report of results directories (--out)",
                            description="One self-contained HTML page (figures inline, "
                            "nothing fetched) of the results\ndirectories that --out of "
                            "simulate, compare and dry-run writes, their runs side by side.")
    report.add_argument("dirs", nargs="+", metavar="DIR",
                        help="results directories of one workload (their runs side by side)")
    report.add_argument("-o", "--output", required=True, metavar="FILE",
                        help="the HTML file to write (written whole, or not at all)")
    report.add_argument("--title", help="the report's title (default: the kinds and runs)")
    report.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpufair.report import write_report  # jinja2, pandas, matplotlib: for this only
    path = write_report(args.dirs, args.output, title=args.title)
    print(path)
    return 0


def add_report_option(parser: argparse.ArgumentParser) -> None:
    """``--report FILE`` on the commands that write results directories."""
    parser.add_argument("--report", metavar="FILE", help="also write an HTML report of the "
                        "results to FILE (as `gpufair report` of --out's directory)")


def report_after(out: str | None, report: str | None, write) -> None:
    """Write the results with ``write(directory)`` to ``out`` — or, for ``--report`` alone,
    to a temporary directory — then the report of them to ``report``."""
    import tempfile
    from pathlib import Path
    if report is None:
        write(out)
        return
    from gpufair.report import write_report
    with tempfile.TemporaryDirectory(prefix="gpufair-results-") as scratch:
        directory = write(out if out is not None else Path(scratch) / "results")
        write_report([directory], report, kept=out is not None)

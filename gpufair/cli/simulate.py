"""``gpufair simulate`` and ``gpufair compare``: policies on a trace, one metrics table."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from gpufair.cli.output import dumps, seed
from gpufair.cli.report import add_report_option, report_after
from gpufair.core.config import DEFAULT_ROUND_S
from gpufair.core.simulation import SimulationReport, SimulationSpec, simulate
from gpufair.data import listing, resolve
from gpufair.errors import InputError
from gpufair.policy.registry import available_policies

#: exit status when --time-limit stopped a simulation before its trace finished
EXIT_PARTIAL = 3
_PARTIAL_HELP = ("exit status 3: --time-limit ran out before the trace finished; the metrics"
                 " printed cover the jobs finished by then, marked partial")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sim = sub.add_parser("simulate", help="simulate one policy on a trace and print metrics",
                         epilog=f"{_PARTIAL_HELP}\n\n{listing()}")
    sim_arguments(sim)
    sim.add_argument("--policy", default="max_min",
                     help=f"one of {', '.join(available_policies())}")
    sim.set_defaults(func=lambda args: run_policies(args, [args.policy]))
    cmp_ = sub.add_parser("compare", help="simulate several policies, one table",
                          epilog=f"{_PARTIAL_HELP}\n\n{listing()}")
    sim_arguments(cmp_)
    cmp_.add_argument("--policies", default="fifo,srtf,las,max_min,max_sum_throughput",
                      help="comma-separated policy names")
    cmp_.set_defaults(func=lambda args: run_policies(
        args, [p.strip() for p in args.policies.split(",") if p.strip()]))


def sim_arguments(parser: argparse.ArgumentParser, *, trace: bool = True) -> None:
    """The options of a simulation; ``trace`` False: without those of a trace file (the
    trace, its throughputs, elastic jobs), for ``replay``, whose history is the trace."""
    if trace:
        _trace_arguments(parser)
    parser.add_argument("--cluster", help="e.g. v100:32 or v100:8,p100:8,k80:8 or 32:0:0 "
                        + ("(default v100:16 for the demo, v100:32 with --trace)" if trace else
                           "(default: each GPU type's peak concurrent use in the history)"))
    parser.add_argument("--gpus-per-server", help="N, or TYPE:N,... (default 1)")
    parser.add_argument("--round", type=float, default=DEFAULT_ROUND_S, dest="round_s",
                        help=f"round length in seconds (default {DEFAULT_ROUND_S:g})")
    parser.add_argument("--seed", type=seed, default=0,
                        help="seed of the policy's random choices (same seed, same result)")
    parser.add_argument("--semantics", choices=("artifact", "clean"), default="clean",
                        help="artifact: the Shockwave/Gavel simulator's exact behaviour, to "
                        "compare with their recorded results; clean: without its accidents")
    parser.add_argument("--config", help="gpufair.toml, or a policy's JSON options file "
                        "(or a bundled one's name)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per policy")
    parser.add_argument("--time-limit", type=_seconds, metavar="S", dest="time_limit_s",
                        help="wall seconds per policy; when they run out the simulation stops, "
                        "prints the metrics of the jobs finished so far marked partial "
                        '("partial": true with --json) and the command exits 3')
    parser.add_argument("--out", metavar="DIR", help="also write the full results (every "
                        "job, allocation and round; docs/FORMATS.md section 9) to the results "
                        "directory DIR, for `gpufair report`")
    add_report_option(parser)
    parser.add_argument("-q", "--quiet", "--no-progress", action="store_true",
                        dest="no_progress", help="no progress bar (there is one on stderr only"
                        " when stdout is a terminal, and never with --json)")


def _trace_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", help="trace file (Shockwave 12-col, Gavel 10-col or MSR "
                        "7-col), or a bundled trace's name (below); default: the bundled "
                        "demo trace")
    parser.add_argument("--throughputs", help="throughputs JSON, or a bundled one's name; "
                        "default: tacc_throughputs_v100")
    parser.add_argument("--elastic", action="store_true",
                        help="trace jobs are elastic: each may run on 1 up to its scale factor "
                        "of GPUs (measured counts only) and be resized (clean semantics)")
    parser.add_argument("--resize-overhead", type=float, metavar="S", dest="resize_overhead_s",
                        help="seconds of no progress per resize with --elastic (default: the "
                        "restart overhead, 20 s: a restart from a checkpoint)")
    parser.add_argument("--elastic-max", type=int, metavar="N", dest="elastic_max",
                        help="with --elastic: jobs may grow to N GPUs when N is above their "
                        "scale factor (the AFS paper lets jobs grow to their model's peak)")


def run_policies(args: argparse.Namespace, names: list[str]) -> int:
    if not names:
        raise InputError("--policies", "name at least one policy (comma-separated)",
                         field="policies", value=args.policies)
    refuse_empty_cluster(args)
    reports = []
    capture = args.out is not None or args.report is not None
    for name in names:
        spec = SimulationSpec(trace=resolve(args.trace), throughputs=resolve(args.throughputs),
                              cluster=args.cluster, gpus_per_server=args.gpus_per_server,
                              policy=name, round_s=args.round_s, seed=args.seed,
                              semantics=args.semantics, config=resolve(args.config),
                              elastic=args.elastic, resize_overhead_s=args.resize_overhead_s,
                              elastic_max=args.elastic_max)
        report = simulate(spec, progress=False if args.no_progress or args.json else None,
                          time_limit_s=args.time_limit_s, capture=capture)
        reports.append(report)
        if args.json:
            print(dumps(report.as_dict(), sort_keys=True))
    if not args.json:
        print(render_table(reports))
    if capture:
        write_results(args, spec, reports)
    return EXIT_PARTIAL if any(r.partial for r in reports) else 0


def refuse_empty_cluster(args: argparse.Namespace) -> None:
    """``--cluster ''`` or ``--gpus-per-server ''`` would quietly mean the default."""
    for option, value in (("cluster", args.cluster), ("gpus_per_server",
                                                      args.gpus_per_server)):
        if value is not None and not value.strip():
            raise InputError(f"--{option.replace('_', '-')}", "must not be empty",
                             field=option, value=value)


def write_results(args: argparse.Namespace, spec: SimulationSpec,
                  reports: Sequence[SimulationReport]) -> None:
    """``--out`` and ``--report``. Imported here only: pandas (and for a report jinja2 and
    matplotlib) load for these options alone."""
    from gpufair.results.simulation import write_simulations
    kind = "simulate" if args.command == "simulate" else "compare"
    report_after(args.out, args.report, lambda out: write_simulations(
        out, spec, reports, kind=kind, command=args.argv))


def _seconds(text: str) -> float:
    """``--time-limit`` (an argparse type): a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return value


_ROWS = [
    ("jobs", lambda r: f"{r.metrics.num_jobs}"),
    ("makespan (s)", lambda r: f"{r.metrics.makespan_s:.0f}"),
    ("avg JCT (s)", lambda r: f"{r.metrics.avg_jct_s:.0f}"),
    ("p90 JCT (s)", lambda r: f"{r.metrics.p90_jct_s:.0f}"),
    ("worst rho", lambda r: f"{r.metrics.worst_rho:.3f}"),
    ("mean rho", lambda r: f"{r.metrics.mean_rho:.3f}"),
    ("unfair >1.0 (%)", lambda r: f"{100 * r.metrics.unfair_fraction['1.0']:.1f}"),
    ("unfair >1.05 (%)", lambda r: f"{100 * r.metrics.unfair_fraction['1.05']:.1f}"),
    ("unfair >1.1 (%)", lambda r: f"{100 * r.metrics.unfair_fraction['1.1']:.1f}"),
    ("Jain (1/rho)", lambda r: f"{r.metrics.jain:.3f}"),
    ("utilization", lambda r: f"{r.metrics.utilization:.3f}"),
    ("rounds", lambda r: f"{r.rounds}"),
    ("wall (s)", lambda r: f"{r.wall_s:.2f}"),
    ("solver share", lambda r: f"{r.solver_s / r.wall_s:.0%}" if r.wall_s else "-"),
]


def render_table(reports: Sequence[SimulationReport]) -> str:
    header = ["metric"] + [r.policy for r in reports]
    rows = [[label] + [fmt(r) for r in reports] for label, fmt in _ROWS]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
             for row in [header, *rows]]
    first = reports[0]
    lines.insert(0, f"trace: {first.trace}  semantics: {first.semantics}  "
                    f"GPUs: {first.num_gpus}")
    for r in reports:
        if r.partial:
            lines.append(f"PARTIAL {r.policy}: the time limit ran out after {r.wall_s:.1f} s;"
                         f" metrics cover the {r.metrics.num_jobs} of {r.trace_jobs} jobs"
                         " finished by then")
    dropped = {d.index for r in reports for d in r.dropped}
    if dropped:
        lines.append(f"{len(dropped)} trace jobs could not be simulated on this cluster "
                     "(run with --json for the reasons)")
    return "\n".join(lines)

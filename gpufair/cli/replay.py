"""``gpufair replay``: a site's finished jobs through every chosen policy, beside "as run".

The history readers and pandas are imported when the command runs, not when ``gpufair`` is:
``gpufair serve`` goes through the same entry point and must not pay for them.
"""

from __future__ import annotations

import argparse

from gpufair.cli.output import dumps
from gpufair.cli.simulate import EXIT_PARTIAL, refuse_empty_cluster, render_table, sim_arguments
from gpufair.data import resolve
from gpufair.errors import InputError
from gpufair.policy.registry import available_policies

#: the policies replayed when --policies is not given: the baselines a site knows
DEFAULT_POLICIES = "fifo,srtf,las,max_min"
#: the formats that are not column maps
FORMATS = ("auto", "sacct", "sacct-json")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "replay", help="replay a job history (saved sacct output, a published trace) "
        "through policies, beside what the resource manager did",
        epilog="Rules (tenants, requeues, arrays, what is left out): docs/replay.md. "
        "Exit status 2: a bad history (file, line and field named); 3: --time-limit ran out.")
    parser.add_argument("history", nargs="?", help="saved `sacct -X -D --parsable2 -o ...` "
                        "output, `sacct --json` output, a published trace (CSV), or a bundled "
                        "history's name (helios_dirlab_1k); not with --sacct")
    parser.add_argument("--sacct", action="store_true",
                        help="read the history from this cluster's accounting: gpufair runs "
                        "sacct itself (allocations, every state) for --starttime..--endtime")
    parser.add_argument("--starttime", metavar="TIME", help="with --sacct: the first jobs' "
                        "time, as sacct takes it (2026-11-01 or 2026-11-01T08:00:00)")
    parser.add_argument("--endtime", metavar="TIME", help="with --sacct: the last jobs' time "
                        "(default: now)")
    parser.add_argument("--clusters", metavar="NAMES", help="with --sacct: sacct --clusters "
                        "(default: the local cluster)")
    parser.add_argument("--format", default="auto", metavar="FORMAT",
                        help="what the history is: auto (from its first bytes and header), "
                        "sacct, sacct-json, or a column map's name (helios-acme, slurm-db, "
                        "nrel-eagle, dirlab, or one of --column-map's)")
    parser.add_argument("--column-map", metavar="FILE", help="a TOML file of column maps for "
                        "other published shapes (the format of the bundled "
                        "gpufair/adapters/history/column_maps.toml)")
    parser.add_argument("--tenant", choices=("account", "user", "qos", "partition", "vc"),
                        help="which column names a job's tenant (default: account, or vc, "
                        "then user, for a trace without accounts)")
    parser.add_argument("--policies", default=DEFAULT_POLICIES,
                        help=f"comma-separated, of {', '.join(available_policies())}")
    parser.add_argument("--round-phase", type=float, metavar="SECONDS", dest="round_phase_s",
                        help="rounds begin this many seconds past a multiple of --round on the "
                        "history's clock, as Slurm's backfill thread passes every bf_interval "
                        "(with slurm_backfill's backfill_at_boundaries; docs/replay.md); "
                        "default: a round begins at the arrival that finds the cluster idle")
    sim_arguments(parser, trace=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gpufair.core.replay import replay
    from gpufair.core.simulation import SimulationSpec

    names = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not names:
        raise InputError("--policies", "name at least one policy (comma-separated)",
                         field="policies", value=args.policies)
    refuse_empty_cluster(args)
    if args.sacct:
        history, fmt = read_live(args)
        if history is None:
            return 1
    elif args.history is None:
        raise InputError("replay", "name a history file, or read this cluster's with --sacct "
                         "--starttime TIME")
    else:
        history, fmt = read_history(resolve(args.history), args.format, args.tenant,
                                    resolve(args.column_map))
    spec = SimulationSpec(round_s=args.round_s, seed=args.seed, semantics=args.semantics,
                          config=resolve(args.config))
    result = replay(history, names, spec, cluster=args.cluster,
                    gpus_per_server=args.gpus_per_server,
                    progress=False if args.no_progress or args.json else None,
                    time_limit_s=args.time_limit_s,
                    on_report=(lambda r: print(dumps(r.as_dict(), sort_keys=True)))
                    if args.json else None, capture=args.out is not None,
                    round_phase_s=args.round_phase_s)
    if args.out is not None:   # pandas-heavy: imported for this option alone
        from gpufair.results.replay import write_replay
        write_replay(args.out, result, spec, history_path=history.source,
                     history_format=fmt, command=args.argv)
    if args.json:
        print(dumps({"history": history_summary(result), "tenants": result.tenants.to_dict(
            orient="records")}, sort_keys=True))
    else:
        print(render_table(result.runs))
        print()
        print(render_tenants(result.tenants))
        for line in history_lines(result):
            print(line)
    return EXIT_PARTIAL if any(r.partial for r in result.runs) else 0


def read_history(path: str, fmt: str, tenant: str, column_map: str | None = None):
    """The history in ``path``, read by the reader its format names (or its first bytes),
    and the format it was read as (``sacct``, ``sacct-json`` or a column map's name)."""
    from gpufair.adapters.history.published import load_maps, read_published
    maps = load_maps(column_map)
    if fmt not in FORMATS and fmt not in maps:
        raise InputError("--format", f"expected one of {', '.join([*FORMATS, *maps])}",
                         field="format", value=fmt)
    if fmt == "auto":
        fmt = sniff(path)
    if fmt == "sacct-json":
        from gpufair.adapters.slurm.sacct_json import read_sacct_json
        return read_sacct_json(path, tenant=tenant), fmt
    if fmt == "sacct":
        from gpufair.adapters.slurm.sacct_saved import read_sacct_text
        return read_sacct_text(path, tenant=tenant), fmt
    history = read_published(path, maps.get(fmt), maps=maps, tenant=tenant)
    return history, history.notes[0].removeprefix("read with the ").removesuffix(
        " column map")


def read_live(args: argparse.Namespace):
    """The history ``sacct`` gives for the window, read like a saved file (the same parser):
    (None, "sacct") when Slurm's accounting does not answer, said on stderr."""
    import sys
    from datetime import datetime

    from gpufair.adapters.slurm.adapter import SlurmUnavailable
    from gpufair.adapters.slurm.sacct import read_sacct_live
    from gpufair.adapters.slurm.sacct_saved import parse_sacct_text
    if args.history is not None:
        raise InputError("--sacct", "reads the cluster's accounting: give no history file "
                         "with it", value=args.history)
    if args.starttime is None:
        raise InputError("--starttime", "--sacct needs the window's start (e.g. 2026-11-01)")
    try:
        data = read_sacct_live(args.starttime, args.endtime or datetime.now(),
                               clusters=args.clusters)
    except ValueError as exc:
        raise InputError("--starttime/--endtime", str(exc)) from None
    except SlurmUnavailable as exc:
        print(f"gpufair replay: Slurm accounting unavailable: {exc}", file=sys.stderr)
        return None, "sacct"
    return parse_sacct_text(data, "sacct (live)", tenant=args.tenant), "sacct"


def sniff(path: str) -> str:
    """``sacct-json`` when the file starts with ``{``; ``sacct`` when its first line has a
    ``|`` or sacct's JobID (the sacct reader then says what is wrong with its separators);
    else ``csv`` (a published trace, its column map found from the header)."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError as exc:
        raise InputError(path, f"cannot read the history: {exc.strerror or exc}") from None
    if head.lstrip().startswith(b"{"):
        return "sacct-json"
    first = head.lstrip().split(b"\n", 1)[0]
    sacct = b"|" in first or b"," not in first or b"jobid" in first.lower()
    return "sacct" if sacct else "csv"


def history_summary(result) -> dict:
    history = result.history
    return {"source": history.source, "tenant_key": history.tenant_key,
            "jobs": len(history.jobs), "excluded": history.excluded,
            "merged_requeues": history.merged_requeues, "cluster": result.replay.cluster,
            "num_gpus": result.replay.num_gpus, "notes": list(result.replay.notes)}


def history_lines(result) -> list[str]:
    history = result.history
    left_out = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in history.excluded.items() if n)
    lines = [f"history: {history.source}: {len(history.jobs)} jobs replayed"
             f" (tenant = {history.tenant_key}); left out: {left_out or 'none'}"]
    if history.merged_requeues:
        lines.append(f"{history.merged_requeues} requeued jobs merged from their incarnations")
    lines += [f"note: {note}" for note in result.replay.notes]
    return lines


def render_tenants(tenants) -> str:
    """The per-tenant table: one block per run, tenants as rows."""
    shown = tenants.copy()
    for column in ("mean_wait_s", "mean_jct_s"):
        shown[column] = shown[column].map(lambda v: "-" if v != v else f"{v:.0f}")
    shown["gpu_hours"] = shown["gpu_hours"].map(lambda v: f"{v:.1f}")
    return shown.to_string(index=False)


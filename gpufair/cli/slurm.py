"""The Slurm commands: ``serve`` (the daemon), ``hook`` (prolog/epilog), ``snapshot``,
``unhold`` (the uninstall's release).

This module is where the Slurm adapter is chosen (YARN's in :mod:`gpufair.cli.yarn`, when
``--yarn`` or ``[daemon] adapter = "yarn"`` asks for it); the daemon behind it knows only the
resource-manager protocol.
"""

from __future__ import annotations

import argparse
import sys

from gpufair.cli.output import print_snapshot


def add_parsers(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="run the daemon against Slurm")
    serve.add_argument("--config", required=True, help="gpufair.toml")
    serve.add_argument("--policy", help="override [daemon] policy")
    serve.add_argument("--dry-run", action="store_true",
                       help="log and journal the actions against a recording adapter; take none")
    serve.add_argument("--shadow", action="store_true",
                       help="run beside Slurm's own scheduler (no job_submit.lua hold): plan"
                       " every round, act on nothing, record the plan next to what Slurm did"
                       " (gpufair shadow-report)")
    serve.add_argument("--rounds", type=int, help="stop after this many rounds")
    serve.add_argument("--yarn", metavar="URL", action="append",
                       help="drive this YARN ResourceManager (repeat for an HA pair) instead"
                       " of [daemon] adapter")
    serve.set_defaults(func=run_serve)
    hook = sub.add_parser("hook", help="Slurm prolog/epilog entry point (always exits 0)")
    hook.add_argument("kind", choices=("prolog", "epilog", "prolog-slurmctld",
                                       "epilog-slurmctld"),
                      help="which Slurm hook runs it (slurm.conf Prolog=, Epilog=, ...)")
    hook.set_defaults(func=run_hook)
    snap = sub.add_parser("snapshot", help="print the state the daemon's round would see")
    source = snap.add_mutually_exclusive_group(required=True)
    source.add_argument("--slurm", action="store_true",
                        help="read from Slurm (squeue/sinfo --json, or slurmrestd per config)")
    source.add_argument("--yarn", metavar="URL", action="append",
                        help="read from this YARN ResourceManager's REST API (repeat for an"
                        " HA pair; [yarn] gives the rest)")
    snap.add_argument("--config", help="gpufair.toml ([slurm] transport, partitions; mode)")
    snap.set_defaults(func=run_snapshot)
    release = sub.add_parser("unhold", help="release the jobs that wait only for gpufair"
                             " (hard mode's hold), not their owners' holds: for an uninstall,"
                             " once the daemon is stopped")
    release.add_argument("--config", help="gpufair.toml ([slurm] transport)")
    release.add_argument("--list", action="store_true",
                         help="print their ids, one per line; release nothing")
    release.set_defaults(func=run_unhold)


def run_hook(args: argparse.Namespace) -> int:
    from gpufair.plugin.hooks import run
    return run(args.kind)


def run_serve(args: argparse.Namespace) -> int:
    from gpufair.adapters.slurm import SlurmAdapter
    from gpufair.core.config import load_config
    from gpufair.plugin.service import serve
    config = load_config(args.config)
    if args.yarn or config.daemon.adapter == "yarn":
        from gpufair.cli.yarn import yarn_adapter
        adapter = yarn_adapter(config, args.yarn)
    else:   # a shadow run reads every job: Slurm holds none of them for gpufair
        adapter = SlurmAdapter.from_settings(
            config.slurm, mode="soft" if args.shadow else config.daemon.mode)
    if args.shadow and args.dry_run:
        print("gpufair: error: --shadow and --dry-run: a shadow run acts on nothing already",
              file=sys.stderr)
        return 2
    return serve(config, adapter, dry_run=args.dry_run, policy=args.policy,
                 max_rounds=args.rounds, verbose=args.verbose, shadow=args.shadow)


def run_unhold(args: argparse.Namespace) -> int:
    from gpufair.adapters.slurm import SlurmAdapter, SlurmUnavailable
    from gpufair.adapters.slurm.translate import held_by_gpufair
    from gpufair.core.config import load_config
    adapter = SlurmAdapter.from_settings(load_config(args.config).slurm, mode="hard")
    try:
        ids = held_by_gpufair(adapter.read_documents()[0])
    except SlurmUnavailable as exc:
        print(f"gpufair: error: Slurm unavailable: {exc}", file=sys.stderr)
        return 1
    failed = 0
    for job_id in ids:
        if args.list:
            print(job_id)
            continue
        result = adapter.release(job_id)
        print(f"{'released' if result.ok else 'FAILED':9} job {job_id}"
              + ("" if result.ok else f": {result.detail}"))
        failed += not result.ok
    return 1 if failed else 0


def run_snapshot(args: argparse.Namespace) -> int:
    """What ``adapter.snapshot()`` returns — in hard mode only the jobs gpufair may start,
    with the nodes of jobs already released blocked — plus what the jobs' logs measure:
    the exact input of the daemon's round, so a dry run of it shows what the daemon does."""
    if args.yarn:
        from gpufair.cli.yarn import run_snapshot as yarn_snapshot
        return yarn_snapshot(args)
    from gpufair.adapters.slurm import SlurmAdapter, SlurmUnavailable
    from gpufair.core.config import load_config
    from gpufair.core.enrich import measure
    from gpufair.profiler.profiler import Profiler
    config = load_config(args.config)
    adapter = SlurmAdapter.from_settings(config.slurm, mode=config.daemon.mode)
    try:
        state = adapter.snapshot()
    except SlurmUnavailable as exc:
        print(f"gpufair: error: Slurm unavailable: {exc}", file=sys.stderr)
        return 1
    # progress and throughput from the jobs' logs
    print_snapshot(measure(state, Profiler()), adapter)
    return 0

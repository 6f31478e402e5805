"""The Slurm-side subcommands of ``gpufair``: serve, hook, snapshot, dry-run.

Kept apart from cli.py so that the simulation commands and these evolve independently; cli.py
only registers them and dispatches.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpufair.errors import InputError

COMMANDS = ("serve", "hook", "snapshot", "dry-run")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="run the arbiter daemon against Slurm")
    serve.add_argument("--config", required=True, help="gpufair.toml")
    serve.add_argument("--policy", help="override [daemon] policy")
    serve.add_argument("--dry-run", action="store_true",
                       help="log (and journal as skipped) the actions; take none")
    serve.add_argument("--rounds", type=int, help="stop after this many rounds")
    hook = sub.add_parser("hook", help="Slurm prolog/epilog entry point (always exits 0)")
    hook.add_argument("kind", choices=("prolog", "epilog", "prolog-slurmctld",
                                       "epilog-slurmctld"))
    snap = sub.add_parser("snapshot", help="print the live cluster as a gpufair snapshot")
    snap.add_argument("--slurm", action="store_true", required=True,
                      help="read from Slurm (squeue/sinfo --json, or slurmrestd per config)")
    snap.add_argument("--config", help="gpufair.toml ([slurm] transport, partitions)")
    dry = sub.add_parser("dry-run", help="what a policy would do with a snapshot, and why")
    dry.add_argument("snapshot", nargs="?", help="gpufair snapshot JSON")
    dry.add_argument("--squeue", help="raw `squeue --json` output instead of a snapshot")
    dry.add_argument("--sinfo", help="raw `sinfo --json` output (with --squeue)")
    dry.add_argument("--partitions", default="",
                     help="managed partitions for raw Slurm files (comma-separated; all)")
    dry.add_argument("--policy", default="las")
    dry.add_argument("--config", help="gpufair.toml (policy options, seed)")
    dry.add_argument("--seed", type=int, default=0)
    dry.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    if args.command == "hook":
        from gpufair.plugin.hooks import run as run_hook
        return run_hook(args.kind)
    if args.command == "serve":
        from gpufair.core.config import load_config
        from gpufair.plugin.service import serve
        return serve(load_config(args.config), dry_run=args.dry_run, policy=args.policy,
                     max_rounds=args.rounds, verbose=args.verbose)
    if args.command == "snapshot":
        return _snapshot(args)
    return _dry_run(args)


def _snapshot(args: argparse.Namespace) -> int:
    from gpufair.adapters.slurm import SlurmUnavailable
    from gpufair.core.config import load_config
    from gpufair.core.enrich import measure
    from gpufair.model.snapshot import state_to_dict
    from gpufair.plugin.service import build_adapter
    from gpufair.plugin.service_config import service_config
    from gpufair.profiler.profiler import Profiler
    svc = service_config(load_config(args.config).sections)
    adapter = build_adapter(svc.slurm, mode=svc.daemon.get("mode", "hard"))
    try:
        view = adapter.view()
    except SlurmUnavailable as exc:
        print(f"gpufair: error: Slurm unavailable: {exc}", file=sys.stderr)
        return 1
    for problem in view.problems:
        print(f"gpufair: warning: {problem}", file=sys.stderr)
    state = measure(view.state, Profiler())   # progress and throughput from the jobs' logs
    data = state_to_dict(state, source={"adapter": f"slurm/{adapter.transport.name}"})
    print(json.dumps(data, sort_keys=True, indent=2, allow_nan=False))
    return 0


def _dry_run(args: argparse.Namespace) -> int:
    from gpufair.cli.dry_run import decide, load_state, render_json, render_table
    from gpufair.core.config import load_config
    from gpufair.policy.base import PolicyConfig
    from gpufair.policy.registry import create_policy
    if args.snapshot is None and args.squeue is None:
        raise InputError("dry-run", "give a snapshot file, or --squeue and --sinfo")
    config = load_config(args.config)
    parts = tuple(p for p in args.partitions.split(",") if p)
    state = load_state(args.snapshot, args.squeue, args.sinfo, parts)
    policy = create_policy(args.policy, PolicyConfig(seed=args.seed,
                                                     options=config.policy_options(args.policy)))
    plan, rows = decide(state, policy)
    render = render_json if args.json else render_table
    print(render(policy.name, state, plan, rows))
    return 0

"""``gpufair explain JOBID``: why a job runs, waits or was preempted, from the daemon.

Any user may run it: the daemon answers on its explain socket, with the job's story if the
job is theirs (or they are an admin), and the same "unknown" as for a job id gpufair never
saw otherwise (:mod:`gpufair.plugin.explain_server`, docs/explain.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from gpufair.errors import EXIT_INPUT


def add_parsers(sub: argparse._SubParsersAction) -> None:
    explain = sub.add_parser("explain", help="why a job runs, waits or was preempted: its"
                             " decisions round by round, from the running daemon")
    explain.add_argument("job", metavar="JOBID", help="Slurm job id or YARN application id")
    explain.add_argument("--json", action="store_true", help="the daemon's reply as JSON")
    explain.add_argument("--config", help="gpufair.toml, for [daemon] explain_socket")
    explain.add_argument("--socket", help="the daemon's explain socket (overrides --config;"
                         " default: /run/gpufair/explain.sock)")
    explain.set_defaults(func=run_explain)


def socket_path(args: argparse.Namespace) -> str | None:
    from gpufair.core.config import DaemonOptions, load_config
    if args.socket:
        return str(args.socket)
    if args.config:
        return load_config(args.config).daemon.explain_socket
    return DaemonOptions().explain_socket


def run_explain(args: argparse.Namespace) -> int:
    from gpufair.plugin.explain_server import UNKNOWN, Unavailable, ask
    path = socket_path(args)
    if not path:
        print("gpufair: error: [daemon] explain_socket is unset: the daemon serves no "
              "explanations", file=sys.stderr)
        return 1
    try:
        reply = ask(path, args.job)
    except (Unavailable, ValueError) as exc:
        print(f"gpufair: error: the gpufair daemon is unavailable: {exc}", file=sys.stderr)
        return 1
    if reply.get("error") == UNKNOWN:
        print(f"gpufair: error: job {args.job}: gpufair has no decision on it that you may "
              "read (an unknown job id, or another user's job)", file=sys.stderr)
        return EXIT_INPUT
    if "error" in reply:
        print(f"gpufair: error: job {args.job}: {reply['error']}", file=sys.stderr)
        return EXIT_INPUT
    if args.json:
        print(json.dumps(reply, indent=2, sort_keys=True))
    else:
        print(render(reply))
    return 0


def _printable(text: str) -> str:
    """Job, app and tenant names in a reason are users' words: no terminal escapes."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def render(reply: dict[str, Any]) -> str:
    """The story for people: one line per run of rounds with the same decision."""
    lines = [f"job {reply['job']}: gpufair's decisions, oldest first"]
    for row in reply["decisions"]:
        rounds = (f"round {row['from_round']}" if row["from_round"] == row["to_round"]
                  else f"rounds {row['from_round']}-{row['to_round']}")
        span = _when(row["from_s"]) if row["from_s"] == row["to_s"] else \
            f"{_when(row['from_s'])} to {_when(row['to_s'])}"
        lines.append(f"  {rounds:<16} {span}: {_printable(row['text'])}")
    next_at = reply.get("next_round_at")
    if next_at is not None:
        lines.append(f"next round: {_when(next_at)}")
    return "\n".join(lines)

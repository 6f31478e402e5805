"""Where the YARN adapter is chosen: ``gpufair snapshot --yarn URL`` and ``gpufair serve``
with ``[daemon] adapter = "yarn"`` (or ``--yarn URL``). The commands themselves are the ones
of :mod:`gpufair.cli.slurm`; only the adapter behind them differs."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from gpufair.cli.output import print_snapshot
from gpufair.errors import EXIT_INPUT

if TYPE_CHECKING:
    from gpufair.adapters.yarn import YarnAdapter
    from gpufair.core.config import Config


def yarn_adapter(config: Config, urls: list[str] | None = None) -> YarnAdapter:
    """The adapter ``[yarn]`` describes; ``urls`` (``--yarn``) replaces ``[yarn] urls``."""
    from gpufair.adapters.yarn import YarnAdapter
    from gpufair.errors import InputError
    if not (urls or config.yarn.urls):
        raise InputError(config.source, "no ResourceManager: give --yarn URL or [yarn] urls",
                         field="yarn.urls")
    return YarnAdapter.from_settings(config.yarn, mode=config.daemon.mode, urls=urls)


def run_snapshot(args: argparse.Namespace) -> int:
    """What the YARN adapter's snapshot returns, plus what the jobs' logs measure (none are
    known for YARN apps unless a profiler finds them): the input of the daemon's round."""
    from gpufair.adapters.yarn import RMReplyError, RMUnavailable
    from gpufair.core.config import load_config
    config = load_config(args.config)
    adapter = yarn_adapter(config, args.yarn)
    try:
        state = adapter.snapshot()
    except RMReplyError as exc:
        print(f"gpufair: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except RMUnavailable as exc:
        print(f"gpufair: error: YARN unavailable: {exc}", file=sys.stderr)
        return 1
    print_snapshot(state, adapter)
    return 0

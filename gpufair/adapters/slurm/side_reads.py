"""Reads beside squeue and sinfo that a round can do without (limits, reservations).

Each is a scontrol command whose text a parser turns into what the model adds; when it cannot
be had (a transport without a command line, scontrol failing, text the parser does not know)
the round goes on without it, as before it was read, and the reason is logged: such a read
fails open, never skipping a round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from gpufair.adapters.slurm.transport import NotSaved, TransportError

log = logging.getLogger("gpufair.slurm")
T = TypeVar("T")


def read_beside(transport: object, argv: Sequence[str], parse: Callable[[str], T],
                what: str) -> T | None:
    """``parse`` of ``argv``'s output through the transport's command line (slurmrestd's
    transport keeps one for what REST cannot do), or None; ``parse`` raises ValueError on
    text it does not know."""
    cli = getattr(transport, "cli", transport)
    read_text = getattr(cli, "read_text", None)
    if read_text is None:
        return None
    try:
        return parse(read_text(list(argv)))
    except NotSaved:        # a dry run of saved files without this one: no warning
        return None
    except (TransportError, ValueError) as exc:
        log.warning("%s not read (%s): left to Slurm this round", what, exc)
        return None

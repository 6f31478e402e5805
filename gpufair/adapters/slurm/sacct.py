"""Slurm's job accounting read live: ``sacct`` run by gpufair, for ``gpufair replay --sacct``.

The reader returns ``sacct --parsable2`` output with its header line as the bytes sacct
printed, exactly what a saved file holds, so a live replay and a replay of a file saved by an
admin are the same code from there on (the replay branch's ``parse_sacct_text(data: bytes,
source)``, which decodes field by field: a job name that is not UTF-8 stays as it was in a
field replay ignores, and is an error naming line and field in one it reads).

It asks for allocations only (``--allocations``: one line per job, not per step), every
incarnation of a requeued job (``--duplicates``: the parser merges them and keeps their
attained time), jobs of every user (``--allusers``) in every state (``--state``), and names
the fields it needs (``SACCT_FIELDS``) so a site's ``SACCT_FORMAT`` cannot change the columns.

The command runs through the Slurm adapter's conventions (:class:`CliTransport`): an argument
list (no shell), a timeout, stderr decoded with :func:`decode` for the message. ``sacct`` that
does not answer, cannot run or fails (slurmdbd down: "Problem talking to the database")
raises :class:`SlurmUnavailable`, which the CLI turns into exit 1 "unavailable".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from gpufair.adapters.slurm.adapter import SlurmUnavailable
from gpufair.adapters.slurm.transport import CliTransport, TransportError, decode

#: The fields replay needs, in this order. 22.05's sacct has no ArrayJobID/ArrayTaskID or
#: Restarts columns: an array task is the JobID ``A_T`` (JobIDRaw its own id), and a restart
#: is one more line of the same JobIDRaw with State REQUEUED (``--duplicates``).
SACCT_FIELDS: tuple[str, ...] = (
    "JobID", "JobIDRaw", "JobName", "User", "UID", "Account", "QOS", "Partition", "Cluster",
    "Submit", "Eligible", "Start", "End", "Elapsed", "ElapsedRaw", "Suspended", "State",
    "ExitCode", "DerivedExitCode", "AllocTRES", "ReqTRES", "NNodes", "NodeList",
    "Timelimit", "TimelimitRaw", "Priority", "Reason", "Flags",
)

#: Every job state 22.05's ``sacct --state`` knows (man sacct), to select jobs by
ALL_STATES = "BF,CA,CD,DL,F,NF,OOM,PD,PR,R,RQ,RS,RV,S,TO"

#: Seconds one ``sacct`` may take: a month of a busy site is tens of MB of text
DEFAULT_TIMEOUT_S = 300.0

#: Runs an argument list and returns its standard output (raises TransportError otherwise)
Runner = Callable[[Sequence[str]], bytes]


def sacct_argv(start: datetime | str, end: datetime | str, *,
               clusters: str | None = None) -> list[str]:
    """The ``sacct`` argument list for jobs that were in any state during [start, end].

    Every state is named (``--state``): without it sacct selects jobs *eligible* in the window,
    and a job held and cancelled before it started was never eligible, so it would be missing
    from the history that must count it (the loopback history has one). Times go in Slurm's
    own format (``YYYY-MM-DDTHH:MM:SS``, the site's local time, as sacct prints them).
    """
    argv = ["sacct", "--allusers", "--allocations", "--duplicates", "--parsable2",
            "--noconvert", f"--starttime={_slurm_time(start)}", f"--endtime={_slurm_time(end)}",
            f"--state={ALL_STATES}", f"--format={','.join(SACCT_FIELDS)}"]
    if clusters:
        if not all(part.replace("-", "").replace("_", "").isalnum()
                   for part in clusters.split(",")):
            raise ValueError(f"not a list of cluster names: {clusters!r}")
        argv.append(f"--clusters={clusters}")
    return argv


def _slurm_time(value: datetime | str) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S")
    text = value.strip()
    # sacct accepts more forms (now-7days, MMDDYY); gpufair passes only what it checked
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not a time (YYYY-MM-DD[THH:MM[:SS]]): {value!r}") from None
    return text


def read_sacct_live(start: datetime | str, end: datetime | str, *,
                    clusters: str | None = None, run: Runner | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> bytes:
    """``sacct --parsable2`` output with its header line, for jobs of [start, end], as the
    bytes sacct printed.

    Raises SlurmUnavailable when sacct does not answer or fails (slurmdbd down, no
    accounting configured); ValueError when ``start``/``end`` are not times.
    """
    argv = sacct_argv(start, end, clusters=clusters)
    runner = run or CliTransport(timeout_s=timeout_s).read_bytes
    try:
        data = runner(argv)
    except TransportError as exc:
        raise SlurmUnavailable(str(exc)) from exc
    header = decode(data.split(b"\n", 1)[0])
    if header.split("|") != list(SACCT_FIELDS):
        # sacct exit 0 with something else first (a banner, a warning on stdout) would be
        # read as jobs: refuse it here, where the command line is known
        raise SlurmUnavailable(f"sacct: unexpected first line {header[:200]!r} "
                               f"(wanted the header {'|'.join(SACCT_FIELDS)[:60]}...)")
    return data

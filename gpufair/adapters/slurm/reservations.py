"""Slurm reservations in the model: no job is planned onto a reserved node for a run that
would overlap the reservation's window (issue 29).

Slurm starts a job that did not ask for a reservation on a reserved node only if the job's
time limit ends before the reservation starts (and never while it is active). gpufair pinned
such jobs there anyway; Slurm then refused them (``ReqNodeNotAvail, Reserved for
maintenance``) and the booked GPUs idled until the refusal was seen a round later. The
reservations are read with ``scontrol -o show reservation`` (22.05's scontrol has no
``--json`` for them) and each waiting job's allowed nodes lose the nodes of every
reservation its run, from now to now + its time limit (none: unbounded), would overlap.

Jobs submitted with ``--reservation`` are not gpufair's: job_submit.lua leaves them to Slurm
(and ``translate.not_eligible`` keeps one moved into a reservation later out), so Slurm
places them only on their reservation's nodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.side_reads import read_beside
from gpufair.model import ClusterState, JobState

#: one reservation per line, ``Key=Value`` words
RESERVATIONS_ARGV = ("scontrol", "-o", "show", "reservation")
_NONE = "No reservations in the system"


class BadReservation(ValueError):
    """A line of ``scontrol -o show reservation`` that 22.05 does not print."""


@dataclass(frozen=True)
class Reservation:
    name: str
    nodes: frozenset[str]
    start_s: float
    end_s: float

    def overlaps(self, start_s: float, end_s: float) -> bool:
        return start_s < self.end_s and end_s > self.start_s


def _time(value: str, line: int, key: str) -> float:
    """scontrol's local time (``2026-11-28T12:09:20``) as epoch seconds; ``Unknown``/none
    for an end: never."""
    if value in ("Unknown", "None", "(null)", "") and key == "EndTime":
        return math.inf
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        raise BadReservation(f"scontrol show reservation line {line}: field {key!r} is "
                             f"not a time: {value[:40]!r}") from None


def parse_reservations(text: str) -> list[Reservation]:
    """The reservations of ``scontrol -o show reservation``; those without nodes (licences
    or burst buffers only) hold no node and are left out."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(_NONE):
            continue
        fields = dict(w.partition("=")[::2] for w in line.split() if "=" in w)
        if "ReservationName" not in fields or "StartTime" not in fields:
            raise BadReservation(f"scontrol show reservation line {number}: no "
                                 f"ReservationName/StartTime: {line[:80]!r}")
        nodes = fields.get("Nodes", "")
        if nodes in ("", "(null)"):
            continue
        try:
            names = frozenset(expand_hostlist(nodes))
        except ValueError as exc:
            raise BadReservation(f"scontrol show reservation line {number}: field 'Nodes': "
                                 f"{exc}") from None
        found.append(Reservation(fields["ReservationName"], names,
                                 _time(fields["StartTime"], number, "StartTime"),
                                 _time(fields.get("EndTime", ""), number, "EndTime")))
    return found


def read_reservations(transport: object) -> list[Reservation] | None:
    """The reservations now, or None when they cannot be read (then, as before, Slurm's
    refusal of a start onto a reserved node is the guard)."""
    return read_beside(transport, RESERVATIONS_ARGV, parse_reservations,
                       "Slurm's reservations")


def outside_reservations(state: ClusterState, reservations: Sequence[Reservation]
                         ) -> ClusterState:
    """``state`` with each waiting job kept off the nodes of every reservation its run
    would overlap if it started now (its time limit; none: it runs on and on)."""
    if not reservations:
        return state
    now = state.time_s
    ahead = [r for r in reservations if r.end_s > now]
    every = tuple(sorted(n.name for n in state.nodes))
    jobs = []
    for job in state.jobs:
        if job.state is not JobState.PENDING:
            jobs.append(job)
            continue
        end = now + job.time_limit_s if job.time_limit_s else math.inf
        blocked = set().union(*(r.nodes for r in ahead if r.overlaps(now, end)))
        allowed = every if job.allowed_nodes is None else job.allowed_nodes
        if blocked & set(allowed):
            job = replace(job, allowed_nodes=tuple(n for n in allowed if n not in blocked))
        jobs.append(job)
    return state.with_jobs(jobs)

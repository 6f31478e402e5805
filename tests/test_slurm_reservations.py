"""Reservations in the model (issue 29): ``scontrol -o show reservation`` read, and waiting jobs
kept off reserved nodes for a run that would overlap the window.

``tests/data/slurm/reservations_22.05.txt`` is real output of the loopback Slurm 22.05 after
``scontrol create reservation ReservationName=r1 Nodes=gpu-k80-1,gpu-k80-2 StartTime=now+300
Duration=60 Users=root`` and ``... r2 Nodes=gpu-v100-1 StartTime=now Duration=UNLIMITED
Flags=MAINT,IGNORE_JOBS`` (scontrol prints local time; 22.05 shows UNLIMITED as a year).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from gpufair.adapters.slurm.reservations import (
    BadReservation,
    Reservation,
    outside_reservations,
    parse_reservations,
)
from gpufair.model import ClusterState, Job, JobState, Node

TEXT = (Path(__file__).parent / "data" / "slurm" / "reservations_22.05.txt").read_text()
NODES = tuple(Node(n, n.split("-")[1], 4) for n in
              ("gpu-k80-1", "gpu-k80-2", "gpu-v100-1", "gpu-v100-2"))
START = 1_000_000.0
R1 = Reservation("r1", frozenset({"gpu-k80-1", "gpu-k80-2"}), START, START + 3600)


def _local(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timestamp()


def test_the_recorded_reservations():
    r1, r2 = parse_reservations(TEXT)
    assert (r1.name, r1.nodes) == ("r1", frozenset({"gpu-k80-1", "gpu-k80-2"}))
    assert (r1.start_s, r1.end_s) == (_local("2026-11-28T12:09:20"), _local("2026-11-28T13:09:20"))
    assert (r2.name, r2.nodes, r2.end_s) == ("r2", frozenset({"gpu-v100-1"}),
                                             _local("2027-11-28T12:04:22"))
    assert parse_reservations("No reservations in the system\n") == []


def test_a_reservation_without_nodes_holds_none():
    line = ("ReservationName=lic StartTime=2026-11-28T12:09:20 EndTime=2026-11-28T13:09:20 "
            "Nodes=(null) NodeCnt=0 Licenses=matlab:2")
    assert parse_reservations(line) == []


@pytest.mark.parametrize("old, new, field", [
    ("StartTime=2026-11-28T12:09:20", "StartTime=soon", "StartTime"),
    ("Nodes=gpu-k80-[1-2]", "Nodes=gpu-k80-[1-2", "Nodes")])
def test_a_line_22_05_does_not_print_names_line_and_field(old, new, field):
    with pytest.raises(BadReservation, match=f"line 1: field '{field}'"):
        parse_reservations(TEXT.replace(old, new, 1))


def _allowed(limit: float | None, now: float, *, allowed=None, state=JobState.PENDING,
             reservations=(R1,)):
    job = Job("1", time_limit_s=limit, allowed_nodes=allowed, state=state)
    out = outside_reservations(ClusterState(now, NODES, (job,)), reservations)
    return out.jobs[0].allowed_nodes


def test_a_run_that_would_overlap_the_window_is_kept_off_its_nodes():
    assert _allowed(600.0, START - 300) == ("gpu-v100-1", "gpu-v100-2")    # ends inside
    assert _allowed(600.0, START + 10) == ("gpu-v100-1", "gpu-v100-2")     # active now
    assert _allowed(None, START - 86400) == ("gpu-v100-1", "gpu-v100-2")   # no time limit


def test_a_run_that_ends_before_the_window_or_starts_after_it_may_use_them():
    assert _allowed(600.0, START - 600) is None      # ends exactly as it starts
    assert _allowed(600.0, START - 601) is None
    assert _allowed(None, START + 3600) is None      # over


def test_a_job_s_own_node_list_is_narrowed_and_running_jobs_are_left():
    assert _allowed(None, START, allowed=("gpu-k80-1", "gpu-v100-2")) == ("gpu-v100-2",)
    assert _allowed(None, START, allowed=("gpu-k80-1",)) == ()          # nothing fits now
    assert _allowed(None, START, allowed=("gpu-v100-2",)) == ("gpu-v100-2",)
    assert _allowed(None, START, state=JobState.RUNNING) is None
    assert _allowed(None, START, reservations=()) is None

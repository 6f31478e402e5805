"""Slurm job arrays: the task list of a pending array record.

``sbatch --array=0-7`` makes one job record that stands for every task not started yet; Slurm
splits a task out into a record of its own (a new job id, its ``array_task_id``) when it
starts it or when an update names it (``scontrol update JobId=A_T``). Releasing the record
itself would release every task in it at once, and Slurm would start as many as fit, then the
rest whenever GPUs free up: starts gpufair never decided. So gpufair starts the tasks of a
pending array record one by one, each by its id ``A_T`` (the update of ``A_T`` splits that task
out, the rest stay held), as many in one round as the plan places: it needs the tasks' numbers.

22.05 prints the list (``array_task_string``) as ranges of the task bitmap: ``0-7``,
``1,3,5``, a stepped range ``0-12:4`` when the ids have one stride, a ``%N`` suffix for
``--array=...%N`` (at most N tasks running at once), and, when the text would be too long for
its buffer, a cut list ending in ``...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Slurm's MaxArraySize cannot exceed 4000001: task ids are below it
MAX_TASK_ID = 4_000_000
_ITEM = re.compile(r"^([0-9]{1,7})(?:-([0-9]{1,7})(?::([0-9]{1,7}))?)?$")


@dataclass(frozen=True, slots=True)
class TaskList:
    """What an ``array_task_string`` says: the lowest task id, how many tasks (None when Slurm
    cut the list short), and the ``%N`` limit of tasks running at once (None if none)."""

    first: int
    count: int | None
    limit: int | None = None
    #: the (lowest, highest, step) ranges as printed: which task ids the record stands for
    ranges: tuple[tuple[int, int, int], ...] = ()

    def __contains__(self, task: object) -> bool:
        return isinstance(task, int) and any(
            lo <= task <= hi and (task - lo) % step == 0 for lo, hi, step in self.ranges)

    def ids(self, at_most: int) -> list[int]:
        """The lowest ``at_most`` task ids, in order (an array may hold 4 million tasks: no
        more are ever listed than asked)."""
        out: list[int] = []
        for lo, hi, step in self.ranges:
            out.extend(range(lo, min(hi, lo + step * (at_most - 1)) + 1, step))
        return sorted(set(out))[:max(0, at_most)]


def parse_task_list(text: str) -> TaskList:
    """Read an ``array_task_string``; raises ``ValueError`` naming the string and the part that
    is not Slurm's syntax (nothing is guessed: the record is then skipped and reported)."""
    body = text.strip()
    limit = None
    if "%" in body:
        body, _, tail = body.rpartition("%")
        if not tail.isascii() or not tail.isdigit() or len(tail) > 7 or int(tail) == 0:
            raise ValueError(f"array task list {text!r}: bad %-limit {tail!r}")
        limit = int(tail)
    truncated = body.endswith("...")
    if truncated:
        # the last item before "..." may itself be cut ("0,2,4,1"): only the ones before it
        body = body[:-3]
        items = body.split(",")[:-1] if "," in body else []
    else:
        items = body.split(",")
    if not items or (not truncated and not body):
        raise ValueError(f"array task list {text!r}: no task ids")
    first: int | None = None
    count = 0
    ranges: list[tuple[int, int, int]] = []
    for item in items:
        match = _ITEM.match(item)
        if match is None:
            raise ValueError(f"array task list {text!r}: bad item {item!r}")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        step = int(match.group(3)) if match.group(3) is not None else 1
        if hi < lo or step == 0 or hi > MAX_TASK_ID:
            raise ValueError(f"array task list {text!r}: bad range {item!r}")
        first = lo if first is None else min(first, lo)
        count += (hi - lo) // step + 1
        ranges.append((lo, hi, step))
    assert first is not None
    return TaskList(first, None if truncated else count, limit, tuple(ranges))

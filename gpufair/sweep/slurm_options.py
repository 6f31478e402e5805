"""The ``[slurm]`` table of a sweep file: what each task of the sweep's job array asks Slurm
for. Declared as settings, so the project's one validator names a wrong key or value."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpufair.settings import parse_settings, setting

#: values that reach sbatch as one argument each: no newline or NUL, nothing a shell reads
#: (none is ever given to a shell, but a task's script is read by people too)
_PLAIN = re.compile(r"[A-Za-z0-9_.,:=+@%/-]*")


@dataclass(frozen=True)
class SlurmArrayOptions:
    partition: str = setting("", "partition of the array (default: the cluster's default)")
    account: str = setting("", "account charged (default: the user's default)")
    qos: str = setting("", "QOS of the tasks (default: the account's)")
    time: str = setting("1:00:00", "time limit of each task (sbatch --time)")
    cpus_per_task: int = setting(1, "CPUs of each task: a simulation uses one", ge=1, le=4096)
    mem: str = setting("4G", "memory of each task (sbatch --mem)")
    max_parallel: int = setting(0, "tasks running at once (--array=...%N); 0: no limit",
                                ge=0, le=100_000)
    gpufair_managed: bool = setting(
        False, "allow a partition gpufair's own daemon manages ([slurm] managed_partitions): "
        "the sweep's tasks are then held and started by the daemon like any job")

    def __post_init__(self) -> None:
        for name in ("partition", "account", "qos", "time", "mem"):
            value = getattr(self, name)
            if not _PLAIN.fullmatch(value):
                raise ValueError(f"{name} = {value!r}: only letters, digits and _.,:=+@%/-")

    @classmethod
    def from_table(cls, table: Any, source: str) -> SlurmArrayOptions:
        return parse_settings(cls, table, source=source, section="slurm")

"""The results directory format (docs/FORMATS.md, section 9) as data: one definition that the
writer, the reader, the report and their tests all read, so a column cannot be renamed in one
place and not in another."""

from __future__ import annotations

from dataclasses import dataclass

#: ``meta.json``'s ``format``: what tells a results directory from any other directory
FORMAT = "gpufair-results"
#: ``meta.json``'s ``version``: bumped when a file or column changes meaning; a reader refuses
#: another version rather than misread it
VERSION = 1
META = "meta.json"
#: the commands that write a results directory (``meta.json``'s ``kind``)
KINDS = ("simulate", "compare", "replay", "dry-run", "shadow", "sweep-cell")
#: ``jobs.csv``'s ``outcome``
OUTCOMES = ("finished", "failed", "unfinished", "dropped", "never_started")
#: ``nodes.csv``'s ``phase``
PHASES = ("before", "after")
#: a replay's recorded history and a shadow run's observed scheduler, as run names
AS_RUN = "as_run"
OBSERVED = "slurm"


@dataclass(frozen=True)
class Table:
    """One table: its file stem and its columns in order, each ``str``, ``float`` or ``int``.

    ``free`` tables (metrics) have ``run`` first and then whatever scalar metrics the runs
    have, so a new metric needs no format version."""

    name: str
    columns: tuple[tuple[str, str], ...]
    free: bool = False

    @property
    def csv(self) -> str:
        return f"{self.name}.csv"

    @property
    def parquet(self) -> str:
        return f"{self.name}.parquet"

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def dtype(self, column: str) -> str:
        return dict(self.columns).get(column, "float")


METRICS = Table("metrics", (("run", "str"),), free=True)
JOBS = Table("jobs", (
    ("run", "str"), ("job_id", "str"), ("tenant", "str"), ("submit_s", "float"),
    ("start_s", "float"), ("end_s", "float"), ("wait_s", "float"), ("jct_s", "float"),
    ("gpus", "int"), ("gpu_types", "str"), ("rho", "float"), ("outcome", "str")))
ALLOCATIONS = Table("allocations", (
    ("run", "str"), ("job_id", "str"), ("start_s", "float"), ("end_s", "float"),
    ("gpu_type", "str"), ("gpus", "int")))
CLUSTER = Table("cluster", (
    ("run", "str"), ("t_s", "float"), ("gpu_type", "str"), ("total", "int"), ("busy", "int"),
    ("queued_jobs", "int")))
TENANTS = Table("tenants", (
    ("run", "str"), ("t_s", "float"), ("tenant", "str"), ("gpus", "float"),
    ("fair_share_gpus", "float")))
ACTIONS = Table("actions", (
    ("run", "str"), ("t_s", "float"), ("job_id", "str"), ("action", "str"), ("node", "str"),
    ("gpus", "int"), ("gpu_type", "str"), ("reason", "str")))
NODES = Table("nodes", (
    ("phase", "str"), ("node", "str"), ("gpu_type", "str"), ("gpu_index", "int"),
    ("job_id", "str")))

TABLES: dict[str, Table] = {t.name: t for t in
                            (METRICS, JOBS, ALLOCATIONS, CLUSTER, TENANTS, ACTIONS, NODES)}

"""Slurm's association and QOS limits, read before gpufair releases a job (issue 29).

A job that a limit forbids (an account's ``GrpTRES=gres/gpu=2`` already used, a user's
``MaxJobs`` reached, a QOS's ``GrpJobs``...) was recognised only from Slurm's pending reason
*after* gpufair had released it onto GPUs booked for it, which then idled until the next round.
Here the limits are read first, from ``scontrol show assoc_mgr flags=assoc,qos``: slurmctld's
own copy of them with the current use in parentheses (``GrpTRES=...,gres/gpu=2(1),...``,
``MaxJobs=5(0)``), so it needs neither slurmdbd's CLI nor a count of jobs in partitions gpufair
does not see. :func:`admit` then keeps a waiting job out of the round while starting it would
break one of them, counting the jobs admitted before it, so no GPU is booked for a job Slurm
will not run; it is offered again as soon as the use falls (a job ends).

What is modelled: GPUs (``gres/gpu``, untyped) and running jobs, per association (the job's
user association, its account and every parent account up to root: ``GrpTRES``, ``GrpJobs``,
and the user association's ``MaxJobs``) and per QOS (``GrpTRES``, ``GrpJobs``, and the per-user
and per-account ``MaxTRESPU``/``MaxJobsPU``/``MaxTRESPA``/``MaxJobsPA``, which 22.05's
assoc_mgr prints only for users and accounts that already have a job in the QOS). Other limits
(typed GPU TRES, CPUs, memory, nodes, ``MaxTRESPerJob``, ``MaxSubmit``, wall-time minutes) are
still left to Slurm's refusal (``translate.refused``), as before.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpufair.adapters.slurm.side_reads import read_beside
from gpufair.adapters.slurm.translate import SlurmJobInfo
from gpufair.model import ClusterState, Job, JobState

#: ``scontrol show assoc_mgr`` for the limits and the use of associations and QOS
ASSOC_MGR_ARGV = ("scontrol", "show", "assoc_mgr", "flags=assoc,qos")

_LIMIT = re.compile(r"^(N|\d{1,12})\((\d{1,20})(?:\.\d+)?\)$")
_GPU_TRES = re.compile(r"(?:^|,)gres/gpu=(N|\d{1,12})\((\d{1,20})\)(?:,|$)")
_NAMED = re.compile(r"^(.*)\((\d{1,12})\)$")


class BadLimits(ValueError):
    """The assoc_mgr text is not what 22.05 prints (names the line)."""


@dataclass
class Budget:
    """One limit group: at most ``gpus`` GPUs and ``jobs`` running jobs (None: no limit), of
    which ``used_gpus`` and ``used_jobs`` are in use; charged as jobs are admitted."""

    label: str
    gpus: int | None = None
    jobs: int | None = None
    used_gpus: int = 0
    used_jobs: int = 0

    def refuses(self, gpus: int) -> str | None:
        """Why one more job of ``gpus`` GPUs would break this limit, or None."""
        if self.gpus is not None and self.used_gpus + gpus > self.gpus:
            return f"{self.label} GPU limit {self.gpus} ({self.used_gpus} in use)"
        if self.jobs is not None and self.used_jobs + 1 > self.jobs:
            return f"{self.label} job limit {self.jobs} ({self.used_jobs} running)"
        return None

    def charge(self, gpus: int) -> None:
        self.used_gpus += gpus
        self.used_jobs += 1

    @property
    def limits(self) -> bool:
        return self.gpus is not None or self.jobs is not None


@dataclass
class _Association:
    account: str
    user: str
    partition: str
    parent: str                      # the parent account ('' for root and user associations)
    budget: Budget


@dataclass
class Limits:
    """The limits one assoc_mgr read shows, by association and by QOS."""

    associations: dict[tuple[str, str, str], _Association] = field(default_factory=dict)
    qos: dict[str, Budget] = field(default_factory=dict)
    #: (QOS, uid) → its MaxTRESPU / MaxJobsPU; (QOS, account) → MaxTRESPA / MaxJobsPA
    qos_users: dict[tuple[str, str], Budget] = field(default_factory=dict)
    qos_accounts: dict[tuple[str, str], Budget] = field(default_factory=dict)

    def budgets(self, account: str, user: str, uid: int | None, partition: str,
                qos: str) -> list[Budget]:
        """Every limit group a job of this account, user, partition and QOS counts in (only
        those that limit something)."""
        found: list[Budget] = []
        mine = None
        for part in (*partition.split(","), ""):
            mine = self.associations.get((account, user, part))
            if mine is not None:
                break
        if mine is not None:
            found.append(mine.budget)
        seen: set[str] = set()
        name = account
        while name and name not in seen:      # the account and its parents, up to root
            seen.add(name)
            node = self.associations.get((name, "", ""))
            if node is None:
                break
            found.append(node.budget)
            name = node.parent
        if qos:
            for budget in (self.qos.get(qos), self.qos_accounts.get((qos, account)),
                           self.qos_users.get((qos, str(uid)))):
                if budget is not None:
                    found.append(budget)
        return [b for b in found if b.limits]


def _value(text: str, line: int) -> tuple[int | None, int]:
    """``N(3)`` → (None, 3); ``5(2)`` → (5, 2); ``''`` → (None, 0)."""
    if text == "":
        return None, 0
    match = _LIMIT.match(text)
    if match is None:
        raise BadLimits(f"assoc_mgr line {line}: not LIMIT(USE): {text[:60]!r}")
    return (None if match.group(1) == "N" else int(match.group(1))), int(match.group(2))


def _gpus(tres: str, line: int) -> tuple[int | None, int]:
    """The ``gres/gpu=L(U)`` part of a TRES list (None, 0 when it names no GPUs)."""
    if not tres:
        return None, 0
    match = _GPU_TRES.search(tres)
    if match is None:
        if "gres/gpu=" in tres:
            raise BadLimits(f"assoc_mgr line {line}: unreadable gres/gpu in {tres[:80]!r}")
        return None, 0
    return (None if match.group(1) == "N" else int(match.group(1))), int(match.group(2))


def _name(text: str) -> str:
    """``root(0)`` → ``root`` (assoc_mgr adds ids in parentheses)."""
    match = _NAMED.match(text)
    return match.group(1) if match else text


def _words(line: str, number: int) -> dict[str, tuple[str, int]]:
    """``Key=Value`` words of one line, each with the line's number (for the errors)."""
    pairs = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            pairs[key] = (value, number)
    return pairs


def parse_assoc_mgr(text: str) -> Limits:
    """The limits of ``scontrol show assoc_mgr flags=assoc,qos`` (22.05's text)."""
    limits = Limits()
    record: dict[str, tuple[str, int]] = {}
    kind = ""                      # "assoc", "qos", "qos-account", "qos-user"
    sub = ""                       # the account or uid of a QOS's sub-record
    qos_name = ""

    def get(key: str) -> str:
        return record.get(key, ("", 0))[0]

    def limit(key: str) -> tuple[int | None, int]:
        value, line = record.get(key, ("", 0))
        return _value(value, line)

    def gpus_of(key: str) -> tuple[int | None, int]:
        value, line = record.get(key, ("", 0))
        return _gpus(value, line)

    def close() -> None:
        if kind == "assoc":
            gpus, used_gpus = gpus_of("GrpTRES")
            jobs, used_jobs = limit("GrpJobs")
            user = _name(get("UserName"))
            if user:   # MaxJobs of a user association: that user's running jobs there
                max_jobs, max_used = limit("MaxJobs")
                if max_jobs is not None and (jobs is None or max_jobs < jobs):
                    jobs, used_jobs = max_jobs, max_used
            account = get("Account")
            label = (f"user {user} in account {account}" if user else f"account {account}")
            key = (account, user, get("Partition"))
            limits.associations[key] = _Association(
                account, user, key[2], _name(get("ParentAccount")),
                Budget(f"association ({label})", gpus, jobs, used_gpus, used_jobs))
        elif kind == "qos":
            gpus, used_gpus = gpus_of("GrpTRES")
            jobs, used_jobs = limit("GrpJobs")
            limits.qos[qos_name] = Budget(f"QOS {qos_name}", gpus, jobs, used_gpus, used_jobs)
        elif kind in ("qos-account", "qos-user"):
            suffix = "PA" if kind == "qos-account" else "PU"
            gpus, used_gpus = gpus_of(f"MaxTRES{suffix}")
            jobs, used_jobs = limit(f"MaxJobs{suffix}")
            who = f"account {sub}" if kind == "qos-account" else f"uid {sub}"
            table = limits.qos_accounts if kind == "qos-account" else limits.qos_users
            table[(qos_name, sub)] = Budget(f"QOS {qos_name} per {who}", gpus, jobs,
                                            used_gpus, used_jobs)
        record.clear()

    section = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("Current Association", "Association Records",
                                                "QOS Records", "No Accounts", "No Users")):
            continue
        if stripped.startswith("ClusterName="):
            close()
            kind, section = "assoc", ""
            record.update(_words(stripped, number))
        elif stripped.startswith("QOS="):
            close()
            kind, section = "qos", ""
            qos_name = _name(stripped.split("=", 1)[1].split()[0])
        elif stripped in ("Account Limits", "User Limits"):
            close()
            section, kind = stripped, ""
        elif section and "=" not in stripped:
            close()
            kind = "qos-account" if section == "Account Limits" else "qos-user"
            sub = stripped
        elif kind:
            record.update(_words(stripped, number))
    close()
    return limits


def admit(jobs: Iterable[tuple[str, int, tuple[str, str, int | None, str, str]]],
          starting: Iterable[tuple[int, tuple[str, str, int | None, str, str]]],
          limits: Limits) -> dict[str, str]:
    """The waiting jobs a limit keeps out, each with why.

    ``jobs``: (id, GPUs, (account, user, uid, partition, QOS)) of the waiting jobs in the
    order the round would consider them (submission order); ``starting``: (GPUs, who) of the
    jobs gpufair released that Slurm has not started yet, which assoc_mgr does not count in
    use yet. A job is admitted while every limit it counts in has room for it, and then
    charged, so the jobs admitted together fit too. ``limits`` is left as it was."""
    limits = copy.deepcopy(limits)
    groups: dict[tuple[str, str, int | None, str, str], list[Budget]] = {}

    def budgets(who: tuple[str, str, int | None, str, str]) -> list[Budget]:
        if who not in groups:
            groups[who] = limits.budgets(*who)
        return groups[who]

    for gpus, who in starting:
        for budget in budgets(who):
            budget.charge(gpus)
    kept_out: dict[str, str] = {}
    for job_id, gpus, who in jobs:
        mine = budgets(who)
        why = next((r for b in mine if (r := b.refuses(gpus)) is not None), None)
        if why is not None:
            kept_out[job_id] = f"a Slurm limit forbids its start now: {why}"
            continue
        for budget in mine:
            budget.charge(gpus)
    return kept_out



def read_limits(transport: object) -> Limits | None:
    """The limits as slurmctld holds them now, or None when they cannot be read: then nothing
    is kept out ahead and Slurm's own refusal is the guard, as before."""
    return read_beside(transport, ASSOC_MGR_ARGV, parse_assoc_mgr,
                       "Slurm's association/QOS limits")


def within_limits(state: ClusterState, infos: Mapping[str, SlurmJobInfo], limits: Limits
                  ) -> tuple[ClusterState, tuple[tuple[Job, str], ...]]:
    """``state`` without the waiting jobs a limit forbids to start now, and those jobs with
    why. Jobs the state shows running that Slurm still shows pending (released by gpufair,
    not started yet) are charged first: assoc_mgr counts them only once they run."""
    starting = [(j.gpus, infos[j.id].counted_as) for j in state.jobs
                if j.state is JobState.RUNNING and j.id in infos
                and infos[j.id].raw_state == "PENDING"]
    waiting = [(j.id, j.gpus, infos[j.id].counted_as) for j in state.jobs
               if j.state is JobState.PENDING and j.id in infos]
    kept_out = admit(waiting, starting, limits)
    if not kept_out:
        return state, ()
    return (state.with_jobs([j for j in state.jobs if j.id not in kept_out]),
            tuple((j, kept_out[j.id]) for j in state.jobs if j.id in kept_out))

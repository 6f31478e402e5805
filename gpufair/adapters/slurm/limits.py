"""Slurm's association and QOS limits, read before gpufair releases a job (issue 29).

A job that a limit forbids (an account's ``GrpTRES=gres/gpu=2`` already used, a user's
``MaxJobs`` reached, a QOS's ``MaxTRESPerJob``...) was recognised only from Slurm's pending
reason *after* gpufair had released it onto GPUs booked for it, which then idled until the
next round. Here the limits are read first, from ``scontrol show assoc_mgr flags=assoc,qos``:
slurmctld's own copy of them with the current use in parentheses
(``GrpTRES=cpu=8(3),...,gres/gpu:k80=1(2)``, ``MaxJobs=5(0)``), so it needs neither
slurmdbd's CLI nor a count of jobs in partitions gpufair does not see. :func:`admit` then
keeps a waiting job out of the round while starting it would break one of them, counting the
jobs admitted before it, so no GPU is booked for a job Slurm will not run; it is offered
again as soon as the use falls (a job ends).

A job's demand is what Slurm checks its limits against: its TRES request (``tres_req_str``:
``cpu=2,mem=4000M,node=1,billing=2,gres/gpu=1,gres/gpu:k80=1``), its node count and its
time limit. A typed request (``--gres=gpu:k80:1``) counts against both ``gres/gpu`` and
``gres/gpu:k80``; an untyped one only against ``gres/gpu`` (22.05 starts an untyped job on a
type whose typed limit is full: tried on the loopback cluster), though once running it adds
to the typed use shown.

What is modelled, per association (the job's user association: every limit below; its
account and each parent account up to root: the ``Grp`` ones) and per QOS (the job's QOS:
every limit; per account and per user: ``MaxTRESPA``/``MaxJobsPA``, ``MaxTRESPU``/
``MaxJobsPU``, which 22.05's assoc_mgr prints only for accounts and users that already have a
job in the QOS), for any TRES (GPUs typed or not, CPUs, memory, nodes, billing...):

- in use plus the job's request within the limit: ``GrpTRES``, ``MaxTRESPU``/``PA``,
  ``GrpJobs``, ``MaxJobs``, ``MaxJobsPU``/``PA``; and ``GrpTRESRunMins`` (the running jobs'
  TRES times their time left, plus the job's TRES times its time limit);
- the job's own request within the limit: ``MaxTRESPerJob``, ``MaxTRESPerNode`` (its TRES
  over its nodes), ``MaxTRESMinsPerJob`` (TRES times its time limit), ``MaxWall``;
- spent below the limit: ``GrpTRESMins`` and ``GrpWall`` (the decayed use slurmctld shows;
  once reached no job starts). With ``AccountingStorageEnforce=safe`` Slurm also refuses a
  job that *could* pass the limit before it ends: that stricter check is left to Slurm.

Not read ahead (still left to Slurm's refusal, ``translate.refused``): ``MaxSubmitJobs`` and
``GrpSubmitJobs`` (enforced at submission: a job already queued is within them), a
partition's QOS, licences, the ``safe`` check above, and a TRES-minutes or run-minutes limit
for a job without a time limit.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpufair.adapters.slurm.side_reads import read_beside
from gpufair.adapters.slurm.translate import SlurmJobInfo
from gpufair.model import ClusterState, Job, JobState

#: ``scontrol show assoc_mgr`` for the limits and the use of associations and QOS
ASSOC_MGR_ARGV = ("scontrol", "show", "assoc_mgr", "flags=assoc,qos")

_LIMIT = re.compile(r"^(N|\d{1,12})\((\d{1,20})(?:\.\d+)?\)$")
#: one TRES of a list: ``gres/gpu:k80=1(2)`` (with its use) or ``mem=30000`` (a per-job limit)
_ITEM = r"[a-z_]+(?:/[^=,()]+)?=(?:N|\d{1,20})(?:\(\d{1,20}(?:\.\d+)?\))?"
_TRES = re.compile(_ITEM)
#: a whole list, checked in one pass (most items are ``N(use)``: no limit, nothing to keep)
_TRES_LIST = re.compile(rf"{_ITEM}(?:,{_ITEM})*")
#: a list with a limit at all (most have none: ``N(use)`` only)
_ANY_LIMIT = re.compile(r"=\d")
#: the limited items of a list that :data:`_TRES_LIST` matched
_LIMITED = re.compile(r"(?:^|,)([a-z_]+(?:/[^=,()]+)?)=(\d{1,20})(?:\((\d{1,20})(?:\.\d+)?\))?"
                      r"(?=,|$)")
#: one TRES of a job's request: ``mem=4000M``, ``gres/gpu:k80=1``
_REQUEST = re.compile(r"^([a-z_]+(?:/[^=,]+)?)=(\d{1,20})([KMGTP]?)$")
_MB = {"K": 1 / 1024, "M": 1, "": 1, "G": 1024, "T": 1024 ** 2, "P": 1024 ** 3}
_NAMED = re.compile(r"^(.*)\((\d{1,12})\)$")
#: sacctmgr's names of the limits, for the reasons people read
_SACCTMGR = {"MaxTRESPJ": "MaxTRESPerJob", "MaxTRESPN": "MaxTRESPerNode",
             "MaxTRESMinsPJ": "MaxTRESMinsPerJob", "MaxWallPJ": "MaxWall",
             "MaxTRESPU": "MaxTRESPerUser", "MaxTRESPA": "MaxTRESPerAccount",
             "MaxJobsPU": "MaxJobsPerUser", "MaxJobsPA": "MaxJobsPerAccount"}


class BadLimits(ValueError):
    """The assoc_mgr text is not what 22.05 prints (names the line and the field)."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"assoc_mgr line {line}: {problem}")
        self.line = line
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Demand:
    """What one job asks, as Slurm's limits count it: its TRES (memory in MB), its nodes and
    its time limit in minutes (None: none known)."""

    tres: Mapping[str, int]
    nodes: int = 1
    minutes: float | None = None


@dataclass(slots=True)
class Cap:
    """One limit of one association or QOS: ``name`` as assoc_mgr prints it (``GrpTRES``,
    ``MaxTRESPJ``...), on ``tres`` ('' for a job count or wall time), of kind:

    - ``sum``: in use plus the job's request at most ``limit``, charged as jobs start;
    - ``jobs``: running jobs, one more at most ``limit``;
    - ``run_mins``: in use plus the request times the job's time limit;
    - ``job``, ``node``, ``job_mins``, ``wall``: the job's own request (per node, times its
      time limit, its time limit) at most ``limit``;
    - ``spent``: no job starts once the use reached ``limit``."""

    name: str
    kind: str
    tres: str
    limit: int
    used: int = 0

    def asked(self, demand: Demand) -> float | None:
        """What the job adds to this limit (None: it cannot be told, no time limit)."""
        if self.kind == "jobs":
            return 1
        if self.kind == "wall":
            return demand.minutes
        if self.kind == "spent" and not self.tres:
            return 1
        count = demand.tres.get(self.tres, 0)
        if self.kind == "node":
            return math.ceil(count / max(1, demand.nodes))
        if self.kind in ("run_mins", "job_mins"):
            return None if demand.minutes is None else count * demand.minutes
        return count

    def refuses(self, demand: Demand) -> str | None:
        """Why this limit forbids the job's start now (None: it allows it)."""
        asked = self.asked(demand)
        if asked is None:
            return None
        what = f"{_SACCTMGR.get(self.name, self.name)}{' ' + self.tres if self.tres else ''}"
        if self.kind == "spent":     # GrpWall counts every job; GrpTRESMins those of its TRES
            if (self.tres and not asked) or self.used < self.limit:
                return None
            return f"{what}: {self.used} used of {self.limit}"
        if self.kind in ("job", "node", "job_mins", "wall"):
            if asked <= self.limit:
                return None
            per = {"node": " per node", "job_mins": " (TRES-minutes)",
                   "wall": " (minutes)"}.get(self.kind, "")
            return f"{what}: the job asks {_number(asked)}{per}, the limit is {self.limit}"
        if not asked or self.used + asked <= self.limit:
            return None
        return f"{what}: {self.used} in use + {_number(asked)} asked > {self.limit}"

    def charge(self, demand: Demand) -> None:
        if self.kind in ("sum", "jobs", "run_mins"):
            self.used += math.ceil(self.asked(demand) or 0)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


@dataclass
class Budget:
    """The limits of one association or QOS (or a QOS's per-user/per-account record) that a
    job counts in, charged as jobs are admitted."""

    label: str
    caps: list[Cap] = field(default_factory=list)

    def refuses(self, demand: Demand) -> str | None:
        """Why one more job of this demand would break one of these limits, or None."""
        for cap in self.caps:
            why = cap.refuses(demand)
            if why is not None:
                return f"{self.label} {why}"
        return None

    def charge(self, demand: Demand) -> None:
        for cap in self.caps:
            cap.charge(demand)

    def copy(self) -> Budget:
        """A copy to charge, the limits read left as they were."""
        return Budget(self.label, [copy.copy(cap) for cap in self.caps])

    @property
    def limits(self) -> bool:
        return bool(self.caps)


@dataclass
class _Association:
    account: str
    user: str
    partition: str
    parent: str                      # the parent account ('' for root and user associations)
    budget: Budget                   # the Grp limits: count for every association below it
    own: Budget                      # the Max limits: count for the association's own jobs


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
        if mine is not None:      # its own limits first: those a job can never get past
            found += (mine.own, mine.budget)
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


def _value(key: str, text: str, line: int) -> tuple[int | None, int]:
    """``N(3)`` → (None, 3); ``5(2)`` → (5, 2); ``''`` → (None, 0)."""
    if text == "":
        return None, 0
    match = _LIMIT.match(text)
    if match is None:
        raise BadLimits(line, f"{key}: not LIMIT(USE): {text[:60]!r}")
    return (None if match.group(1) == "N" else int(match.group(1))), int(match.group(2))


def _tres_caps(name: str, kind: str, text: str, line: int) -> list[Cap]:
    """The limited TRES of one list (``cpu=N(2),gres/gpu=2(1)``; ``mem=30000,gres/gpu=2``)."""
    if not text:
        return []
    limited = _limited(text)
    if limited is None:
        bad = next((i for i in text.split(",") if _TRES.fullmatch(i) is None), text)
        raise BadLimits(line, f"{name}: not TRES=LIMIT(USE): {bad[:60]!r}")
    return [Cap(name, kind, tres, limit, used) for tres, limit, used in limited]


@functools.lru_cache(maxsize=1 << 14)
def _limited(text: str) -> tuple[tuple[str, int, int], ...] | None:
    """(TRES, limit, use) of the limited items of a list; None: not a TRES list. Cached: the
    same lists come back in every association (``cpu=N(0),mem=N(0),...`` of idle ones) and
    in every round (a record's use changes only when its jobs start or end)."""
    if _TRES_LIST.fullmatch(text) is None:
        return None
    if _ANY_LIMIT.search(text) is None:
        return ()
    return tuple((tres, int(limit), int(used or 0))
                 for tres, limit, used in _LIMITED.findall(text))


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


#: the limits of an association or QOS that count for everything below it, by assoc_mgr's
#: name and kind; and those that count for its own jobs only (a user association's, a QOS's)
_GROUP = (("GrpTRES", "sum"), ("GrpTRESRunMins", "run_mins"), ("GrpTRESMins", "spent"))
_GROUP_COUNTS = (("GrpJobs", "jobs"), ("GrpWall", "spent"))
_OWN = (("MaxTRESPJ", "job"), ("MaxTRESPN", "node"), ("MaxTRESMinsPJ", "job_mins"))
_OWN_COUNTS = (("MaxJobs", "jobs"),)


def parse_assoc_mgr(text: str) -> Limits:
    """The limits of ``scontrol show assoc_mgr flags=assoc,qos`` (22.05's text)."""
    limits = Limits()
    record: dict[str, tuple[str, int]] = {}
    kind = ""                      # "assoc", "qos", "qos-account", "qos-user"
    sub = ""                       # the account or uid of a QOS's sub-record
    qos_name = ""

    def caps(tres: Iterable[tuple[str, str]], counts: Iterable[tuple[str, str]]
             ) -> list[Cap]:
        found = []
        for key, how in tres:
            value, line = record.get(key, ("", 0))
            found += _tres_caps(key, how, value, line)
        for key, how in counts:
            value, line = record.get(key, ("", 0))
            limit, used = _value(key, value, line)
            if limit is not None:
                found.append(Cap(key, how, "", limit, used))
        return found

    def wall() -> list[Cap]:
        value, line = record.get("MaxWallPJ", ("", 0))
        if not value:
            return []
        if not value.isdigit() or len(value) > 12:
            raise BadLimits(line, f"MaxWallPJ: not minutes: {value[:40]!r}")
        return [Cap("MaxWallPJ", "wall", "", int(value))]

    def close() -> None:
        if kind == "assoc":
            user = _name(get("UserName"))
            account = get("Account")
            label = (f"user {user} in account {account}" if user else f"account {account}")
            key = (account, user, get("Partition"))
            own = caps(_OWN, _OWN_COUNTS) + wall() if user else []
            limits.associations[key] = _Association(
                account, user, key[2], _name(get("ParentAccount")),
                Budget(f"association ({label})", caps(_GROUP, _GROUP_COUNTS)),
                Budget(f"association ({label})", own))
        elif kind == "qos":
            limits.qos[qos_name] = Budget(
                f"QOS {qos_name}", caps(_GROUP + _OWN, _GROUP_COUNTS) + wall())
        elif kind in ("qos-account", "qos-user"):
            suffix = "PA" if kind == "qos-account" else "PU"
            who = f"account {sub}" if kind == "qos-account" else f"uid {sub}"
            table = limits.qos_accounts if kind == "qos-account" else limits.qos_users
            table[(qos_name, sub)] = Budget(
                f"QOS {qos_name} for {who}",
                caps(((f"MaxTRES{suffix}", "sum"),), ((f"MaxJobs{suffix}", "jobs"),)))
        record.clear()

    def get(key: str) -> str:
        return record.get(key, ("", 0))[0]

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
            named = stripped[len("QOS="):].split()
            if not named:
                raise BadLimits(number, "QOS record without a name")
            qos_name = _name(named[0])
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


#: who a job counts for: (account, user name, uid, partition, QOS)
Who = tuple[str, str, int | None, str, str]


def admit(jobs: Iterable[tuple[str, Demand, Who]], starting: Iterable[tuple[Demand, Who]],
          limits: Limits) -> dict[str, str]:
    """The waiting jobs a limit keeps out, each with why.

    ``jobs``: (id, demand, (account, user, uid, partition, QOS)) of the waiting jobs in the
    order the round would consider them (submission order); ``starting``: (demand, who) of
    the jobs gpufair released that Slurm has not started yet, which assoc_mgr does not count
    in use yet. A job is admitted while every limit it counts in has room for it, and then
    charged, so the jobs admitted together fit too. ``limits`` is left as it was."""
    groups: dict[Who, list[Budget]] = {}
    copies: dict[int, Budget] = {}      # charged: copies of those the jobs count in only

    def budgets(who: Who) -> list[Budget]:
        if who not in groups:
            groups[who] = [copies.setdefault(id(b), b.copy()) for b in limits.budgets(*who)]
        return groups[who]

    for demand, who in starting:
        for budget in budgets(who):
            budget.charge(demand)
    kept_out: dict[str, str] = {}
    for job_id, demand, who in jobs:
        mine = budgets(who)
        why = next((r for b in mine if (r := b.refuses(demand)) is not None), None)
        if why is not None:
            kept_out[job_id] = f"a Slurm limit forbids its start now: {why}"
            continue
        for budget in mine:
            budget.charge(demand)
    return kept_out


def demand(job: Job, info: SlurmJobInfo) -> Demand:
    """What Slurm counts of ``job`` against its limits: its TRES request as slurmctld holds
    it (``tres_req_str``; a TRES it prints in a form not known here is not counted), with
    its GPUs (and their type, if it asked one) as the model has them, whatever the string
    says; its nodes; its time limit."""
    tres: dict[str, int] = {}
    for item in info.tres_req.split(",") if info.tres_req else ():
        match = _REQUEST.match(item)
        if match is None:
            continue
        name, count, unit = match.groups()
        tres[name] = math.ceil(int(count) * _MB[unit]) if name == "mem" else int(count)
    tres["gres/gpu"] = job.gpus
    if info.gpu_type:
        tres[f"gres/gpu:{info.gpu_type}"] = job.gpus
    minutes = None if job.time_limit_s is None else job.time_limit_s / 60.0
    return Demand(tres, max(1, tres.get("node", info.node_count)), minutes)


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
    starting = [(demand(j, infos[j.id]), infos[j.id].counted_as) for j in state.jobs
                if j.state is JobState.RUNNING and j.id in infos
                and infos[j.id].raw_state == "PENDING"]
    waiting = [(j.id, demand(j, infos[j.id]), infos[j.id].counted_as) for j in state.jobs
               if j.state is JobState.PENDING and j.id in infos]
    kept_out = admit(waiting, starting, limits)
    if not kept_out:
        return state, ()
    return (state.with_jobs([j for j in state.jobs if j.id not in kept_out]),
            tuple((j, kept_out[j.id]) for j in state.jobs if j.id in kept_out))

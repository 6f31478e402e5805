"""Gandiva_fair (Chaudhary et al., EuroSys'20): ticket-weighted GPU time per user.

Each job lives on a server (a *home*; a multi-server job on several) chosen to even out the
ticket load per GPU; every quantum a central stride scheduler picks large jobs and per-server
aggregates, and each picked server runs gang-aware stride (Algorithm 1) over its own small
jobs. Migrations even out the loads (and move jobs to the GPU type where they progress best);
users trade GPU types at a second price. The spec is ``specs/gandiva_fair.md``; the choices
it leaves open are listed in ``docs/policies/gandiva_fair.md``.

A round that comes before the quantum is up keeps the quantum's selection and only fills GPUs
freed by jobs that ended (charged for the rest of the quantum). The quantum grows with what a
switch costs on the resource manager: at most ``max_switch_overhead`` of a quantum may go to
one stop-and-restart.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpufair.errors import InputError
from gpufair.model import (
    Assignment,
    ClusterState,
    Job,
    JobState,
    NodeState,
    Plan,
    Reason,
    node_of,
)
from gpufair.model.records import Figure
from gpufair.policy.base import PolicyBase, PolicyConfig
from gpufair.policy.gandiva_fair.pools import PoolView, spread
from gpufair.policy.gandiva_fair.stride import Entry, central_select, gang_stride, join_pass
from gpufair.policy.gandiva_fair.trading import (
    Trade,
    base_entitlements,
    replay,
    trade_round,
)
from gpufair.settings import setting

#: A step is due once this share of the quantum has passed: the artifact's rounds end at
#: their last job's finish, a hair before R.
_DUE = 0.95


@dataclass(frozen=True)
class GandivaFairOptions:
    quantum_s: float = setting(60.0, "time slice: each quantum the stride schedulers pick who"
                               " runs (paper: 1-2 minutes)", gt=0.0, le=86400.0)
    switch_cost_s: float | None = setting(
        None, "seconds one stop-and-restart costs a job on this resource manager; unset: the"
        " simulator's restart overhead in simulations, 0 on a live cluster (set it for"
        " requeue-based time slicing)", ge=0.0, le=86400.0)
    max_switch_overhead: float = setting(
        0.05, "the quantum is at least switch_cost_s / this: the share of a quantum one"
        " switch may cost", gt=0.0, le=1.0)
    tickets: Mapping[str, float] = setting(
        {}, "tickets per tenant (Slurm account or user); unlisted tenants: the resource"
        " manager's weight (1 by default)")
    balance_threshold: float = setting(
        0.10, "migrate between two servers of a type when their ticket loads per GPU differ"
        " by more than this share of the mean", ge=0.0, le=1e6)
    migrations_per_pool: int = setting(1, "load-balancing moves per GPU type per quantum",
                                       ge=0, le=1_000_000)
    hetero_threshold: float = setting(
        0.10, "move a job to another GPU type when its expected rate there is higher by more"
        " than this share (one move per quantum)", ge=0.0, le=1e6)
    type_moves_per_quantum: int = setting(
        1, "jobs moved to another GPU type per quantum, the largest gain first (the paper:"
        " one)", ge=0, le=1_000_000)
    migration_cooldown_quanta: int = setting(
        4, "a job that moved is not moved again for this many quanta (no ping-pong)",
        ge=0, le=1_000_000)
    trading: bool = setting(True, "users trade GPU types at a second price (needs 2+ users"
                            " with measured speeds on both types)")
    trade_threshold: float = setting(
        0.10, "trade only when the buyer's speedup beats the seller's by more than this"
        " share", ge=0.0, le=1e6)
    trade_migrations: bool = setting(
        True, "after a trade, move the buyer's jobs onto the fast type and the seller's onto"
        " the slow one until each has jobs for its new entitlement there (the paper's trade"
        " step); false: only the one heterogeneity move per quantum moves jobs between types")
    type_choice: str = setting(
        "user", "job: a job goes (and moves) to the type where its own expected rate is"
        " highest (the paper's rule); user: where its user's total rate gains most (keeps a"
        " user's slower entitlement in use)", choices=("job", "user"))
    gpu_rank: tuple[str, ...] = setting(
        (), "GPU types fastest first, to break ties; unlisted types rank below, by measured"
            " rates")


def _merged(before: list[str], now: dict, aside: dict) -> dict:
    """``now`` with the ``aside`` entries put back where they were in ``before``'s order."""
    out = {k: aside[k] if k in aside else now[k] for k in before if k in aside or k in now}
    for key, value in now.items():
        out.setdefault(key, value)
    return out


@dataclass
class Home:
    """Where a job lives: its GPU type's pool and its GPUs on each of its servers."""

    pool: str
    parts: dict[str, int]
    seq: int

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(self.parts)


def _one_server_holds(job: Job, servers: Sequence[str], caps: Mapping[str, int]) -> bool:
    """Whether one of the pool's servers the job may use has room for its whole gang."""
    allowed = None if job.allowed_nodes is None else set(job.allowed_nodes)
    return any(caps[s] >= job.gpus for s in servers if allowed is None or s in allowed)


class GandivaFairPolicy(PolicyBase):
    name = "gandiva_fair"
    Options = GandivaFairOptions

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        opts = self.options
        where = "policies.gandiva_fair"
        for tenant, value in opts.tickets.items():
            if not value > 0:
                raise InputError(self.config.options_source, "tickets must be > 0",
                                 field=f"{where}.tickets.{tenant}", value=value)
        if len(set(opts.gpu_rank)) != len(opts.gpu_rank):
            raise InputError(self.config.options_source, "a GPU type is listed twice",
                             field=f"{where}.gpu_rank", value=list(opts.gpu_rank))
        cost = opts.switch_cost_s if opts.switch_cost_s is not None else \
            (getattr(self.config, "preempt_cost_s", None) or 0.0)
        #: the quantum in force: the option, or longer when switching is expensive
        self.quantum_s = max(opts.quantum_s, cost / opts.max_switch_overhead)
        self._seq = 0
        self.home: dict[str, Home] = {}
        self.local_pass: dict[str, float] = {}
        self.central_pass: dict[str, float] = {}     # large jobs
        self.agg_pass: dict[str, float] = {}         # server -> its aggregate's pass
        self.agg_seq: dict[str, int] = {}
        self.selection: dict[str, tuple[str, ...]] = {}
        self.charged_aggs: set[str] = set()
        self.step_at: float | None = None
        self.moved_at: dict[str, float] = {}
        self.trades: list[Trade] = []
        self.trade_log: list[Trade] = []
        self.quanta = 0
        self.migrations = 0
        #: jobs set aside (absent, or their home's servers drained) since when: see _rest
        self.resting_since: dict[str, float] = {}

    # -- restart safety ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Homes, passes, the quantum's selection and its start, trades: a restarted daemon
        continues the same stride sequence instead of starting every pass again at 0."""
        return {
            "seq": self._seq,
            "home": {j: [h.pool, [[s, n] for s, n in h.parts.items()], h.seq]
                     for j, h in self.home.items()},
            "local_pass": dict(self.local_pass), "central_pass": dict(self.central_pass),
            "agg_pass": dict(self.agg_pass), "agg_seq": dict(self.agg_seq),
            "selection": {j: list(g) for j, g in self.selection.items()},
            "charged_aggs": sorted(self.charged_aggs), "step_at": self.step_at,
            "moved_at": dict(self.moved_at), "trades": [t.as_dict() for t in self.trades],
            "trade_log": [t.as_dict() for t in self.trade_log], "quanta": self.quanta,
            "migrations": self.migrations, "resting_since": dict(self.resting_since)}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        self._seq = int(data["seq"])
        self.home = {j: Home(str(p), {str(s): int(n) for s, n in parts}, int(q))
                     for j, (p, parts, q) in data["home"].items()}
        self.local_pass = {k: float(v) for k, v in data["local_pass"].items()}
        self.central_pass = {k: float(v) for k, v in data["central_pass"].items()}
        self.agg_pass = {k: float(v) for k, v in data["agg_pass"].items()}
        self.agg_seq = {k: int(v) for k, v in data["agg_seq"].items()}
        self.selection = {j: tuple(g) for j, g in data["selection"].items()}
        self.charged_aggs = set(data["charged_aggs"])
        self.step_at = None if data["step_at"] is None else float(data["step_at"])
        self.moved_at = {k: float(v) for k, v in data["moved_at"].items()}
        self.trades = [Trade.from_dict(t) for t in data["trades"]]
        self.trade_log = [Trade.from_dict(t) for t in data["trade_log"]]
        self.quanta = int(data["quanta"])
        self.migrations = int(data["migrations"])
        self.resting_since = {k: float(v) for k, v in data.get("resting_since", {}).items()}

    # -- the round --------------------------------------------------------------------------
    def schedule(self, state: ClusterState, now: float) -> Plan:
        jobs = {j.id: j for j in state.active_jobs()}
        layout = state.layout()
        caps = {s: len(g) for s, g in layout.gpus_of.items() if g}
        pool_servers = {t: [s for s in names if s in caps]
                        for t, names in layout.nodes_of.items()}
        pool_servers = {t: s for t, s in pool_servers.items() if s}
        resting = self._rest(state, jobs, pool_servers, caps, now)
        self._forget(jobs, resting)
        if not resting:
            return self._schedule(state, now, jobs, layout, caps, pool_servers)
        order = (list(self.home), list(self.selection))
        homes = {j: self.home.pop(j) for j in resting}
        chosen = {j: self.selection.pop(j) for j in resting if j in self.selection}
        for job_id in resting:
            jobs.pop(job_id, None)
        plan = self._schedule(state, now, jobs, layout, caps, pool_servers)
        # back as they were, in their places (dict order breaks ties), for the next round
        self.home = _merged(order[0], self.home, homes)
        self.selection = _merged(order[1], self.selection, chosen)
        others = plan.explain
        if others is None:
            return plan

        def explain() -> dict[str, Reason]:
            rest = {j: Reason("gandiva_fair.resting", {"pool": homes[j].pool})
                    for j in resting}
            return {**others(), **rest}
        return replace(plan, explain=explain)

    def _schedule(self, state: ClusterState, now: float, jobs: dict[str, Job], layout,
                  caps: dict[str, int], pool_servers: dict[str, list[str]]) -> Plan:
        users = sorted({j.tenant for j in jobs.values()})
        tickets = self._tickets(state, users)
        rank = self._rank(list(pool_servers), jobs.values())
        capacity = {t: sum(caps[s] for s in names) for t, names in pool_servers.items()}
        speedups = self._speedups(jobs.values(), rank, pool_servers)
        ent = base_entitlements(tickets, capacity) if users else {}
        kept, undone = replay(ent, self.trades, speedups)
        self.trades = kept
        self.trade_log += [Trade(now, t.fast, t.slow, t.buyer, t.seller, -t.price, True)
                           for t in undone]
        self._check_homes(jobs, pool_servers, caps)
        pools = self._pools(jobs, pool_servers, caps, users, ent)
        self._place_new(jobs, pools, rank, tickets)
        due = self.step_at is None or now < self.step_at or \
            now - self.step_at >= _DUE * self.quantum_s
        moved = traded = 0
        if due:
            moved = self._migrate(jobs, pools, rank, now)
            if self.options.trading and len(pools) > 1 and len(users) > 1:
                demand = {u: 0.0 for u in users}
                for job in jobs.values():
                    demand[job.tenant] += job.gpus
                made = trade_round(ent, speedups, demand, now, self.options.trade_threshold)
                self.trades += made
                self.trade_log += made
                traded = len(made)
                if made:   # tickets follow the entitlements at once
                    pools = self._pools(jobs, pool_servers, caps, users, ent)
                    if self.options.trade_migrations:
                        moved += self._follow_trades(jobs, pools, made, ent, now)
            self._step(state, jobs, pools, now)
        else:
            self._continue(state, jobs, pools, now)
        order = list(self.selection) + sorted(
            (j for j in jobs if j not in self.selection and j in self.home),
            key=lambda j: self.home[j].seq)
        assignments = tuple(Assignment(j, self.selection[j]) for j in self.selection)
        what = f"quantum {self.quanta}" if due else "fill"
        return Plan(assignments=assignments,
                    priorities={j: -float(i) for i, j in enumerate(order)},
                    reason=f"gandiva_fair: {what}, {len(assignments)} jobs run, {moved} moved,"
                           f" {traded} trades, quantum {self.quantum_s:g} s",
                    explain=lambda: self._explain(jobs, tickets, set(self.selection)))

    def _explain(self, jobs: Mapping[str, Job], tickets: Mapping[str, float],
                 selected: set[str]) -> dict[str, Reason]:
        """Gandiva_fair's terms: the user's tickets, the job's stride pass in its GPU type's
        pool (the lowest passes run this quantum), and the user's standing GPU trades."""
        out = {}
        for job_id, job in jobs.items():
            home = self.home.get(job_id)
            if home is None:
                out[job_id] = Reason("gandiva_fair.no_pool", {"tickets": tickets[job.tenant]})
                continue
            stride_pass = self.local_pass.get(job_id, self.central_pass.get(job_id))
            figures: dict[str, Figure] = {"tickets": tickets[job.tenant], "pool": home.pool}
            if stride_pass is not None:
                figures["pass"] = round(stride_pass, 4)
            trades = sum(job.tenant in (t.buyer, t.seller) for t in self.trades)
            if trades:
                figures["trades"] = trades
            out[job_id] = Reason("gandiva_fair.stride_selected" if job_id in selected
                                 else "gandiva_fair.stride_waiting", figures)
        return out

    # -- users, types, speeds ---------------------------------------------------------------
    def _tickets(self, state: ClusterState, users: list[str]) -> dict[str, float]:
        weights = {t.name: t.weight for t in state.tenants}
        out = {}
        for user in users:
            value = self.options.tickets.get(user, weights.get(user, 1.0))
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InputError("snapshot", "a tenant's tickets (weight) must be a finite"
                                 " number > 0", field=f"tenants.{user}.weight", value=value)
            out[user] = float(value)
        return out

    def _rank(self, types: list[str], jobs) -> dict[str, int]:
        """Higher is faster: the option's order first, then the mean measured speed
        relative to each job's best type, then the name."""
        speed = {t: 0.0 for t in types}
        for job in jobs:
            rates = {t: job.rate(t) for t in types}
            best = max(rates.values(), default=0.0)
            if best > 0:
                for t, r in rates.items():
                    speed[t] += r / best
        listed = {t: len(self.options.gpu_rank) - i for i, t in enumerate(self.options.gpu_rank)}
        order = sorted(types, key=lambda t: (listed.get(t, 0), speed[t], t))
        return {t: i for i, t in enumerate(order)}

    def _speedups(self, jobs, rank: Mapping[str, int], pool_servers
                  ) -> dict[tuple[str, str], dict[str, float]]:
        """Per (fast, slow) type pair, each user's mean measured speedup fast/slow over its
        jobs with a rate on both (the profiler's measurements, never a declaration)."""
        if not self.options.trading or len(pool_servers) < 2:
            return {}
        types = sorted(pool_servers, key=lambda t: -rank[t])
        sums: dict[tuple[str, str], dict[str, list[float]]] = {}
        for job in jobs:
            rates = {t: job.rate(t) for t in types}
            for i, fast in enumerate(types):
                for slow in types[i + 1:]:
                    if rates[fast] > 0 and rates[slow] > 0:
                        acc = sums.setdefault((fast, slow), {}).setdefault(job.tenant, [0, 0])
                        acc[0] += rates[fast] / rates[slow]
                        acc[1] += 1
        return {pair: {u: s / n for u, (s, n) in by_user.items()}
                for pair, by_user in sums.items()}

    # -- homes ------------------------------------------------------------------------------
    def _forget(self, jobs: Mapping[str, Job], resting: set[str]) -> None:
        for table in (self.home, self.local_pass, self.central_pass, self.selection,
                      self.moved_at):
            for key in [k for k in table if k not in jobs and k not in resting]:
                del table[key]

    def _rest(self, state: ClusterState, jobs: Mapping[str, Job], pool_servers, caps,
              now: float) -> set[str]:
        """Homed jobs set aside for this round, their home, pass and selection kept: a job
        absent from the snapshot (not ended: a resource manager's job it released and has
        yet to start, say) or whose home's servers are drained for now (a requeue settling
        there). For at most one quantum: then it is gone (or placed again) as before.

        Without this a job Slurm was slow to start came back as a newcomer, at the
        minimum pass: more than its tickets' share."""
        resting: set[str] = set()
        ended: set[str] | None = None       # read only when needed: this runs every round
        drained: dict[str, int] | None = None
        for job_id, home in self.home.items():
            job = jobs.get(job_id)
            out = [] if job is None else [s for s in home.parts if s not in caps]
            if job is None:
                if ended is None:
                    ended = {j.id for j in state.jobs if not j.state.active}
                aside = job_id not in ended
            elif not out:
                aside = False
            else:   # usable but for its drained servers
                if drained is None:
                    drained = {n.name: len(n.gpu_ids()) for n in state.nodes
                               if n.state is NodeState.DRAIN}
                aside = all(s in drained for s in out) and self._usable(
                    job, home.pool, home.parts,
                    {home.pool: [*pool_servers.get(home.pool, ()), *out]},
                    {**caps, **{s: drained[s] for s in out}})
            since = self.resting_since.get(job_id, now)
            if aside and now - since < self.quantum_s:
                resting.add(job_id)
                self.resting_since[job_id] = since
        if len(self.resting_since) != len(resting):
            self.resting_since = {j: t for j, t in self.resting_since.items() if j in resting}
        return resting

    @staticmethod
    def _usable(job: Job, pool: str, parts: Mapping[str, int], pool_servers, caps) -> bool:
        names = set(pool_servers.get(pool, ()))
        return bool(parts) and all(s in names and n <= caps[s] for s, n in parts.items()) \
            and job.rate(pool) > 0 and sum(parts.values()) == job.gpus \
            and (job.allowed_nodes is None or set(parts) <= set(job.allowed_nodes))

    def _check_homes(self, jobs, pool_servers, caps) -> None:
        """Jobs whose home went away (server down, type no longer allowed) are placed
        again; a job first seen running keeps the servers it runs on when it may."""
        for job_id, home in list(self.home.items()):
            if not self._usable(jobs[job_id], home.pool, home.parts, pool_servers, caps):
                self._unhome(job_id)
        type_by_node = {s: t for t, names in pool_servers.items() for s in names}
        for job in jobs.values():
            if job.id in self.home or not job.gpus_held:
                continue
            parts: dict[str, int] = {}
            for gpu in job.gpus_held:
                parts[node_of(gpu)] = parts.get(node_of(gpu), 0) + 1
            kinds = {type_by_node.get(s) for s in parts}
            if len(kinds) != 1 or None in kinds:
                continue
            pool = kinds.pop()
            # a gang split over servers when one would hold it is placed afresh (a split
            # home would block all its servers each quantum it runs)
            # (asked only of a split gang: a scan of the pool per running job cost a site of
            # 2,500 running jobs seconds, issue 30)
            if (len(parts) == 1 or job.nodes == len(parts)
                    or not _one_server_holds(job, pool_servers[pool], caps)) and \
                    self._usable(job, pool, parts, pool_servers, caps):
                self._make_home(job.id, pool, parts)

    def _make_home(self, job_id: str, pool: str, parts: dict[str, int]) -> None:
        self.home[job_id] = Home(pool, parts, self._seq)
        self._seq += 1

    def _unhome(self, job_id: str) -> None:
        self.home.pop(job_id, None)
        self.local_pass.pop(job_id, None)
        self.central_pass.pop(job_id, None)
        self.selection.pop(job_id, None)

    def _pools(self, jobs, pool_servers, caps, users, ent) -> dict[str, PoolView]:
        pools = {t: PoolView(t, names, {s: caps[s] for s in names}, users,
                             {u: ent[u][t] for u in users})
                 for t, names in pool_servers.items()}
        for job_id, home in self.home.items():
            job = jobs[job_id]
            pools[home.pool].add(job.tenant, home.parts)
        return pools

    def _place_new(self, jobs, pools: dict[str, PoolView], rank,
                   tickets: Mapping[str, float]) -> None:
        """Algorithm 2: the user with the fewest GPUs placed per ticket goes first (its
        earliest job); the job goes to the type where it would progress fastest (measured
        rate x expected share of time there), onto that type's least ticket-loaded
        servers."""
        queues: dict[str, deque[Job]] = {}
        for job in sorted(jobs.values(), key=lambda j: (j.arrival_s, j.id)):
            if job.id not in self.home:
                queues.setdefault(job.tenant, deque()).append(job)
        placed = {u: 0.0 for u in queues}
        rates = self._user_rates(jobs) if self._by_user and queues else {}
        for job_id in self.home:
            if jobs[job_id].tenant in placed:
                placed[jobs[job_id].tenant] += jobs[job_id].gpus
        # the next user by (GPUs placed per ticket, its earliest job's arrival, name): a heap,
        # as only the user served changes its key (a min over every user per job cost a
        # site of 7,000 waiting jobs and 200 users seconds, issue 30); names are unique, so
        # the order is the one min() gave
        turn = [(placed[u] / tickets[u], q[0].arrival_s, u) for u, q in queues.items()]
        heapq.heapify(turn)
        while turn:
            user = heapq.heappop(turn)[2]
            job = queues[user].popleft()
            if not queues[user]:
                del queues[user]
            if self._place_one(job, user, pools, rank, rates):
                placed[user] += job.gpus
            if user in queues:
                heapq.heappush(turn, (placed[user] / tickets[user],
                                      queues[user][0].arrival_s, user))

    def _place_one(self, job: Job, user: str, pools: dict[str, PoolView], rank,
                   rates: dict[str, dict[str, float]]) -> bool:
        """The job onto the type where it would progress fastest, onto that type's least
        ticket-loaded servers; False when no type can ever hold it (it waits: larger than
        the cluster)."""
        best = None
        totals = rates.setdefault(user, {})
        for name, pool in pools.items():
            choice = self._prospect(job, pool)
            if choice is None:
                continue
            share, servers = choice
            value = job.rate(name) * share
            if self._by_user:
                value = pool.fraction(user, job.gpus) * (totals.get(name, 0.0) +
                                                         job.rate(name)) - \
                    pool.fraction(user) * totals.get(name, 0.0)
            key = (value, rank[name])
            if best is None or key > best[0]:
                best = (key, name, servers)
        if best is None:
            return False
        _, name, servers = best
        parts = spread(job, servers, pools[name].caps)
        self._make_home(job.id, name, parts)
        pools[name].add(job.tenant, parts)
        totals[name] = totals.get(name, 0.0) + job.rate(name)
        return True

    @property
    def _by_user(self) -> bool:
        return self.options.type_choice == "user"

    def _user_rates(self, jobs) -> dict[str, dict[str, float]]:
        """User -> pool -> the sum of the measured rates of its jobs homed there."""
        out: dict[str, dict[str, float]] = {}
        for job_id, home in self.home.items():
            job = jobs[job_id]
            mine = out.setdefault(job.tenant, {})
            mine[home.pool] = mine.get(home.pool, 0.0) + job.rate(home.pool)
        return out

    def _prospect(self, job: Job, pool: PoolView) -> tuple[float, tuple[str, ...]] | None:
        """(expected share of time, servers) if the job joined this pool now: its user's
        tickets per GPU over the load of the servers it would get."""
        if job.rate(pool.name) <= 0 or job.gpus > pool.capacity:
            return None
        per_gpu = pool.with_job(job.tenant, job.gpus)
        loads = pool.loads(per_gpu)
        servers = pool.choose(job, loads)
        if servers is None:
            return None
        mine = per_gpu[pool.user_index[job.tenant]]
        parts = spread(job, servers, pool.caps)
        after = max(loads[pool.index[s]] + n * mine / pool.caps[s] for s, n in parts.items())
        return min(1.0, mine / after if after > 0 else 1.0), servers

    # -- migration --------------------------------------------------------------------------
    def _movable(self, job_id: str, now: float) -> bool:
        last = self.moved_at.get(job_id)
        return last is None or now - last >= self.options.migration_cooldown_quanta * \
            self.quantum_s * _DUE

    def _move(self, job: Job, pools, to_pool: str, servers: tuple[str, ...], now: float
              ) -> None:
        home = self.home[job.id]
        pools[home.pool].add(job.tenant, home.parts, -1)
        seq = home.seq
        self._unhome(job.id)
        parts = spread(job, servers, pools[to_pool].caps)
        self.home[job.id] = Home(to_pool, parts, seq)
        pools[to_pool].add(job.tenant, parts)
        self.moved_at[job.id] = now
        self.migrations += 1

    def _migrate(self, jobs, pools: dict[str, PoolView], rank, now: float) -> int:
        moved = 0
        if len(pools) > 1:
            for _ in range(self.options.type_moves_per_quantum):
                if not self._migrate_type(jobs, pools, rank, now):
                    break
                moved += 1
        for pool in pools.values():
            for _ in range(self.options.migrations_per_pool):
                if not self._balance(jobs, pool, pools, now):
                    break
                moved += 1
        return moved

    def _migrate_type(self, jobs, pools, rank, now: float) -> int:
        """At most one job per quantum moves to the type where its expected rate is higher
        by more than the threshold: the largest gain wins."""
        per_gpu = {n: p.per_gpu() for n, p in pools.items()}
        loads = {n: p.loads(per_gpu[n]) for n, p in pools.items()}
        cache: dict[tuple[str, int, str], tuple[float, tuple[str, ...]] | None] = {}
        totals = self._user_rates(jobs) if self._by_user else {}
        best = None
        for job_id, home in sorted(self.home.items(), key=lambda kv: kv[1].seq):
            job = jobs[job_id]
            if not self._movable(job_id, now):
                continue
            pool = pools[home.pool]
            mine = per_gpu[home.pool][pool.user_index[job.tenant]]
            load = max(loads[home.pool][pool.index[s]] for s in home.servers)
            here = job.rate(home.pool) * min(1.0, mine / load if load > 0 else 1.0)
            plain = job.allowed_nodes is None and job.nodes is None
            for name, other in pools.items():
                if name == home.pool or job.rate(name) <= 0:
                    continue   # (the cache below is per user and size, not per job)
                key = (job.tenant, job.gpus, name)
                if plain and key in cache:
                    found = cache[key]
                else:
                    found = self._prospect(job, other)
                    if plain:
                        cache[key] = found
                if found is None:
                    continue
                if self._by_user:
                    gain = self._user_gain(job, pool, other, totals[job.tenant])
                else:
                    there = job.rate(name) * found[0]
                    gain = there / here - 1 if here > 0 else math.inf
                if gain > self.options.hetero_threshold and \
                        (best is None or (gain, rank[name]) > best[0]):
                    best = ((gain, rank[name]), job, name, found[1])
        if best is None:
            return 0
        _, job, name, servers = best
        self._move(job, pools, name, servers, now)
        return 1

    def _follow_trades(self, jobs, pools: dict[str, PoolView], made: list[Trade],
                       ent: Mapping[str, Mapping[str, float]], now: float) -> int:
        """The paper's trade step: "then jobs for the seller and buyer are migrated to the
        traded GPUs". The buyer's jobs move onto the fast type and the seller's onto the
        slow one until each has jobs enough there for its new entitlement, taken from the
        types where it has jobs beyond its entitlement. Without this only the one
        heterogeneity move per quantum moves jobs between types, so a trader's jobs stay
        where they were homed before the trade; the GPUs it bought, with no job of its own
        on them, went as bonus share to whoever had jobs there (issue 36: the simulated
        gains of the paper's experiment followed where jobs were homed, not the trades)."""
        moved = 0
        for trade in made:
            for user, dst in ((trade.buyer, trade.fast), (trade.seller, trade.slow)):
                moved += self._fill_entitlement(jobs, pools, user, dst, ent[user], now)
        return moved

    def _fill_entitlement(self, jobs, pools: dict[str, PoolView], user: str, dst: str,
                          entitled: Mapping[str, float], now: float) -> int:
        """Move ``user``'s jobs onto ``dst`` while its jobs there ask for fewer GPUs than it
        is entitled to: each from the type where it has most GPUs of jobs beyond its
        entitlement (and at least the job's own), the smallest job that is not running
        first, then the oldest."""
        target = pools[dst]
        column = target.user_index[user]
        moved = 0
        while target.demands()[column] < entitled.get(dst, 0.0) - 1e-9:
            best = None
            for job_id, home in self.home.items():
                job = jobs[job_id]
                if job.tenant != user or home.pool == dst or job.rate(dst) <= 0 or \
                        not self._movable(job_id, now):
                    continue
                src = pools[home.pool]
                surplus = src.demands()[src.user_index[user]] - \
                    entitled.get(home.pool, 0.0)
                if surplus < job.gpus - 1e-9:
                    continue
                key = (-surplus, bool(job.gpus_held), job.gpus, home.seq)
                if best is None or key < best[0]:
                    best = (key, job)
            if best is None:
                break
            found = self._prospect(best[1], target)
            if found is None:
                break
            self._move(best[1], pools, dst, found[1], now)
            moved += 1
        return moved

    @staticmethod
    def _user_gain(job: Job, src: PoolView, dst: PoolView, totals: Mapping[str, float]
                   ) -> float:
        """The change of the user's total rate (sum over its jobs of measured rate x share
        of time) if ``job`` moved from ``src`` to ``dst``, in units of the job's rate there:
        a move pays when it adds at least ``hetero_threshold`` of one job running there."""
        user, size = job.tenant, job.gpus
        here, there = totals.get(src.name, 0.0), totals.get(dst.name, 0.0)
        before = src.fraction(user) * here + dst.fraction(user) * there
        after = src.fraction(user, -size) * (here - job.rate(src.name)) + \
            dst.fraction(user, size) * (there + job.rate(dst.name))
        return (after - before) / job.rate(dst.name)

    def _balance(self, jobs, pool: PoolView, pools, now: float) -> bool:
        """One small job from the most to the least ticket-loaded server, when their gap
        exceeds the threshold and the move narrows it."""
        if len(pool.servers) < 2:
            return False
        per_gpu = pool.per_gpu()
        loads = pool.loads(per_gpu)
        mean = float(loads.mean())
        src = int(np.argmax(loads))
        dst = int(np.argmin(loads))
        gap = float(loads[src] - loads[dst])
        if mean <= 0 or gap <= self.options.balance_threshold * mean:
            return False
        src_name, dst_name = pool.servers[src], pool.servers[dst]
        best = None
        for job_id, home in self.home.items():
            if home.pool != pool.name or home.servers != (src_name,):
                continue
            job = jobs[job_id]
            if job.nodes or not self._movable(job_id, now) or \
                    job.gpus > pool.caps[dst_name] or \
                    (job.allowed_nodes is not None and dst_name not in job.allowed_nodes):
                continue
            weight = job.gpus * per_gpu[pool.user_index[job.tenant]]
            after = abs((loads[src] - weight / pool.cap[src]) -
                        (loads[dst] + weight / pool.cap[dst]))
            if after >= gap - 1e-12:
                continue
            key = (round(after, 12), bool(job.gpus_held), job.gpus, home.seq)
            if best is None or key < best[0]:
                best = (key, job)
        if best is None:
            return False
        self._move(best[1], pools, pool.name, (dst_name,), now)
        return True

    # -- the stride schedulers --------------------------------------------------------------
    def _entries(self, jobs, pool: PoolView) -> tuple[list[Entry], dict[str, list[Entry]]]:
        """The pool's central entries (large jobs, server aggregates) and each server's small
        jobs, with strides from this round's tickets; newcomers join at the minimum pass."""
        per_gpu = pool.per_gpu()
        small: dict[str, list[Entry]] = {}
        large: list[Entry] = []
        for job_id, home in self.home.items():
            if home.pool != pool.name:
                continue
            job = jobs[job_id]
            mine = per_gpu[pool.user_index[job.tenant]]
            stride = 1.0 / mine if mine > 0 else math.inf
            if len(home.servers) == 1:
                small.setdefault(home.servers[0], []).append(
                    Entry(job_id, job.gpus, stride, self.local_pass.get(job_id), home.seq))
            else:
                large.append(Entry(job_id, job.gpus, stride, self.central_pass.get(job_id),
                                   home.seq, home.servers))
        for entries in small.values():
            floor = join_pass(e.pass_ for e in entries if e.pass_ is not None)
            for e in entries:
                if e.pass_ is None:
                    e.pass_ = floor
                    self.local_pass[e.key] = floor
        for server in [s for s in self.agg_pass if s in pool.index and s not in small]:
            del self.agg_pass[server]     # no small jobs left: it joins afresh later
        central = large + [
            Entry(s, 0, pool.caps[s] / sum(e.size / e.stride for e in entries),
                  self.agg_pass.get(s), self._agg_seq(s), (s,), aggregate=True)
            for s, entries in small.items()]
        floor = join_pass(e.pass_ for e in central if e.pass_ is not None)
        for e in central:
            if e.pass_ is None:
                e.pass_ = floor
                (self.agg_pass if e.aggregate else self.central_pass)[e.key] = floor
        return central, small

    def _agg_seq(self, server: str) -> int:
        if server not in self.agg_seq or server not in self.agg_pass:
            self.agg_seq[server] = self._seq
            self._seq += 1
        return self.agg_seq[server]

    @staticmethod
    def _blocked(jobs) -> set[str]:
        """GPUs that suspended jobs still hold (Slurm keeps them allocated): nobody else may
        use them; the suspended job itself resumes on them (see :meth:`_free_for`)."""
        return {g for j in jobs.values() if j.state is JobState.SUSPENDED for g in j.gpus_held}

    @staticmethod
    def _free_for(job: Job, used: set[str]) -> set[str]:
        """What ``job`` may not take: everything used, except the GPUs it holds suspended."""
        if job.state is JobState.SUSPENDED and job.gpus_held:
            return used - set(job.gpus_held)
        return used

    def _gpus_for(self, job: Job, home: Home, pool: PoolView, used: set[str],
                  gpus_of: Mapping[str, tuple[str, ...]], type_of,
                  selected: tuple[str, ...] = ()) -> tuple[str, ...] | None:
        """The GPUs ``job`` runs on this quantum: those it holds (or, not started yet, those
        it was ``selected`` for) when they still fit its home, else free ones there."""
        parts = home.parts
        held = tuple(job.gpus_held) or tuple(selected)
        on = {s: sum(1 for g in held if node_of(g) == s) for s in parts}
        if held and len(held) == job.gpus and on == parts and not used.intersection(held) \
                and all(g in type_of for g in held):
            return held
        if job.state is JobState.SUSPENDED and held:
            return None   # resumes only where it is
        gpus: list[str] = []
        for server, count in parts.items():
            free = [g for g in gpus_of[server] if g not in used]
            if len(free) < count:
                return None
            gpus += free[:count]
        out = tuple(gpus)
        return out if job.placement_problem(out, type_of) is None else None

    def _step(self, state: ClusterState, jobs, pools, now: float) -> None:
        """A new quantum: central picks, then Algorithm 1 on each picked server; passes
        move only for what really got GPUs."""
        layout = state.layout()
        running_on, self.selection = self.selection, {}
        self.charged_aggs = set()
        used = self._blocked(jobs)
        for pool in pools.values():
            central, small = self._entries(jobs, pool)
            picks: list[tuple[Entry, Entry | None]] = []    # (job entry, its aggregate)
            for entry in central_select(central, pool.servers):
                if entry.aggregate:
                    server = entry.key
                    local = gang_stride(small[server], pool.caps[server], charge=0)
                    picks += [(e, entry) for e in local]
                else:
                    picks.append((entry, None))
            # the jobs of the last selection go first, on the GPUs they were given, so those
            # are reserved before a newly picked job takes a server's first free ones: moving
            # a running job to other GPUs of its own server costs a requeue on Slurm and buys
            # nothing. (The selection, not what the snapshot shows held: a job Slurm has yet
            # to start holds nothing there, and must be placed as if it had started. The
            # order of the passes' and strides' accounting below does not matter.)
            picks.sort(key=lambda pick: pick[0].key not in running_on)
            for entry, agg in picks:
                job = jobs[entry.key]
                gpus = self._gpus_for(job, self.home[job.id], pool, self._free_for(job, used),
                                      layout.gpus_of, layout.type_of,
                                      running_on.get(job.id, ()))
                if gpus is None:
                    continue
                used.update(gpus)
                self.selection[job.id] = gpus
                if agg is None:
                    self.central_pass[entry.key] += entry.stride
                else:
                    self.local_pass[entry.key] += entry.stride
                    if agg.key not in self.charged_aggs:
                        self.agg_pass[agg.key] += agg.stride
                        self.charged_aggs.add(agg.key)
        self.step_at = now
        self.quanta += 1

    def _continue(self, state: ClusterState, jobs, pools, now: float) -> None:
        """Between quanta: the selection runs on; GPUs freed by jobs that ended go to the
        small jobs of their server (Algorithm 1 on the free GPUs), charged for the rest of
        the quantum."""
        layout = state.layout()
        rest = max(0.0, min(1.0, (self.step_at + self.quantum_s - now) / self.quantum_s))
        kept: dict[str, tuple[str, ...]] = {}
        used = self._blocked(jobs)
        for job_id, gpus in self.selection.items():
            home = self.home.get(job_id)
            if home is None:
                continue
            job = jobs[job_id]
            if set(gpus) == set(job.gpus_held) and \
                    not self._free_for(job, used).intersection(gpus):
                mine: tuple[str, ...] | None = tuple(gpus)
            else:
                mine = self._gpus_for(job, home, pools[home.pool], self._free_for(job, used),
                                      layout.gpus_of, layout.type_of)
            if mine is None:
                continue
            used.update(mine)
            kept[job_id] = mine
        self.selection = kept
        if rest <= 0:
            return
        for pool in pools.values():
            central, small = self._entries(jobs, pool)
            aggs = {e.key: e for e in central if e.aggregate}
            for server, entries in small.items():
                free = sum(1 for g in layout.gpus_of[server] if g not in used)
                waiting = [e for e in entries if e.key not in kept]
                if free <= 0 or not waiting:
                    continue
                for entry in gang_stride(waiting, free, charge=0):
                    job = jobs[entry.key]
                    gpus = self._gpus_for(job, self.home[job.id], pool,
                                          self._free_for(job, used), layout.gpus_of,
                                          layout.type_of)
                    if gpus is None:
                        continue
                    used.update(gpus)
                    self.selection[job.id] = gpus
                    self.local_pass[entry.key] += entry.stride * rest
                    agg = aggs[server]
                    if agg.key not in self.charged_aggs:
                        self.agg_pass[agg.key] += agg.stride * rest
                        self.charged_aggs.add(agg.key)

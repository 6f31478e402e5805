"""One GPU type's pool of servers: ticket load per GPU (eq. 2) and where a job would go.

Servers hold one GPU type each, so every type is its own pool with its own tickets (the
user's entitlement to that type) and its own split stride scheduler. A pool view is rebuilt
each round from the policy's record of where jobs live; nothing in it is policy state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from gpufair.model import Job
from gpufair.policy.gandiva_fair.tickets import water_fill

#: Tickets of a user who has jobs in a pool but no entitlement there (it sold it): enough
#: to be scheduled when nobody entitled wants the GPUs (bonus share), never before them.
NO_ENTITLEMENT = 1e-9


def spread(job: Job, servers: Sequence[str], caps: Mapping[str, int]) -> dict[str, int]:
    """How many of the job's GPUs go on each of its servers: equal parts when the job asks
    for a node count, else each server filled in turn."""
    if job.nodes:
        return {s: job.gpus // job.nodes for s in servers}
    out, left = {}, job.gpus
    for s in servers:
        take = min(caps[s], left)
        if take:
            out[s] = take
        left -= take
    return out


class PoolView:
    """Loads and tickets of one pool for one round."""

    def __init__(self, name: str, servers: Sequence[str], caps: Mapping[str, int],
                 users: Sequence[str], entitlement: Mapping[str, float]) -> None:
        self.name = name
        self.servers = list(servers)
        self.index = {s: i for i, s in enumerate(self.servers)}
        self.caps = dict(caps)
        self.cap = np.array([caps[s] for s in self.servers], dtype=float)
        self.capacity = int(self.cap.sum())
        self.users = list(users)
        self.user_index = {u: i for i, u in enumerate(self.users)}
        self.weights = np.array([max(entitlement.get(u, 0.0), NO_ENTITLEMENT)
                                 for u in self.users])
        self._weight_list = self.weights.tolist()
        self.gpus = np.zeros((len(self.servers), len(self.users)))   # GPUs by server, user
        # its column sums, kept as GPUs are added: whole numbers, so exactly what summing
        # the matrix gives, without a pass over every server at each prospect (issue 30)
        self._demand = np.zeros(len(self.users))
        self._fractions: dict[tuple[str, int], float] = {}
        self._masks: dict[tuple[str, ...] | None, np.ndarray] = {}

    def add(self, user: str, parts: Mapping[str, int], sign: int = 1) -> None:
        self._fractions.clear()
        column = self.user_index[user]
        for server, count in parts.items():
            self.gpus[self.index[server], column] += sign * count
            self._demand[column] += sign * count

    def demands(self) -> np.ndarray:
        """GPUs of demand per user (a fresh array: callers change it)."""
        return self._demand.copy()

    def _present(self, demands: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
        """(demand, tickets) of the users with demand here, in user order: water_fill's
        arguments, built from lists rather than one numpy scalar per user."""
        users, weights, values = self.users, self._weight_list, demands.tolist()
        index = np.flatnonzero(demands > 0).tolist()
        return {users[i]: values[i] for i in index}, {users[i]: weights[i] for i in index}

    def per_gpu(self, demands: np.ndarray | None = None) -> np.ndarray:
        """Eq. (1) with effective tickets: each user's water-filled tickets over its demand
        in this pool (0 for users without demand here)."""
        demands = self.demands() if demands is None else demands
        present, weights = self._present(demands)
        if not present:
            return np.zeros(len(self.users))
        _, effective = water_fill(float(self.capacity), weights, present)
        out = np.zeros(len(self.users))
        for u, t in effective.items():
            out[self.user_index[u]] = t / present[u]
        return out

    def fraction(self, user: str, delta: int = 0) -> float:
        """The share of time the user's jobs here would run if its demand changed by
        ``delta`` GPUs: its water-filled GPUs over its demand (servers balanced)."""
        key = (user, delta)
        if key not in self._fractions:
            demands = self.demands()
            demands[self.user_index[user]] += delta
            mine = float(demands[self.user_index[user]])
            if mine <= 0:
                self._fractions[key] = 0.0
            else:
                present, weights = self._present(demands)
                share, _ = water_fill(float(self.capacity), weights, present)
                self._fractions[key] = min(1.0, share[user] / mine)
        return self._fractions[key]

    def loads(self, per_gpu: np.ndarray) -> np.ndarray:
        """Eq. (2) for every server."""
        return self.gpus @ per_gpu / self.cap

    def with_job(self, user: str, size: int) -> np.ndarray:
        """Tickets per GPU if ``user`` had ``size`` more GPUs of demand here (eq. 1 changes
        for all of its jobs when one arrives)."""
        demands = self.demands()
        demands[self.user_index[user]] += size
        return self.per_gpu(demands)

    def _allowed(self, nodes: tuple[str, ...] | None) -> np.ndarray:
        """Which of the pool's servers a job restricted to ``nodes`` may use, as a mask;
        kept per distinct restriction (a site's jobs share a few: partitions, features),
        where a set per job and a scan of every server per placement cost 10,000 jobs
        seconds (issue 30)."""
        mask = self._masks.get(nodes)
        if mask is None:
            if nodes is None:
                mask = np.ones(len(self.servers), dtype=bool)
            else:
                allowed = set(nodes)
                mask = np.array([s in allowed for s in self.servers], dtype=bool)
            self._masks[nodes] = mask
        return mask

    def choose(self, job: Job, loads: np.ndarray) -> tuple[str, ...] | None:
        """The least ticket-loaded servers the job may use (Algorithm 2 lines 9-11): one
        that holds the whole gang if any, else the k least loaded whose GPUs add up to it;
        with a node count, that many servers with room for an equal part each."""
        usable = self._allowed(job.allowed_nodes)
        if job.nodes:
            if job.gpus % job.nodes:
                return None
            fit = np.flatnonzero(usable & (self.cap >= job.gpus // job.nodes))
            if len(fit) < job.nodes:
                return None
            # the least loaded first, ties in server order (a stable sort of ascending
            # indices): what filtering the stable order of every server gave
            best = fit[np.argsort(loads[fit], kind="stable")[:job.nodes]]
            return tuple(self.servers[i] for i in best.tolist())
        whole = usable & (self.cap >= job.gpus)
        if whole.any():   # the least loaded that holds it, the first on a tie
            return (self.servers[int(np.argmin(np.where(whole, loads, np.inf)))],)
        order = [self.servers[i] for i in np.argsort(loads, kind="stable").tolist()
                 if usable[i]]   # ties: server order
        chosen, total = [], 0
        for s in order:
            chosen.append(s)
            total += self.caps[s]
            if total >= job.gpus:
                return tuple(chosen)
        return None

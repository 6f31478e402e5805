"""One GPU type's pool of servers: ticket load per GPU (eq. 2) and where a job would go.

Servers hold one GPU type each, so every type is its own pool with its own tickets (the
user's entitlement to that type) and its own split stride scheduler. A pool view is rebuilt
each round from the policy's record of where jobs live; nothing in it is policy state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from gpufair.model import Job
from gpufair.policy.gandiva_fair.tickets import water_fill_arrays

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
        self.gpus = np.zeros((len(self.servers), len(self.users)))   # GPUs by server, user
        # its column sums, kept as GPUs are added: whole numbers, so exactly what summing
        # the matrix gives, without a pass over every server at each prospect (issue 30)
        self._demand = np.zeros(len(self.users))
        self._filled: dict[tuple[str | None, int], tuple[np.ndarray, np.ndarray, float]] = {}
        self._masks: dict[tuple[str, ...] | None, np.ndarray] = {}

    def add(self, user: str, parts: Mapping[str, int], sign: int = 1) -> None:
        self._filled.clear()
        column = self.user_index[user]
        for server, count in parts.items():
            self.gpus[self.index[server], column] += sign * count
            self._demand[column] += sign * count

    def demands(self) -> np.ndarray:
        """GPUs of demand per user (a fresh array: callers change it)."""
        return self._demand.copy()

    def _fill(self, user: str | None = None, delta: int = 0
              ) -> tuple[np.ndarray, np.ndarray, float]:
        """(demands, water-filled share, level) if ``user``'s demand changed by ``delta``
        GPUs; kept until the pool changes, as a placement asks for the same fill twice
        (the prospect's loads and the user's share of time)."""
        key = (user, delta) if delta else (None, 0)
        found = self._filled.get(key)
        if found is None:
            demands = self.demands()
            if key[0] is not None:
                demands[self.user_index[user]] += delta
            share, level = water_fill_arrays(float(self.capacity), self.weights, demands)
            found = self._filled[key] = (demands, share, level)
        return found

    def per_gpu(self) -> np.ndarray:
        """Eq. (1) with effective tickets: each user's water-filled tickets over its demand
        in this pool (0 for users without demand here)."""
        return self._per_gpu(*self._fill())

    @staticmethod
    def _per_gpu(demands: np.ndarray, share: np.ndarray, level: float) -> np.ndarray:
        out = np.zeros(len(demands))
        present = demands > 0
        out[present] = share[present] / level / demands[present]
        return out

    def fraction(self, user: str, delta: int = 0) -> float:
        """The share of time the user's jobs here would run if its demand changed by
        ``delta`` GPUs: its water-filled GPUs over its demand (servers balanced)."""
        column = self.user_index[user]
        mine = float(self._demand[column] + delta)
        if mine <= 0:
            return 0.0
        _, share, _ = self._fill(user, delta)
        return min(1.0, float(share[column]) / mine)

    def loads(self, per_gpu: np.ndarray) -> np.ndarray:
        """Eq. (2) for every server."""
        return self.gpus @ per_gpu / self.cap

    def with_job(self, user: str, size: int) -> np.ndarray:
        """Tickets per GPU if ``user`` had ``size`` more GPUs of demand here (eq. 1 changes
        for all of its jobs when one arrives)."""
        return self._per_gpu(*self._fill(user, size))

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

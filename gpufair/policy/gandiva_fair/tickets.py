"""Tickets: user -> job -> GPU (Gandiva_fair eqs. 1-3) and the bonus share of users who cannot
use theirs (water-filling, the paper's "weight readjustment" of Chandra & Shenoy).

All functions are generic in the number type, so tests can pass ``Fraction`` and check the
paper's numbers exactly; the policy passes floats.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)


def water_fill(capacity: float, weights: Mapping[K, float], demands: Mapping[K, float]
               ) -> tuple[dict[K, float], dict[K, float]]:
    """(share, effective tickets) per user: weighted max-min fairness with demand caps.

    Users are taken in order of demand per ticket; one whose demand fits under its share of
    what is left is satisfied and leaves with its tickets, the rest split the remainder in
    ticket proportion (the paper's "satisfy such users first, remove them, recalculate the
    weights and iterate"). Effective tickets are ``share / level``: unchanged for users who can
    use their share, smaller for the capped ones, so eq. (1) charges them only for what they
    use and their servers do not look loaded with tickets nobody spends.
    """
    users = [u for u in weights if demands.get(u, 0) > 0]
    if any(weights[u] <= 0 for u in users):
        raise ValueError("every user with demand needs tickets > 0")
    order = sorted(users, key=lambda u: demands[u] / weights[u])
    share: dict[K, float] = {}
    left = capacity
    tickets_left = sum((weights[u] for u in users), 0 * capacity)
    level = None
    for index, user in enumerate(order):
        if demands[user] * tickets_left <= left * weights[user]:
            share[user] = demands[user]
            left -= demands[user]
            tickets_left -= weights[user]
            continue
        level = left / tickets_left
        for rest in order[index:]:
            share[rest] = level * weights[rest]
        break
    if level is None:   # everybody satisfied: the smallest level that still satisfies all
        level = max((demands[u] / weights[u] for u in users), default=1)
    return share, {u: share[u] / level for u in users}


def water_fill_arrays(capacity: float, weights: np.ndarray, demands: np.ndarray
                      ) -> tuple[np.ndarray, float]:
    """:func:`water_fill` over float arrays, to the bit: (share per entry, level).

    The policy water-fills each pool several times per job it places (a prospect per type,
    and the user's share with and without the job); over 200 users and 7,000 waiting jobs
    the dicts and the per-user loop cost seconds (issue 30). Entries with demand ≤ 0 are not
    users (share 0). The same IEEE operations in the same order: users by demand per ticket
    (a stable sort, ties in entry order), the capacity and tickets left subtracted one user
    at a time (``ufunc.accumulate`` is sequential), the tickets summed by Python's ``sum``
    in entry order as :func:`water_fill` does; effective tickets are then ``share / level``.
    """
    present = np.flatnonzero(demands > 0)
    share = np.zeros(len(demands))
    if not len(present):
        return share, 1.0
    wanted, tickets = demands[present], weights[present]
    if not np.all(tickets > 0):
        raise ValueError("every user with demand needs tickets > 0")
    order = np.argsort(wanted / tickets, kind="stable")
    wanted_o, tickets_o = wanted[order], tickets[order]
    left = np.subtract.accumulate(np.concatenate(([float(capacity)], wanted_o)))[:-1]
    tickets_left = np.subtract.accumulate(
        np.concatenate(([sum(tickets.tolist(), 0.0)], tickets_o)))[:-1]
    fits = wanted_o * tickets_left <= left * tickets_o
    out = wanted_o.copy()
    if fits.all():   # everybody satisfied: the smallest level that still satisfies all
        level = float(np.max(wanted / tickets))
    else:
        first = int(np.argmin(fits))
        level = float(left[first] / tickets_left[first])
        out[first:] = level * tickets_o[first:]
    share[present[order]] = out
    return share, level


def tickets_per_gpu(tickets: Mapping[K, float], demands: Mapping[K, float]) -> dict[K, float]:
    """Eq. (1): a user's tickets spread over the GPUs its jobs ask for."""
    return {u: tickets[u] / demands[u] for u in tickets if demands.get(u, 0) > 0}


def job_tickets(per_gpu: float, size: int) -> float:
    """Eq. (3)."""
    return per_gpu * size


def load_per_gpu(resident: Mapping[str, tuple[float, int]], gpus: int) -> float:
    """Eq. (2) for one server: ``resident`` maps each job to (its user's tickets per GPU,
    the job's GPUs *on this server*) — a job spanning servers loads each with its part."""
    return sum(per_gpu * here for per_gpu, here in resident.values()) / gpus

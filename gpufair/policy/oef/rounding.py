"""The placer's rounding (spec §4.4-4.5): fractional shares to whole GPUs, round by round.

Each round every GPU goes whole to one (virtual) tenant; the fractional share x is realised
over time by carrying the deviation ``dev += x - real`` into the next round (paper §4.3).
Rounding each entry on its own can hand out more GPUs than exist (three tenants of 1/3 of one
GPU all round up once their deviation reaches 2/3), so each type is apportioned as a whole:
floors of x + dev first, the rest to the largest remainders (ties: larger deviation, then
the tenant's order), never more than the type has.

Small shares: a tenant whose whole-GPU total is below its smallest job's gang gets nothing
this round (its deviation grows until it can run a job, which is the paper's anti-starvation
rule), and the GPUs it gives back go, one at a time, to the tenant furthest below its share on
that type, charged through its deviation so long-run shares stay right.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Slack under which x + dev counts as reaching the next whole GPU (float noise only).
EPS = 1e-9


def apportion(values: np.ndarray, dev: np.ndarray, total: int) -> np.ndarray:
    """Whole numbers ≥ 0 summing to ``total`` that follow ``values`` (x + dev) as closely as
    floors and largest remainders can; ``dev`` breaks ties, then the row order.

    Negative values count as 0; if the rest sum to more than ``total`` (which only clamping
    negatives can cause) they are shrunk in proportion first, so no loop ever takes GPUs
    back one at a time.
    """
    n = len(values)
    if n == 0 or total <= 0:
        return np.zeros(n, dtype=np.int64)
    target = np.maximum(values, 0.0)
    if target.sum() > total:
        target = target * (total / target.sum())
    real = np.floor(target + EPS).astype(np.int64)
    real = np.minimum(real, total)
    order = np.arange(n)
    while (short := total - int(real.sum())) > 0:
        pick = np.lexsort((order, -dev, -(target - real)))[:short]
        real[pick] += 1
    return real


class Rounder:
    """Carried deviation per (virtual tenant, GPU type): the policy state that must survive a
    restart, or shares drift each time the daemon comes back."""

    def __init__(self) -> None:
        self.dev: dict[str, dict[str, float]] = {}
        self._pending: tuple[list[str], list[str], np.ndarray, np.ndarray] = (
            [], [], np.zeros((0, 0)), np.zeros((0, 0)))

    def state_dict(self) -> dict[str, Any]:
        return {"dev": {k: dict(v) for k, v in self.dev.items()}}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        self.dev = {str(k): {str(t): float(d) for t, d in v.items()}
                    for k, v in data["dev"].items()}

    def _deviations(self, keys: Sequence[str], types: Sequence[str]) -> np.ndarray:
        """dev as a matrix for these tenants; a departed tenant's deviation is dropped and
        each type re-centred to sum 0 (so the others' long-run shares stay balanced)."""
        departed = set(self.dev) - set(keys)
        dev = np.array([[self.dev.get(key, {}).get(t, 0.0) for t in types] for key in keys],
                       dtype=float).reshape(len(keys), len(types))
        if departed and len(keys):
            dev -= dev.mean(axis=0, keepdims=True)
        return dev

    def round(self, keys: Sequence[str], types: Sequence[str], ideal: np.ndarray,
              capacity: Sequence[int], usable: np.ndarray, min_demand: Sequence[int],
              *, settle: bool = True) -> np.ndarray:
        """Whole GPUs per (tenant, type) for one round.

        ``ideal`` n x k fractional shares, ``usable`` which types a tenant can run on (a
        released GPU only goes to a tenant that can use it), ``min_demand`` each tenant's
        smallest gang. ``settle``: charge the result as given at once; otherwise the caller
        charges what the tenants could use with :meth:`settle`.
        """
        n, k = len(keys), len(types)
        dev = self._deviations(keys, types)
        values = ideal + dev
        real = np.zeros((n, k), dtype=np.int64)
        for j in range(k):
            rows = np.flatnonzero(usable[:, j])   # a GPU only for a tenant that can use it
            total = min(int(capacity[j]), max(0, math.floor(values[rows, j].sum() + EPS)))
            real[rows, j] = apportion(values[rows, j], dev[rows, j], total)
        need = np.asarray(min_demand, dtype=np.int64)
        starved = (real.sum(axis=1) < need) & (real.sum(axis=1) > 0)
        if starved.any():
            released = real[starved].sum(axis=0)
            real[starved] = 0
            order = np.arange(n)
            for j in range(k):
                takers = np.flatnonzero(~starved & usable[:, j])
                for _ in range(int(released[j]) if takers.size else 0):
                    gap = values[takers, j] - real[takers, j]
                    best = takers[np.lexsort((order[takers], -dev[takers, j], -gap))[0]]
                    real[best, j] += 1
        self._pending = (list(keys), list(types), ideal, dev)
        if settle:
            self.settle(real)
        return real

    def settle(self, charged: np.ndarray) -> None:
        """``dev += x − charged`` for the round just dealt, re-centred per type to sum 0.

        ``charged`` is what each tenant got and could use. A tenant whose gangs did not fit
        the whole GPUs it was dealt (they were split over types) is charged only what ran,
        so it is owed the rest; re-centring keeps the deviations bounded however long that
        lasts (what one is owed, the others owe together).
        """
        keys, types, ideal, dev = self._pending
        new_dev = dev + ideal - charged
        if len(keys):
            new_dev -= new_dev.mean(axis=0, keepdims=True)
        self.dev = {key: {t: float(new_dev[i, j]) for j, t in enumerate(types)}
                    for i, key in enumerate(keys)}

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
    floors and largest remainders can; ``dev`` breaks ties, then the row order."""
    n = len(values)
    real = np.maximum(0, np.floor(values + EPS)).astype(np.int64)
    order = np.arange(n)
    while real.sum() > total:   # clamped negatives can push the floors over the total
        over = real.sum() - total
        remainder = values - real
        cand = np.flatnonzero(real > 0)
        pick = cand[np.lexsort((-order[cand], dev[cand], remainder[cand]))][:over]
        real[pick] -= 1
    short = total - int(real.sum())
    if short > 0:
        remainder = values - real
        pick = np.lexsort((order, -dev, -remainder))[:short]
        real[pick] += 1
        short = total - int(real.sum())
        while short > 0:   # only when total > n + Σ floors: cannot happen for Σx = total
            pick = np.lexsort((order, -dev, -(values - real)))[:short]
            real[pick] += 1
            short = total - int(real.sum())
    return real


class Rounder:
    """Carried deviation per (virtual tenant, GPU type): the policy state that must survive a
    restart, or shares drift each time the daemon comes back."""

    def __init__(self) -> None:
        self.dev: dict[str, dict[str, float]] = {}

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
              capacity: Sequence[int], usable: np.ndarray, min_demand: Sequence[int]
              ) -> np.ndarray:
        """Whole GPUs per (tenant, type) for one round, and the deviations carried on.

        ``ideal`` n x k fractional shares, ``usable`` which types a tenant can run on (a
        released GPU only goes to a tenant that can use it), ``min_demand`` each tenant's
        smallest gang.
        """
        n, k = len(keys), len(types)
        dev = self._deviations(keys, types)
        values = ideal + dev
        real = np.zeros((n, k), dtype=np.int64)
        for j in range(k):
            total = min(int(capacity[j]), max(0, math.floor(values[:, j].sum() + EPS)))
            real[:, j] = apportion(values[:, j], dev[:, j], total)
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
        new_dev = dev + ideal - real
        self.dev = {key: {t: float(new_dev[i, j]) for j, t in enumerate(types)}
                    for i, key in enumerate(keys)}
        return real

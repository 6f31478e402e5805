"""Measured strategy-proofness of the partial-allocation auction on small random instances.

PA is strategy-proof for *divisible* goods and *homogeneous* valuations (Cole et al.);
THEMIS applies it to indivisible GPUs and to ρ-based valuations that are neither homogeneous
(the elapsed-time term, the demand cap, a non-zero value for the empty bundle) nor divisible.
So the property is measured, not assumed: for one app of each instance, brute-force a grid of
misreported ρ tables (class-wise scalings plus the paper's §6.3 slowdown lies) through the
exhaustive PA and compare its *true* utility with the truthful outcome's, under three readings
of "getting c_i of a bundle": divisible (value interpolated between the empty row and the
bundle), stochastic rounding (exact expectation over the two legal sizes) and floor rounding.

Instances: 3 apps on 2 machines × 2 GPUs; app i has elapsed e, serial work W, demand cap d,
cross-machine slowdown S, so ρ(k GPUs) = (e + W·S/min(k, d)) / T_id, and an empty row
ρ_old = (e + D + W/min(d, 4)) / T_id (served D seconds later, the policy's default reading).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gpufair.policy.themis.auction import Bid, BidRow, partial_allocation

_ROOT = ("type", "gpu")
_MACHINES = (("machine", "m0"), ("machine", "m1"))
CAPACITY: Mapping[tuple, int] = {_ROOT: 4, _MACHINES[0]: 2, _MACHINES[1]: 2}
_FACTORS = (0.6, 1.0, 1.6)
_STRUCTURED = (0.1, 0.2, 0.34, 0.5, 1.0)


@dataclass(frozen=True)
class SpApp:
    elapsed: float
    work: float
    demand: int
    s_cross: float
    delay: float
    t_id: float

    def rho(self, k: int, cross: bool) -> float:
        if k == 0:
            return (self.elapsed + self.delay + self.work / min(self.demand, 4)) / self.t_id
        slow = self.s_cross if cross and k > 1 else 1.0
        return (self.elapsed + self.work * slow / min(k, self.demand)) / self.t_id


def random_app(rng: random.Random) -> SpApp:
    work = rng.uniform(500, 8000)
    return SpApp(elapsed=rng.uniform(0, 3000), work=work, demand=rng.choice((1, 2, 4)),
                 s_cross=rng.choice((1.0, 1.1, 1.3)), delay=rng.uniform(300, 1200),
                 t_id=work * rng.uniform(1.0, 4.0))


def _rows(app: SpApp) -> list[tuple[str, int, tuple, bool]]:
    """(class, size, pool, cross) of each row: packed 2-GPU rows per machine, the rest
    anywhere (valued cross-machine, the conservative reading of a pool row)."""
    rows = [("k1", 1, _ROOT, False)]
    for k in range(2, min(app.demand, 4) + 1):
        rows.append(("cross", k, _ROOT, True))
        if k == 2 and app.s_cross > 1.0:
            rows += [("local", 2, m, False) for m in _MACHINES]
    return rows


def make_bid(name: str, app: SpApp, scale: Mapping[str, float] | None = None) -> Bid:
    scale = scale or {}
    rows = tuple(BidRow({pool: k} if pool == _ROOT else {pool: k, _ROOT: k}, k,
                        app.rho(k, cross) * scale.get(cls, 1.0), (cls, pool, cross))
                 for cls, k, pool, cross in _rows(app))
    return Bid(name, app.rho(0, False) * scale.get("old", 1.0), rows)


def misreports() -> list[dict[str, float]]:
    """Class-wise scalings of the table, and the paper's slowdown lies by X%."""
    classes = ("old", "k1", "local", "cross")
    out = [dict(zip(classes, f, strict=True)) for f in itertools.product(_FACTORS, repeat=4)]
    for x in _STRUCTURED:
        out += [{"cross": 1 + x}, {"local": 1 - x}]
    return out


def utilities(app: SpApp, row: BidRow | None, c: float) -> dict[str, float]:
    """The liar's true utility (1/ρ) of receiving c of ``row`` under each reading."""
    v_old = 1.0 / app.rho(0, False)
    if row is None:
        return dict.fromkeys(("divisible", "stochastic", "floor"), v_old)
    _, pool, cross = row.tag
    n = row.gpus

    def value(k: int) -> float:
        return v_old if k == 0 else max(v_old, 1.0 / app.rho(k, cross and pool == _ROOT))

    target = c * n
    lo, hi = int(np.floor(target + 1e-12)), int(np.ceil(target - 1e-12))
    p = target - lo if hi > lo else 0.0
    return {"divisible": v_old + c * (value(n) - v_old),
            "stochastic": p * value(hi) + (1 - p) * value(lo),
            "floor": value(lo)}


@dataclass(frozen=True)
class SpReport:
    instances: int
    misreports: int
    rate: dict[str, float]  # share of instances where some misreport pays
    mean_gain: dict[str, float]  # mean best relative gain over paying instances
    max_gain: dict[str, float]


def measure(instances: int = 200, seed: int = 0, apps: int = 3) -> SpReport:
    rng = random.Random(seed)
    lies = misreports()
    kinds = ("divisible", "stochastic", "floor")
    gains: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(instances):
        population = [random_app(rng) for _ in range(apps)]
        names = [f"a{i}" for i in range(apps)]
        truthful = [make_bid(n, a) for n, a in zip(names, population, strict=True)]
        liar = population[0]

        def outcome(bids: list[Bid], liar: SpApp = liar) -> dict[str, float]:
            res = partial_allocation(bids, CAPACITY, brute_force=True)
            return utilities(liar, res.chosen["a0"], res.c["a0"])

        honest = outcome(truthful)
        best = dict.fromkeys(kinds, 0.0)
        for lie in lies:
            got = outcome([make_bid("a0", liar, lie), *truthful[1:]])
            for k in kinds:
                best[k] = max(best[k], (got[k] - honest[k]) / honest[k])
        for k in kinds:
            gains[k].append(best[k])
    rate = {k: float(np.mean([g > 1e-9 for g in gains[k]])) for k in kinds}
    paying = {k: [g for g in gains[k] if g > 1e-9] for k in kinds}
    return SpReport(instances, len(lies), rate,
                    {k: float(np.mean(paying[k])) if paying[k] else 0.0 for k in kinds},
                    {k: float(max(gains[k])) for k in kinds})

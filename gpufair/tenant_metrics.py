"""Tenant-level throughput and fairness of a run, for any policy (OEF promises these).

A ledger of intervals during which each job ran on g GPUs of one type (or waited). From it:

* **normalized throughput** (OEF paper §6, spec §5.5): a job on g GPUs of type j counts
  g · rate_j(g) / rate_ref(g) *slowest-GPU equivalents*, ref the slowest type, so jobs of
  very different absolute speeds add up; the cluster's time average is the efficiency figure;
  (as allocated); the *actual* figure counts the iterations the jobs trained instead, in the
  same units, so restart overheads lower it;
* **sharing incentive (SI)**: a tenant's normalized throughput over the intervals it was
  active, against what an equal 1/n partition of every type (n tenants active then) would
  have given it, capped at its demand (the GPUs its active jobs can use) and taken on its
  best types first — long-run, since one round's whole GPUs cannot match a fraction;
* **envy-freeness (EF)**: for tenants l, i active together, l's value of i's GPUs (the best
  D_l of them by l's speedups, D_l its demand) against l's own, summed over those intervals.

A tenant's speedup for a type is the gang-weighted mean over its active jobs. All of this
reads the jobs' measured rates only, never a policy's internal view, so it can judge any
policy the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gpufair.model import Job

#: Relative shortfall / excess below which SI and EF count as met (rounding noise).
SLACK = 0.05


def normalized_speedups(job: Job, types: Sequence[str], reference: str) -> np.ndarray:
    """rate_j(g) / rate_ref(g) per type at the job's gang size (its slowest positive rate
    stands in when it has none on the reference type); 0 where it cannot run."""
    rates = np.array([job.rate(t) for t in types], dtype=float)
    base = job.rate(reference)
    if not base > 0:
        positive = rates[rates > 0]
        base = float(positive.min()) if positive.size else 1.0
    return rates / base


def _best_value(speed: np.ndarray, bundle: np.ndarray, demand: float,
                order: np.ndarray | None = None) -> float:
    """Value of up to ``demand`` GPUs of ``bundle`` taken on the types ``speed`` rates best
    (``order``: those types, best first, when the caller has them already)."""
    value, left = 0.0, demand
    for j in np.argsort(-speed, kind="stable") if order is None else order:
        take = min(left, bundle[j])
        value += take * speed[j]
        left -= take
        if left <= 0:
            break
    return value


@dataclass
class TenantLedger:
    types: tuple[str, ...]
    reference: str
    busy_s: float = 0.0
    work: float = 0.0   # Σ dt · normalized throughput of the cluster (GPUs as allocated)
    done: float = 0.0   # iterations done, in slowest-GPU seconds (restarts cost here)
    got: dict[str, float] = field(default_factory=dict)
    si_ref: dict[str, float] = field(default_factory=dict)
    own_pair: dict[tuple[str, str], float] = field(default_factory=dict)
    other_pair: dict[tuple[str, str], float] = field(default_factory=dict)
    #: job id -> (throughput profile, gang, allowed types, normalized speedups): a job's
    #: speedups change only with those, and reading them again for every job at every event
    #: was a sixth of a 50-tenant simulation
    _speedups: dict[str, tuple[object, int, object, np.ndarray]] = field(
        default_factory=dict, repr=False, compare=False)

    def speedups(self, job: Job) -> np.ndarray:
        """:func:`normalized_speedups` of ``job``, kept while its rates stay the same."""
        kept = self._speedups.get(job.id)
        if kept is not None and kept[0] is job.throughput and kept[1] == job.gpus and \
                kept[2] == job.gpu_types:
            return kept[3]
        w = normalized_speedups(job, self.types, self.reference)
        self._speedups[job.id] = (job.throughput, job.gpus, job.gpu_types, w)
        return w

    def add(self, dt: float, jobs: Sequence[Job], running: Mapping[str, str],
            capacity: Mapping[str, int]) -> None:
        """``jobs`` active during ``dt``; ``running`` job id → the type it ran on."""
        if dt <= 0 or not jobs:
            return
        k = len(self.types)
        # sums of a few floats per tenant, kept in Python floats (numpy's per-call cost on
        # 3-element arrays was most of a 50-tenant run's ledger); the same additions in the
        # same order, so the same figures to the last bit
        sums: dict[str, list[float]] = {}
        gangs: dict[str, float] = {}
        bundle: dict[str, np.ndarray] = {}
        rate: dict[str, float] = {}
        for job in jobs:
            w = self.speedups(job)
            acc = sums.get(job.tenant)
            if acc is None:
                acc = sums[job.tenant] = [0.0] * k
                bundle[job.tenant] = np.zeros(k)
                rate[job.tenant] = 0.0
            g = job.gpus
            for i, x in enumerate(w.tolist()):
                acc[i] += g * x
            gangs[job.tenant] = gangs.get(job.tenant, 0.0) + g
            on = running.get(job.id)
            if on is not None:
                j = self.types.index(on)
                bundle[job.tenant][j] += g
                rate[job.tenant] += g * w[j]
        speed = {t: np.array(acc) for t, acc in sums.items()}
        tenants = sorted(speed)
        m = np.array([capacity.get(t, 0) for t in self.types], dtype=float)
        self.busy_s += dt
        for tenant in tenants:
            speed[tenant] /= gangs[tenant]
            self.work += dt * rate[tenant]
            self.got[tenant] = self.got.get(tenant, 0.0) + dt * rate[tenant]
            share = _best_value(speed[tenant], m / len(tenants), gangs[tenant])
            self.si_ref[tenant] = self.si_ref.get(tenant, 0.0) + dt * share
        holding = {b for b in tenants if bundle[b].any()}
        for a in tenants:
            order = np.argsort(-speed[a], kind="stable")
            for b in tenants:
                if a != b:
                    key = (a, b)
                    self.own_pair[key] = self.own_pair.get(key, 0.0) + dt * rate[a]
                    # a tenant holding no GPUs is worth nothing to another (most of them,
                    # with 50 tenants on 24 GPUs)
                    value = _best_value(speed[a], bundle[b], gangs[a], order) \
                        if b in holding else 0.0
                    self.other_pair[key] = self.other_pair.get(key, 0.0) + dt * value

    def add_progress(self, job: Job, iterations: float) -> None:
        """``iterations`` the job trained since last told: actual work, counted as the
        seconds its gang of the slowest type would have needed (x gang size), so that
        restart overheads and idle starts show, unlike in the allocated figure."""
        base = job.rate(self.reference)
        if not base > 0:
            rates = [r for r in (job.rate(t) for t in self.types) if r > 0]
            base = min(rates, default=0.0)
        if base > 0 and iterations > 0:
            self.done += iterations / base * job.gpus

    def summary(self) -> dict[str, float]:
        """Cluster throughput (busy-time mean), SI and EF as ratios and violation counts."""
        si = {t: self.got[t] / self.si_ref[t] for t in self.got if self.si_ref[t] > 0}
        envy = {k: self.other_pair[k] / self.own_pair[k] if self.own_pair[k] > 0 else
                (np.inf if self.other_pair[k] > 0 else 1.0) for k in self.own_pair}
        return {
            "throughput": self.work / self.busy_s if self.busy_s else float("nan"),
            "actual": self.done / self.busy_s if self.busy_s else float("nan"),
            "tenants": float(len(self.got)),
            "si_min": min(si.values(), default=float("nan")),
            "si_violations": float(sum(r < 1 - SLACK for r in si.values())),
            "ef_max": max(envy.values(), default=float("nan")),
            "ef_violations": float(sum(r > 1 + SLACK for r in envy.values())),
            "pairs": float(len(envy)),
        }

"""The AFS policy: one AFS allocation per GPU type, AFS-P's run counters, a resize cap.

Each round (and each event) the shares are recomputed from scratch, as the paper does at
every churn event:

1. *pools*: AFS is defined for one homogeneous pool (spec §7). Each job is put in the pool
   of the type it runs on now (moving costs a restart), else of the type where its first
   rung is fastest. After one allocation per pool, a pool left with idle GPUs is allocated
   again with the jobs that got nothing in their own pool and can run there, so that a
   crowded type does not leave another idle.
2. *allocation*: Algorithm 1 (``afs_l``: remaining iterations known) or the length-unaware
   ``afs_p``: with more jobs than GPUs it shares GPUs by run counters (one unit of
   ``unit_s`` of wall time each, non-preemptive within a unit), otherwise rule (3) both
   ways with seeded coin flips. Ladders respect min/max GPUs, measured counts and network
   packing (:mod:`gpufair.policy.afs.ladder`).
3. *reconfiguration cap*: when more running jobs would change size than
   ``max_resizes_per_round``, the smallest changes are held at their current size and the
   allocation is run again around them, until the rest fit the cap.
4. *placement*: :func:`gpufair.policy.afs.placement.place_pool`.

State that must survive a restart: each job's run seconds and the end of its current
quantum (AFS-P), and the time of the last call; see :meth:`AfsPolicy.state_dict`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpufair.errors import InputError
from gpufair.model import Assignment, ClusterState, Job, JobState, Plan, Reason
from gpufair.model.records import Figure
from gpufair.policy.afs.allocation import (
    AFS_L,
    AFS_P,
    Allocation,
    Rung,
    allocate,
    processor_sharing,
)
from gpufair.policy.afs.ladder import job_bounds, ladder, packing_sizes
from gpufair.policy.afs.placement import place_pool
from gpufair.policy.base import PolicyBase, PolicyConfig
from gpufair.settings import setting

STATE_SOURCE = "afs policy state"


@dataclass(frozen=True)
class AfsOptions:
    mode: str = setting(AFS_P, "afs_l: remaining iterations known (Algorithm 1); afs_p: "
                        "lengths unknown (rule (3) both ways, run counters when jobs > GPUs)",
                        choices=(AFS_L, AFS_P))
    unit_s: float = setting(7200.0, "AFS-P's unit of run time (the paper's 2 h at full scale;"
                            " scale it with the workload)", gt=0)
    network_packing: bool = setting(True, "elastic shares only of sizes 1, 2, ... below the "
                                    "GPUs per server and multiples of it (CoDDL, App. E)")
    max_resizes_per_round: int | None = setting(
        None, "most running jobs whose GPU count may change in one decision (unset: no cap)",
        ge=0)


@dataclass
class _Pool:
    gpu_type: str
    gpus: int
    sizes: frozenset[int] | None
    jobs: list[tuple[Job, Rung]]


class AfsPolicy(PolicyBase):
    name = "afs"
    Options = AfsOptions

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        self.run_s: dict[str, float] = {}        # wall seconds each job held >= 1 GPU
        self.quantum_end_s: dict[str, float] = {}  # AFS-P: run_s at which its unit ends
        self.last_s: float | None = None
        # per decision: each job's rungs by GPU type, and its place in the scan order
        self._rungs: dict[str, dict[str, Rung]] = {}
        self._scan: dict[str, int] = {}

    # -- persistence ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"run_s": dict(sorted(self.run_s.items())),
                "quantum_end_s": dict(sorted(self.quantum_end_s.items())),
                "last_s": self.last_s}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        if not isinstance(data, Mapping):
            raise InputError(STATE_SOURCE, "expected an object", value=data)
        run = _seconds_map(data.get("run_s", {}), "run_s")
        quantum = _seconds_map(data.get("quantum_end_s", {}), "quantum_end_s")
        last = data.get("last_s")
        if last is not None and (isinstance(last, bool) or not isinstance(last, (int, float))
                                 or not math.isfinite(last)):
            raise InputError(STATE_SOURCE, "expected a finite number or null", field="last_s",
                             value=last)
        self.run_s, self.quantum_end_s = run, quantum
        self.last_s = None if last is None else float(last)

    # -- one decision ----------------------------------------------------------------------
    def schedule(self, state: ClusterState, now: float) -> Plan:
        active = [j for j in state.active_jobs()]
        self._account(state, now)
        active.sort(key=lambda j: (j.arrival_s, j.id))   # the scan order (spec §2.7)
        pools, current = self._pools(state, active)
        self._scan = {j.id: i for i, j in enumerate(active)}
        rng = self._rng(active)
        counts = self._allocate_all(pools, active, current, rng, {})
        cap = self.options.max_resizes_per_round
        if cap is not None:
            counts = self._cap_resizes(pools, active, current, counts, cap)
        assignments: list[Assignment] = []
        layout = state.layout()
        by_id = {j.id: j for j in active}
        for gpu_type, wanted in _by_type(counts).items():
            placed = place_pool(layout, gpu_type,
                                [(by_id[k], c) for k, c in wanted.items() if c > 0])
            assignments += [Assignment(k, placed[k]) for k in wanted if k in placed]
        order = {a.job_id: i for i, a in enumerate(assignments)}
        ranked = sorted(active, key=lambda j: (order.get(j.id, len(order)), j.arrival_s, j.id))
        rungs = self._rungs
        return Plan(tuple(assignments),
                    priorities={j.id: -float(rank) for rank, j in enumerate(ranked)},
                    reason=f"afs ({self.options.mode}): {len(assignments)} jobs, "
                           f"{sum(len(a.gpu_ids) for a in assignments)} GPUs",
                    explain=lambda: _explain(active, counts, rungs))

    def _rng(self, active: list[Job], pinned: Mapping[str, object] | None = None
             ) -> random.Random:
        """AFS-P's coins, seeded by the seed and the jobs decided on (not the clock): the
        same jobs give the same decision, so a dry run of a saved snapshot shows exactly
        what the daemon decides for them, whenever either runs."""
        key = ",".join(j.id for j in active) + "|" + ",".join(sorted(pinned or {}))
        return random.Random(f"{self.config.seed}:{key}")

    def _account(self, state: ClusterState, now: float) -> None:
        """Run time since the last call for every job holding GPUs (counted once per job,
        whatever its share); forget jobs that left the snapshot."""
        elapsed = 0.0 if self.last_s is None else max(0.0, now - self.last_s)
        present = set()
        for job in state.jobs:
            present.add(job.id)
            if job.state is JobState.RUNNING and job.gpus_held:
                self.run_s[job.id] = self.run_s.get(job.id, 0.0) + elapsed
        for gone in set(self.run_s) - present:
            del self.run_s[gone]
        for gone in set(self.quantum_end_s) - present:
            del self.quantum_end_s[gone]
        self.last_s = now if self.last_s is None else max(self.last_s, now)

    def _pools(self, state: ClusterState, active: list[Job]
               ) -> tuple[dict[str, _Pool], dict[str, tuple[str, int]]]:
        """The pools, each job's rungs on every type, and what each job runs on now."""
        layout = state.layout()
        pools: dict[str, _Pool] = {}
        for gpu_type in state.gpu_type_names():
            size = state.gpu_count(gpu_type)
            per_node = layout.biggest.get(gpu_type, 0)
            sizes = packing_sizes(per_node, size) if self.options.network_packing \
                and per_node else None
            pools[gpu_type] = _Pool(gpu_type, size, sizes, [])
        self._rungs = {}
        current: dict[str, tuple[str, int]] = {}
        claimed = dict.fromkeys(pools, 0)
        order = {t: i for i, t in enumerate(pools)}
        # the types with a node each restriction allows: a site's jobs share a few
        # restrictions (partitions, features), and a set of every job's nodes per type cost
        # 10,000 jobs seconds (issue 30)
        reachable: dict[tuple[str, ...], set[str]] = {}
        for job in active:
            rungs = {}
            allowed = job.allowed_nodes
            if allowed is not None and allowed not in reachable:
                nodes = set(allowed)
                reachable[allowed] = {t for t in pools
                                      if layout.node_sets.get(t, frozenset()) & nodes}
            for gpu_type, pool in pools.items():
                if allowed is not None and gpu_type not in reachable[allowed]:
                    continue
                rung = ladder(job, gpu_type, pool.gpus, pool.sizes)
                if rung is not None:
                    rungs[gpu_type] = rung
            self._rungs[job.id] = rungs
            types = {layout.type_of.get(g) for g in job.gpus_held}
            here = types.pop() if len(types) == 1 and job.state is JobState.RUNNING else None
            if here is not None and here in rungs:
                current[job.id] = (here, len(job.gpus_held))
            if not rungs:
                continue
            # home: where it runs; else the type where its first rung is fastest, and on a
            # tie the one with the most GPUs not yet claimed by first rungs (spreads jobs
            # of equal rates over the types instead of crowding the first)
            home = here if here in rungs else max(
                rungs, key=lambda t: (rungs[t].rates[0], pools[t].gpus - claimed[t],
                                      -order[t]))
            claimed[home] += rungs[home].counts[0]
            pools[home].jobs.append((job, rungs[home]))
        return pools, current

    def _allocate_all(self, pools: dict[str, _Pool], active: list[Job],
                      current: dict[str, tuple[str, int]], rng: random.Random,
                      pinned: dict[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
        """Job id → (GPU type, count) for every job given GPUs. Pinned jobs keep their
        (type, count) and take no part in the allocation: they are never eligible, so the
        scan would never pick them."""
        out: dict[str, tuple[str, int]] = dict(pinned)
        spare: dict[str, int] = {}
        for pool in pools.values():
            rungs = [r for _, r in pool.jobs if r.key not in pinned]
            gpus = pool.gpus - sum(c for t, c in pinned.values() if t == pool.gpu_type)
            got = self._allocate_pool(pool.gpu_type, gpus, rungs, current, rng)
            out.update((k, (pool.gpu_type, c)) for k, c in got.counts.items() if c > 0)
            spare[pool.gpu_type] = got.idle
        for pool in pools.values():
            if not spare[pool.gpu_type]:
                continue
            own = [r for _, r in pool.jobs if r.key not in pinned]
            mine = {r.key for r in own}
            homeless = [self._rungs[j.id][pool.gpu_type] for j in active
                        if j.id not in out and j.id not in mine
                        and pool.gpu_type in self._rungs[j.id]]
            if not homeless:
                continue
            for r in own:
                out.pop(r.key, None)
            gpus = pool.gpus - sum(c for t, c in pinned.values() if t == pool.gpu_type)
            rungs = sorted(own + homeless, key=lambda r: self._scan[r.key])
            got = self._allocate_pool(pool.gpu_type, gpus, rungs, current, rng)
            out.update((k, (pool.gpu_type, c)) for k, c in got.counts.items() if c > 0)
        return out

    def _allocate_pool(self, gpu_type: str, gpus: int, rungs: list[Rung],
                       current: dict[str, tuple[str, int]], rng: random.Random) -> Allocation:
        if self.options.mode == AFS_P:
            if sum(r.counts[0] for r in rungs) > gpus:
                return self._stage_one(gpu_type, gpus, rungs, current)
            for r in rungs:   # a new stage one starts new units for the jobs running then
                self.quantum_end_s.pop(r.key, None)
        return allocate(rungs, gpus, mode=self.options.mode, rng=rng)

    def _stage_one(self, gpu_type: str, gpus: int, rungs: list[Rung],
                   current: dict[str, tuple[str, int]]) -> Allocation:
        """AFS-P with more jobs than GPUs: one rung each, by run counters (fewest units
        first, then arrival), non-preemptive within a unit of run time."""
        unit = self.options.unit_s
        keep = []
        for r in rungs:
            if current.get(r.key, (None,))[0] == gpu_type:
                run = self.run_s.get(r.key, 0.0)
                end = self.quantum_end_s.setdefault(r.key, _next_unit(run, unit))
                if run < end:
                    keep.append(r.key)
        kept = set(keep)   # (a look-up in the list per job was quadratic at a site's size)
        rest = sorted((r.key for r in rungs if r.key not in kept),
                      key=lambda k: (math.floor(self.run_s.get(k, 0.0) / unit),
                                     self._scan[k]))
        got = processor_sharing(rungs, gpus, keep=keep, order=rest)
        for key in rest:
            if got.counts.get(key):
                self.quantum_end_s[key] = _next_unit(self.run_s.get(key, 0.0), unit)
        return got

    def _cap_resizes(self, pools: dict[str, _Pool], active: list[Job],
                     current: dict[str, tuple[str, int]], counts: dict[str, tuple[str, int]],
                     cap: int) -> dict[str, tuple[str, int]]:
        """Hold the smallest resizes at their current size until at most ``cap`` remain.

        A resize is a running job that stays on its GPU type with another count it could
        keep (a measured rate, within its min/max); starts and preemptions are not resizes
        (the round's preemption cap governs those), nor is a job that cannot stay as it is.
        Each pass pins more jobs, so the loop ends after at most one pass per running job."""
        by_id = {j.id: j for j in active}

        def can_stay(key: str) -> bool:
            gpu_type, count = current[key]
            low, high = job_bounds(by_id[key])
            return low <= count <= high and by_id[key].rate(gpu_type, count) > 0

        pinned: dict[str, tuple[str, int]] = {}
        while True:
            resized = [k for k, (t, c) in counts.items()
                       if k in current and k not in pinned and current[k] != (t, c)
                       and current[k][0] == t and can_stay(k)]
            if len(resized) <= cap:
                return counts
            resized.sort(key=lambda k: (-abs(counts[k][1] - current[k][1]), self._scan[k]))
            for key in resized[cap:]:
                pinned[key] = current[key]
            counts = self._allocate_all(pools, active, current, self._rng(active, pinned),
                                        pinned)


def _explain(active: list[Job], counts: Mapping[str, tuple[str, int]],
             rungs: Mapping[str, Mapping[str, Rung]]) -> dict[str, Reason]:
    """AFS's terms: the job's share ladder on its GPU type (the GPU counts it has rates
    for), the rung it got, and the gain of its next rung, (p' - p) / p', which rule (3)
    weighs against the other jobs' when it hands out one more GPU."""
    out = {}
    for job in active:
        gpu_type, count = counts.get(job.id, ("", 0))
        ladders = rungs.get(job.id, {})
        ladder = ladders.get(gpu_type) or next(iter(ladders.values()), None)
        if ladder is None:
            out[job.id] = Reason("afs.no_ladder", {"gpus": job.gpus})
            continue
        figures: dict[str, Figure] = {"gpus": count,
                                      "ladder": "/".join(map(str, ladder.counts))}
        if gpu_type:
            figures["gpu_type"] = gpu_type
        higher = [i for i, c in enumerate(ladder.counts) if c > count]
        if higher:
            i = higher[0]
            now_rate = ladder.rates[i - 1] if i > 0 else 0.0
            figures["next_rung"] = ladder.counts[i]
            figures["next_rung_gain"] = round((ladder.rates[i] - now_rate) / ladder.rates[i], 4)
        out[job.id] = Reason("afs.share" if count else "afs.no_share", figures)
    return out


def _by_type(counts: Mapping[str, tuple[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for key, (gpu_type, count) in counts.items():
        out.setdefault(gpu_type, {})[key] = count
    return out


def _next_unit(run_s: float, unit: float) -> float:
    return (math.floor(run_s / unit) + 1) * unit


def _seconds_map(value: Any, name: str) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise InputError(STATE_SOURCE, "expected an object of job id -> seconds", field=name,
                         value=value)
    out = {}
    for key, seconds in value.items():
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                or not math.isfinite(seconds) or seconds < 0:
            raise InputError(STATE_SOURCE, "expected a finite number of seconds >= 0",
                             field=f"{name}.{key}", value=seconds)
        out[str(key)] = float(seconds)
    return out

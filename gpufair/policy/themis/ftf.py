"""Finish-time fairness ρ = T_shared / T_independent (THEMIS §3.2, §4.3; spec themis.md §2).

Pure functions plus one small serialisable tracker, so the same arithmetic serves the agent's
bids, the arbiter's filtering and the tests that pin the paper's Table 2 and Table 3.

* Eq. 1 (single job): ``T_sh(G) = elapsed + iters_left · iter_serial · S / min(|G|, d_max)``,
  ``T_cluster = iter_total · iter_serial / min(R_C, d_max)``, ``T_id = T_cluster · N_avg``.
* Eq. 2 (successive halving): ``T_sh`` is the sum over phases of the slowest job of the
  phase, GPUs split evenly among the phase's jobs (capped at ``d_max``), serialised by LPT
  list scheduling when there are fewer GPUs than jobs; future phases use the median job.
  The elapsed time is added as for Eq. 1 (spec U11); at t = 0 both forms agree.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TID_MODES = ("paper", "share_capped")


def iter_time(iter_time_serial: float, gpus: int, demand_max: int, slowdown: float = 1.0
              ) -> float:
    """Seconds per iteration on ``gpus`` GPUs: linear speedup up to ``demand_max`` (Eq. 1)."""
    if gpus <= 0:
        return math.inf
    return iter_time_serial * slowdown / min(gpus, demand_max)


def t_shared(elapsed_s: float, iters_left: float, iter_time_serial: float, gpus: int,
             demand_max: int, slowdown: float = 1.0) -> float:
    """Eq. 1's T_sh: time already spent plus the rest at the speed of allocation G.

    A finished job (nothing left) needs no GPUs; an unfinished one with none never finishes.
    """
    if iters_left <= 0:
        return elapsed_s
    return elapsed_s + iters_left * iter_time(iter_time_serial, gpus, demand_max, slowdown)


def t_cluster(work_gpu_s: float, r_c: int, demand_max: int) -> float:
    """Time on the whole cluster (or the demand cap) with linear speedup and no slowdown.

    ``work_gpu_s`` is the serial work: iter_total · iter_time_serial for one job, the budget B
    of a hyper-parameter app.
    """
    return work_gpu_s / max(1, min(r_c, demand_max))


def t_independent(work_gpu_s: float, r_c: int, demand_max: int, n_avg: float,
                  mode: str = "paper") -> float:
    """T_id. ``paper``: Eq. 1 literally, T_cluster · N_avg. ``share_capped`` (spec U10): the
    app alone on a 1/N_avg slice, W / min(R_C / N_avg, d_max), which does not inflate T_id of
    apps whose demand is below their slice."""
    n_avg = max(1.0, n_avg)
    if mode == "paper":
        return t_cluster(work_gpu_s, r_c, demand_max) * n_avg
    if mode == "share_capped":
        return work_gpu_s / min(r_c / n_avg, float(demand_max))
    raise ValueError(f"tid_mode must be one of {TID_MODES}, got {mode!r}")


def rho(t_sh: float, t_id: float) -> float:
    return math.inf if t_id <= 0 else t_sh / t_id


# -- successive halving (Eq. 2) --------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """One successive-halving phase: the iteration time of each of its jobs (the live jobs'
    own times for the current phase, candidates for a future one) and iterations per job."""

    iter_times: tuple[float, ...]
    iterations: float
    jobs: int | None = None  # how many jobs run; default len(iter_times)

    @property
    def num_jobs(self) -> int:
        return self.jobs if self.jobs is not None else len(self.iter_times)


def upper_median(values: Sequence[float]) -> float:
    """The median job of the paper's future-phase estimate; for an even count the slower of
    the middle two, which reproduces both the Table 3 bids and the revised 2160 s estimate."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def lpt_makespan(durations: Iterable[float], machines: int) -> float:
    """Longest-processing-time list scheduling of independent tasks on identical machines."""
    if machines <= 0:
        return math.inf
    loads = [0.0] * machines
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(loads, loads[0] + d)
    return max(loads)


def phase_time(phase: Phase, gpus: int, demand_max: int, use_median: bool) -> float:
    """T_sh(i): the phase ends when its slowest job ends (spec U12 for the GPU split)."""
    n = phase.num_jobs
    if n == 0:
        return 0.0
    if gpus <= 0:
        return math.inf
    times = [upper_median(phase.iter_times)] * n if use_median else list(phase.iter_times)
    if gpus < n:
        return lpt_makespan((t * phase.iterations for t in times), gpus)
    per_job = min(gpus // n, demand_max)
    return max(t * phase.iterations / per_job for t in times)


def sh_t_shared(phases: Sequence[Phase], gpus: int, demand_max: int, elapsed_s: float = 0.0,
                current_exact: bool = False) -> float:
    """Eq. 2 with the elapsed term: ``elapsed + Σ_i T_sh(i)``. ``current_exact`` uses the
    live jobs' own iteration times in the first (current) phase instead of the median."""
    total = elapsed_s
    for i, phase in enumerate(phases):
        total += phase_time(phase, gpus, demand_max, use_median=not (current_exact and i == 0))
    return total


# -- rigid gangs: the app-scheduler's estimate for apps of trace jobs ------------------------


def gang_makespan(running: Sequence[tuple[float, int]], waiting: Sequence[tuple[float, int]],
                  free_gpus: int) -> float:
    """Time until an app's last job ends, for rigid gangs (spec U12/U23).

    ``running`` and ``waiting`` are (remaining seconds, gang size). Running jobs keep their
    GPUs until they end; waiting jobs start longest first whenever the idle GPUs (``free_gpus``
    plus those of ended jobs) fit their gang. With one job this is exactly Eq. 1's remaining
    time; when a waiting job can never start it is infinite.
    """
    events = [(d, g) for d, g in running]
    heapq.heapify(events)
    end = max((d for d, _ in running), default=0.0)
    queue = sorted(waiting, key=lambda w: -w[0])
    now, free = 0.0, free_gpus
    while queue:
        job = next((w for w in queue if w[1] <= free), None)
        if job is not None:
            queue.remove(job)
            free -= job[1]
            heapq.heappush(events, (now + job[0], job[1]))
            end = max(end, now + job[0])
            continue
        if not events:
            return math.inf
        now, freed = heapq.heappop(events)
        free += freed
    return end


# -- N_avg: time-weighted number of active apps over each app's life (spec §2.4, U9) ---------


class NAvgTracker:
    """∫ N_active dt / (t − T_start) per app, counting the app itself.

    The arbiter is the only component that sees the global count, so it integrates the
    count between its calls and hands each app its average with every offer. Serialisable
    with :meth:`to_dict` / :meth:`from_dict` so a restarted daemon keeps T_id stable.
    """

    def __init__(self) -> None:
        self.last_t: float | None = None
        self.last_n = 0
        self.start: dict[str, float] = {}
        self.integral: dict[str, float] = {}

    def update(self, now: float, active: Mapping[str, float]) -> None:
        """``active`` maps each active app to its submission time."""
        if self.last_t is not None and now > self.last_t:
            span = now - self.last_t
            for app in self.integral:
                self.integral[app] += self.last_n * span
        for app, t_start in active.items():
            if app not in self.start:
                self.start[app] = t_start
                # an app that arrived before this call saw at least the current population
                self.integral[app] = len(active) * max(0.0, now - t_start)
        for app in [a for a in self.start if a not in active]:
            del self.start[app], self.integral[app]
        self.last_t, self.last_n = now, len(active)

    def n_avg(self, app: str, now: float) -> float:
        t_start = self.start.get(app)
        if t_start is None or now <= t_start:
            return float(max(1, self.last_n))
        extra = self.last_n * max(0.0, now - (self.last_t or now))
        return max(1.0, (self.integral[app] + extra) / (now - t_start))

    def to_dict(self) -> dict[str, Any]:
        return {"last_t": self.last_t, "last_n": self.last_n,
                "apps": {a: [self.start[a], self.integral[a]] for a in sorted(self.start)}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NAvgTracker:
        tracker = cls()
        tracker.last_t = data.get("last_t")
        tracker.last_n = int(data.get("last_n", 0))
        for app, (start, integral) in data.get("apps", {}).items():
            tracker.start[app], tracker.integral[app] = float(start), float(integral)
        return tracker

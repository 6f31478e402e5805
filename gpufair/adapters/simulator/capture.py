"""What a simulated run did, kept for a results directory (``--out``): who held which GPUs
when, the cluster at each round, and each tenant's GPUs and demand.

It only reads the simulator's state, at the points where that state changes (an action
applied, a job finished, a round begun), so a run with a capture decides and measures exactly
what a run without one does (tests/test_sim_identity.py, tests/test_sim_capture.py). It keeps
plain tuples: the tables are built once, at the end, by :mod:`gpufair.results`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpufair.adapters.simulator.jobs import SimJob

#: a trace job's tenant when the trace names none (the same as a Job record's default)
DEFAULT_TENANT = "default"


def tenant_of(job: SimJob) -> str:
    return getattr(job.trace, "tenant", None) or DEFAULT_TENANT


class RunCapture:
    """The rows of one simulated run's ``allocations``, ``cluster`` and ``tenants`` tables
    (docs/FORMATS.md §9), times in seconds from the trace's first arrival ``t0``."""

    def __init__(self, t0: float, gpu_types: Sequence[str], totals: Mapping[str, int]) -> None:
        self.t0 = t0
        self.gpu_types = tuple(gpu_types)
        self.totals = dict(totals)
        self.capacity = sum(self.totals.values())
        #: (job_id, start_s, end_s, gpu_type, gpus)
        self.allocations: list[tuple[str, float, float, str, int]] = []
        #: (t_s, gpu_type, total, busy, queued_jobs)
        self.cluster: list[tuple[float, str, int, int, int]] = []
        #: (t_s, tenant, gpus, demand_gpus): the GPUs a tenant holds and the GPUs its active
        #: jobs ask for (its fair share is computed from these when the results are written)
        self.tenants: list[tuple[float, str, float, float]] = []
        #: job id → (since, gpu_type, gpus) of the allocation it holds now
        self._open: dict[str, tuple[float, str, int]] = {}
        self._last_sample: float | None = None

    def held(self, job: SimJob, gpu_type: str | None, now: float) -> None:
        """``job`` now holds ``len(job.held)`` GPUs of ``gpu_type`` (None: none): the interval
        it held before, if different, ends at ``now``."""
        count = len(job.held)
        current = self._open.get(job.id)
        if current is not None and current[1:] == (gpu_type, count):
            return
        if current is not None:
            since, kind, gpus = current
            if now > since:
                self.allocations.append((job.id, since - self.t0, now - self.t0, kind, gpus))
            del self._open[job.id]
        if count and gpu_type is not None:
            self._open[job.id] = (now, gpu_type, count)

    def round_started(self, now: float, active: Iterable[SimJob],
                      gpu_type_of: Mapping[str, str]) -> None:
        """A sample of the cluster and the tenants as the round begins (its allocation
        applied). One per instant: a round boundary reached twice at one time keeps the
        later sample."""
        t = now - self.t0
        if self._last_sample is not None and t <= self._last_sample:
            self._drop_samples_at(self._last_sample)
        self._last_sample = t
        busy: Counter[str] = Counter()
        held: Counter[str] = Counter()
        demand: Counter[str] = Counter()
        queued = 0
        for job in active:
            tenant = tenant_of(job)
            demand[tenant] += job.top if job.elastic else job.sf
            if job.held:
                busy.update(gpu_type_of[g] for g in job.held)   # (a gang may span types)
                held[tenant] += len(job.held)
            else:
                queued += 1
        for kind in self.gpu_types:
            self.cluster.append((t, kind, self.totals[kind], busy[kind], queued))
        for tenant in sorted(demand):
            self.tenants.append((t, tenant, float(held[tenant]), float(demand[tenant])))

    def _drop_samples_at(self, t: float) -> None:
        while self.cluster and self.cluster[-1][0] == t:
            self.cluster.pop()
        while self.tenants and self.tenants[-1][0] == t:
            self.tenants.pop()

    def finish(self, now: float) -> None:
        """Close the allocations still open (a run stopped by its time limit) at ``now``."""
        for job_id, (since, kind, gpus) in list(self._open.items()):
            if now > since:
                self.allocations.append((job_id, since - self.t0, now - self.t0, kind, gpus))
        self._open.clear()

    def job_rows(self, jobs: Sequence[SimJob], dropped: Sequence[tuple[str, str, float, int]],
                 rho: Mapping[str, float]) -> list[tuple]:
        """``jobs.csv``'s rows (without ``run``): every simulated job, then the trace's jobs
        the cluster could not run (``dropped``: id, tenant, arrival, GPUs). ``rho``: the
        finished jobs' ρ as the run's metrics computed it."""
        types: dict[str, dict[str, None]] = {}
        for job_id, _, _, kind, _ in self.allocations:
            types.setdefault(job_id, {})[kind] = None
        nan = math.nan
        rows = []
        for job in jobs:
            submit = job.arrival_s - self.t0
            start = nan if job.start_s is None else job.start_s - self.t0
            end = nan if job.finish_s is None or not job.finished else job.finish_s - self.t0
            if job.finished:
                outcome = "failed" if job.failed_out else "finished"
            else:
                outcome = "unfinished" if job.start_s is not None else "never_started"
            rows.append((job.id, tenant_of(job), submit, start, end, start - submit,
                         end - submit, job.sf, ";".join(types.get(job.id, ())),
                         rho.get(job.id, nan), outcome))
        for job_id, tenant, arrival, gpus in dropped:
            rows.append((job_id, tenant, arrival - self.t0, nan, nan, nan, nan, gpus, "", nan,
                         "dropped"))
        return rows

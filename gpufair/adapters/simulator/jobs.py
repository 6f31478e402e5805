"""Simulated jobs: a trace line plus the run-time state the virtual cluster keeps for it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpufair.adapters.simulator.throughputs import Throughputs
from gpufair.adapters.simulator.trace import TraceJob, job_type_with_batch
from gpufair.adapters.simulator.workload import (
    SAMPLES_PER_EPOCH,
    SwitchFlags,
    epoch_profile,
    exclusive_time,
    iterations_per_epoch,
    num_epochs,
)
from gpufair.model import Adaptation, Job, ThroughputProfile

_STATIC = Adaptation.STATIC   # (read for every job at every boundary: see workload._GNS)


@dataclass(eq=False)  # identity: the engine removes jobs from lists by identity
class SimJob:
    trace: TraceJob
    id: str
    model: str
    b0: int | None
    mode: Adaptation
    epochs: int | None
    exclusive_s: float
    batch: int | None
    total: float
    run: float = 0.0
    admitted: bool = False
    admission: int = 0   # its place in the order of admission (the engine's job lists')
    finished: bool = False
    finish_s: float | None = None
    start_s: float | None = None
    attained_s: float = 0.0
    failures: int = 0
    failed_out: bool = False
    flags: SwitchFlags = field(default_factory=SwitchFlags)
    held: tuple[str, ...] = ()
    restarts: int = 0
    overhead_left_s: float = 0.0
    # rounds the job was active and the active jobs summed over them: set when it ends
    # (TraceSimulator._count_job_rounds), from the simulator's totals at its admission
    active_rounds: int = 0
    active_sum: float = 0.0
    counted_at_admission: tuple[int, int] = (0, 0)
    batch_changes: list[int] = field(default_factory=list)
    profile: ThroughputProfile = field(default_factory=ThroughputProfile)
    batch_rates: tuple[tuple[int, float], ...] = ()
    # the last snapshot record and what it was made from: waiting jobs do not change
    record_key: tuple | None = None
    record: Job | None = None
    # the record's field values, the fixed ones filled in once (TraceSimulator._make_record)
    record_values: dict[str, object] | None = None
    # (held, profile, rate): the rate on the GPUs held, kept while both are the same objects
    held_rate: tuple[tuple[str, ...], ThroughputProfile, float] | None = None
    # GPUs' worth idle at each step on the GPUs held: 0 on one type; on a gang spanning
    # types, what its faster GPUs wait for the slowest (set with ``held_rate``)
    idle_gpus: float = 0.0
    # elastic (``--elastic``): may run on 1..top GPUs (the scale factor, or ``--elastic-max``
    # when larger); resizes carried out
    elastic: bool = False
    top: int = 0
    resizes: int = 0

    @property
    def sf(self) -> int:
        return self.trace.scale_factor

    @property
    def arrival_s(self) -> float:
        return self.trace.arrival_s

    @property
    def min_gpus(self) -> int | None:
        return 1 if self.elastic else None

    @property
    def max_gpus(self) -> int | None:
        return self.top if self.elastic else None

    @property
    def remaining(self) -> float:
        return self.total - self.run

    @property
    def adapts(self) -> bool:
        return self.mode is not _STATIC and self.b0 is not None \
            and self.model in SAMPLES_PER_EPOCH

    def epoch_now(self) -> int:
        """ceil(steps run / iterations per epoch at the current batch size) (§1.4's c)."""
        return math.ceil(self.run / iterations_per_epoch(self.model, self.batch))


class ProfileCache:
    """One immutable ThroughputProfile per (job type, gang size), shared by all snapshots.

    An elastic job's profile also holds every smaller GPU count the throughputs file
    measured for its job type (the scaling curve a policy such as AFS reads)."""

    def __init__(self, throughputs: Throughputs, gpu_types: tuple[str, ...]) -> None:
        self._throughputs = throughputs
        self._types = gpu_types
        self._cache: dict[tuple[str, int, int | None], ThroughputProfile] = {}
        self._batch_rates: dict[tuple[str, str, int], tuple[tuple[int, float], ...]] = {}

    def get(self, job_type: str, sf: int, top: int | None = None) -> ThroughputProfile:
        """``top``: an elastic job's most GPUs (its profile holds 1..top); None: rigid."""
        key = (job_type, sf, top)
        profile = self._cache.get(key)
        if profile is None:
            counts = (sf,) if top is None else range(1, top + 1)
            rates = {(t, c): r for t in self._types for c in counts
                     if (r := self._throughputs.rate(t, job_type, c)) is not None}
            profile = self._cache[key] = ThroughputProfile(rates)
        return profile


    def batch_rates(self, gpu_type: str, model: str, sf: int) -> tuple[tuple[int, float], ...]:
        """:meth:`Throughputs.batch_rates`, once per (type, model, gang): it scans the whole
        table, and a 900-job trace asked it 900 times for a handful of answers."""
        key = (gpu_type, model, sf)
        rates = self._batch_rates.get(key)
        if rates is None:
            rates = self._batch_rates[key] = self._throughputs.batch_rates(gpu_type, model, sf)
        return rates


def build_job(trace: TraceJob, throughputs: Throughputs, profiles: ProfileCache,
              gpu_types: tuple[str, ...], elastic: bool = False,
              elastic_max: int | None = None) -> SimJob | str:
    """The simulated job, or the reason it cannot be simulated on this cluster.

    ``elastic``: the trace's scale factor becomes the job's max GPUs (min 1), or
    ``elastic_max`` when that is larger; a job whose max is 1 stays rigid. Its work and
    isolated time are still those at the scale factor."""
    top = max(trace.scale_factor, elastic_max or 0)
    elastic = elastic and top > 1
    profile = profiles.get(trace.job_type, trace.scale_factor, top if elastic else None)
    usable = {t: r for (t, c), r in profile.rates.items()
              if r > 0 and c == trace.scale_factor}
    if not usable:
        known = any(throughputs.rate(t, trace.job_type, trace.scale_factor) is not None
                    for t in throughputs.gpu_types())
        return (f"job type {trace.job_type!r} with {trace.scale_factor} GPUs has zero throughput"
                if known else f"no throughput for ({trace.job_type!r}, {trace.scale_factor}) "
                f"on any cluster GPU type ({', '.join(gpu_types)})")
    reference = max(usable, key=usable.get)
    model, b0 = trace.model, trace.batch_size
    mode = trace.mode
    if model in SAMPLES_PER_EPOCH and b0 is not None:
        epochs = num_epochs(model, b0, trace.total_steps)
        sizes = epoch_profile(model, b0, trace.scale_factor, mode, epochs)

        def rate_at(b: int) -> float | None:
            return throughputs.rate(reference, job_type_with_batch(trace.job_type, b),
                                    trace.scale_factor)

        exclusive = exclusive_time(model, sizes, rate_at)
    else:
        epochs, mode = None, Adaptation.STATIC
        exclusive = trace.total_steps / usable[reference]
    return SimJob(trace=trace, id=str(trace.index), model=model, b0=b0, mode=mode,
                  epochs=epochs, exclusive_s=exclusive, batch=b0, total=float(trace.total_steps),
                  profile=profile, elastic=elastic, top=top if elastic else 0,
                  batch_rates=profiles.batch_rates(reference, model, trace.scale_factor))

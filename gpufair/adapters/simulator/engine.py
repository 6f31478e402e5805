"""A virtual-clock resource manager behind the same adapter protocol as Slurm and YARN.

The arbiter asks it for snapshots and hands it actions exactly as it would a real cluster;
``advance`` then moves the virtual clock to the next round boundary (or, in ``clean``
semantics, to the next arrival or completion between rounds).
"""

from __future__ import annotations

import bisect
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gpufair.adapters.simulator.capture import DEFAULT_TENANT, RunCapture
from gpufair.adapters.simulator.jobs import ProfileCache, SimJob, build_job
from gpufair.adapters.simulator.semantics import MAX_FAILED_ROUNDS, Semantics
from gpufair.adapters.simulator.throughputs import Throughputs
from gpufair.adapters.simulator.trace import TraceJob, job_type_with_batch
from gpufair.adapters.simulator.workload import (
    MAX_BATCH,
    SAMPLES_PER_EPOCH,
    iterations_per_epoch,
    next_batch_size,
    rescale_steps,
    update_switch_flags,
)
from gpufair.errors import InputError
from gpufair.metrics import JobOutcome, Metrics, compute_metrics
from gpufair.model import (
    Action,
    ActionResult,
    ClusterState,
    GpuType,
    Job,
    JobState,
    Migrate,
    Node,
    Preempt,
    Resize,
    Resume,
    SetPriority,
    Start,
)
from gpufair.model.records import job_from_fields, progress_of

log = logging.getLogger("gpufair.simulator")
_STALL_ROUNDS = 1000
_RUNNING, _PENDING = JobState.RUNNING, JobState.PENDING
_EPS = 1e-9
#: Round lengths a simulation accepts: below a second the round mechanism measures nothing
#: real (and 1e-9 s rounds never end); above a day nothing is scheduled.
MIN_ROUND_S, MAX_ROUND_S = 1.0, 86400.0
#: The most rounds a simulation may need even if every job ran alone, one after the other,
#: on its slowest GPU type: beyond that it would run for hours or forever (the published
#: traces need at most a few tens of thousands).
MAX_ROUNDS = 5_000_000


def _admission_order(job: SimJob) -> int:
    return job.admission


class SimulationStalled(RuntimeError):
    """Active jobs exist, nothing runs and nothing will arrive: the policy starves them."""


@dataclass(frozen=True)
class DroppedJob:
    index: int
    line: int
    reason: str


class TraceSimulator:
    name = "simulator"

    def __init__(self, trace: Sequence[TraceJob], throughputs: Throughputs,
                 nodes: Sequence[Node], semantics: Semantics, round_s: float = 120.0, *,
                 elastic: bool = False, resize_overhead_s: float | None = None,
                 elastic_max: int | None = None, capture: bool = False,
                 round_phase_s: float | None = None) -> None:
        """``capture``: keep what the run did for a results directory (:attr:`capture`;
        nothing it keeps feeds back into the run).

        ``round_phase_s``: round boundaries fall on the clock, at ``round_phase_s`` plus a
        multiple of ``round_s``, as a resource manager's periodic pass does (Slurm's backfill
        thread every ``bf_interval``, its phase set when slurmctld started), instead of
        ``round_s`` after the arrival that found the cluster idle (None, the default). An
        arrival between boundaries is then an event like a job's end.

        ``elastic``: trace jobs may run on 1..scale factor GPUs and be resized (the
        scale factor becomes their max GPUs, or ``elastic_max`` when larger, to let jobs
        grow past their request as the AFS paper's do); a resize costs ``resize_overhead_s`` of no
        progress (default: the semantics' restart overhead, as a restart from a checkpoint
        does; CoDDL's in-place resize costs ~4 ms, i.e. 0)."""
        if not MIN_ROUND_S <= round_s <= MAX_ROUND_S:   # NaN fails this too
            raise InputError("--round", f"must be a finite number of seconds from "
                             f"{MIN_ROUND_S:g} to {MAX_ROUND_S:g}", field="round",
                             value=round_s)
        if elastic and semantics.round_ends_at_last_finish:
            raise InputError("--elastic", "elastic jobs need --semantics clean (the artifact "
                             "semantics reproduce rigid-gang simulators)", field="semantics",
                             value=semantics.name)
        if resize_overhead_s is not None and not 0 <= resize_overhead_s <= MAX_ROUND_S:
            raise InputError("--resize-overhead", f"must be a number of seconds from 0 to "
                             f"{MAX_ROUND_S:g}", field="resize_overhead", value=resize_overhead_s)
        if round_phase_s is not None and not math.isfinite(round_phase_s):
            raise InputError("--round-phase", "must be a finite number of seconds",
                             field="round_phase", value=round_phase_s)
        if round_phase_s is not None and semantics.round_ends_at_last_finish:
            raise InputError("--round-phase", "needs --semantics clean (artifact rounds end "
                             "at their last finish)", field="semantics", value=semantics.name)
        if resize_overhead_s is not None and not elastic:
            raise InputError("--resize-overhead", "only rigid jobs: give --elastic too",
                             field="resize_overhead", value=resize_overhead_s)
        if elastic_max is not None and not (elastic and isinstance(elastic_max, int)
                                            and 1 <= elastic_max <= 4096):
            raise InputError("--elastic-max", "a whole number of GPUs from 1 to 4096, with "
                             "--elastic", field="elastic_max", value=elastic_max)
        self.elastic = elastic
        self.resize_overhead_s = semantics.restart_overhead_s if resize_overhead_s is None \
            else float(resize_overhead_s)
        self.semantics = semantics
        self.round_s = float(round_s)
        self.round_phase_s = round_phase_s
        self.nodes = tuple(nodes)
        self._gpu_type = {g: n.gpu_type for n in self.nodes for g in n.gpu_ids()}
        self.num_gpus = len(self._gpu_type)
        types = tuple(dict.fromkeys(n.gpu_type for n in self.nodes))
        self._gpu_types = tuple(GpuType(t) for t in types)
        self._throughputs = throughputs
        self._profiles = ProfileCache(throughputs, types)
        largest = {t: max(n.gpus for n in self.nodes if n.gpu_type == t) for t in types}
        self.jobs: list[SimJob] = []
        self.dropped: list[DroppedJob] = []
        for trace_job in trace:
            built = build_job(trace_job, throughputs, self._profiles, types, elastic,
                              elastic_max)
            if isinstance(built, str):
                self.dropped.append(DroppedJob(trace_job.index, trace_job.line, built))
                continue
            fits = [t for (t, _), r in built.profile.rates.items()
                    if r > 0 and sum(n.gpus for n in self.nodes if n.gpu_type == t) >= built.sf]
            if not fits:
                self.dropped.append(DroppedJob(trace_job.index, trace_job.line,
                                               f"needs {built.sf} GPUs of one type; the cluster "
                                               f"has at most {max(largest.values())} per node"))
                continue
            self.jobs.append(built)
        if not self.jobs:
            first = self.dropped[0]
            more = len(self.dropped) - 1
            raise InputError(trace[0].source if trace else "trace",
                             f"no job of the trace can run on this cluster (line "
                             f"{first.line}: {first.reason}"
                             f"{f'; and {more} more' if more else ''})")
        for d in self.dropped:
            log.warning("trace line %d (job %d) not simulated: %s", d.line, d.index, d.reason)
        self._check_horizon()
        #: what the run did, for ``--out`` (None unless asked: it costs a little per round)
        self.capture: RunCapture | None = None
        #: the trace jobs not simulated, as ``jobs.csv`` rows need them (with ``capture``)
        self.dropped_jobs: list[tuple[str, str, float, int]] = []
        if capture:
            self.capture = RunCapture(self.jobs[0].arrival_s, types, Counter(
                self._gpu_type.values()))
            dropped = {d.index for d in self.dropped}
            self.dropped_jobs = [(str(t.index), getattr(t, "tenant", None) or DEFAULT_TENANT,
                                  t.arrival_s, t.scale_factor)
                                 for t in trace if t.index in dropped]
        self._arrivals = [j.arrival_s for j in self.jobs]
        self._next_arrival = 0
        self.now = self.jobs[0].arrival_s
        self._round_start = self.now
        self.rounds = 0
        self.busy_gpu_s = 0.0
        #: the straggler cost of gangs that span GPU types (OEF §6.3.3): workers placed in
        #: such gangs, and GPU-seconds their faster GPUs idled waiting for the slowest
        self.straggler_workers = 0
        self.straggler_idle_gpu_s = 0.0
        self.at_round_boundary = True
        self._active: list[SimJob] = []
        #: the active jobs by id, those holding GPUs in admission order (the order
        #: ``_active`` lists them in), the GPUs they hold, and how many waiting jobs have
        #: each smallest gang: kept as GPUs are taken and given back (:meth:`_hold`), so an
        #: event costs what runs, not what waits (issue 31: thousands wait on a full cluster)
        self._active_by_id: dict[str, SimJob] = {}
        self._running: list[SimJob] = []
        self._held_gpus = 0
        self._waiting_gangs: Counter[int] = Counter()
        self._ended: list[SimJob] = []
        self._previous_round: set[str] = set()
        self._stalled = 0
        #: rounds counted, and the active jobs summed over them (:meth:`_count_active_round`)
        self._rounds_counted = 0
        self._active_counted = 0
        self._adapting = 0   # active jobs that may change their batch size
        #: changes other than the clock and the progress of running jobs (arrivals, ends,
        #: actions carried out, batch-size switches), counted: a caller whose policy plans
        #: from those alone knows that an unchanged count means an unchanged plan
        self.changes = 0
        self._align_round()
        self._admit()

    def _check_horizon(self) -> None:
        """Refuse a simulation that could need more than :data:`MAX_ROUNDS` rounds, measured
        as the jobs run one at a time on their slowest GPU type: a reasonable policy stays
        below that, and a trace over it (a job of 1e10 steps at 1e-6 iterations/s) would
        keep the simulator stepping rounds for years instead of answering."""
        serial_s = 0.0
        for job in self.jobs:
            slowest = min(r for r in job.profile.rates.values() if r > 0)
            rates = [r for _, r in job.batch_rates if r > 0]
            serial_s += job.total / min([slowest, *rates]) + self.semantics.restart_overhead_s
        rounds = serial_s / self.round_s + len(self.jobs)
        if not rounds <= MAX_ROUNDS:
            raise InputError(self.jobs[0].trace.source, "the jobs would need up to "
                             f"{rounds:.3g} rounds of {self.round_s:g} s (at most "
                             f"{MAX_ROUNDS:g}): total_steps too large for the throughputs, "
                             "or --round too short")

    # -- adapter protocol -------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return not self._active and self._next_arrival >= len(self.jobs)

    def resizes(self) -> int:
        """Resizes carried out so far (elastic jobs only)."""
        return sum(j.resizes for j in self.jobs)

    def gpus_in_use(self) -> int:
        return self._held_gpus

    def may_start_any(self) -> bool:
        """Some waiting job's smallest gang (1 GPU for an elastic job) fits in the number of
        idle GPUs: without that, no decision between round boundaries can start anything.
        (Read from the running counts: this runs at every event.)"""
        idle = self.num_gpus - self._held_gpus
        return any(gang <= idle for gang, waiting in self._waiting_gangs.items() if waiting)

    def snapshot(self) -> ClusterState:
        # a waiting job's record stands until it is started or its batch size changes (both
        # clear ``record_key``): thousands wait on a full cluster, and checking each one's
        # key at every event was the largest part of a long history's snapshots (issue 31)
        record = self._record
        jobs = [j.record if not j.held and j.record_key is not None and not j.record_key[1]
                else record(j) for j in self._active]
        jobs += [self._record(j) for j in self._ended]
        self._ended = []
        return ClusterState(time_s=self.now, nodes=self.nodes, jobs=tuple(jobs),
                            gpu_types=self._gpu_types)

    def apply(self, actions: Sequence[Action]) -> list[ActionResult]:
        self.changes += 1   # (even if every action is refused: nothing is assumed)
        by_id = self._active_by_id
        held = {g for j in self._running for g in j.held}
        results = []
        for action in actions:
            job = by_id.get(action.job_id)
            if job is None:
                results.append(ActionResult(action, False, "no such active job"))
                continue
            if isinstance(action, Preempt):
                held.difference_update(job.held)
                self._hold(job, ())
                results.append(ActionResult(action, True))
            elif isinstance(action, Start | Resume | Migrate):
                problem = self._check_gpus(job, action.gpu_ids, held - set(job.held))
                if job.held and not isinstance(action, Migrate):
                    problem = "already running; a move is a Migrate"
                if problem:
                    results.append(ActionResult(action, False, problem))
                    continue
                held.difference_update(job.held)
                held.update(action.gpu_ids)
                self._start(job, tuple(action.gpu_ids), moved=isinstance(action, Migrate))
                self._count_stragglers(job)
                results.append(ActionResult(action, True))
            elif isinstance(action, Resize):
                if not job.elastic:
                    results.append(ActionResult(action, False, "trace jobs are rigid gangs"))
                    continue
                problem = self._check_gpus(job, action.gpu_ids, held - set(job.held))
                if not job.held:
                    problem = problem or "not running; a start is a Start"
                if problem:
                    results.append(ActionResult(action, False, problem))
                    continue
                held.difference_update(job.held)
                held.update(action.gpu_ids)
                self._hold(job, tuple(action.gpu_ids))
                self._count_stragglers(job)
                job.resizes += 1
                job.overhead_left_s = self.resize_overhead_s
                results.append(ActionResult(action, True))
            elif isinstance(action, SetPriority):
                results.append(ActionResult(action, True, "priorities have no effect here"))
        if self.capture is not None:
            for action in actions:
                if (job := by_id.get(action.job_id)) is not None:
                    self.capture.held(job, self._gpu_type[job.held[0]] if job.held else None,
                                      self.now)
        return results

    def advance(self) -> None:
        """Run the virtual cluster to the next point where the arbiter must decide."""
        if self.semantics.round_ends_at_last_finish:
            self._run_artifact_round()
        else:
            self._run_until_next_event()

    # -- helpers shared by both semantics ----------------------------------------------------
    def _check_gpus(self, job: SimJob, gpus: Sequence[str], busy: set[str]) -> str:
        if job.elastic:
            if not 1 <= len(gpus) <= job.top:
                return f"elastic job of 1 to {job.top} GPUs, got {len(gpus)}"
        elif len(gpus) != job.sf:
            return f"gang of {job.sf} GPUs, got {len(gpus)}"
        types = {self._gpu_type.get(g) for g in gpus}
        if None in types:
            return "unknown GPU id"
        if busy.intersection(gpus):
            return "GPU already in use"
        if job.profile.gang_rate(types, len(gpus)) <= 0:   # (a gang may span types)
            return f"job cannot run on {len(gpus)} GPUs of " + \
                ("this type" if len(types) == 1 else f"each of {'/'.join(sorted(types))}")
        return ""

    def _start(self, job: SimJob, gpus: tuple[str, ...], moved: bool) -> None:
        job.record_key = None   # (see snapshot: a started job's record is made anew)
        first = job.start_s is None
        if first:
            job.start_s = self.now
        elif not job.held and not moved:
            job.restarts += 1
        self._hold(job, gpus)
        if not self.semantics.restart_overhead_full_rounds_only and \
                (self.semantics.first_start_overhead or not first):
            job.overhead_left_s = self.semantics.restart_overhead_s

    def _hold(self, job: SimJob, gpus: tuple[str, ...], *, ending: bool = False) -> None:
        """Set the GPUs ``job`` holds (() gives them back; ``ending``: and it leaves the
        active jobs), keeping the running list and counts of :meth:`__init__` with them."""
        before = job.held
        job.held = gpus
        self._held_gpus += len(gpus) - len(before)
        if bool(before) == bool(gpus):
            return   # a move or resize: running before and after
        gang = 1 if job.elastic else job.sf
        if gpus:
            bisect.insort(self._running, job, key=_admission_order)
            self._waiting_gangs[gang] -= 1
        else:
            self._running.remove(job)
            if not ending:
                self._waiting_gangs[gang] += 1

    def _rate(self, job: SimJob, gpu_type: str, count: int) -> float:
        rate = job.profile.rate(gpu_type, count)
        return 0.0 if rate is None else rate

    def _held_rate(self, job: SimJob) -> float:
        """Looked up again only when the job's GPUs or its profile (batch size) change: a
        running job is asked at every event. A gang spanning GPU types runs at the slowest
        type's rate (:meth:`ThroughputProfile.gang_rate`); what its faster GPUs idle at
        each step is kept in ``job.idle_gpus`` for the straggler accounting."""
        cached = job.held_rate
        if cached is not None and cached[0] is job.held and cached[1] is job.profile:
            return cached[2]
        held, type_of = job.held, self._gpu_type
        first = type_of[held[0]]
        kinds = {type_of[g] for g in held}
        if len(kinds) == 1:
            rate, job.idle_gpus = self._rate(job, first, len(held)), 0.0
        else:
            rate = job.profile.gang_rate(kinds, len(held))
            job.idle_gpus = sum(1.0 - rate / self._rate(job, type_of[g], len(held))
                                for g in held)
        job.held_rate = (held, job.profile, rate)
        return rate

    def _count_stragglers(self, job: SimJob) -> None:
        """The OEF paper's straggler metric (§6.3.3): workers placed in a gang that spans GPU
        types, counted at each start, move or resize onto such a gang."""
        if len({self._gpu_type[g] for g in job.held}) > 1:
            self.straggler_workers += len(job.held)

    def _record(self, job: SimJob) -> Job:
        key = (job.run, job.held, job.batch, job.attained_s, job.finished, job.restarts,
               job.start_s)
        if key != job.record_key:
            job.record_key, job.record = key, self._make_record(job)
        return job.record

    def _make_record(self, job: SimJob) -> Job:
        if job.finished:
            state = JobState.FAILED if job.failed_out else JobState.COMPLETED
        else:   # (module names: an enum member read through its class is slow on 3.11)
            state = _RUNNING if job.held else _PENDING
        epochs_done = 0
        if job.epochs is not None and job.batch:
            epochs_done = int(job.run // iterations_per_epoch(job.model, job.batch))
        if job.record_values is None:
            job.record_values = self._record_template(job)
        values = job.record_values
        values["state"] = state
        values["start_s"] = job.start_s
        values["finish_s"] = job.finish_s
        values["progress"] = progress_of(job.run, job.total, epochs_done, job.epochs)
        values["throughput"] = job.profile
        values["batch_size"] = job.batch
        values["attained_s"] = job.attained_s
        values["restarts"] = job.restarts
        values["gpus_held"] = job.held
        return job_from_fields(values)

    @staticmethod
    def _record_template(job: SimJob) -> dict[str, object]:
        """The job's record as its field values, with the fields it keeps for its whole
        life filled in once: running jobs get a new record at every event, and looking
        these up again was much of its cost. :meth:`_make_record` sets the others."""
        return dict(vars(Job(
            id=job.id, tenant=job.trace.tenant, app=job.trace.app, gpus=job.sf,
            min_gpus=job.min_gpus, max_gpus=job.max_gpus,
            arrival_s=job.arrival_s, model=job.model,
            initial_batch_size=job.b0, adaptation=job.mode,
            samples_per_epoch=SAMPLES_PER_EPOCH.get(job.model),
            max_batch_size=MAX_BATCH.get(job.model, job.b0) if job.adapts else job.b0,
            batch_rates=job.batch_rates, weight=job.trace.priority_weight,
            time_limit_s=job.trace.time_limit_s, nodes=job.trace.nodes)))

    def _admit(self) -> None:
        while self._next_arrival < len(self.jobs) and \
                self._arrivals[self._next_arrival] <= self.now + _EPS:
            job = self.jobs[self._next_arrival]
            job.admitted = True
            job.admission = self._next_arrival
            job.counted_at_admission = (self._rounds_counted, self._active_counted)
            self.changes += 1
            self._adapting += job.adapts
            self._active.append(job)
            self._active_by_id[job.id] = job
            self._waiting_gangs[1 if job.elastic else job.sf] += 1
            self._next_arrival += 1

    def _align_round(self) -> None:
        """With ``round_phase_s``, the round in progress is the one of the clock's grid that
        ``now`` falls in, and ``now`` a boundary only if it is on the grid."""
        if self.round_phase_s is None:
            return
        step = self.round_s
        self._round_start = self.round_phase_s + \
            math.floor((self.now - self.round_phase_s) / step + _EPS) * step
        self.at_round_boundary = self.now - self._round_start <= _EPS * step

    def _next_arrival_time(self) -> float:
        if self._next_arrival < len(self.jobs):
            return self._arrivals[self._next_arrival]
        return math.inf

    def _finish(self, job: SimJob, when: float, failed: bool = False) -> None:
        job.finished = True
        job.failed_out = failed
        job.finish_s = when
        self._count_job_rounds(job)
        self._adapting -= job.adapts
        self.changes += 1
        if self.capture is not None:
            self.capture.held(job, None, when)
        self._active.remove(job)
        del self._active_by_id[job.id]
        self._ended.append(job)

    def _switch_batch(self, job: SimJob) -> None:
        """Apply a pending batch-size change (§1.4 'Applying a change')."""
        if not (job.flags.up or job.flags.down):
            return   # nothing pending (next_batch_size would say None): every job, every round
        new = next_batch_size(job.flags, job.model, job.mode, job.b0, job.batch)
        if new is None or new == job.batch or job.b0 == MAX_BATCH.get(job.model):
            return
        new_type = job_type_with_batch(job.trace.job_type, new)
        profile = self._profiles.get(new_type, job.sf, job.top if job.elastic else None)
        if not any(r > 0 for r in profile.rates.values()):
            return  # the key is missing: the change is reverted
        old = job.batch
        job.record_key = None   # (see snapshot)
        self.changes += 1
        if self.semantics.switch_rounds_epoch_up:
            total, run = rescale_steps(job.model, int(job.total), int(job.run), old, new)
            job.total, job.run = float(total), float(run)
        else:
            job.total, job.run = job.total * old / new, job.run * old / new
        job.batch = new
        job.profile = profile
        job.batch_changes.append(new)

    def _evaluate_switch_rules(self) -> None:
        if not self._adapting:   # most traces (every history) have no job that adapts
            return
        for job in self._active:
            if job.adapts:
                update_switch_flags(job.flags, job.model, job.mode, job.b0, job.batch, job.sf,
                                    job.epoch_now())
                if not self.semantics.batch_switch_lag:
                    self._switch_batch(job)

    def _count_active_round(self) -> None:
        """One more round for every active job, each seeing ``len(self._active)`` active:
        kept as running totals that a job reads the difference of when it ends
        (:meth:`_count_job_rounds`), not added to each of thousands of waiting jobs."""
        self._rounds_counted += 1
        self._active_counted += len(self._active)

    def _count_job_rounds(self, job: SimJob) -> None:
        """The job's active rounds and the sum of the active counts it saw, from the running
        totals at its admission (integers: the sums are exact, as the per-job ones were)."""
        rounds, active = job.counted_at_admission
        job.active_rounds = self._rounds_counted - rounds
        job.active_sum = float(self._active_counted - active)

    def _no_progress(self) -> None:
        """Nothing ran: jump to the next arrival, or detect a policy that starves jobs."""
        arrival = self._next_arrival_time()
        if arrival < math.inf:
            self.now = max(self.now, arrival)
            self._stalled = 0
            return
        self._stalled += 1
        if self._stalled > _STALL_ROUNDS:
            raise SimulationStalled(f"{len(self._active)} active jobs and nothing ran for "
                                    f"{_STALL_ROUNDS} rounds at t={self.now:.0f}s")
        self.now += self.round_s

    # -- artifact semantics: one round per call, ending at the last finish ------------------
    def _run_artifact_round(self) -> None:
        start = self.now
        if self.capture is not None:
            self.capture.round_started(start, self._active, self._gpu_type)
        dispatched = list(self._running)
        self._count_active_round()
        if not dispatched:
            self._no_progress()
        else:
            self._stalled = 0
            plans = []
            for job in dispatched:
                rate = self._held_rate(job)
                steps = min(math.floor(rate * self.round_s), job.remaining)
                finish = start + steps / rate if steps > 0 else start
                plans.append((job, steps, finish))
            end = max(f for _, _, f in plans)
            for job, steps, finish in plans:
                self._credit_artifact(job, steps, finish - start, finish, start)
            self.now = end
        self._previous_round = {j.id for j in dispatched}
        self.rounds += 1
        self._evaluate_switch_rules()
        self._admit()

    def _credit_artifact(self, job: SimJob, steps: float, elapsed: float, finish: float,
                         start: float) -> None:
        sem = self.semantics
        if job.id not in self._previous_round and self.rounds >= 1 and elapsed != 0 \
                and self.round_s - 5 < elapsed:
            steps = math.floor(steps * (elapsed - sem.restart_overhead_s) / elapsed)
            elapsed -= sem.restart_overhead_s
        if sem.failure_path and steps <= 0 and elapsed <= 0:
            job.failures += 1
            if job.failures >= MAX_FAILED_ROUNDS:
                self._hold(job, (), ending=True)
                self._finish(job, start, failed=True)
            return
        job.failures = 0
        job.run += steps
        job.attained_s += elapsed
        self.busy_gpu_s += elapsed * job.sf
        self.straggler_idle_gpu_s += elapsed * job.idle_gpus
        over_deadline = sem.deadline_guard and \
            job.attained_s > int(1.5 * int(job.exclusive_s))
        if job.remaining <= 0 or over_deadline:
            self._hold(job, (), ending=True)
            self._finish(job, finish)
        elif sem.batch_switch_lag:
            self._switch_batch(job)

    # -- clean semantics: continuous progress, events between fixed-length rounds ----------
    def _run_until_next_event(self) -> None:
        if not self._active:  # idle cluster: the next arrival opens a new round
            if self.capture is not None:   # (the series shows the idle stretch)
                self.capture.round_started(self.now, (), self._gpu_type)
            self.now = max(self.now, self._next_arrival_time())
            self.at_round_boundary = True
            self._align_round()
            self._admit()
            return
        if self.at_round_boundary:
            self._round_start = self.now
            if self.capture is not None:
                self.capture.round_started(self.now, self._active, self._gpu_type)
            self._count_active_round()
            self.rounds += 1
        boundary = self._round_start + self.round_s
        now = self.now
        # (the loops below run for every running job at every event: names hoisted, and
        # ``job.total - job.run`` written out where ``job.remaining`` would be a call)
        target = min(boundary, self._next_arrival_time())
        held_rate = self._held_rate
        running = []
        for job in self._running:
            rate = held_rate(job)
            running.append((job, rate))
            if (ends := now + job.overhead_left_s + (job.total - job.run) / rate) < target:
                target = ends
        elapsed = target - now
        with_overhead = self.semantics.attained_includes_overhead
        busy = self.busy_gpu_s
        done = []
        for job, rate in running:   # (min/max written out: builtin calls, for every job)
            productive = elapsed
            if left := job.overhead_left_s:   # a restart still being paid
                overhead = elapsed if elapsed < left else left
                job.overhead_left_s = left - overhead
                productive = elapsed - overhead
            total = job.total
            run = job.run + rate * productive
            job.run = run = total if total < run else run
            job.attained_s += elapsed if with_overhead else productive
            busy += productive * len(job.held)
            if job.idle_gpus:   # a gang spanning types: its faster GPUs wait at each step
                self.straggler_idle_gpu_s += productive * job.idle_gpus
            if total - run <= _EPS * (total if total > 1.0 else 1.0):
                done.append(job)
        self.busy_gpu_s = busy
        self.now = target
        for job in done:
            self._hold(job, (), ending=True)
            self._finish(job, target)
        self.at_round_boundary = target >= boundary - _EPS
        if not running and self.at_round_boundary and self._active:
            self._stalled += 1
            if self._stalled > _STALL_ROUNDS:
                raise SimulationStalled(f"{len(self._active)} active jobs and nothing ran for "
                                        f"{_STALL_ROUNDS} rounds at t={self.now:.0f}s")
        elif running:
            self._stalled = 0
        if self.at_round_boundary:
            self._evaluate_switch_rules()
        self._admit()

    # -- results ----------------------------------------------------------------------------
    def outcomes(self) -> list[JobOutcome]:
        out = []
        for job in self.jobs:
            if not job.finished:
                continue
            contention = job.active_sum / job.active_rounds / self.num_gpus \
                if job.active_rounds else math.nan
            out.append(JobOutcome(job_id=job.id, arrival_s=job.arrival_s, finish_s=job.finish_s,
                                  isolated_s=job.exclusive_s, gpus=job.sf,
                                  avg_contention=contention, failed=job.failed_out))
        return out

    def makespan(self) -> float:
        return self.now - self.jobs[0].arrival_s

    def metrics(self) -> Metrics:
        return compute_metrics(self.outcomes(), self.num_gpus, self.makespan(), self.busy_gpu_s)


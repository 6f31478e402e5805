"""Shockwave (NSDI'23): a volatile Fisher market over a planning window of T rounds.

Each re-plan maximises the FTF-weighted Nash social welfare of epoch progress over the next T
rounds minus λ × a makespan lower bound (paper eq. 11), with gang sizes and GPU capacity per
round. A job's utility and its remaining time depend only on how many rounds s it gets in the
window (regimes follow progress, not wall time), so both are tabulated per s and the problem
is an exact MILP (spec §2.7, compact form): binaries X[j,t] (job j runs in round t) and a
one-hot z[j,s] choosing j's round count. Regime order is inside the tabulation; the log needs
no approximation. The solved counts are then laid out round by round with running jobs kept
in place and the most unfairly treated jobs first, and idle GPUs of the round are filled with
the longest remaining jobs (work conservation, spec §8.3).

Parameter names follow their role; the artifact's configuration spelling is accepted too (its
``k`` is the paper's λ and its ``lambda`` the paper's exponent k: FORMATS.md §6).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from gpufair.model import ClusterState, Job, Plan, Reason
from gpufair.policy.base import PolicyBase, PolicyConfig
from gpufair.policy.placement import capacity_by_type, greedy_walk, held_types, place
from gpufair.policy.replan import replan_due, replan_interval, replan_interval_setting
from gpufair.policy.shockwave.regimes import Trajectory, configs_from_now, predict
from gpufair.policy.solver import LinearProgram, Solution, SolveOptions, solve
from gpufair.settings import parse_settings, setting

EPS = 1e-6
#: re-plan at most once per this many rounds unless ``replan_interval_s`` says otherwise
REPLAN_ROUNDS = 0.75
#: the certified market's default acceptance gap (measured: docs/policies/shockwave.md)
CERTIFY_REL_GAP = 1e-3
#: HiGHS solves the count relaxation with its costs times 2**this. They are normalised by
#: jobs x GPUs, so at 2,000 jobs on 512 GPUs they run from 1e-11 to 3e-5, under HiGHS's dual
#: tolerance (1e-7): its dual simplex then ends "optimal" on the presolved LP and spends ~5,000
#: primal iterations (1.6 s) repairing the point after postsolve. Measured on the 158 LPs of a
#: 900/256 run and the 51 of a 2000/512 one (HiGHS 1.16, same optima): 2**4 took 8.3 and 3.7 s
#: of solver time against 7.6 and 30.2 s unscaled (worst LP 0.11 and 0.16 s against 0.14 and
#: 1.74 s); 2**3 7.1 and 5.8 s, 2**6 11.8 and 5.0 s. Larger factors make each iteration dearer
#: (bringing max |c| to 1, as ``scale_objective`` does, was 2-10x slower), so it is fixed.
_LP_OBJECTIVE_SCALE = 4


@dataclass(frozen=True)
class ShockwaveSettings:
    ftf_exponent: float = setting(12.0, "paper k: budget w_j = rho_hat_j ** k (paper: 5)",
                                  ge=0.0, aliases=("lambda",))
    makespan_weight: float = setting(3.0, "paper lambda, on H / Z_0 (paper: 1e-3; see README)",
                                     ge=0.0)
    makespan_weight_per_s: float | None = setting(
        None, "the artifact's k: weight per second of H, not normalised by Z_0 (its objective"
        " is sum log u / (N T) - k max R); unset: use makespan_weight", ge=0.0,
        aliases=("k",))
    window_rounds: int = setting(20, "paper T: rounds in the planning window", ge=1,
                                 aliases=("future_rounds",))
    solver_timeout_s: float = setting(15.0, "per market solve", gt=0.0,
                                      aliases=("solver_timeout",))
    solver_rel_gap: float = setting(1e-3, "relative MIP gap of the count MILP", ge=0.0,
                                    le=0.999999)
    certify_rel_gap: float = setting(
        CERTIFY_REL_GAP, "the certified method accepts rounded counts whose objective is"
        " within this (relative) of an upper bound on the count MILP's optimum (the LP"
        " value, or the dual bound from its duals): hence within this of the optimum",
        ge=0.0, le=0.999999)
    market_method: str = setting(
        "certified", "exact: the count MILP every re-plan; certified: its LP relaxation,"
        " rounded, accepted when within certify_rel_gap of the bound (else the MILP,"
        " warm-started from the rounding)", choices=("exact", "certified"))
    solver_threads: int | None = setting(None, "solver threads", ge=1,
                                         aliases=("solver_num_threads",))
    reoptimize_every: int = setting(8, "rounds before a forced re-plan (the artifact's REOPT)",
                                    ge=1)
    replan_interval_s: float | None = replan_interval_setting(
        "3/4 of a round — at most one re-plan per round, as in the paper, even when a round"
        " ends a little early")
    accordion_regimes: int = setting(2, "K of an Accordion job", ge=1)
    gang_aware_makespan: bool = setting(False, "H's spread term sum n_j R_j / M, not"
                                        " sum R_j / M")
    keep_running_bonus: float = setting(2.0, "round 1 counts a running job's budget 1 + this"
                                        " times", ge=0.0)
    mode: str = setting("reactive", "reactive: a batch-size change re-plans at once (paper);"
                        " lazy: it waits for the next event (the artifact)",
                        choices=("reactive", "lazy"))
    budget: str = setting("paper", "paper: rho_hat^k (eq. 9); artifact: its finish-time"
                          " targets with rhomax", choices=("paper", "artifact"))
    rhomax: float = setting(1.0, "the artifact budget's threshold", gt=0.0)
    plan_throughput: str = setting(
        "regimes", "how the market credits a job's progress per planned round — regimes: at"
        " the predicted future batch sizes' speeds (paper eq. 7); past_epoch: at the mean"
        " exclusive epoch time of the epochs run so far and the current one (the artifact's"
        " planned progress, spec §2.8). The remaining-time estimate is the regimes' in both",
        choices=("regimes", "past_epoch"))
    log_approximation_bases: tuple[float, ...] = setting(
        (), "the artifact's piecewise-linear log over these progress breakpoints; empty: the"
        " exact log, which the tabulation makes free")

    #: the artifact's keys that only its hard-constraint formulation uses
    ARTIFACT_UNUSED: ClassVar[tuple[str, ...]] = ("gpu_ram",)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], source: str = "shockwave options"
                     ) -> ShockwaveSettings:
        return parse_settings(cls, options, source=source, section="policies.shockwave",
                              ignored=cls.ARTIFACT_UNUSED)


@dataclass
class JobView:
    """What the market needs of one job at re-plan time."""

    job: Job
    trajectory: Trajectory
    remaining_s: float
    rho_hat: float
    weight: float
    #: the trajectory the market credits progress by (``plan_throughput``); None: trajectory
    plan: Trajectory | None = None


@dataclass
class ShockwaveState:
    """Policy state that must survive a restart (plain data, serialisable)."""

    regimes: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    contention: dict[str, tuple[float, float]] = field(default_factory=dict)
    last_time: float | None = None
    last_active: int = 0
    plan: dict[str, list[bool]] = field(default_factory=dict)
    plan_time: float = 0.0
    plan_jobs: frozenset[str] = frozenset()
    batch_seen: dict[str, int | None] = field(default_factory=dict)
    targets: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


class ShockwavePolicy(PolicyBase):
    name = "shockwave"
    Options = ShockwaveSettings

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__(config)
        self.settings = self.options
        self.state = ShockwaveState()
        self.solve_log: list[tuple[int, float, float | None, str]] = []  # (jobs, s, gap, status)
        #: job id -> (its record, (regime history, K), prediction): derived, never state
        self._trajectories: dict[str, tuple[Job, tuple[Any, int], tuple[Trajectory, float]
                                            | None]] = {}

    # -- restart safety ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything the policy remembers, as JSON (the daemon stores it each round)."""
        st = self.state
        return {"regimes": {k: [list(r) for r in v] for k, v in st.regimes.items()},
                "contention": {k: list(v) for k, v in st.contention.items()},
                "last_time": st.last_time, "last_active": st.last_active, "plan": st.plan,
                "plan_time": st.plan_time, "plan_jobs": sorted(st.plan_jobs),
                "batch_seen": st.batch_seen,
                "targets": {k: [list(t) for t in v] for k, v in st.targets.items()}}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        self._trajectories.clear()
        self.state = ShockwaveState(
            regimes={k: [(int(b), float(e)) for b, e in v] for k, v in data["regimes"].items()},
            contention={k: (float(a), float(b)) for k, (a, b) in data["contention"].items()},
            last_time=data["last_time"], last_active=int(data["last_active"]),
            plan={k: [bool(x) for x in v] for k, v in data["plan"].items()},
            plan_time=float(data["plan_time"]), plan_jobs=frozenset(data["plan_jobs"]),
            batch_seen=dict(data["batch_seen"]),
            targets={k: [(float(t), float(f)) for t, f in v]
                     for k, v in data.get("targets", {}).items()})

    # -- bookkeeping ------------------------------------------------------------------------
    def _observe(self, state: ClusterState, jobs: Sequence[Job], now: float, gpus: int) -> bool:
        """Update regimes and contention; True when something forces a re-plan."""
        st = self.state
        changed = frozenset(j.id for j in jobs) != st.plan_jobs
        if st.last_time is not None and now > st.last_time:
            factor = max(1.0, st.last_active / gpus) if gpus else 1.0
            for job in jobs:
                total, span = st.contention.get(job.id, (0.0, 0.0))
                st.contention[job.id] = (total + factor * (now - st.last_time),
                                         span + now - st.last_time)
        st.last_time, st.last_active = now, len(jobs)
        for job in jobs:
            history = st.regimes.setdefault(job.id, [(job.batch_size or 0, 0.0)])
            if job.batch_size != st.batch_seen.get(job.id, job.batch_size):
                history.append((job.batch_size or 0, float(job.progress.epochs_done)))
                changed |= self.settings.mode == "reactive"
            st.batch_seen[job.id] = job.batch_size
        active = {j.id for j in jobs}
        for table in (st.regimes, st.contention, st.batch_seen, st.targets,
                      self._trajectories):
            for gone in set(table) - active:
                del table[gone]
        return changed

    def _trajectory(self, job: Job) -> tuple[Trajectory, float] | None:
        """The job's predicted trajectory and remaining seconds, or None if unplannable.

        Remembered per job while its record object and regime history stay the same: a
        record is immutable, and the simulator hands out the same one until the job changes,
        so a waiting job's prediction is made once, not every round."""
        history = self.state.regimes.get(job.id)
        key = (tuple(history) if history else None, self.settings.accordion_regimes)
        cached = self._trajectories.get(job.id)
        if cached is not None and cached[0] is job and cached[1] == key:
            return cached[2]
        found = self._predict(job, history or [(job.batch_size, 0.0)])
        result = None if found is None else (found, found.remaining_seconds)
        self._trajectories[job.id] = (job, key, result)
        return result

    def _predict(self, job: Job, history: Sequence[tuple[int, float]]) -> Trajectory | None:
        epochs_total = job.progress.epochs_total
        if not epochs_total or not job.samples_per_epoch or not job.batch_size:
            return _static_trajectory(job)
        completed = [b - a for (_, a), (_, b) in itertools.pairwise(history)]
        configs = configs_from_now(job.adaptation, job.initial_batch_size or job.batch_size,
                                   job.batch_size, job.max_batch_size, len(completed),
                                   self.settings.accordion_regimes)
        seconds = [_epoch_seconds(job, b) for b in configs]
        # a regime whose batch size was never measured cannot be planned: stop before it
        usable = next((i for i, s in enumerate(seconds) if s is None), len(seconds))
        seconds = [s for s in seconds[: max(1, usable)] if s is not None]
        if not seconds:
            return None
        done = job.progress.epochs_done + _epoch_fraction(job)
        return predict(epochs_total, done, completed, seconds)

    def _view(self, job: Job, now: float, gpus: int) -> JobView | None:
        found = self._trajectory(job)
        if found is None:
            return None
        trajectory, remaining = found
        attained = job.attained_s
        waited = max(0.0, now - job.arrival_s - attained)
        total, span = self.state.contention.get(job.id, (0.0, 0.0))
        n_avg = total / span if span > 0 else max(1.0, self.state.last_active / max(1, gpus))
        predicted_total = attained + remaining
        rho_hat = (attained + waited + remaining * n_avg) / (predicted_total * n_avg) \
            if predicted_total > 0 else 1.0
        view = JobView(job, trajectory, remaining, rho_hat,
                       rho_hat ** self.settings.ftf_exponent)
        if self.settings.plan_throughput == "past_epoch":
            view.plan = _past_epoch_plan(job, self.state.regimes.get(job.id, []), trajectory)
        if self.settings.budget == "artifact":
            view.weight = self._artifact_budget(view, now, gpus)
        return view

    def _artifact_budget(self, view: JobView, now: float, gpus: int) -> float:
        """The artifact's weight: 1 while on target, (projected / target)^k once behind."""
        share = min(1.0, gpus / max(1, self.state.last_active))
        series = self.state.targets.get(view.job.id)
        if not series:
            return 1.0
        times = [t for t, _ in series] + [now]
        spans = np.diff(times)
        values = np.array([f for _, f in series])
        mean = float(values @ spans / spans.sum()) if spans.sum() > 0 else float(values.mean())
        target = 0.9 * mean + 0.1 * float(values[-1])
        ratio = min(100.0, (now + view.remaining_s / share) / target) if target > 0 else 1.0
        if ratio <= self.settings.rhomax:
            return 1.0
        exponent = 100.0 if view.remaining_s < self.config.round_s else \
            self.settings.ftf_exponent
        return ratio ** exponent

    def _record_targets(self, jobs: Sequence[Job], views: Mapping[str, JobView], now: float,
                        gpus: int) -> None:
        """Fair finish-time targets, appended whenever the job set changes (artifact)."""
        share = min(1.0, gpus / max(1, len(jobs)))
        for job in jobs:
            view = views.get(job.id)
            if view is None:
                continue
            done = _isolated_done(job, self.state.regimes.get(job.id, []))
            fair = job.arrival_s + (done + view.remaining_s) / share
            self.state.targets.setdefault(job.id, []).append((now, fair))

    # -- the market -------------------------------------------------------------------------
    def _solve(self, views: Sequence[JobView], gpus: int) -> dict[str, list[bool]]:
        """Plan the window: solve for round counts, lay them out, certify or fall back.

        The objective depends on each job's round count only, so the count problem (one
        aggregate capacity row Σ n_j s_j ≤ M·T) is a relaxation of the full MILP with the
        same objective. When its counts can be laid out round by round within M GPUs (always,
        in practice, with gang sizes that divide M), they are optimal for the full MILP too;
        otherwise the full MILP is solved.
        """
        market = Market(views, gpus, self.settings.window_rounds, self.config.round_s,
                        self.settings)
        counts = self._counts(market)
        if counts is None:
            return {}
        grid = _layout(views, counts, gpus, self.settings.window_rounds,
                       self.settings.keep_running_bonus)
        if grid is None:
            full = self._run(market.full_problem(), len(views))
            if not full.ok:
                return {}
            grid = market.grid_from(full.x)
        return dict(zip((v.job.id for v in views), grid.astype(bool).tolist(), strict=True))

    def _counts(self, market: Market) -> np.ndarray | None:
        """Round counts within ``certify_rel_gap`` (certified) or ``solver_rel_gap`` (the
        MILP) of the count MILP's optimum, or None.

        ``certified`` first solves the LP relaxation without the ordering rows (a few hundred
        rows instead of one per round of every job: an order of magnitude faster than the
        MILP's presolve alone at 900 jobs). Its optimum has only a few fractional jobs (as
        many as binding coupling rows), so flooring them and refilling the freed capacity
        greedily loses almost nothing. The LP value bounds the MILP optimum from above, and
        when it is not close enough, :meth:`Market.dual_bound` at the LP's duals, which
        usually is; rounded counts within ``certify_rel_gap`` of a bound are within that of
        the optimum, and the MILP is skipped. Otherwise the MILP runs, warm-started from the
        rounding.
        """
        n = len(market.views)
        start = None
        if self.settings.market_method == "certified":
            problem = market.count_problem(relaxed=True)
            relaxed = self._run(problem, n, highs_scale=_LP_OBJECTIVE_SCALE)
            if not relaxed.ok:
                # the welfare is normalised by N·M, so at hundreds of jobs the LP's costs are
                # 1e-8 to 1e-5, under HiGHS's dual tolerance: one 314-job relaxation stopped
                # "Unknown". Once more with them scaled up (exactly, by a power of two); not
                # always, as that makes HiGHS's simplex 2-10x slower on the same LP.
                relaxed = self._run(problem, n, scale_objective=True)
            if relaxed.ok and relaxed.objective is not None:
                counts = market.round_counts(relaxed.x)
                value = market.value(counts)
                bound = relaxed.objective
                if (bound - value) / max(abs(value), EPS) > self.settings.certify_rel_gap \
                        and relaxed.duals is not None:
                    bound = min(bound, market.dual_bound(relaxed.duals))
                gap = (bound - value) / max(abs(value), EPS)
                if gap <= self.settings.certify_rel_gap:
                    self.solve_log[-1] = (n, self.solve_log[-1][1], max(0.0, gap), "certified")
                    return counts
                start = market.start_from(counts)
        solution = self._run(market.count_problem(), n, start)
        return market.counts_from(solution.x) if solution.ok else None

    def _run(self, problem: LinearProgram, jobs: int, start: np.ndarray | None = None,
             scale_objective: bool = False, highs_scale: int = 0) -> Solution:
        settings = self.settings
        options = SolveOptions(backend=_mip_backend(self.config.solver_backend),
                               time_limit_s=settings.solver_timeout_s,
                               mip_gap=settings.solver_rel_gap,
                               threads=settings.solver_threads or self.config.solver_threads,
                               seed=self.config.seed, warm_start=start,
                               scale_objective=scale_objective,
                               highs_objective_scale=highs_scale)
        started = time.perf_counter()
        solution = solve(problem, options)
        elapsed = time.perf_counter() - started
        self.stats.solves += 1
        self.stats.solver_s += elapsed
        self.solve_log.append((jobs, elapsed, solution.mip_gap, solution.status.value))
        return solution

    # -- one round --------------------------------------------------------------------------
    def schedule(self, state: ClusterState, now: float) -> Plan:
        jobs = state.active_jobs()
        capacity = capacity_by_type(state)
        gpus = sum(capacity.values())
        forced = self._observe(state, jobs, now, gpus)
        st = self.state
        d = self.config.round_s
        elapsed_rounds = round((now - st.plan_time) / d) if st.plan else 0
        views = {j.id: v for j in jobs if j.gpus <= gpus and (v := self._view(j, now, gpus))}
        if self.settings.budget == "artifact" and frozenset(views) != st.plan_jobs:
            self._record_targets(jobs, views, now, gpus)
            views = {i: self._view(views[i].job, now, gpus) for i in views}
        # a plan acts only at round boundaries (preemption waits for them), so an event
        # mid-round need not re-plan at once: it waits until most of a round has passed
        settle = replan_due(st.plan_time if st.plan else None, now, replan_interval(
            self.settings.replan_interval_s, d, REPLAN_ROUNDS))
        if (forced and settle) or not st.plan or elapsed_rounds >= min(
                self.settings.reoptimize_every, self.settings.window_rounds):
            ordered = [views[j.id] for j in jobs if j.id in views]
            st.plan = self._solve(ordered, gpus) if ordered else {}
            st.plan_time, st.plan_jobs, elapsed_rounds = now, frozenset(j.id for j in jobs), 0
        planned = [views[i] for i in views if _runs(st.plan.get(i), elapsed_rounds)]
        planned.sort(key=lambda v: -v.weight)
        rest = sorted((v for i, v in views.items() if not _runs(st.plan.get(i), elapsed_rounds)),
                      key=lambda v: -v.remaining_s)
        unplannable = [j for j in jobs if j.id not in views]  # no rates known: run last
        picks = greedy_walk([v.job for v in planned + rest] + unplannable, capacity,
                            held_types(state))
        assignments = place(state, picks)
        plan, first = st.plan, elapsed_rounds
        return Plan(assignments=assignments,
                    priorities={i: v.rho_hat for i, v in views.items()},
                    reason=f"shockwave: {len(planned)} planned, "
                           f"{len(assignments) - min(len(planned), len(assignments))} filled",
                    explain=lambda: _explain(jobs, views, plan, first))


# -- helpers -----------------------------------------------------------------------------------
def _log(util: np.ndarray, bases: Sequence[float]) -> np.ndarray:
    """log(max(ε, u)), or the artifact's interpolation of it between ``bases`` (u capped at 1)."""
    if not bases:
        return np.log(np.maximum(EPS, util))
    points = np.asarray(sorted(bases), dtype=float)
    return np.interp(np.minimum(util, points[-1]), points, np.log(np.maximum(EPS, points)))


def _runs(row: list[bool] | None, t: int) -> bool:
    return bool(row) and t < len(row) and row[t]


def _explain(jobs: Sequence[Job], views: Mapping[str, JobView], plan: Mapping[str, list[bool]],
             now_round: int) -> dict[str, Reason]:
    """Shockwave's terms: the job's budget in the market (from its predicted finish-time
    fairness ρ̂), and the rounds of the planning window the market gave it — this one or
    not, and how many are left. A job the market cannot see (no known rate, larger than the
    cluster) only fills what the plan leaves."""
    out = {}
    for job in jobs:
        view = views.get(job.id)
        if view is None:
            out[job.id] = Reason("shockwave.unplannable", {"gpus": job.gpus})
            continue
        row = plan.get(job.id) or []
        left = row[now_round:]
        out[job.id] = Reason(
            "shockwave.planned" if _runs(row, now_round) else "shockwave.not_planned",
            {"budget": round(view.weight, 4), "rho_hat": round(view.rho_hat, 4),
             "planned_rounds_left": sum(left), "window_rounds_left": len(left),
             "remaining_s": round(view.remaining_s, 1)})
    return out


def _mip_backend(backend: str) -> str:
    return "auto" if backend == "ecos" else backend  # ECOS solves LPs only


def _epoch_seconds(job: Job, batch: int) -> float | None:
    """Exclusive seconds per epoch at ``batch``: (samples / batch) / iterations per second."""
    rate = job.rate_at_batch(batch)
    if rate is None and batch == job.batch_size:
        rate = max(job.throughput.rates.values(), default=None)
    if not rate or not job.samples_per_epoch:
        return None
    return job.samples_per_epoch / batch / rate


def _isolated_done(job: Job, history: Sequence[tuple[int, float]]) -> float:
    """Exclusive seconds of the epochs already done, regime by regime."""
    done = float(job.progress.epochs_done)
    total = 0.0
    bounds = [*history[1:], (job.batch_size or 0, done)]
    for (batch, start), (_, end) in zip(history, bounds, strict=True):
        per = _epoch_seconds(job, batch) if batch else None
        total += max(0.0, min(end, done) - start) * (per or 0.0)
    return total


def _past_epoch_plan(job: Job, history: Sequence[tuple[int, float]], trajectory: Trajectory
                     ) -> Trajectory | None:
    """All remaining epochs at τ̄, the mean exclusive time of epochs 0..F (the F done and
    the current one), each at the batch size it ran (or runs) at: the artifact's planned
    progress q_j·τ̄_j ≤ D·Σ_t X[j,t] (spec §2.8), from what the job has run, not a profile.

    Epochs of a batch size whose rate is unknown are left out of the mean; None (plan by
    the regimes) when no epoch's time is known or the job has no epoch count.
    """
    done = job.progress.epochs_done
    total = job.progress.epochs_total
    if not total or not job.batch_size or not trajectory.remaining_epochs:
        return None
    history = history or [(job.batch_size, 0.0)]
    seconds, epochs = 0.0, 0.0
    bounds = [*history[1:], (job.batch_size, float(done))]
    spans = [(b, max(0.0, min(end, done) - start))
             for (b, start), (_, end) in zip(history, bounds, strict=True)]
    for batch, count in [*spans, (job.batch_size, 1.0)]:
        per = _epoch_seconds(job, batch) if batch and count else None
        if per is not None:
            seconds += count * per
            epochs += count
    if not epochs:
        return None
    return Trajectory((sum(trajectory.remaining_epochs),), (seconds / epochs,))


def _epoch_fraction(job: Job) -> float:
    """Fraction of the current epoch already done (iterations beyond whole epochs)."""
    if not job.samples_per_epoch or not job.batch_size:
        return 0.0
    per_epoch = math.ceil(job.samples_per_epoch / job.batch_size)
    done = job.progress.iterations_done / per_epoch - job.progress.epochs_done
    return min(max(done, 0.0), 1.0)


def _static_trajectory(job: Job) -> Trajectory:
    """A job without epoch information: one regime of its remaining iterations."""
    rate = max(job.throughput.rates.values(), default=0.0)
    left = job.progress.iterations_left
    if not rate or left is None:
        return Trajectory((), ())
    return Trajectory((1.0,), (left / rate,))


def _rows(rows: Sequence[tuple[np.ndarray, np.ndarray, float]], n: int
          ) -> tuple[sp.csr_array, np.ndarray]:
    cols = np.concatenate([r[0] for r in rows])
    vals = np.concatenate([r[1] for r in rows])
    row_idx = np.repeat(np.arange(len(rows)), [len(r[0]) for r in rows])
    matrix = sp.csr_array((vals, (row_idx, cols)), shape=(len(rows), n))
    return matrix, np.array([r[2] for r in rows], dtype=float)


def _epochs_after(trajectories: Sequence[Trajectory], seconds: np.ndarray) -> np.ndarray:
    """``Trajectory.epochs_after`` for every trajectory (rows) at every time (columns).

    The same steps as the scalar walk, regime by regime on whole arrays, so every entry is
    the scalar's to the bit; a job with fewer regimes walks through zero-length ones, which
    change nothing.
    """
    n = len(trajectories)
    width = max((len(t.remaining_epochs) for t in trajectories), default=0)
    epochs, per = np.zeros((n, width)), np.zeros((n, width))
    for j, trajectory in enumerate(trajectories):
        epochs[j, :len(trajectory.remaining_epochs)] = trajectory.remaining_epochs
        per[j, :len(trajectory.epoch_seconds)] = trajectory.epoch_seconds
    need = epochs * per
    left = np.broadcast_to(np.asarray(seconds, dtype=float), (n, len(seconds))).copy()
    done, out = np.zeros_like(left), np.zeros_like(left)
    walking = np.ones(left.shape, dtype=bool)
    for i in range(width):
        e, p, cost = epochs[:, i, None], per[:, i, None], need[:, i, None]
        through = left >= cost
        rate = np.divide(left, p, out=np.zeros_like(left), where=p > 0)
        stops = walking & ~through
        out[stops] = (done + np.where(p > 0, rate, e))[stops]
        walking &= through
        done = np.where(walking, done + e, done)
        left = np.where(walking, left - cost, left)
    out[walking] = done[walking]
    return out


def _running_sum(values: np.ndarray) -> float:
    """Left-to-right sum from 0.0: the rounding of a per-job ``+=`` loop (np.sum pairs)."""
    total = 0.0
    for value in values.tolist():
        total += value
    return total


def _with_ordering(a_ub: sp.csr_array, b_ub: np.ndarray, offsets: np.ndarray,
                   skip: np.ndarray) -> tuple[sp.csr_array, np.ndarray]:
    """Append the rows δ[j,s+1] − δ[j,s] ≤ 0 inside the block of columns of each job j
    not in ``skip``."""
    sizes = np.diff(offsets)
    cols = np.arange(int(offsets[-1]))
    owner = np.repeat(np.arange(len(sizes)), sizes)
    later = cols[np.isin(cols, offsets[:-1], invert=True) & ~skip[owner]]
    n = len(later)
    rows = sp.csr_array((np.concatenate([np.ones(n), -np.ones(n)]),
                         (np.tile(np.arange(n), 2), np.concatenate([later, later - 1]))),
                        shape=(n, a_ub.shape[1]))
    return sp.vstack([a_ub, rows], format="csr"), np.concatenate([b_ub, np.zeros(n)])


def _layout(views: Sequence[JobView], counts: np.ndarray, gpus: int, horizon: int,
            keep_bonus: float = 2.0) -> np.ndarray | None:
    """Lay round counts out over the window, or None if no packing tried fits them.

    Only the counts enter the objective; the layout decides who runs now, because only the
    first round runs before the next re-plan. Round 1 takes jobs by budget (the most
    unfairly treated first), a running job's budget counting ``1 + keep_bonus`` times since
    stopping it wastes a restart; jobs that need every round of the window come first. The
    other rounds are packed widest gang first into the emptiest rounds. If that fails, the
    whole window is packed that way and its best round moved to the front.
    """
    gang = np.array([v.job.gpus for v in views])
    running = np.array([bool(v.job.gpus_held) for v in views])
    priority = np.array([v.weight for v in views]) * (1 + keep_bonus * running)
    counts = counts.astype(int)
    first = np.zeros(len(views), dtype=bool)
    free = gpus
    for j in _ordered(np.flatnonzero(counts > 0), counts < horizon, -priority):
        if gang[j] <= free:
            first[j] = True
            free -= gang[j]
    rest = _pack(gang, counts - first, gpus, horizon - 1, priority)
    if rest is not None:
        return np.column_stack([first, rest])
    whole = _pack(gang, counts, gpus, horizon, priority)
    if whole is None:
        return None
    return whole[:, np.argsort(-(priority @ whole), kind="stable")]


def _ordered(items: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``items`` sorted by (first, second) of each, ties in their given order (stable, as
    ``sorted`` with a tuple key, without a Python call per item)."""
    return items[np.lexsort((second[items], first[items]))]


def _pack(gang: np.ndarray, counts: np.ndarray, gpus: int, rounds: int,
          priority: np.ndarray) -> np.ndarray | None:
    """Widest gangs first, each job into its emptiest rounds (earliest on ties)."""
    grid = np.zeros((len(gang), rounds), dtype=bool)
    free = np.full(rounds, gpus)
    for j in _ordered(np.flatnonzero(counts > 0), -gang, -priority):
        order = np.argsort(-free, kind="stable")
        fits = order[free[order] >= gang[j]]
        if len(fits) < counts[j]:
            return None
        chosen = fits[: counts[j]]
        grid[j, chosen] = True
        free[chosen] -= gang[j]
    return grid


@dataclass
class Market:
    """The re-plan's MILPs, built from per-job tables over the round count s = 0..S_j.

    lu_j(s) = log(max(ε, (F_j + epochs after s rounds) / E_j)) and rem_j(s) = max(0,
    R_j - s·D): regime order and speed-ups are inside the tables (spec §2.7, compact form).
    The tables are computed for every job at once on a jobs × (T + 1) grid (a per-job,
    per-round Python loop was most of a re-plan at hundreds of jobs); ``lu_full`` and
    ``rem_full`` hold them padded with each job's last value, ``tops`` each job's S_j.
    """

    views: Sequence[JobView]
    gpus: int
    horizon: int
    round_s: float
    settings: ShockwaveSettings
    log_util: list[np.ndarray] = field(init=False)
    remaining: list[np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        d, n = self.round_s, len(self.views)
        remaining_s = np.array([v.remaining_s for v in self.views], dtype=float)
        self.tops = np.array([max(1, min(self.horizon, math.ceil(r / d))) for r in remaining_s],
                             dtype=int).reshape(n)
        s = np.arange(self.horizon + 1)
        progress = _epochs_after([v.trajectory if v.plan is None else v.plan
                                  for v in self.views], s * d)
        totals = np.array([v.job.progress.epochs_total or 0 for v in self.views], dtype=float)
        done = np.array([v.job.progress.epochs_done + _epoch_fraction(v.job) if t else 0.0
                         for v, t in zip(self.views, totals, strict=True)], dtype=float)
        has_total = totals != 0
        with np.errstate(divide="ignore", invalid="ignore"):
            util = np.where(has_total[:, None],
                            (done[:, None] + progress) / np.where(has_total, totals, 1.0)[:, None],
                            np.minimum(1.0, s * d / np.maximum(remaining_s, d)[:, None]))
        lu = _log(util.reshape(n, len(s)), self.settings.log_approximation_bases)
        rem = np.maximum(0.0, remaining_s[:, None] - s * d)
        # pad each row past S_j with its value at S_j (what _step_gains and _at index)
        index = np.minimum(s, self.tops[:, None])
        rows = np.arange(n)[:, None]
        self.lu_full, self.rem_full = lu[rows, index], rem[rows, index]
        self.log_util = [self.lu_full[j, :top + 1] for j, top in enumerate(self.tops)]
        self.remaining = [self.rem_full[j, :top + 1] for j, top in enumerate(self.tops)]
        self.weights = np.array([v.weight for v in self.views], dtype=float)
        self.gangs = np.array([v.job.gpus for v in self.views], dtype=int)
        self.widths = np.array([self._width(v) for v in self.views], dtype=float)
        self.offsets = np.concatenate([[0], np.cumsum(self.tops)]).astype(int)
        self._tables = (self.lu_full, self.rem_full, self.weights * self._scale, self.widths)
        #: Z_0 for H's weight, summed once (the rounding asks for the weight per step)
        self._z0 = sum(v.remaining_s for v in self.views) or 1.0

    @property
    def _scale(self) -> float:
        return 1.0 / (len(self.views) * self.gpus)

    def _h_weight(self) -> float:
        if self.settings.makespan_weight_per_s is not None:
            return -self.settings.makespan_weight_per_s * self.horizon / self.gpus
        return -self.settings.makespan_weight / self._z0

    def _width(self, view: JobView) -> float:
        if self.settings.makespan_weight_per_s is not None:
            return 0.0  # the artifact's regularizer is the longest remaining time alone
        return view.job.gpus / self.gpus if self.settings.gang_aware_makespan else 1 / self.gpus

    @property
    def _offsets(self) -> np.ndarray:
        """Where each job's δ columns start; the last entry is h's column."""
        return self.offsets

    def count_problem(self, relaxed: bool = False) -> LinearProgram:
        """Incremental binaries δ[j,s] = [s_j ≥ s] (ordered), h; one aggregate capacity row.

        ``relaxed``: the LP relaxation, with the ordering rows δ[j,s] ≥ δ[j,s+1] only for
        jobs whose utility increments grow somewhere (a regime speed-up): with shrinking
        increments (most jobs) the LP orders them by itself, so their rows are redundant, and
        without them the model has a few hundred rows instead of one per job-round.

        Built from flat arrays over all (job, s) at once; the entries, their order and the
        sums' order are those of a per-job construction (tests/test_shockwave_fast.py).
        """
        n, offsets, tops = len(self.views), self.offsets, self.tops
        h = int(offsets[-1])
        owner = np.repeat(np.arange(n), tops)  # the job of each δ column
        step = np.arange(h) - offsets[:-1][owner]  # s - 1 of each δ column
        lu_step = self.lu_full[owner, step + 1] - self.lu_full[owner, step]
        drop = -(self.rem_full[owner, step + 1] - self.rem_full[owner, step])
        budget = self.weights * self._scale
        c = np.zeros(h + 1)
        c[:h] = budget[owner] * lu_step
        c[h] = self._h_weight()
        constant = _running_sum(budget * self.lu_full[:, 0])
        # rows 0..n-1: rem_j(0) - Σ drop δ_j ≤ h; row n: the spread; row n+1: capacity
        job_cols = np.empty(h + n, dtype=int)
        job_vals = np.empty(h + n)
        slot = np.arange(h) + owner  # each job's block, then its h entry
        job_cols[slot], job_vals[slot] = np.arange(h), -drop
        job_cols[offsets[1:] + np.arange(n)] = h
        job_vals[offsets[1:] + np.arange(n)] = -1.0
        cols = np.concatenate([job_cols, np.arange(h), [h], np.arange(h)])
        vals = np.concatenate([job_vals, -drop * self.widths[owner], [-1.0],
                               self.gangs[owner].astype(float)])
        row_idx = np.concatenate([np.repeat(np.arange(n), tops + 1),
                                  np.full(h + 1, n), np.full(h, n + 1)])
        spread_rhs = -_running_sum(self.rem_full[:, 0] * self.widths)
        b_ub = np.concatenate([-self.rem_full[:, 0],
                               [spread_rhs, float(self.gpus * self.horizon)]])
        a_ub = sp.csr_array((vals, (row_idx, cols)), shape=(n + 2, h + 1))
        if relaxed:
            second = np.diff(self.lu_full, 2, axis=1)
            inside = np.arange(second.shape[1]) < (self.tops - 1)[:, None]
            convex = ~np.any((second > 0) & inside, axis=1)
        else:
            convex = np.zeros(n, dtype=bool)
        a_ub, b_ub = _with_ordering(a_ub, b_ub, offsets, skip=convex)
        integrality = None if relaxed else np.arange(h + 1) < h
        ub = np.ones(h + 1)
        ub[h] = np.inf
        return LinearProgram(c=c, A_ub=a_ub, b_ub=b_ub, lb=0.0, ub=ub, integrality=integrality,
                             maximize=True, constant=constant,
                             name="shockwave_counts_lp" if relaxed else "shockwave_counts")

    def dual_bound(self, duals: np.ndarray) -> float:
        """An upper bound on the count MILP's optimum from the relaxation's row duals: the
        Lagrangian with the capacity row (price μ) and the spread row (price ν) moved into the
        objective, maximised over integer counts exactly.

        Weak duality makes it valid for any μ ≥ 0 and 0 ≤ ν ≤ λ (beyond λ it is +∞), so the
        LP's duals need not be exact; at the LP's own duals it is never above the LP bound,
        and it is usually far below: what remains of the relaxation's gap is its leveling of
        the longest jobs at h with fractional rounds (rem_j(s) ≤ h with s fractional), which
        integer counts cannot do. For fixed h each job picks its best count among those that
        finish within h, so the inner maximum is a sweep over h through every rem_j(s) value
        (h between two of them only costs more λh).
        """
        n, horizon = len(self.views), self.horizon
        weight = -self._h_weight()
        mu = max(0.0, float(duals[n + 1]))
        nu = min(max(0.0, float(duals[n])), weight)
        s = np.arange(horizon + 1)
        allowed = s <= self.tops[:, None]
        gain = (self.weights * self._scale)[:, None] * self.lu_full \
            - mu * self.gangs[:, None] * s - nu * self.widths[:, None] * self.rem_full
        gain = np.where(allowed, gain, -np.inf)
        # best[j, k]: job j's best gain over counts ≥ k (-inf past S_j)
        best = np.maximum.accumulate(gain[:, ::-1], axis=1)[:, ::-1]
        best = np.column_stack([best, np.full(n, -np.inf)])
        jobs, counts = np.nonzero(allowed)
        rem = self.rem_full[jobs, counts]
        order = np.argsort(-rem, kind="stable")
        rem = rem[order]
        # once h < rem_j(s), count s is out: j's best moves from best[j, s] to best[j, s+1]
        loss = (best[jobs, counts + 1] - best[jobs, counts])[order]
        total = np.concatenate([[0.0], np.cumsum(loss)]) + best[:, 0].sum()
        levels = np.unique(np.append(rem, 0.0))
        out = np.searchsorted(-rem, -levels, side="left")  # counts with rem_j(s) > h
        return mu * self.gpus * horizon + float(np.max(total[out] - (weight - nu) * levels))

    def counts_from(self, x: np.ndarray) -> np.ndarray:
        offsets = self.offsets
        return np.array([round(x[offsets[j]:offsets[j + 1]].sum())
                         for j in range(len(self.views))])

    def start_from(self, counts: np.ndarray) -> np.ndarray:
        """The count problem's point for ``counts``: a MIP start for it."""
        offsets = self.offsets
        x = np.zeros(int(offsets[-1]) + 1)
        for j, k in enumerate(counts):
            x[offsets[j]:offsets[j] + int(k)] = 1.0
        x[-1] = self._makespan(counts)
        return x

    def _at(self, table: np.ndarray, counts: np.ndarray) -> np.ndarray:
        return table[np.arange(len(counts)), np.asarray(counts, dtype=int)]

    def _makespan(self, counts: np.ndarray) -> float:
        """h at ``counts``: the longest remaining time or the spread term, whichever is larger."""
        rem = self._at(self.rem_full, counts)
        return max(0.0, float(rem.max(initial=0.0)), float(self.widths @ rem))

    def value(self, counts: np.ndarray) -> float:
        """The count problem's objective at ``counts`` (constant included)."""
        weights = self.weights * self._scale
        return float(weights @ self._at(self.lu_full, counts)) \
            + self._h_weight() * self._makespan(counts)

    def round_counts(self, x: np.ndarray) -> np.ndarray:
        """Integer counts from the relaxation's ``x``: the better of two roundings.

        Down: each job's total floored (capacity holds), the freed capacity then given a
        round at a time to the job whose extra round gains the most objective per GPU. Up:
        totals rounded up, then rounds taken back, one at a time, from the job that loses the
        least per GPU, until capacity holds; then the same fill. Both steps count h exactly,
        and the second matters when the LP levels several of the longest jobs at a
        fractional h: flooring all of them raises h by a round, and no single extra round
        lowers it again, so the down rounding alone cannot recover it.
        """
        offsets = self._offsets
        sums = np.add.reduceat(x[:-1], offsets[:-1]) if len(x) > 1 else np.zeros(0)
        tops, gangs = self.tops, self.gangs
        best: np.ndarray | None = None
        for rounded in (np.floor(sums + 1e-6), np.ceil(sums - 1e-6)):
            counts = np.clip(rounded.astype(int), 0, tops)
            while gangs @ counts > self.gpus * self.horizon:
                loss = -self._step_gains(counts, -1) / gangs
                counts[int(np.argmin(loss))] -= 1
            while True:
                free = self.gpus * self.horizon - int(gangs @ counts)
                gain = np.where(gangs <= free, self._step_gains(counts, 1), -np.inf) / gangs
                if not len(gain) or gain.max() <= 0:
                    break
                counts[int(np.argmax(gain))] += 1
            if best is None or self.value(counts) > self.value(best):
                best = counts
        return best if best is not None else np.zeros(0, dtype=int)

    def _step_gains(self, counts: np.ndarray, step: int) -> np.ndarray:
        """The objective's change if one job's count moves by ``step`` (±1), per job; -inf
        where the move leaves 0..S_j. h counted exactly: the others' longest remaining time
        (top two of the current ones), the job's new one, and the spread term."""
        lu, rem, weights, widths = self._tables
        rows = np.arange(len(counts))
        moved = np.clip(counts + step, 0, self.tops)
        now_rem, new_rem = rem[rows, counts], rem[rows, moved]
        order = np.argsort(-now_rem)
        first = now_rem[order[0]] if len(order) else 0.0
        second = now_rem[order[1]] if len(order) > 1 else 0.0
        others = np.where(rows == order[0], second, first) if len(order) else now_rem
        spread = widths @ now_rem - widths * (now_rem - new_rem)
        h_new = np.maximum(np.maximum(others, new_rem), np.maximum(spread, 0.0))
        gain = weights * (lu[rows, moved] - lu[rows, counts]) \
            + self._h_weight() * (h_new - self._makespan(counts))
        return np.where(moved == counts + step, gain, -np.inf)

    def full_problem(self) -> LinearProgram:
        """X[j,t] per round with per-round capacity, and a one-hot z[j,s] per job."""
        n, horizon = len(self.views), self.horizon
        sizes = [len(lu) for lu in self.log_util]
        z_offset = n * horizon + np.concatenate([[0], np.cumsum(sizes)])
        h = int(z_offset[-1])
        c = np.zeros(h + 1)
        c[h] = self._h_weight()
        eq_rows: list[tuple[np.ndarray, np.ndarray, float]] = []
        ub_rows: list[tuple[np.ndarray, np.ndarray, float]] = []
        spread_cols, spread_vals = [], []
        for j, view in enumerate(self.views):
            s = np.arange(sizes[j])
            cols = z_offset[j] + s
            c[cols] = view.weight * self._scale * self.log_util[j]
            x_cols = j * horizon + np.arange(horizon)
            eq_rows.append((cols, np.ones(len(s)), 1.0))
            eq_rows.append((np.concatenate([x_cols, cols]),
                            np.concatenate([np.ones(horizon), -s.astype(float)]), 0.0))
            ub_rows.append((np.append(cols, h), np.append(self.remaining[j], -1.0), 0.0))
            spread_cols.append(cols)
            spread_vals.append(self.remaining[j] * self._width(view))
        ub_rows.append((np.append(np.concatenate(spread_cols), h),
                        np.append(np.concatenate(spread_vals), -1.0), 0.0))
        gang = np.array([v.job.gpus for v in self.views], dtype=float)
        for t in range(horizon):
            ub_rows.append((np.arange(n) * horizon + t, gang, float(self.gpus)))
        a_eq, b_eq = _rows(eq_rows, h + 1)
        a_ub, b_ub = _rows(ub_rows, h + 1)
        integrality = np.ones(h + 1, dtype=bool)
        integrality[h] = False
        ub = np.ones(h + 1)
        ub[h] = np.inf
        return LinearProgram(c=c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq, lb=0.0, ub=ub,
                             integrality=integrality, maximize=True, name="shockwave_full")

    def grid_from(self, x: np.ndarray) -> np.ndarray:
        n = len(self.views)
        return np.round(x[: n * self.horizon]).reshape(n, self.horizon) > 0.5

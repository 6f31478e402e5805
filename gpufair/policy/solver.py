"""One LP/MILP entry point for every optimisation-based policy.

Gavel (max-min fairness LP), Themis (0-1 auction MILPs) and Shockwave (planning-window MILP)
all need the same thing every scheduling round: solve a model given in matrix form, quickly,
deterministically, and without ever crashing the scheduler because of the solver. Keeping that
in one place means the policies only build matrices, and solver quirks (licenses, status
codes, thread pools, output banners) are handled once.

Two backends are supported:

* **Gurobi** (``gurobipy``), used when it imports, a license works and the model fits. The
  pip wheel ships a size-limited license (at most 2000 variables and 2000 linear
  constraints), so ``"auto"`` checks the size first and still catches Gurobi's own
  "model too large" error, falling back to HiGHS instead of failing the round.
* **HiGHS** (``highspy``), always available (a hard dependency), used for everything else.

The model is passed to both solvers as whole arrays (CSR/CSC), never element by element:
the scheduler calls this every round on models with tens of thousands of variables, and a
Python loop per variable would cost more than the solve itself.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

import highspy
import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    MatrixLike = sp.spmatrix | sp.sparray | np.ndarray

__all__ = [
    "BACKENDS",
    "GUROBI_SIZE_LIMITED_MAX_CONSTRS",
    "GUROBI_SIZE_LIMITED_MAX_VARS",
    "LP_METHODS",
    "LinearProgram",
    "Solution",
    "SolveOptions",
    "Status",
    "available_backends",
    "gurobi_fits",
    "reset_fallback_log",
    "solve",
]

logger = logging.getLogger("gpufair.solver")


_HIGHS_BANNER_LOCK = threading.Lock()
_highs_banner_shown = False


def _new_highs() -> highspy.Highs:
    """A ``Highs`` object whose banner goes to the log, never to stdout.

    Recent highspy prints its banner on file descriptor 1 when the process's first ``Highs``
    is created, before ``output_flag`` can be set, so ``gpufair simulate --json`` on a default
    install was not JSON. The first creation runs with fd 1 pointed at a temporary file and
    what HiGHS wrote there is logged at DEBUG; later ones print nothing.
    """
    global _highs_banner_shown
    if _highs_banner_shown:
        return highspy.Highs()
    with _HIGHS_BANNER_LOCK:
        if _highs_banner_shown:
            return highspy.Highs()
        sys.stdout.flush()
        saved = os.dup(1)
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 1)
            try:
                h = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", "replace").strip()
        _highs_banner_shown = True
    if text:
        logger.debug("HiGHS: %s", " ".join(text.split()))
    return h

#: Accepted values of :attr:`SolveOptions.backend`.
BACKENDS: tuple[str, ...] = ("auto", "gurobi", "highs", "ecos")
#: Accepted values of :attr:`SolveOptions.lp_method`.
LP_METHODS: tuple[str, ...] = ("default", "simplex", "ipm")

#: Limits of the size-limited license bundled with the ``gurobipy`` pip wheel.
GUROBI_SIZE_LIMITED_MAX_VARS = 2000
GUROBI_SIZE_LIMITED_MAX_CONSTRS = 2000

# Gurobi error codes that mean "this license cannot solve this model" (as opposed to a bug or
# a numerical failure): GRB.Error.NO_LICENSE and GRB.Error.SIZE_LIMIT_EXCEEDED. Kept as plain
# ints so that this module never needs gurobipy to import.
_GRB_NO_LICENSE = 10009
_GRB_SIZE_LIMIT_EXCEEDED = 10010


class Status(str, Enum):
    """Outcome of a solve, the same vocabulary for every backend."""

    OPTIMAL = "optimal"
    #: A time/gap/node limit stopped the solver, but it has a feasible incumbent.
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    #: A limit stopped the solver before it found any feasible point.
    NO_SOLUTION = "no_solution"
    ERROR = "error"


# --------------------------------------------------------------------------------------------
# Problem, options, solution
# --------------------------------------------------------------------------------------------


def _as_matrix(name: str, value: MatrixLike, n: int) -> sp.csr_array:
    """Convert a dense or sparse constraint matrix to canonical CSR without Python loops.

    Canonical (sorted, no duplicate entries) matters because HiGHS rejects duplicate entries;
    the caller's matrix is copied before being canonicalised so it is never mutated.
    """
    if sp.issparse(value):
        # Copy: the model must not change if the caller later edits its matrix in place.
        mat = sp.csr_array(value, dtype=np.float64, copy=True)
        mat.sum_duplicates()
    else:
        dense = np.asarray(value, dtype=np.float64)
        if dense.ndim != 2:
            raise ValueError(f"{name} must be 2-D (rows x variables), got shape {dense.shape}")
        mat = sp.csr_array(dense)
    if mat.shape[1] != n:
        raise ValueError(f"{name} has {mat.shape[1]} columns but c has {n} entries")
    if not np.all(np.isfinite(mat.data)):
        raise ValueError(f"{name} contains NaN or infinite coefficients")
    return mat


def _as_vector(name: str, value: ArrayLike, size: int, size_of: str) -> np.ndarray:
    """A 1-D float64 copy of ``value``; scalars broadcast to ``size`` (used for bounds)."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(size, float(arr))
    elif arr.ndim != 1 or arr.size != size:
        raise ValueError(f"{name} has shape {arr.shape} but {size_of} needs {size} entries")
    else:
        arr = arr.copy()
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} contains NaN")
    return arr


@dataclass(frozen=True, eq=False)
class LinearProgram:
    """``min/max c·x + constant  s.t.  A_ub x <= b_ub,  A_eq x == b_eq,  lb <= x <= ub``.

    Inputs are validated and normalised once here (matrices to canonical CSR, bounds to
    arrays) so that a malformed model fails loudly at the policy that built it, with the name
    of the offending array, instead of as an opaque solver error, and so that every backend
    can read the arrays directly. ``eq=False`` because element-wise array comparison makes
    dataclass equality meaningless here.
    """

    c: np.ndarray
    A_ub: MatrixLike | None = None
    b_ub: np.ndarray | None = None
    A_eq: MatrixLike | None = None
    b_eq: np.ndarray | None = None
    lb: np.ndarray | float = 0.0
    ub: np.ndarray | float = np.inf
    integrality: np.ndarray | None = None
    maximize: bool = False
    constant: float = 0.0
    name: str = "model"

    def __post_init__(self) -> None:
        c = np.asarray(self.c, dtype=np.float64)
        if c.ndim != 1:
            raise ValueError(f"c must be 1-D, got shape {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ValueError("c contains NaN or infinite coefficients")
        n = c.size
        set_ = object.__setattr__  # frozen dataclass: normalise in place once, here
        set_(self, "c", c.copy())

        for kind in ("ub", "eq"):
            a_name, b_name = f"A_{kind}", f"b_{kind}"
            a, b = getattr(self, a_name), getattr(self, b_name)
            if a is None and b is None:
                continue
            if a is None or b is None:
                missing, given = (a_name, b_name) if a is None else (b_name, a_name)
                raise ValueError(f"{given} is given but {missing} is None")
            mat = _as_matrix(a_name, a, n)
            rhs = _as_vector(b_name, b, mat.shape[0], f"{a_name} with {mat.shape[0]} rows")
            if kind == "eq" and not np.all(np.isfinite(rhs)):
                raise ValueError("b_eq contains infinite values")
            set_(self, a_name, mat)
            set_(self, b_name, rhs)

        lb = _as_vector("lb", self.lb, n, "c")
        ub = _as_vector("ub", self.ub, n, "c")
        if np.any(lb == np.inf):
            raise ValueError("lb contains +inf")
        if np.any(ub == -np.inf):
            raise ValueError("ub contains -inf")
        set_(self, "lb", lb)
        set_(self, "ub", ub)

        if self.integrality is not None:
            integ = np.asarray(self.integrality)
            if integ.ndim != 1 or integ.size != n:
                raise ValueError(f"integrality has shape {integ.shape} but c needs {n} entries")
            if integ.dtype != np.bool_:
                if not np.all(np.isin(integ, (0, 1))):
                    raise ValueError("integrality must be boolean (or 0/1) per variable")
                integ = integ.astype(np.bool_)
            set_(self, "integrality", integ.copy())
        if not np.isfinite(self.constant):
            raise ValueError(f"constant must be finite, got {self.constant}")
        set_(self, "maximize", bool(self.maximize))
        set_(self, "constant", float(self.constant))

    @property
    def num_vars(self) -> int:
        return int(self.c.size)

    @property
    def num_ub(self) -> int:
        """Number of ``<=`` rows."""
        return 0 if self.A_ub is None else int(self.A_ub.shape[0])

    @property
    def num_eq(self) -> int:
        """Number of ``==`` rows."""
        return 0 if self.A_eq is None else int(self.A_eq.shape[0])

    @property
    def num_constraints(self) -> int:
        """Linear rows (``<=`` plus ``==``); variable bounds are not counted, as for Gurobi."""
        return self.num_ub + self.num_eq

    @property
    def is_mip(self) -> bool:
        return self.integrality is not None and bool(self.integrality.any())

    def objective_value(self, x: np.ndarray) -> float:
        """``c·x + constant``: what :attr:`Solution.objective` reports for ``x``."""
        return float(self.c @ np.asarray(x, dtype=np.float64)) + self.constant


@dataclass(frozen=True, eq=False)
class SolveOptions:
    """Knobs that every backend understands; anything backend-specific stays in here."""

    backend: str = "auto"
    time_limit_s: float | None = None
    #: Relative MIP gap; ``None`` keeps the solver default (1e-4 for both backends).
    mip_gap: float | None = None
    #: ``None`` lets the solver choose.
    threads: int | None = None
    seed: int = 0
    #: MIP start (Gurobi ``Start`` / HiGHS ``setSolution``); ignored for pure LPs.
    warm_start: np.ndarray | None = None
    #: Algorithm for pure LPs (ignored for MIPs): ``"default"`` keeps the solver's choice
    #: (dual simplex for HiGHS), ``"ipm"`` is interior point + crossover. On large, highly
    #: degenerate LPs such as max-min fairness, ``"ipm"`` is several times faster on HiGHS
    #: (a 50k-variable max-min LP: ~2.5 s instead of ~45 s), but it may return a different
    #: optimal vertex than simplex, so it is opt-in.
    lp_method: str = "default"
    #: Hand the backend the objective multiplied by the power of two that brings its largest
    #: |c| up into [0.5, 1) if it is smaller (the reported objective is the original's,
    #: exactly). For models whose costs are all near or below the backends' dual tolerance
    #: (1e-7): HiGHS can then stop with model status "Unknown" (Shockwave's normalised
    #: welfare at 300 jobs, costs 2e-8 to 4e-5). Opt-in, and best kept for a retry: on the
    #: LPs that solve either way it made HiGHS's simplex 2-10x slower for the same optimum.
    scale_objective: bool = False
    #: HiGHS only: its ``user_objective_scale`` (costs times 2**k inside HiGHS, which hands
    #: back the original's objective, point and duals). A modest fixed k, unlike the above,
    #: lifts costs of 1e-11 to 1e-5 off the dual tolerance without making the simplex's
    #: iterations dearer: see Shockwave's ``_LP_OBJECTIVE_SCALE``. 0: HiGHS's own scaling.
    highs_objective_scale: int = 0

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.lp_method not in LP_METHODS:
            raise ValueError(f"lp_method must be one of {LP_METHODS}, got {self.lp_method!r}")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"time_limit_s must be > 0, got {self.time_limit_s}")
        if self.mip_gap is not None and not self.mip_gap >= 0:
            raise ValueError(f"mip_gap must be >= 0, got {self.mip_gap}")
        if not 0 <= self.highs_objective_scale <= 20:
            raise ValueError("highs_objective_scale must be in 0..20, got "
                             f"{self.highs_objective_scale}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not 0 <= self.seed <= 2_000_000_000:
            raise ValueError(f"seed must be in [0, 2e9], got {self.seed}")
        if self.warm_start is not None:
            ws = np.asarray(self.warm_start, dtype=np.float64)
            if ws.ndim != 1:
                raise ValueError(f"warm_start must be 1-D, got shape {ws.shape}")
            object.__setattr__(self, "warm_start", ws)


@dataclass(frozen=True, eq=False)
class Solution:
    """Result of :func:`solve`.

    ``objective`` is in the problem's own sense and includes ``constant``. ``backend`` is the
    solver that actually produced the result (it can differ from the one requested when a
    fallback happened; ``message`` then says why). ``solve_time_s`` is wall-clock time of the
    whole :func:`solve` call, model construction included, because that is what counts
    against a scheduling round.
    """

    status: Status
    x: np.ndarray | None
    objective: float | None
    backend: str
    solve_time_s: float
    mip_gap: float | None = None
    message: str = ""
    #: An LP solved to optimality by HiGHS or Gurobi: each row's dual, the objective's rate of
    #: change per unit of its right-hand side (≥ 0 for a binding ≤ row of a maximisation),
    #: the A_ub rows then the A_eq rows. None for MILPs, ECOS and any other stop.
    duals: np.ndarray | None = None

    @property
    def ok(self) -> bool:
        """True when ``x`` is a usable (feasible) point."""
        return self.status in (Status.OPTIMAL, Status.FEASIBLE) and self.x is not None


@dataclass(frozen=True)
class _Raw:
    """What a backend reports before backend-independent post-processing.

    ``status=None`` means "infeasible or unbounded, the solver cannot tell which".
    """

    status: Status | None
    x: np.ndarray | None = None
    objective: float | None = None
    mip_gap: float | None = None
    message: str = ""
    duals: np.ndarray | None = None


class _GurobiUnusable(Exception):
    """Gurobi cannot solve this model here (license/size); the caller should fall back."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.reason = reason


# --------------------------------------------------------------------------------------------
# Fallback logging (once per process)
# --------------------------------------------------------------------------------------------

_FALLBACK_LOGGED: set[str] = set()
_FALLBACK_LOCK = threading.Lock()


def _log_fallback_once(key: str, reason: str) -> None:
    """Log a fallback to HiGHS once per process and reason, at INFO: it is expected (the pip
    licence is size-limited), so it must not alarm users the way a WARNING does.

    The scheduler solves every round, often with the same model size; a warning per solve
    would flood the log with the same line, while one line per reason keeps the fact visible.
    """
    with _FALLBACK_LOCK:
        if key in _FALLBACK_LOGGED:
            return
        _FALLBACK_LOGGED.add(key)
    logger.info("%s; using HiGHS instead (logged once per process)", reason)


def reset_fallback_log() -> None:
    """Forget which fallbacks were already logged, so the next one is logged again.

    Meant for tests (each test can then observe the "log once" behaviour independently) and
    for long-running daemons that want to re-announce fallbacks after a configuration reload.
    """
    with _FALLBACK_LOCK:
        _FALLBACK_LOGGED.clear()


# --------------------------------------------------------------------------------------------
# Gurobi
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _GurobiState:
    env: Any | None  # gurobipy.Env when usable
    size_limited: bool
    reason: str  # why env is None


_GUROBI_STATE: _GurobiState | None = None
_GUROBI_INIT_LOCK = threading.Lock()
# Gurobi environments are not thread-safe; every model shares the one cached env, so solves
# are serialised. The scheduler solves one model at a time anyway.
_GUROBI_SOLVE_LOCK = threading.Lock()


def _probe_gurobi() -> _GurobiState:
    """Import gurobipy, start one quiet environment and find out whether it is size-limited.

    Starting an environment costs milliseconds and, unless OutputFlag is 0 *before* start,
    prints a license banner, hence exactly one quiet environment per process. The size limit
    is detected by optimising an empty model one variable over the pip limit (a few ms, once),
    so that an unrestricted license is not needlessly held to the pip limits.
    """
    try:
        import gurobipy as gp
    except ImportError as exc:
        return _GurobiState(None, True, f"gurobipy is not importable ({exc})")
    try:
        env = gp.Env(empty=True)
        env.setParam("OutputFlag", 0)
        env.start()
    except gp.GurobiError as exc:
        return _GurobiState(None, True, f"no usable Gurobi license (error {exc.errno}: {exc})")
    try:
        with gp.Model("gpufair_license_probe", env=env) as probe:
            probe.addMVar(GUROBI_SIZE_LIMITED_MAX_VARS + 1)
            probe.optimize()
        size_limited = False
    except gp.GurobiError as exc:
        if exc.errno != _GRB_SIZE_LIMIT_EXCEEDED:
            env.dispose()
            return _GurobiState(None, True, f"Gurobi license check failed ({exc.errno}: {exc})")
        size_limited = True
    return _GurobiState(env, size_limited, "")


def _gurobi_state() -> _GurobiState:
    """The process-wide Gurobi state, probed lazily on first use (never at import time)."""
    global _GUROBI_STATE
    with _GUROBI_INIT_LOCK:
        if _GUROBI_STATE is None:
            _GUROBI_STATE = _probe_gurobi()
        return _GUROBI_STATE


def available_backends() -> tuple[str, ...]:
    """Backends that can run here: ``"gurobi"`` only if gurobipy imports *and* is licensed."""
    names = ["gurobi"] if _gurobi_state().env is not None else []
    names.append("highs")
    if importlib.util.find_spec("ecos") is not None:
        names.append("ecos")
    return tuple(names)


def gurobi_fits(problem: LinearProgram) -> bool:
    """Cheap pre-check: can the installed Gurobi license take a model of this size?

    With the size-limited pip license this compares against
    :data:`GUROBI_SIZE_LIMITED_MAX_VARS` / :data:`GUROBI_SIZE_LIMITED_MAX_CONSTRS`; with an
    unrestricted license every model fits; without a usable Gurobi nothing does. It avoids
    building a large Gurobi model only to be refused at ``optimize()``.
    """
    state = _gurobi_state()
    if state.env is None:
        return False
    if not state.size_limited:
        return True
    return (
        problem.num_vars <= GUROBI_SIZE_LIMITED_MAX_VARS
        and problem.num_constraints <= GUROBI_SIZE_LIMITED_MAX_CONSTRS
    )


_GRB_STATUS_NAMES = {
    1: "LOADED", 2: "OPTIMAL", 3: "INFEASIBLE", 4: "INF_OR_UNBD", 5: "UNBOUNDED", 6: "CUTOFF",
    7: "ITERATION_LIMIT", 8: "NODE_LIMIT", 9: "TIME_LIMIT", 10: "SOLUTION_LIMIT",
    11: "INTERRUPTED", 12: "NUMERIC", 13: "SUBOPTIMAL", 14: "INPROGRESS", 15: "USER_OBJ_LIMIT",
    16: "WORK_LIMIT", 17: "MEM_LIMIT", 18: "LOCALLY_OPTIMAL", 19: "LOCALLY_INFEASIBLE",
}
_GRB_LIMIT_STATUSES = frozenset({7, 8, 9, 10, 11, 15, 16, 17})


def _map_gurobi_status(code: int, sol_count: int) -> Status | None:
    """Gurobi ``Model.Status`` (+ incumbent count) to :class:`Status`; None = INF_OR_UNBD."""
    if code == 2:  # OPTIMAL
        return Status.OPTIMAL
    if code == 3:  # INFEASIBLE
        return Status.INFEASIBLE
    if code == 4:  # INF_OR_UNBD
        return None
    if code == 5:  # UNBOUNDED
        return Status.UNBOUNDED
    if code in _GRB_LIMIT_STATUSES or code == 6:  # 6 = CUTOFF
        return Status.FEASIBLE if sol_count > 0 else Status.NO_SOLUTION
    if code in (12, 13, 18):  # NUMERIC, SUBOPTIMAL, LOCALLY_OPTIMAL
        return Status.FEASIBLE if sol_count > 0 else Status.ERROR
    return Status.ERROR


def _solve_gurobi(problem: LinearProgram, opts: SolveOptions) -> _Raw:
    """Solve with Gurobi's matrix API; raise :class:`_GurobiUnusable` on license problems."""
    import gurobipy as gp
    from gurobipy import GRB

    env = _gurobi_state().env
    if env is None:  # pragma: no cover - callers check first
        raise _GurobiUnusable("unavailable", _gurobi_state().reason)
    n = problem.num_vars
    try:
        with _GUROBI_SOLVE_LOCK, gp.Model(problem.name, env=env) as model:
            if problem.is_mip:
                vtype: Any = np.where(problem.integrality, GRB.INTEGER, GRB.CONTINUOUS)
            else:
                vtype = GRB.CONTINUOUS
            x = model.addMVar(n, lb=problem.lb, ub=problem.ub, obj=problem.c, vtype=vtype)
            rows = []
            if problem.num_ub:
                rows.append(model.addMConstr(problem.A_ub, x, GRB.LESS_EQUAL, problem.b_ub))
            if problem.num_eq:
                rows.append(model.addMConstr(problem.A_eq, x, GRB.EQUAL, problem.b_eq))
            model.ModelSense = GRB.MAXIMIZE if problem.maximize else GRB.MINIMIZE
            model.ObjCon = problem.constant
            params = model.Params
            params.OutputFlag = 0
            params.Seed = opts.seed
            if opts.time_limit_s is not None:
                params.TimeLimit = opts.time_limit_s
            if opts.mip_gap is not None:
                params.MIPGap = opts.mip_gap
            if opts.threads is not None:
                params.Threads = opts.threads
            if problem.is_mip and opts.warm_start is not None:
                x.Start = opts.warm_start
            if not problem.is_mip and opts.lp_method != "default":
                params.Method = 1 if opts.lp_method == "simplex" else 2  # dual simplex/barrier
            model.optimize()

            code, sol_count = int(model.Status), int(model.SolCount)
            status = _map_gurobi_status(code, sol_count)
            message = "" if code == 2 else f"Gurobi status {_GRB_STATUS_NAMES.get(code, code)}"
            if status not in (Status.OPTIMAL, Status.FEASIBLE):
                return _Raw(status, message=message)
            if sol_count == 0:
                return _Raw(Status.ERROR, message=f"{message or 'optimal'} without a solution")
            gap = float(model.MIPGap) if problem.is_mip else None
            duals = None
            if not problem.is_mip and status is Status.OPTIMAL:
                duals = np.concatenate([np.asarray(r.Pi, dtype=np.float64).ravel()
                                        for r in rows] or [np.zeros(0)])
            return _Raw(status, np.array(x.X, dtype=np.float64), float(model.ObjVal), gap,
                        message, duals)
    except gp.GurobiError as exc:
        if exc.errno == _GRB_SIZE_LIMIT_EXCEEDED:
            raise _GurobiUnusable(
                "size", f"Gurobi refused model '{problem.name}' ({n} vars, "
                f"{problem.num_constraints} constraints): {exc}"
            ) from exc
        if exc.errno == _GRB_NO_LICENSE:
            raise _GurobiUnusable("license", f"Gurobi license error: {exc}") from exc
        raise _GurobiUnusable("error", f"Gurobi error {exc.errno}: {exc}") from exc


# --------------------------------------------------------------------------------------------
# HiGHS
# --------------------------------------------------------------------------------------------

_HMS = highspy.HighsModelStatus
_HIGHS_LIMITS = frozenset({
    _HMS.kTimeLimit, _HMS.kIterationLimit, _HMS.kSolutionLimit, _HMS.kObjectiveBound,
    _HMS.kObjectiveTarget, _HMS.kInterrupt, _HMS.kHighsInterrupt, _HMS.kMemoryLimit,
})
_PRIMAL_FEASIBLE = int(highspy.SolutionStatus.kSolutionStatusFeasible)

# The HiGHS thread pool is process-global and fixed at first use: a later run asking for a
# different "threads" value fails with kError unless the pool is rebuilt. Track the explicit
# value the pool was built with and rebuild only when it changes; the lock keeps a rebuild
# from happening under a concurrent run.
_HIGHS_LOCK = threading.Lock()
_highs_pool_threads: int | None = None


def _map_highs_status(model_status: highspy.HighsModelStatus, primal_feasible: bool
                      ) -> Status | None:
    """HiGHS model status (+ whether a feasible primal point exists) to :class:`Status`.

    None = kUnboundedOrInfeasible. A limit with a feasible point is FEASIBLE whatever the
    limit was; without one it is NO_SOLUTION. kUnknown with a feasible point is also
    treated as FEASIBLE: the point satisfies the model even if optimality was not proven.
    """
    if model_status == _HMS.kOptimal:
        return Status.OPTIMAL
    if model_status == _HMS.kInfeasible:
        return Status.INFEASIBLE
    if model_status == _HMS.kUnbounded:
        return Status.UNBOUNDED
    if model_status == _HMS.kUnboundedOrInfeasible:
        return None
    if model_status in _HIGHS_LIMITS:
        return Status.FEASIBLE if primal_feasible else Status.NO_SOLUTION
    if model_status == _HMS.kUnknown and primal_feasible:
        return Status.FEASIBLE
    return Status.ERROR


def _solve_highs(problem: LinearProgram, opts: SolveOptions) -> _Raw:
    """Solve with HiGHS, passing the whole model as CSC arrays in one ``passModel`` call."""
    global _highs_pool_threads
    n = problem.num_vars
    blocks = [m for m in (problem.A_ub, problem.A_eq) if m is not None]
    if not blocks:
        a = sp.csc_array((0, n), dtype=np.float64)
    elif len(blocks) == 1:
        a = blocks[0].tocsc()
    else:
        a = sp.vstack(blocks, format="csc")
    inf = np.inf
    row_lower = np.concatenate([np.full(problem.num_ub, -inf),
                                problem.b_eq if problem.num_eq else np.empty(0)])
    row_upper = np.concatenate([problem.b_ub if problem.num_ub else np.empty(0),
                                problem.b_eq if problem.num_eq else np.empty(0)])
    # The array overload reads n integrality entries even for an LP (an empty array reads
    # garbage), so always pass a full vector; all-zero means "continuous" and HiGHS then
    # solves it as an LP.
    if problem.is_mip:
        integrality = problem.integrality.astype(np.int32)
    else:
        integrality = np.zeros(n, dtype=np.int32)

    h = _new_highs()
    h.setOptionValue("output_flag", False)
    status = h.passModel(
        n, a.shape[0], a.nnz, int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMaximize if problem.maximize else highspy.ObjSense.kMinimize),
        problem.constant, problem.c, problem.lb, problem.ub, row_lower, row_upper,
        a.indptr.astype(np.int32, copy=False), a.indices.astype(np.int32, copy=False),
        a.data, integrality,
    )
    if status == highspy.HighsStatus.kError:
        return _Raw(Status.ERROR, message="HiGHS rejected the model (passModel error)")
    h.setOptionValue("random_seed", int(opts.seed))
    if opts.time_limit_s is not None:
        h.setOptionValue("time_limit", float(opts.time_limit_s))
    if opts.mip_gap is not None:
        h.setOptionValue("mip_rel_gap", float(opts.mip_gap))
    if not problem.is_mip and opts.lp_method != "default":
        h.setOptionValue("solver", opts.lp_method)
    if opts.highs_objective_scale:
        h.setOptionValue("user_objective_scale", int(opts.highs_objective_scale))
    if problem.is_mip and opts.warm_start is not None:
        # A start HiGHS cannot use (e.g. infeasible) is just ignored by it, as documented.
        h.setSolution(n, np.arange(n, dtype=np.int32), opts.warm_start)

    with _HIGHS_LOCK:
        if opts.threads is not None:
            h.setOptionValue("threads", int(opts.threads))
            if _highs_pool_threads != opts.threads:
                highspy.Highs.resetGlobalScheduler(True)
                _highs_pool_threads = opts.threads
        run_status = h.run()

    model_status = h.getModelStatus()
    info = h.getInfo()
    primal_feasible = int(info.primal_solution_status) == _PRIMAL_FEASIBLE
    mapped = _map_highs_status(model_status, primal_feasible)
    message = "" if model_status == _HMS.kOptimal else h.modelStatusToString(model_status)
    if run_status == highspy.HighsStatus.kError and mapped is Status.ERROR:
        message = f"HiGHS run error ({message})"
    if mapped not in (Status.OPTIMAL, Status.FEASIBLE):
        return _Raw(mapped, message=message)
    if not primal_feasible:
        return _Raw(Status.ERROR, message=f"{message or 'optimal'} without a feasible point")
    found = h.getSolution()
    x = np.asarray(found.col_value, dtype=np.float64)
    gap = None
    if problem.is_mip and np.isfinite(info.mip_gap):
        gap = float(info.mip_gap)
    duals = None
    if not problem.is_mip and mapped is Status.OPTIMAL and getattr(found, "dual_valid", False):
        duals = np.asarray(found.row_dual, dtype=np.float64)
    return _Raw(mapped, x, float(info.objective_function_value), gap, message, duals)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------

# ECOS exit flags (ecos.h): optimal, primal/dual infeasible, and "close to" each of those.
_ECOS_OPTIMAL, _ECOS_PINF, _ECOS_DINF = 0, 1, 2
_ECOS_INACCURATE = 10


def _solve_ecos(problem: LinearProgram, opts: SolveOptions) -> _Raw:
    """Solve an LP with ECOS, the interior-point solver the Gavel/Shockwave artifacts use.

    Interior-point solutions of degenerate LPs are not vertices: ties are split rather than
    decided, and variables at a bound sit a hair inside it. Gavel's round mechanism orders
    jobs by allocation / received share, so those hair-widths decide who runs; reproducing
    the artifacts' numbers needs the same kind of solver, not just the same optimum.
    """
    import ecos

    if problem.is_mip:
        return _Raw(Status.ERROR, message="ECOS solves LPs only; use HiGHS or Gurobi for MILPs")
    n = problem.num_vars
    eye = sp.identity(n, format="csr")
    low, high = np.isfinite(problem.lb), np.isfinite(problem.ub)
    blocks = [problem.A_ub] if problem.A_ub is not None else []
    # ECOS checks for the legacy sparse-matrix interface, not sparse arrays
    g = sp.csc_matrix(sp.vstack([*blocks, -eye[low], eye[high]], format="csc"))
    h = np.concatenate([problem.b_ub if problem.num_ub else np.empty(0),
                        -problem.lb[low], problem.ub[high]])
    c = -problem.c if problem.maximize else problem.c
    kwargs: dict[str, Any] = {"verbose": False}   # a solver's output never reaches stdout
    if problem.num_eq:
        kwargs.update(A=sp.csc_matrix(problem.A_eq), b=problem.b_eq)
    result = ecos.solve(c, g, h, {"l": g.shape[0], "q": [], "e": 0}, **kwargs)
    flag = int(result["info"]["exitFlag"])
    if flag in (_ECOS_OPTIMAL, _ECOS_INACCURATE):
        x = np.asarray(result["x"], dtype=np.float64)
        status = Status.OPTIMAL if flag == _ECOS_OPTIMAL else Status.FEASIBLE
        return _Raw(status, x, problem.objective_value(x))
    if flag in (_ECOS_PINF, _ECOS_PINF + _ECOS_INACCURATE):
        return _Raw(Status.INFEASIBLE, message="ECOS: primal infeasible")
    if flag in (_ECOS_DINF, _ECOS_DINF + _ECOS_INACCURATE):
        return _Raw(Status.UNBOUNDED, message="ECOS: dual infeasible (unbounded)")
    return _Raw(Status.ERROR, message=f"ECOS: {result['info'].get('infostring', flag)}")


_BACKEND_FUNCS = {"gurobi": _solve_gurobi, "highs": _solve_highs, "ecos": _solve_ecos}


def _run_backend(name: str, problem: LinearProgram, opts: SolveOptions) -> _Raw:
    """Run one backend and settle "infeasible or unbounded" with a zero-objective re-solve.

    Both solvers can stop with that ambiguous verdict (presolve proves "no finite optimum"
    without knowing which). Policies react differently to the two (infeasible = a bug in the
    constraints, unbounded = a missing bound), so the same model with c = 0 is solved: if it
    is feasible the original is unbounded, otherwise infeasible. This only costs a second
    solve in that rare case and works identically for LPs and MILPs on both backends.
    """
    raw = _BACKEND_FUNCS[name](problem, opts)
    if raw.status is not None:
        return raw
    feas = replace(problem, c=np.zeros(problem.num_vars), constant=0.0, maximize=False)
    check = _BACKEND_FUNCS[name](feas, replace(opts, warm_start=None))
    if check.status in (Status.OPTIMAL, Status.FEASIBLE):
        return _Raw(Status.UNBOUNDED, message="unbounded (feasible, no finite optimum)")
    if check.status is Status.INFEASIBLE:
        return _Raw(Status.INFEASIBLE, message="infeasible (confirmed by feasibility check)")
    return _Raw(Status.ERROR, message="solver reported infeasible-or-unbounded and the "
                f"feasibility check ended with {check.status}")


def _finish(problem: LinearProgram, raw: _Raw, backend: str, t0: float,
            prefix: str = "") -> Solution:
    """Clean up ``x`` and assemble the public :class:`Solution`.

    Integer variables are rounded (solvers return e.g. 0.9999999 within their integrality
    tolerance, and policies index or compare with these values) and every value is clipped
    into its bounds (a -1e-12 GPU share would break allocation invariants downstream). Both
    changes are within solver tolerances.
    """
    x = raw.x
    if x is not None:
        if problem.is_mip:
            x[problem.integrality] = np.round(x[problem.integrality])
        np.clip(x, problem.lb, problem.ub, out=x)
        x += 0.0  # normalise -0.0 so identical solutions compare and print identically
    message = "; ".join(part for part in (prefix, raw.message) if part)
    return Solution(status=raw.status if raw.status is not None else Status.ERROR, x=x,
                    objective=raw.objective if x is not None else None, backend=backend,
                    solve_time_s=time.perf_counter() - t0, mip_gap=raw.mip_gap,
                    message=message, duals=raw.duals if x is not None else None)


def _trivial(problem: LinearProgram) -> _Raw | None:
    """Settle models no solver needs to see, identically for every backend.

    A model without variables makes HiGHS report "model empty" and Gurobi refuse the
    constraints; crossed bounds (lb > ub) make the backends disagree on error vs infeasible.
    """
    if np.any(problem.lb > problem.ub):
        bad = int(np.flatnonzero(problem.lb > problem.ub)[0])
        return _Raw(Status.INFEASIBLE, message=f"lb > ub for variable {bad}")
    if problem.num_vars:
        return None
    feasible = (problem.num_ub == 0 or bool(np.all(problem.b_ub >= 0))) and (
        problem.num_eq == 0 or bool(np.all(problem.b_eq == 0)))
    if not feasible:
        return _Raw(Status.INFEASIBLE, message="no variables and a violated constant row")
    return _Raw(Status.OPTIMAL, np.zeros(0), problem.constant, None, "no variables")


def _objective_factor(c: np.ndarray) -> float:
    """The power of two that brings max |c| up into [0.5, 1) when it is below: exact to
    multiply and divide by. Never down: costs spanning many decades (a budget raised to the
    100th power) would push the small ones below the tolerances instead."""
    largest = float(np.abs(c).max(initial=0.0))
    if not 0.0 < largest < 0.5:
        return 1.0
    return float(2.0 ** -(np.frexp(largest)[1]))


def solve(problem: LinearProgram, options: SolveOptions | None = None) -> Solution:
    """Solve ``problem`` and never raise because of the solver.

    Backend choice for ``"auto"``: Gurobi when it is licensed and :func:`gurobi_fits`, else
    HiGHS. An explicit ``"gurobi"`` that cannot be honoured (not installed, not licensed,
    model too large) also falls back to HiGHS, because a scheduling round must produce an
    allocation; ``Solution.backend`` and ``Solution.message`` say what happened, and the
    fallback is logged once per process. Other Gurobi failures give ``Status.ERROR`` when
    Gurobi was requested explicitly and fall back under ``"auto"``.

    Raises:
        ValueError: ``options.warm_start`` does not have one entry per variable.
    """
    opts = options if options is not None else SolveOptions()
    if opts.scale_objective:
        factor = _objective_factor(problem.c)
        unscaled = replace(opts, scale_objective=False)
        if factor == 1.0:
            return solve(problem, unscaled)
        found = solve(replace(problem, c=problem.c * factor, constant=problem.constant * factor),
                      unscaled)
        return replace(found, objective=None if found.objective is None
                       else found.objective / factor,
                       duals=None if found.duals is None else found.duals / factor)
    t0 = time.perf_counter()
    if opts.warm_start is not None and opts.warm_start.size != problem.num_vars:
        raise ValueError(f"warm_start has {opts.warm_start.size} entries but the model has "
                         f"{problem.num_vars} variables")
    trivial = _trivial(problem)
    if trivial is not None:
        return _finish(problem, trivial, "none", t0)
    if opts.backend == "highs":
        return _finish(problem, _run_backend("highs", problem, opts), "highs", t0)
    if opts.backend == "ecos":
        if not problem.is_mip:
            return _finish(problem, _run_backend("ecos", problem, opts), "ecos", t0)
        return _finish(problem, _run_backend("highs", problem, opts), "highs", t0,
                       prefix="ECOS solves LPs only; solved with HiGHS")

    state = _gurobi_state()
    if state.env is None:
        fallback = _GurobiUnusable("unavailable", f"Gurobi unavailable: {state.reason}")
    elif not gurobi_fits(problem):
        fallback = _GurobiUnusable(
            "size", f"model '{problem.name}' ({problem.num_vars} vars, "
            f"{problem.num_constraints} constraints) exceeds the size-limited Gurobi license "
            f"({GUROBI_SIZE_LIMITED_MAX_VARS} vars / {GUROBI_SIZE_LIMITED_MAX_CONSTRS} "
            "constraints)")
    else:
        try:
            return _finish(problem, _run_backend("gurobi", problem, opts), "gurobi", t0)
        except _GurobiUnusable as exc:
            if exc.key == "error" and opts.backend == "gurobi":
                return _finish(problem, _Raw(Status.ERROR, message=exc.reason), "gurobi", t0)
            fallback = exc
    _log_fallback_once(fallback.key, fallback.reason)
    raw = _run_backend("highs", problem, opts)
    return _finish(problem, raw, "highs", t0, prefix=f"{fallback.reason}; solved with HiGHS")

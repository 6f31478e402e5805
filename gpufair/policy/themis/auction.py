"""THEMIS's partial-allocation (PA) auction (Cole, Gkatzelis, Goel 2013; spec themis.md §3).

One round, for the participating apps P and the offered GPUs:

1. the proportional-fair (PF) allocation maximises Σ_i ln(1/ρ_i(G_i)) over one XOR bid row per
   app, each GPU to at most one app — a 0-1 winner-determination MILP on the solver layer;
2. each winner i keeps a fraction c_i = Π_{j≠i} V_j(PF) / Π_{j≠i} V_j(PF without i) ≤ 1 of
   its bundle (the paper prints this ratio upside down, spec §3.2): one warm-started re-solve
   without i per winner;
3. c_i · |G_i| becomes whole GPUs by a seeded rounding rule (the paper leaves integrality
   open; spec §3.4), and what is not kept is leftover for the caller to hand out.

Resources are abstract *constraint keys* with capacities: a bid row says how many units of
each key it uses. The policy uses a laminar machine ⊂ rack ⊂ type pool tree (the compact form
of spec §3.3); tests use one key per GPU (the explicit-subset form). The MILP does not care.

Exact shortcuts before the MILP: one pool in all → a multiple-choice knapsack DP; one pool
shared by all rows (one GPU type with rack/machine rows) → the same DP as an upper bound,
certified by placing its selection on the other pools, the MILP only where that fails.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from gpufair.policy.solver import LinearProgram, SolveOptions, Status, solve

ROUNDING_MODES = ("stochastic", "floor", "nearest")
_C_SNAP = 1e-9


@dataclass(frozen=True)
class BidRow:
    """One row of a valuation table: a bundle (its resource use) and ρ with it."""

    uses: Mapping[Hashable, int]
    gpus: int
    rho: float
    tag: Any = None  # what the agent needs to realise the row as GPU ids


@dataclass(frozen=True)
class Bid:
    """An app's XOR bid: ``rho_old`` is the empty row (ρ with what it holds now)."""

    app: str
    rho_old: float
    rows: tuple[BidRow, ...] = ()


@dataclass(frozen=True)
class AuctionOptions:
    backend: str = "auto"
    time_limit_s: float | None = 5.0
    threads: int | None = None
    seed: int = 0
    rho_cap_abs: float = 1e3
    rho_cap_factor: float = 10.0
    #: Deterministic work budget of one auction's MILP solves, in model columns: the PF solve
    #: and each payment re-solve cost their model's column count, and a solve that would
    #: overspend it is not made — PF then starts from the greedy point, a payment is priced
    #: by a greedy refill (both err towards c_i = 1, in the winner's favour, and count in
    #: ``AuctionResult.inexact``). Checked before the wall-clock limits, so a round it binds
    #: is the same on an idle and on a loaded machine. None = no work budget.
    work_budget: int | None = None
    #: Wall-time budget of one auction's MILP solves (PF + payments), None = exact. Solves
    #: stop at their incumbent (spec U21) and, once it is spent, the remaining payments are
    #: priced by a greedy refill; both under-estimate OPT(P without i), so they err towards
    #: c_i = 1, in the winner's favour. ``AuctionResult.inexact`` counts them. What it
    #: decides depends on the machine's load: prefer ``work_budget``.
    budget_s: float | None = 4.0
    #: Use the exact knapsack DP when every row draws from one pool (one GPU type, no
    #: placement-specific rows); when every row draws from one common pool among others
    #: (one GPU type with rack/machine rows), the root-pool relaxation with a feasibility
    #: certificate (see :func:`_relaxed_optimizer`); otherwise, and when False, the MILP.
    knapsack: bool = True
    #: The relaxation path needs at least this many bidders: below it the MILP is a few
    #: milliseconds anyway and stays the one code path small rounds (and their tests) run.
    relax_min_apps: int = 8


@dataclass
class AuctionResult:
    """PF rows (``None`` = empty bundle), hidden-payment fractions and solver accounting."""

    chosen: dict[str, BidRow | None]
    c: dict[str, float]
    objective: float  # Σ ln V over P in the PF allocation (capped ρ)
    solves: int = 0
    solve_s: float = 0.0
    backends: set[str] = field(default_factory=set)
    inexact: int = 0  # solves stopped by a time limit (incumbent used)
    #: Optima (PF or PF without i) proven by the root-pool relaxation: exact, no MILP.
    certified: int = 0
    #: Relaxation optima that could not be realised, so the MILP solved them (still exact).
    milp_fallbacks: int = 0

    def expected_gpus(self) -> dict[str, float]:
        return {a: (r.gpus * self.c[a] if r else 0.0) for a, r in self.chosen.items()}


def rho_cap(bids: Sequence[Bid], options: AuctionOptions) -> float:
    """Spec U3: a finite stand-in for ρ = ∞ (an app holding nothing gets nothing)."""
    finite = [r.rho for b in bids for r in b.rows if math.isfinite(r.rho)]
    finite += [b.rho_old for b in bids if math.isfinite(b.rho_old)]
    return max(options.rho_cap_abs, options.rho_cap_factor * max(finite, default=1.0))


def _weight(rho: float, cap: float) -> float:
    return -math.log(min(max(rho, 1e-300), cap))


# An optimiser: given the apps that take part, (objective incl. empty rows, chosen rows).
Optimizer = Callable[[Sequence[int]], tuple[float, dict[int, int | None]]]


def _run_pa(bids: Sequence[Bid], weights: list[list[float]], base: list[float],
            optimise: Optimizer) -> tuple[dict[int, int | None], dict[int, float], float]:
    """PF, then one re-solve without each winner; shared by the MILP and the brute force."""
    everyone = list(range(len(bids)))
    opt, chosen = optimise(everyone)
    c: dict[int, float] = {}
    for i in everyone:
        b = chosen.get(i)
        if b is None or len(bids) == 1:
            c[i] = 1.0  # nothing to scale; a lone bidder pays nothing (empty product)
            continue
        without, _ = optimise([j for j in everyone if j != i])
        ln_c = (opt - weights[i][b]) - without
        value = math.exp(min(0.0, ln_c))
        c[i] = 1.0 if value >= 1.0 - _C_SNAP else value
    return chosen, c, opt


def _milp_optimizer(bids: Sequence[Bid], weights: list[list[float]], base: list[float],
                    capacity: Mapping[Hashable, int], options: AuctionOptions,
                    stats: AuctionResult, pf_rows: Mapping[int, int] | None = None
                    ) -> Optimizer:
    """PF as a 0-1 MILP over (app, row) variables; re-solves only change bounds.

    ``pf_rows`` is a PF optimum found elsewhere (the relaxation path): it becomes the
    incumbent, so every later solve is a payment re-solve warm-started from it.
    """
    owner, row_of, cols = [], [], []
    for i, bid in enumerate(bids):
        for b in range(len(bid.rows)):
            owner.append(i)
            row_of.append(b)
    n = len(owner)
    keys = {k: r for r, k in enumerate(capacity)}
    gain = np.array([weights[i][b] - base[i] for i, b in zip(owner, row_of, strict=True)])
    data, rows_idx = [], []
    for col, (i, b) in enumerate(zip(owner, row_of, strict=True)):
        for key, units in bids[i].rows[b].uses.items():
            if key not in keys:
                raise ValueError(f"bid row of {bids[i].app!r} uses unknown resource {key!r}")
            data.append(float(units))
            rows_idx.append(len(bids) + keys[key])
            cols.append(col)
        data.append(1.0)
        rows_idx.append(i)
        cols.append(col)
    a_ub = sp.csr_array((data, (rows_idx, cols)), shape=(len(bids) + len(keys), n))
    b_ub = np.concatenate([np.ones(len(bids)), np.array([float(capacity[k]) for k in keys])])
    owner_arr = np.array(owner, dtype=int)
    incumbent: dict[str, np.ndarray] = {}
    gpus = np.array([bids[i].rows[b].gpus for i, b in zip(owner, row_of, strict=True)])
    greedy = _Greedy(gain, owner_arr, gpus, a_ub[len(bids):].tocsc(), b_ub[len(bids):])
    started = time.perf_counter()
    progress = {"winners": 0, "done": 0, "work": 0}
    if pf_rows is not None:
        start = np.zeros(n)
        column = {(i, b): k for k, (i, b) in enumerate(zip(owner, row_of, strict=True))}
        for i, b in pf_rows.items():
            start[column[i, b]] = 1.0
        incumbent["x"] = start
        progress["winners"] = len(pf_rows)

    def affordable() -> bool:
        """Whether one more solve fits the work budget (and charge it if so)."""
        if options.work_budget is not None and progress["work"] + n > options.work_budget:
            return False
        progress["work"] += n
        return True

    def limit() -> float | None:
        """PF gets half the budget; payments share what is left evenly; 0 = spent."""
        if options.budget_s is None:
            return options.time_limit_s
        left = options.budget_s - (time.perf_counter() - started)
        if "x" in incumbent:
            left /= max(1, progress["winners"] - progress["done"])
            progress["done"] += 1
        else:
            left /= 2
        return 0.0 if left <= 0 else min(options.time_limit_s or math.inf, max(0.01, left))

    base_total = sum(base)

    def value(x: np.ndarray) -> float:
        """gain·x for a 0-1 point, exactly rounded (``math.fsum`` of the chosen columns):
        the same on every machine. BLAS's dot splits vectors over 10,000 entries across
        its threads (a result that depends on their number) and, on 2 busy cores, took
        6-30 ms per call: once per payment, 984 payments at 10,000 jobs (issue 30)."""
        chosen = np.flatnonzero(x)
        return math.fsum((gain[chosen] * x[chosen]).tolist())

    def optimise(apps: Sequence[int]) -> tuple[float, dict[int, int | None]]:
        if len(apps) == len(bids) - 1:  # PF without one app: the payment re-solves
            # the one app left out, from the sums of the indices (exact in integers)
            missing = [len(bids) * (len(bids) - 1) // 2 - sum(apps)]
        else:
            missing = sorted(set(range(len(bids))) - set(apps))
        constant = base_total - sum(base[i] for i in missing)
        if n == 0:
            return constant, {}
        ub = np.ones(n)
        for i in missing:
            ub[owner_arr == i] = 0.0
        # the PF point without the removed app is feasible; the first solve starts greedy,
        # so a time limit always leaves an incumbent at least as good as greedy
        warm = incumbent["x"] * ub if "x" in incumbent else greedy.fill()
        over_work = not affordable()
        time_limit = None if over_work else limit()
        if "x" in incumbent and (over_work or time_limit == 0.0):
            # a budget is spent (a solver may overrun its own time limit by its set-up time):
            # price the rest by a greedy refill of the freed GPUs, a lower bound on
            # OPT(P \ i)
            x = greedy.fill(start=warm, allowed=ub)
            stats.inexact += 1
            return float(constant + value(x)), {}
        if over_work:   # no PF solve fits the work budget: the greedy point, load or not
            stats.inexact += 1
            x = warm
        else:
            problem = LinearProgram(c=gain, A_ub=a_ub, b_ub=b_ub, lb=0.0, ub=ub,
                                    integrality=np.ones(n, dtype=bool), maximize=True,
                                    constant=constant, name="themis_pf")
            sol = solve(problem, SolveOptions(backend=options.backend, mip_gap=0.0,
                                              time_limit_s=time_limit or None,
                                              threads=options.threads, seed=options.seed,
                                              warm_start=warm))
            stats.solves += 1
            stats.solve_s += sol.solve_time_s
            stats.backends.add(sol.backend)
            stats.inexact += sol.status is not Status.OPTIMAL
            x = np.round(sol.x) if sol.ok else warm * ub  # never fail a round
        if "x" not in incumbent:
            incumbent["x"] = x
            progress["winners"] = len({owner[k] for k in np.flatnonzero(x > 0.5)})
        chosen = {int(owner[k]): int(row_of[k]) for k in np.flatnonzero(x > 0.5)}
        return float(constant + value(x)), chosen

    return optimise


class _Greedy:
    """Feasible PF points by greedy: rows by gain per GPU, each app at most once.

    Used as the first solve's MIP start (so a time limit always leaves an incumbent) and to
    price payments once the budget is spent: refilling the GPUs a winner frees gives a
    lower bound on OPT(P without i). Vectorised over the capacity matrix because it runs
    once per winner on models with thousands of rows.
    """

    def __init__(self, gain: np.ndarray, owner: np.ndarray, gpus: np.ndarray,
                 cap_matrix: sp.csc_array, capacity: np.ndarray) -> None:
        self.gain, self.owner = gain, owner
        self.order = np.lexsort((np.arange(len(gain)), -gain / np.maximum(1, gpus)))
        self.cap_matrix, self.capacity = cap_matrix, capacity
        ptr, idx, data = cap_matrix.indptr, cap_matrix.indices.tolist(), cap_matrix.data.tolist()
        self.columns = [tuple(zip(idx[ptr[k]:ptr[k + 1]], data[ptr[k]:ptr[k + 1]], strict=True))
                        for k in range(len(gain))]

    def fill(self, start: np.ndarray | None = None, allowed: np.ndarray | None = None
             ) -> np.ndarray:
        m = self.cap_matrix
        x = np.zeros(len(self.gain)) if start is None else start.copy()
        left = self.capacity - m @ x
        taken = np.zeros(self.owner.max() + 1 if len(self.owner) else 0, dtype=bool)
        taken[self.owner[x > 0.5]] = True
        ok = (self.gain > 0) & ~taken[self.owner]
        if allowed is not None:
            ok &= allowed > 0
        over = (m.data > left[m.indices]).astype(int)
        ok &= np.add.reduceat(over, m.indptr[:-1]) == 0 if m.nnz else ok
        room = left.tolist()
        for k in self.order[ok[self.order]].tolist():
            column = self.columns[k]
            if taken[self.owner[k]] or any(need > room[r] for r, need in column):
                continue
            for r, need in column:
                room[r] -= need
            taken[self.owner[k]] = True
            x[k] = 1.0
        return x


def _brute_optimizer(bids: Sequence[Bid], weights: list[list[float]], base: list[float],
                     capacity: Mapping[Hashable, int]) -> Optimizer:
    """Exhaustive PF for tiny instances: the reference the MILP is tested against, and fast
    enough (one vectorised pass over all row combinations) to brute-force misreports."""
    keys = {k: r for r, k in enumerate(capacity)}
    combos = np.array(list(itertools.product(*[range(len(b.rows) + 1) for b in bids])),
                      dtype=int).reshape(-1, len(bids))
    used = np.zeros((len(combos), len(keys)))
    values = []
    for i, bid in enumerate(bids):
        table = np.zeros((len(bid.rows) + 1, len(keys)))
        for b, row in enumerate(bid.rows, start=1):
            for key, units in row.uses.items():
                table[b, keys[key]] += units
        used += table[combos[:, i]]
        values.append(np.array([base[i], *weights[i]])[combos[:, i]])
    cap = np.array([float(capacity[k]) for k in keys])
    feasible = np.all(used <= cap + 1e-9, axis=1)

    def optimise(apps: Sequence[int]) -> tuple[float, dict[int, int | None]]:
        out = [i for i in range(len(bids)) if i not in apps]
        mask = feasible & np.all(combos[:, out] == 0, axis=1) if out else feasible
        total = np.sum([values[i] for i in apps], axis=0) if apps else np.zeros(len(combos))
        total = np.where(mask, total, -np.inf)
        best = int(np.argmax(total))  # ties: the first combination in product order
        return float(total[best]), {i: int(combos[best, i]) - 1 for i in apps
                                    if combos[best, i] > 0}

    return optimise


def _knapsack_tables(choices: Sequence[Sequence[tuple[int, float]]], base: Sequence[float],
                     cap: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray],
                                        list[np.ndarray]]:
    """Prefix and suffix tables of a multiple-choice knapsack, with the option each picks.

    ``choices[i]`` are app i's (units, weight) options; ``base[i]`` is its value with none.
    prefix[i][c] is the best value of apps < i within c units, suffix[i][c] of apps >= i;
    picks give the option taken at each capacity (-1: none). Both exact PF paths build on
    these: one max-plus join per "without i" optimum.
    """
    def step(table: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        best = table + base[i]
        pick = np.full(cap + 1, -1, dtype=np.int32)
        for o, (k, w) in enumerate(choices[i]):
            if k > cap:
                continue
            cand = np.full(cap + 1, -np.inf)
            cand[k:] = table[: cap + 1 - k] + w
            better = cand > best + 1e-12
            best = np.where(better, cand, best)
            pick = np.where(better, o, pick)
        return best, pick

    n = len(choices)
    prefix, prefix_picks = [np.zeros(cap + 1)], []
    for i in range(n):
        table, pick = step(prefix[-1], i)
        prefix.append(table)
        prefix_picks.append(pick)
    suffix: list[np.ndarray] = [np.zeros(cap + 1)] * (n + 1)
    suffix_picks: list[np.ndarray] = [np.zeros(0, dtype=np.int32)] * n
    for i in range(n - 1, -1, -1):
        suffix[i], suffix_picks[i] = step(suffix[i + 1], i)
    return prefix, prefix_picks, suffix, suffix_picks


def _single_pool(bids: Sequence[Bid], capacity: Mapping[Hashable, int]) -> Hashable | None:
    """The one resource every row draws from, if there is exactly one (else None)."""
    keys = {k for b in bids for r in b.rows for k in r.uses}
    return next(iter(keys)) if len(keys) == 1 and next(iter(keys)) in capacity else None


def _knapsack_optimizer(bids: Sequence[Bid], weights: list[list[float]], base: list[float],
                        cap: int) -> Optimizer:
    """Exact PF when all rows draw from one pool: a multiple-choice knapsack by DP.

    Prefix tables F_i[c] (best value of apps < i within c GPUs) and suffix tables make every
    "without i" optimum an O(C) max-plus join, so the payments of all winners cost about as
    much as one PF solve — the case of one-GPU-per-server clusters and placement-insensitive
    models, where the MILP's branch and bound spends its time on symmetric optima.
    """
    n = len(bids)
    sizes = [[next(iter(r.uses.values())) for r in b.rows] for b in bids]
    choices = [list(zip(sizes[i], weights[i], strict=True)) for i in range(n)]
    prefix, picks, suffix, _ = _knapsack_tables(choices, base, cap)

    def optimise(apps: Sequence[int]) -> tuple[float, dict[int, int | None]]:
        missing = sorted(set(range(n)) - set(apps))
        if not missing:
            chosen: dict[int, int | None] = {}
            c = cap
            for i in range(n - 1, -1, -1):  # backtrack the prefix tables
                b = int(picks[i][c])
                if b >= 0:
                    chosen[i] = b
                    c -= sizes[i][b]
            return float(prefix[n][cap]), chosen
        if len(missing) > 1:
            raise ValueError("the knapsack optimiser answers PF and PF-without-one only")
        i = missing[0]
        joined = prefix[i] + suffix[i + 1][::-1]  # F_i[c] + B_{i+1}[C - c]
        return float(joined.max()), {}

    return optimise


def _common_pool(bids: Sequence[Bid], capacity: Mapping[Hashable, int]) -> Hashable | None:
    """A resource every bid row uses (the GPU-type pool of a one-type offer), else None.

    With several such resources the tightest is taken: it gives the smaller relaxation."""
    rows = [r for b in bids for r in b.rows]
    if not rows:
        return None
    common = set(rows[0].uses)
    for row in rows[1:]:
        common &= row.uses.keys()
        if not common:
            return None
    keys = [k for k in rows[0].uses if k in common and k in capacity]
    return min(keys, key=lambda k: capacity[k]) if keys else None


_TIE = 1e-12  # rows this close to an app's best of their size count as equally good


def _relaxed_optimizer(bids: Sequence[Bid], weights: list[list[float]], base: list[float],
                       capacity: Mapping[Hashable, int], root: Hashable,
                       milp: Callable[[Mapping[int, int] | None], Optimizer],
                       stats: AuctionResult) -> Optimizer:
    """Exact PF and PF-without-i from the root-pool relaxation plus a realisation check.

    Dropping every capacity row but the one pool all rows share (the GPU type) leaves a
    multiple-choice knapsack: per app and bundle size, its best row. Prefix and suffix DP
    tables price the relaxation of PF and of every PF-without-i (an O(C) join each, as in
    :func:`_knapsack_optimizer`). The relaxation is an upper bound on the true optimum, so
    when its selection can be realised — each selected app given one of its best rows of
    the selected size, with every rack and machine capacity respected — the realised point
    is an optimum of the full MILP (up to ``_TIE`` per app). Realisation is a greedy
    best-fit, tried first incrementally from the PF rows (a payment usually only lets a
    loser or two in) and then from scratch; only a selection it cannot place is sent to the
    MILP (``milp``, built on first use and warm-started from the PF rows), so the results
    are exactly those of the MILP path, and ``stats`` counts both outcomes.

    Pays off when placement-specific rows are many but rarely binding (identical machines,
    placement-sensitive gangs that fit one machine): the MILP's branch and bound then
    spends its time proving what the knapsack bound shows at once.
    """
    n = len(bids)
    cap = int(capacity[root])
    # options[i] = [(units on root, best weight, rows of that size within _TIE of best)]
    options: list[list[tuple[int, float, list[int]]]] = []
    for i, bid in enumerate(bids):
        by_size: dict[int, list[int]] = {}
        for b, row in enumerate(bid.rows):
            by_size.setdefault(int(row.uses[root]), []).append(b)
        opts = []
        for k, rows in by_size.items():
            best = max(weights[i][b] for b in rows)
            opts.append((k, best, [b for b in rows if weights[i][b] >= best - _TIE]))
        options.append(opts)
    units = [{b: {key: int(u) for key, u in row.uses.items()} for b, row in enumerate(bid.rows)}
             for bid in bids]
    cap_of = {key: int(v) for key, v in capacity.items()}
    for i, table in enumerate(units):
        for use in table.values():
            if not use.keys() <= cap_of.keys():
                raise ValueError(f"bid row of {bids[i].app!r} uses unknown resource "
                                 f"{next(k for k in use if k not in cap_of)!r}")

    prefix, ppick, suffix, spick = _knapsack_tables(
        [[(k, w) for k, w, _ in opts] for opts in options], base, cap)

    # Reference paths: PF backtracked through the prefix tables, and the full problem walked
    # forward through the suffix tables; ``*_left[j]`` is the capacity the walk holds at
    # app j. A without-i walk that reaches a reference's capacity at some app follows that
    # reference from there on, so it stops early and only the apps before are explicit.
    # plain lists: the walks index one entry per app, where numpy scalars cost 5x more
    pp = [p.tolist() for p in ppick]
    sp_ = [p.tolist() for p in spick]
    size = [[k for k, _, _ in opts] for opts in options]
    pf_choice = [-1] * n
    pf_left = [0] * (n + 1)
    left = cap
    for j in range(n - 1, -1, -1):
        pf_left[j + 1] = left
        pf_choice[j] = o = pp[j][left]
        if o >= 0:
            left -= size[j][o]
    ref_choice = [-1] * n
    ref_left = [0] * (n + 1)
    left = cap
    for j in range(n):
        ref_left[j] = left
        ref_choice[j] = o = sp_[j][left]
        if o >= 0:
            left -= size[j][o]
    ref_differs = [j for j in range(n) if ref_choice[j] != pf_choice[j]]

    def changes(i: int, c: int) -> dict[int, int]:
        """The relaxation's choice without app ``i`` (prefix apps within ``c`` units), as
        the apps whose option differs from PF's (-1: nothing), i itself included."""
        diff = {i: -1}
        left = c
        for j in range(i - 1, -1, -1):
            if left == pf_left[j + 1]:
                break
            o = pp[j][left]
            if o != pf_choice[j]:
                diff[j] = o
            if o >= 0:
                left -= size[j][o]
        left = cap - c
        stop = n
        for j in range(i + 1, n):
            if left == ref_left[j]:
                stop = j
                break
            o = sp_[j][left]
            if o != pf_choice[j]:
                diff[j] = o
            if o >= 0:
                left -= size[j][o]
        for j in ref_differs[bisect.bisect_left(ref_differs, stop):]:
            diff[j] = ref_choice[j]
        return diff

    def place(todo: Sequence[int], chosen: Mapping[int, int], rows: dict[int, int],
              room: dict[Hashable, int]) -> bool:
        """Greedy best fit of the apps ``todo`` onto ``room``; fills ``rows``."""
        order = sorted(todo, key=lambda j: (len(options[j][chosen[j]][2]),
                                            -options[j][chosen[j]][0], j))
        for j in order:
            pick, slack = -1, math.inf
            for b in options[j][chosen[j]][2]:
                use = units[j][b]
                tight = min(room[key] - u for key, u in use.items())
                if 0 <= tight < slack:
                    pick, slack = b, tight
            if pick < 0:
                return False
            for key, u in units[j][pick].items():
                room[key] -= u
            rows[j] = pick
        return True

    pf: dict[str, Any] = {}
    fallback: dict[str, Optimizer] = {}

    def use_milp(apps: Sequence[int]) -> tuple[float, dict[int, int | None]]:
        stats.milp_fallbacks += 1
        if "opt" not in fallback:
            fallback["opt"] = milp(pf.get("rows"))
        return fallback["opt"](apps)

    def optimise(apps: Sequence[int]) -> tuple[float, dict[int, int | None]]:
        if len(apps) == n:
            chosen = {j: o for j, o in enumerate(pf_choice) if o >= 0}
            rows: dict[int, int] = {}
            room = dict(cap_of)
            if not place(list(chosen), chosen, rows, room):
                return use_milp(apps)
            stats.certified += 1
            pf.update(rows=rows, room=room, value=float(prefix[n][cap]))
            return pf["value"], dict(rows)
        if len(apps) != n - 1:
            raise ValueError("the relaxation optimiser answers PF and PF-without-one only")
        i = n * (n - 1) // 2 - sum(apps)  # the one app left out
        joined = prefix[i] + suffix[i + 1][::-1]  # F_i[c] + B_{i+1}[C - c]
        c_best = int(np.argmax(joined))
        value = float(joined[c_best])
        if "rows" not in pf:  # PF went to the MILP: so do its payments
            return use_milp(apps)
        rows, room = pf["rows"], pf["room"]
        lower = pf["value"] - (weights[i][rows[i]] if i in rows else base[i])
        if value <= lower + 1e-12:  # PF minus i is feasible and meets the bound
            stats.certified += 1
            return lower, {}
        diff = changes(i, c_best)
        # try in place from the PF rows, then undo: only the changed apps move
        removed = {j: rows.pop(j) for j in diff if j in rows}
        for j, b in removed.items():
            for key, u in units[j][b].items():
                room[key] += u
        todo = [j for j, o in diff.items() if o >= 0]
        chosen = {j: diff[j] for j in todo}
        placed: dict[int, int] = {}
        ok = place(todo, chosen, placed, room)
        for j, b in placed.items():
            for key, u in units[j][b].items():
                room[key] += u
        for j, b in removed.items():
            for key, u in units[j][b].items():
                room[key] -= u
            rows[j] = b
        if not ok:
            full = {j: diff.get(j, o) for j, o in enumerate(pf_choice)}
            full = {j: o for j, o in full.items() if o >= 0}
            if not place(list(full), full, {}, dict(cap_of)):
                return use_milp(apps)
        stats.certified += 1
        return value, {}

    return optimise


def partial_allocation(bids: Sequence[Bid], capacity: Mapping[Hashable, int],
                       options: AuctionOptions | None = None, *, brute_force: bool = False
                       ) -> AuctionResult:
    """PF allocation and hidden-payment fractions c_i for one round (Pseudocode 1, l. 6–8)."""
    options = options or AuctionOptions()
    cap = rho_cap(bids, options)
    base = [_weight(b.rho_old, cap) for b in bids]
    weights = [[_weight(r.rho, cap) for r in b.rows] for b in bids]
    result = AuctionResult({}, {}, 0.0)
    started = time.perf_counter()
    pool = _single_pool(bids, capacity) if options.knapsack else None
    root = None
    if options.knapsack and pool is None and len(bids) >= max(2, options.relax_min_apps):
        root = _common_pool(bids, capacity)
    if brute_force:
        optimise = _brute_optimizer(bids, weights, base, capacity)
    elif pool is not None:
        optimise = _knapsack_optimizer(bids, weights, base, int(capacity[pool]))
        result.backends.add("knapsack")
    elif root is not None:
        def milp(pf_rows: Mapping[int, int] | None) -> Optimizer:
            return _milp_optimizer(bids, weights, base, capacity, options, result, pf_rows)
        optimise = _relaxed_optimizer(bids, weights, base, capacity, root, milp, result)
    else:
        optimise = _milp_optimizer(bids, weights, base, capacity, options, result)
    chosen, c, opt = _run_pa(bids, weights, base, optimise)
    result.chosen = {b.app: (b.rows[chosen[i]] if chosen.get(i) is not None else None)
                     for i, b in enumerate(bids)}
    result.c = {b.app: c[i] for i, b in enumerate(bids)}
    result.objective = opt
    if root is not None and result.certified:
        result.backends.add("root-dp")
    if brute_force or pool is not None or root is not None:
        result.solve_s = time.perf_counter() - started  # wall time, MILP fallbacks included
    return result


def round_share(c: float, n: int, legal: Sequence[int], mode: str, rng: random.Random) -> int:
    """Whole GPUs for c·n (spec §3.4/U23): a legal size between the two nearest to c·n.

    ``stochastic`` keeps E[size] = c·n (PA's guarantee in expectation); ``floor`` is the
    conservative deterministic rule; ``nearest`` rounds half up. ``legal`` holds the sizes the
    app can use (its gang sizes, bundles of whole jobs); 0 and n are always legal.
    """
    if mode not in ROUNDING_MODES:
        raise ValueError(f"rounding must be one of {ROUNDING_MODES}, got {mode!r}")
    if c >= 1.0 - _C_SNAP:
        return n
    target = c * n
    sizes = sorted({0, n, *(s for s in legal if 0 < s <= n)})
    lo = max(s for s in sizes if s <= target + 1e-12)
    hi = min(s for s in sizes if s >= target - 1e-12)
    if lo == hi:
        return lo
    frac = (target - lo) / (hi - lo)
    if mode == "floor":
        return lo
    if mode == "nearest":
        return hi if frac >= 0.5 else lo
    return hi if rng.random() < frac else lo  # stochastic

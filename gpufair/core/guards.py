"""The guards between a plan and the actions that carry it out: what a round may not do.

Each guard takes the round's state and its actions and returns the actions it keeps and the
ones it holds back, with the reason. A held-back action keeps its job where it is, so every
action that needed that job's GPUs is held back with it. They run in the one round pipeline
(:mod:`gpufair.core.round`), so the daemon, the dry run and a guarded simulation apply the same
rules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gpufair.model import Action, ClusterState, JobState, Migrate, Preempt, Resize, node_of
from gpufair.model.host_room import HostRoom

#: Priorities of the soft mode are ranks mapped into [1, PRIORITY_TOP], highest first.
PRIORITY_TOP = 1_000_000


@dataclass(frozen=True)
class Deferred:
    """An action a guard held back, and why: ``reason`` in words for the log, ``code``
    (``guard.what``) and ``figures`` for the job's reason (:mod:`gpufair.core.explain`)."""

    action: Action
    reason: str
    code: str = "guard"
    figures: Mapping[str, float | int | str] = field(default_factory=dict)


Guard = Callable[[ClusterState, Sequence[Action]], tuple[list[Action], list[Deferred]]]


def takes_gpus(action: Action) -> bool:
    """Actions that stop a running job on the GPUs it holds (a migration or resize restarts
    it from its checkpoint elsewhere: to the job that is a preemption too)."""
    return isinstance(action, (Preempt, Migrate, Resize))


def hold_back(state: ClusterState, actions: Sequence[Action],
              jobs: Mapping[str, frozenset[str]], reason: str, code: str = "guard",
              figures: Mapping[str, float | int | str] | None = None
              ) -> tuple[list[Action], list[Deferred]]:
    """Drop the actions on ``jobs`` (job id → GPUs it holds) and every action that needs
    those GPUs. A move or preemption dropped that way leaves its own job where it is, so the
    GPUs *it* holds are blocked in turn, until nothing more changes."""
    if not jobs:   # nothing held back: skip indexing every job's GPUs (each guard, each round)
        return list(actions), []
    held = {j.id: frozenset(j.gpus_held) for j in state.jobs}
    staying = dict(jobs)
    # the fixed point as a walk over GPUs: each GPU blocked once looks up the moves and
    # preemptions that need it (one pass per link of a chain of moves rescanned every
    # action before: quadratic on a large first round, issue 30)
    needing: dict[str, list[Action]] = {}
    for action in actions:
        if takes_gpus(action):
            for gpu in getattr(action, "gpu_ids", ()):
                needing.setdefault(gpu, []).append(action)
    blocked = [g for gpus in staying.values() for g in gpus]
    seen: set[str] = set()
    while blocked:
        gpu = blocked.pop()
        if gpu in seen:
            continue
        seen.add(gpu)
        for action in needing.get(gpu, ()):
            if action.job_id not in staying:
                staying[action.job_id] = held.get(action.job_id, frozenset())
                blocked.extend(staying[action.job_id])
    busy = frozenset().union(*staying.values()) if staying else frozenset()
    dropped = [action.job_id in staying or bool(busy.intersection(getattr(action, "gpu_ids",
                                                                           ())))
               for action in actions]
    pointless = _pointless_preemptions(actions, dropped, held)
    kept: list[Action] = []
    deferred: list[Deferred] = []
    for n, action in enumerate(actions):
        if dropped[n] or n in pointless:
            why = reason if dropped[n] else f"it only made room for actions held back ({reason})"
            deferred.append(Deferred(action, why, code, figures or {}))
        else:
            kept.append(action)
    return kept, deferred


def _pointless_preemptions(actions: Sequence[Action], dropped: Sequence[bool],
                           held: Mapping[str, frozenset[str]]) -> set[int]:
    """The kept preemptions whose GPUs only held-back actions wanted: carried out, they
    would stop a job for nothing this round (its GPUs idle, the job restarted by a later
    round). Found by CI under load: a round moved w1 onto w2's GPUs and preempted w2; the
    settling guard held w1's move back but not w2's preemption. A preemption whose GPUs
    no action wants (the plan stops the job for its own sake), or a kept action wants too,
    stays."""
    wanted_by_dropped = {g for n, a in enumerate(actions) if dropped[n]
                         for g in getattr(a, "gpu_ids", ())}
    if not wanted_by_dropped:
        return set()
    wanted_by_kept = {g for n, a in enumerate(actions) if not dropped[n]
                      for g in getattr(a, "gpu_ids", ())}
    return {n for n, a in enumerate(actions)
            if not dropped[n] and isinstance(a, Preempt)
            and (freed := held.get(a.job_id)) and freed & wanted_by_dropped
            and not freed & wanted_by_kept}


def unusable_nodes(state: ClusterState, actions: Sequence[Action]
                   ) -> tuple[list[Action], list[Deferred]]:
    """Jobs holding GPUs on a drained, down or settling node are left as they are this round
    (the policy sees usable nodes only, so it would "preempt" them for nothing)."""
    on_usable = state.layout().node_of_gpu   # usable GPU -> its (usable) node: no parsing
    if all(g in on_usable for j in state.jobs for g in j.gpus_held):
        return list(actions), []   # the common case, at every decision: nothing to hold
    usable = {n.name for n in state.usable_nodes()}
    frozen = {j.id: frozenset(j.gpus_held) for j in state.jobs
              if j.gpus_held and any(g not in on_usable and node_of(g) not in usable
                                     for g in j.gpus_held)}
    return hold_back(state, actions, frozen, "its GPUs are on a drained or settling node",
                     "guard.node_not_usable")


def job_constraints(state: ClusterState, actions: Sequence[Action]
                    ) -> tuple[list[Action], list[Deferred]]:
    """A placement the resource manager would refuse or twist (a node outside the job's
    partition or its --nodelist, a --nodes count broken, another GPU type than it asked) is
    never sent: the job waits for a plan that fits, rather than failing or running split."""
    jobs = {j.id: j for j in state.jobs}
    type_of: dict[str, str] | None = None   # built when a job asks something of its placement
    broken = {}
    for action in actions:
        job = jobs.get(action.job_id)
        gpus = getattr(action, "gpu_ids", ())
        if job is None or not gpus or not job.constrains_placement:
            continue
        if type_of is None:
            type_of = {g: n.gpu_type for n in state.nodes for g in n.gpu_ids()}
        if job.placement_problem(gpus, type_of) is not None:
            broken[job.id] = frozenset(job.gpus_held)
    return hold_back(state, actions, broken,
                     "the planned placement breaks what the job asked of the resource manager",
                     "guard.job_constraints")


def host_room(state: ClusterState, actions: Sequence[Action]
              ) -> tuple[list[Action], list[Deferred]]:
    """A start or move onto a node whose free CPUs or memory cannot hold the job is never
    sent: Slurm would leave the job waiting there (Reason=Resources) on GPUs booked for it.

    Shared placement already avoids such nodes; this holds for every policy, including those
    that place gangs their own way. The room is the nodes' less what the jobs that go on
    running hold, charged action by action in plan order (a move held back here leaves its
    job where it is, uncounted: the next round counts it)."""
    placing = [a for a in actions if getattr(a, "gpu_ids", ())]
    if not placing:
        return list(actions), []
    jobs = {j.id: j for j in state.jobs}
    if all(jobs.get(a.job_id) is None or jobs[a.job_id].host is None for a in placing):
        return list(actions), []      # a simulation: nobody asks for CPUs or memory
    room = HostRoom.of(state)
    if room is None:
        return list(actions), []
    moving = {a.job_id for a in actions if takes_gpus(a)}
    for job in state.active_jobs():
        if job.id not in moving:
            room.take(job, job.gpus_held)
    broken: dict[str, frozenset[str]] = {}
    for action in placing:
        job = jobs.get(action.job_id)
        if job is None or job.host is None:
            continue
        gpus = getattr(action, "gpu_ids", ())
        counts: dict[str, int] = {}
        for gpu in gpus:
            counts[node_of(gpu)] = counts.get(node_of(gpu), 0) + 1
        if all(room.fits(job, node, count) for node, count in counts.items()):
            room.take(job, gpus)
        else:
            broken[job.id] = frozenset(job.gpus_held)
    return hold_back(state, actions, broken,
                     "too few free CPUs or too little memory beside the planned GPUs")


def min_runtime(seconds: float) -> Guard:
    """A job that started less than ``seconds`` ago keeps its GPUs (no thrashing)."""
    def guard(state: ClusterState, actions: Sequence[Action]
              ) -> tuple[list[Action], list[Deferred]]:
        if seconds <= 0:
            return list(actions), []
        jobs = {j.id: j for j in state.jobs}
        young = {}
        for action in actions:
            job = jobs.get(action.job_id)
            if (takes_gpus(action) and job is not None and job.state is JobState.RUNNING
                    and job.start_s is not None and state.time_s - job.start_s < seconds):
                young[job.id] = frozenset(job.gpus_held)
        return hold_back(state, actions, young, f"started less than {seconds:g} s ago",
                         "guard.min_runtime", {"min_runtime_s": seconds})
    return guard


def preemption_cap(share: float) -> Guard:
    """Actions that take GPUs from running jobs (in plan order) free at most ``share`` of all
    GPUs per round; a victim over the cap keeps its GPUs, and so the starts that needed them
    wait too."""
    def guard(state: ClusterState, actions: Sequence[Action]
              ) -> tuple[list[Action], list[Deferred]]:
        takers = [a for a in actions if takes_gpus(a)]
        if not takers:   # a fill between round boundaries only starts: nothing to count
            return list(actions), []
        limit = math.floor(share * state.gpu_count() + 1e-9)
        held = {j.id: j.gpus_held for j in state.jobs}
        freed = 0
        over: dict[str, frozenset[str]] = {}
        for action in takers:
            if action.job_id not in over:
                size = len(held.get(action.job_id, ()))
                if freed + size > limit:
                    over[action.job_id] = frozenset(held.get(action.job_id, ()))
                else:
                    freed += size
        return hold_back(state, actions, over,
                         f"over the preemption cap ({share:.0%} of the GPUs)",
                         "guard.preemption_cap", {"cap_gpus": limit, "freed_gpus": freed})
    return guard


_RUNS = re.compile(r"\d+|\D+")


def natural_key(job_id: str) -> tuple[tuple[int, int, str], ...]:
    """Order of job ids with their digit runs read as numbers (a total order: ties of equal
    value, ``07`` and ``7``, fall back to the text)."""
    return tuple((0, int(part), part) if part.isdigit() else (1, 0, part)
                 for part in _RUNS.findall(job_id))


def rank_priorities(priorities: Mapping[str, float]) -> dict[str, int]:
    """Plan priorities (any scale, higher first) → distinct integer priorities by rank.
    Ties go to the lower job id in natural order: digit runs compare as numbers, so Slurm's
    ``9`` precedes ``10`` and YARN's ``application_…_9`` precedes ``application_…_10``."""
    ordered = sorted(priorities.items(), key=lambda kv: (-kv[1], natural_key(kv[0])))
    return {job_id: PRIORITY_TOP - rank for rank, (job_id, _) in enumerate(ordered)}

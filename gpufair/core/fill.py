"""Work conservation on a live cluster: GPUs the plan leaves idle go to jobs that wait.

Why: the daemon acts at rounds, and a non-preemptive round (a job ended, a job arrived) can
only start what the plan placed on GPUs that are free *now*. A plan made for the next lease
often puts a new job on GPUs still held by a job it means to evict at the round, and it may
leave GPUs to nobody (a gang that did not fit, a job that finished since). Slurm alone would
start a fitting job on such GPUs at once; holding every job back costs GPU-hours nobody gets
(issue 12, item 18: idle GPU-seconds while a fitting job waits).

So, after the diff and the guards, every GPU that is free, usable and not taken by this
round's actions is offered to waiting jobs (a move the guards held back, of a job on a node
being drained or settling, takes nothing): first those the plan wants running but could not
start (their planned GPUs are busy), then the rest by the plan's priorities, then in
submission order (Slurm's FIFO). A filler honours every placement constraint the job asked
for (nodes, node count, GPU type), and the next preemptive round is free to take its GPUs
back like anyone else's.

Only the daemon fills (``[daemon] fill_idle``): the simulator acts on the plan exactly, as the
papers' artifacts do, so its figures stay comparable with theirs.
"""

from __future__ import annotations

from gpufair.model import Action, ClusterState, Job, JobState, Plan, Start, node_of
from gpufair.model.host_room import HostRoom
from gpufair.model.records import NodeLayout
from gpufair.policy.placement import constrained_layout


def free_gpus(state: ClusterState, actions: list[Action]) -> dict[str, list[str]]:
    """Usable node → its GPUs that no active job holds and no action of this round takes.

    A job this round preempts still holds its GPUs here: they are the plan's to give."""
    taken = {g for j in state.active_jobs() for g in j.gpus_held}
    for action in actions:
        taken.update(getattr(action, "gpu_ids", ()))
    return {node.name: [g for g in node.gpu_ids() if g not in taken]
            for node in state.usable_nodes()}


def fill_order(state: ClusterState, plan: Plan, actions: list[Action]) -> list[Job]:
    """Waiting jobs no action starts, the plan's wishes first, then its priorities, then FIFO."""
    acted = {a.job_id for a in actions}
    waiting = [j for j in state.jobs if j.state is JobState.PENDING and j.id not in acted]
    wanted = {a.job_id: i for i, a in enumerate(plan.assignments)}
    position = {j.id: i for i, j in enumerate(state.jobs)}

    def rank(job: Job) -> tuple[int, float, float, int]:
        in_plan = wanted.get(job.id)
        return (0 if in_plan is not None else 1, in_plan if in_plan is not None else 0,
                -plan.priorities.get(job.id, 0.0), position[job.id])

    return sorted(waiting, key=rank)


def host_room(state: ClusterState, actions: list[Action]) -> HostRoom | None:
    """CPUs and memory left on each node once every active job (those this round preempts
    still hold theirs) and every placement of this round's actions are counted."""
    room = HostRoom.of(state)
    if room is not None:
        jobs = {j.id: j for j in state.jobs}
        for job in state.active_jobs():
            room.take(job, job.gpus_held)
        for action in actions:
            if action.job_id in jobs:
                room.take(jobs[action.job_id], getattr(action, "gpu_ids", ()))
    return room


def layout_for(job: Job, layout: NodeLayout, free: dict[str, list[str]],
               room: HostRoom | None = None) -> tuple[str, ...]:
    """GPUs for ``job`` among ``free``: its fastest GPU type first, within its constraints
    (and, with ``room``, where its CPUs and memory fit too)."""
    allowed = [t for t in layout.nodes_of if job.gpu_types is None or t in job.gpu_types]
    for gpu_type in sorted(allowed, key=lambda t: -job.rate(t)):
        gpus = constrained_layout(job, layout.nodes_of[gpu_type], free, room)
        if gpus and job.placement_problem(gpus, layout.type_of) is None:
            return gpus
    return ()


def fill_idle(state: ClusterState, plan: Plan, actions: list[Action]) -> list[Action]:
    """Starts that put waiting jobs on GPUs the round leaves idle (appended to ``actions``)."""
    free = free_gpus(state, actions)
    idle = sum(len(g) for g in free.values())
    if not idle:
        return []
    layout = state.layout()
    room = host_room(state, actions)
    starts: list[Action] = []
    for job in fill_order(state, plan, actions):
        if idle < job.gpus:
            continue
        gpus = layout_for(job, layout, free, room)
        if not gpus:
            continue
        if room is not None:
            room.take(job, gpus)
        for gpu in gpus:
            free[node_of(gpu)].remove(gpu)
        idle -= len(gpus)
        starts.append(Start(job.id, gpus))
    return starts


def occupancy(state: ClusterState) -> tuple[frozenset, frozenset, frozenset]:
    """What a fill-only round depends on: who waits, who holds which GPUs, which are usable.
    The daemon's poll compares it with the last round's to tell whether anything changed."""
    return (frozenset(j.id for j in state.jobs if j.state is JobState.PENDING),
            frozenset((j.id, j.gpus_held) for j in state.active_jobs() if j.gpus_held),
            frozenset((n.name, n.gpu_ids()) for n in state.usable_nodes()))


def may_fill(state: ClusterState) -> bool:
    """Some GPU is free and some waiting job is no larger than all the free GPUs together
    (a cheap necessary condition; the round itself checks the constraints)."""
    idle = sum(len(g) for g in free_gpus(state, []).values())
    return any(j.gpus <= idle for j in state.jobs if j.state is JobState.PENDING) and idle > 0

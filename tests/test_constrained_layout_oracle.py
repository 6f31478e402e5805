"""``constrained_layout`` on its count buckets against the scan it replaced (issue 30).

The oracle is the algorithm as it stood before the buckets: for every job, list every allowed
node's free GPUs and sort the nodes. Here it runs side by side with the new code, on random
clusters, over a sequence of jobs whose placements change the free GPUs between questions
(the buckets must follow each take), with allowed sets from none to one node (the small-set
path) to all, gangs larger than a node, exact node counts and uneven nodes, nodes counting
their CPUs (or not) and jobs asking CPUs per GPU (or not), and with the
free GPUs both as a :class:`FreeGpus` (indexed) and as a plain dict (a policy's own map, as
Themis and AFS pass). All three must give the same GPUs, in the same order.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufair.model import Job, Node, Progress, ThroughputProfile
from gpufair.model.host_room import HostRoom
from gpufair.model.records import HostRequest
from gpufair.policy.free_gpus import FreeGpus
from gpufair.policy.placement import constrained_layout


def old_constrained_layout(job: Job, names, free, room: HostRoom | None = None
                           ) -> tuple[str, ...]:
    """The scan as it was, CPUs and memory counted (kept here only as the oracle)."""
    allowed = names if job.allowed_nodes is None else \
        [n for n in names if n in set(job.allowed_nodes)]
    if room is not None and job.host is None:
        room = None
    if job.nodes is None:
        sizes: list[int] = []
        for name in allowed:
            size = len(free[name])
            if size >= job.gpus and (room is None or room.fits(job, name, job.gpus)):
                return tuple(free[name][: job.gpus])
            sizes.append(size)
        gpus: list[str] = []
        for name, size in zip(allowed, sizes, strict=True):
            take = min(size, job.gpus - len(gpus))
            if room is not None:
                take = room.most(job, name, take)
            gpus.extend(free[name][:take])
            if len(gpus) == job.gpus:
                return tuple(gpus)
        return ()
    if job.gpus % job.nodes:
        return ()
    per = job.gpus // job.nodes
    fitting = sorted((n for n in allowed if len(free[n]) >= per
                      and (room is None or room.fits(job, n, per))), key=lambda n: len(free[n]))
    if len(fitting) < job.nodes:
        return ()
    return tuple(g for name in fitting[: job.nodes] for g in free[name][:per])


@st.composite
def clusters(draw):
    sizes = draw(st.lists(st.integers(0, 8), min_size=1, max_size=40))
    names = tuple(f"n{i:02d}" for i in range(len(sizes)))
    cpus = draw(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 32)),
                                              min_size=len(sizes), max_size=len(sizes))))
    nodes = [Node(n, "t", size, cpus=None if cpus is None else cpus[i])
             for i, (n, size) in enumerate(zip(names, sizes, strict=True))]
    gpus_of = {n: tuple(f"{n}:{k}" for k in range(s)) for n, s in zip(names, sizes,
                                                                      strict=True)}
    every = [g for n in names for g in gpus_of[n]]
    taken = draw(st.lists(st.sampled_from(every), unique=True)) if every else []
    jobs = []
    for k in range(draw(st.integers(1, 25))):
        count = draw(st.one_of(st.none(), st.integers(1, 4)))
        gpus = draw(st.integers(1, 12)) if count is None else \
            count * draw(st.integers(1, 8)) + draw(st.sampled_from([0] * 5 + [1]))
        allowed = draw(st.one_of(st.none(), st.lists(st.sampled_from((*names, "elsewhere")),
                                                     min_size=0, max_size=len(names) + 1)))
        per_gpu = draw(st.one_of(st.none(), st.integers(0, 6)))
        jobs.append(Job(id=f"j{k}", gpus=gpus, progress=Progress(0.0, 1.0),
                        throughput=ThroughputProfile({("t", gpus): 1.0}), nodes=count,
                        host=None if per_gpu is None else HostRequest(cpus_per_gpu=per_gpu),
                        allowed_nodes=None if allowed is None else tuple(sorted(set(allowed)))))
    return names, gpus_of, taken, jobs, nodes


@settings(max_examples=500, deadline=None)
@given(clusters())
def test_buckets_answer_what_the_scan_answered(cluster):
    names, gpus_of, taken, jobs, nodes = cluster
    node_at = {g: n for n, gpus in gpus_of.items() for g in gpus}
    rooms = [HostRoom(nodes) for _ in range(3)]   # the oracle's, the indexed's, the plain's
    indexed = FreeGpus.around(gpus_of, node_at, taken)
    plain = {n: [g for g in gpus if g not in set(taken)] for n, gpus in gpus_of.items()}
    oracle = {n: list(gpus) for n, gpus in plain.items()}
    for job in jobs:
        expected = old_constrained_layout(job, names, oracle, rooms[0])
        assert constrained_layout(job, names, indexed, rooms[1]) == expected, job
        assert constrained_layout(job, list(names), plain, rooms[2]) == expected, job
        for room in rooms:
            room.take(job, expected)
        indexed.take(expected, node_at)
        for g in expected:
            oracle[node_at[g]].remove(g)
            plain[node_at[g]].remove(g)


def test_a_node_left_full_after_a_take_is_no_longer_offered():
    """The bucket of a node must follow a take: the first 4-GPU gang fills n0, the next goes
    to n1 (a stale index would offer n0 again)."""
    gpus_of = {n: tuple(f"{n}:{k}" for k in range(4)) for n in ("n0", "n1")}
    node_at = {g: n for n, gpus in gpus_of.items() for g in gpus}
    free = FreeGpus.around(gpus_of, node_at, ())
    job = Job(id="a", gpus=4, progress=Progress(0.0, 1.0),
              throughput=ThroughputProfile({("t", 4): 1.0}), nodes=1,
              allowed_nodes=("n0", "n1"))
    first = constrained_layout(job, ("n0", "n1"), free)
    free.take(first, node_at)
    assert first == gpus_of["n0"]
    assert constrained_layout(job, ("n0", "n1"), free) == gpus_of["n1"]

"""Free CPUs and memory per node while one placement is made.

A GPU is no use to a job whose CPUs or memory its node cannot also hold: Slurm then leaves
the job waiting (Reason=Resources) on the node gpufair pinned it to, and the GPUs booked for
it idle. So placement asks, beside "are there free GPUs", "does the rest of the job fit
there": each node's CPUs and memory, less what the resource manager shows held by what gpufair
does not schedule, less what the jobs placed so far in this placement take.

Only nodes that say their CPUs or memory count (Slurm's do; a simulated cluster's do not), and
only jobs that ask (``Job.host``): a simulation pays nothing and decides exactly as before.

It lives beside the records rather than in ``policy/`` because both sides ask it: placement
(every policy's, and the daemon's fill) and the Slurm adapter, which checks that a job it
released still fits where it is pinned (adapters never import a policy).
"""

from __future__ import annotations

from collections.abc import Iterable

from gpufair.model.records import ClusterState, Job, Node, node_of


class HostRoom:
    """Node → free CPUs and memory (MB), charged as a placement takes nodes."""

    def __init__(self, nodes: Iterable[Node]) -> None:
        self._nodes = {n.name: n for n in nodes if n.cpus is not None or n.memory_mb is not None}
        self._cpus = {name: (n.cpus or 0) - n.cpus_unavailable for name, n in self._nodes.items()}
        self._memory = {name: (n.memory_mb or 0) - n.memory_unavailable_mb
                        for name, n in self._nodes.items()}

    @classmethod
    def of(cls, state: ClusterState) -> HostRoom | None:
        """The room of the state's nodes; None when no node tells its CPUs or memory."""
        if all(n.cpus is None and n.memory_mb is None for n in state.nodes):
            return None
        return cls(state.nodes)

    def fits(self, job: Job, node: str, gpus: int) -> bool:
        """Whether ``node`` has room for ``job`` with ``gpus`` of its GPUs there."""
        known = self._nodes.get(node)
        if known is None or job.host is None:
            return True
        cpus, memory = job.host.on_node(gpus, known)
        return (known.cpus is None or cpus <= self._cpus[node]) and \
            (known.memory_mb is None or memory <= self._memory[node])

    def most(self, job: Job, node: str, gpus: int) -> int:
        """The most GPUs, up to ``gpus``, that ``job`` can take on ``node`` with room for the
        rest of it (what it needs grows with its GPUs there); 0 if not even one."""
        while gpus > 0 and not self.fits(job, node, gpus):
            gpus -= 1
        return gpus

    def take(self, job: Job, gpu_ids: Iterable[str]) -> None:
        """Charge the nodes of ``gpu_ids`` with what ``job`` needs on each."""
        if job.host is None:
            return
        per_node: dict[str, int] = {}
        for gpu in gpu_ids:
            per_node[node_of(gpu)] = per_node.get(node_of(gpu), 0) + 1
        for node, count in per_node.items():
            known = self._nodes.get(node)
            if known is not None:
                cpus, memory = job.host.on_node(count, known)
                self._cpus[node] -= cpus
                self._memory[node] -= memory

    def free(self, node: str) -> tuple[int, int] | None:
        """(free CPUs, free memory MB) of ``node``, or None when it does not count them."""
        if node not in self._nodes:
            return None
        return self._cpus[node], self._memory[node]

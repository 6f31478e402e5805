"""The GPUs still free during one placement, and the nodes that can take a gang, fast.

Why: a constrained job (allowed nodes, an exact node count) used to be placed by scanning
every node of its type and listing each node's free GPUs, once per job: on a site of 1,024
nodes and 10,000 jobs that was most of a round (issue 30: 23 s of 39 in LAS). Here the nodes
of a type are kept in buckets by how many GPUs they have free, each bucket in node order,
updated as GPUs are taken; the two questions placement asks are then answered from the
buckets:

- *first fitting*: the first node in order with at least ``g`` GPUs free;
- *best fitting*: ``k`` nodes with at least ``per`` free, fewest free first, node order
  among equals (the nodes that keep the largest holes open).

They answer exactly what a scan in node order answers (``constrained_layout`` reads the
answers the same way from either; ``tests/test_placement_oracle.py`` holds them to the old
scan on random clusters). Whether a node can take GPUs at all is decided in one place,
:meth:`Candidates.allows`, so a further test of a node (its free CPUs or memory) goes there.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence

#: Whether a node has room for so many of a job's GPUs beyond free GPUs (CPUs, memory)
Fits = Callable[[str, int], bool]


class FreeGpus(Mapping[str, list[str]]):
    """Node → its GPUs not yet taken in this placement, in the node's own order, over a shared
    ``taken`` set and ``used`` counts (listing a node's free GPUs only when a gang lands on
    it). The per-type count buckets are built on the first question about a type and kept
    up to date by :meth:`take`."""

    def __init__(self, gpus_of: Mapping[str, tuple[str, ...]], taken: set[str],
                 used: dict[str, int]) -> None:
        self._gpus_of, self._taken, self._used = gpus_of, taken, used
        self._indexes: dict[tuple[str, ...], CountIndex] = {}
        self._index_of: dict[str, CountIndex] = {}   # node -> the index it is in

    @classmethod
    def around(cls, gpus_of: Mapping[str, tuple[str, ...]], node_at: Mapping[str, str],
               taken: Iterable[str]) -> FreeGpus:
        """The usable GPUs ``gpus_of`` less ``taken`` (ids of unusable GPUs are ignored)."""
        taken_set: set[str] = set()
        used: dict[str, int] = {}
        for g in taken:
            node = node_at.get(g)
            if node is not None and g not in taken_set:
                taken_set.add(g)
                used[node] = used.get(node, 0) + 1
        return cls(gpus_of, taken_set, used)

    def __getitem__(self, node: str) -> list[str]:
        gpus = self._gpus_of[node]
        if not self._used.get(node):
            return list(gpus)
        return [g for g in gpus if g not in self._taken]

    def __iter__(self) -> Iterator[str]:
        return iter(self._gpus_of)

    def __len__(self) -> int:
        return len(self._gpus_of)

    def count(self, node: str) -> int:
        """How many GPUs of ``node`` are still free (without listing them)."""
        return len(self._gpus_of[node]) - self._used.get(node, 0)

    def take(self, gpus: Iterable[str], node_at: Mapping[str, str]) -> None:
        taken, used, index_of = self._taken, self._used, self._index_of
        for g in gpus:
            if g not in taken:
                taken.add(g)
                node = node_at[g]
                before = used.get(node, 0)
                used[node] = before + 1
                index = index_of.get(node)
                if index is not None:
                    free = len(self._gpus_of[node]) - before
                    index.moved(node, free, free - 1)

    def candidates(self, names: Sequence[str], allowed: Collection[str] | None,
                   fits: Fits | None = None) -> Candidates:
        """The nodes of ``names`` (one GPU type's, in order) that ``allowed`` lets a job use
        (and where ``fits`` says its other needs fit)."""
        if not isinstance(names, tuple):   # only a type's own node tuple is worth an index
            return Candidates(names, allowed, self.count, fits)
        index = self._indexes.get(names)
        if index is None:
            index = self._indexes[names] = CountIndex(names, self.count)
            for name in names:
                self._index_of[name] = index
        return IndexedCandidates(names, allowed, self.count, fits, index)


class CountIndex:
    """One type's nodes bucketed by free GPU count; each bucket holds node positions in
    order (a sorted list: a node moves with a bisect, a query reads buckets from the front)."""

    def __init__(self, names: Sequence[str], count: Callable[[str], int]) -> None:
        self.names = names
        self.position = {name: i for i, name in enumerate(names)}
        counts = [count(name) for name in names]
        self.buckets: list[list[int]] = [[] for _ in range(max(counts, default=0) + 1)]
        for i, free in enumerate(counts):
            self.buckets[free].append(i)
        self.total = sum(counts)

    def moved(self, node: str, before: int, after: int) -> None:
        at = self.position[node]
        bucket = self.buckets[before]
        del bucket[bisect_left(bucket, at)]
        while after >= len(self.buckets):
            self.buckets.append([])
        insort(self.buckets[after], at)
        self.total += after - before


class Candidates:
    """The allowed nodes of one type, answered by a scan in node order (the plain statement
    of both questions; used for free maps without an index, e.g. a policy's own dict)."""

    def __init__(self, names: Sequence[str], allowed: Collection[str] | None,
                 count: Callable[[str], int], fits: Fits | None = None) -> None:
        self.names, self.allowed, self.count, self.fits = names, allowed, count, fits

    def allows(self, name: str, gpus: int) -> bool:
        """Whether the job may take ``gpus`` GPUs of this node as far as anything but its
        free GPU count goes (its allowed nodes; with ``fits``, its CPUs and memory): the
        one place a node's fitness is told."""
        return (self.allowed is None or name in self.allowed) and \
            (self.fits is None or self.fits(name, gpus))

    def in_order(self, gpus: int) -> Iterable[str]:
        """The allowed nodes in order, to spread ``gpus`` over (empty when they cannot hold
        them); each then takes what its free GPUs (and ``fits``) allow."""
        allowed = self.allowed
        return [n for n in self.names if allowed is None or n in allowed]

    def first_fitting(self, gpus: int) -> str | None:
        return next((n for n in self.in_order(gpus)
                     if self.count(n) >= gpus and self.allows(n, gpus)), None)

    def best_fitting(self, per: int, nodes: int) -> list[str] | None:
        fitting = sorted((n for n in self.in_order(per)
                          if self.count(n) >= per and self.allows(n, per)), key=self.count)
        return fitting[:nodes] if len(fitting) >= nodes else None


class IndexedCandidates(Candidates):
    """The same answers from a :class:`CountIndex`: a few buckets read from the front, not
    every node. A small allowed set (a user's node list) is scanned directly instead."""

    def __init__(self, names: Sequence[str], allowed: Collection[str] | None,
                 count: Callable[[str], int], fits: Fits | None, index: CountIndex) -> None:
        super().__init__(names, allowed, count, fits)
        self.index = index
        position = index.position
        self.few: list[str] | None = None
        if allowed is not None and len(allowed) * 8 < len(names):
            self.few = [names[i] for i in sorted(position[n] for n in allowed
                                                 if n in position)]

    def in_order(self, gpus: int) -> Iterable[str]:
        if self.few is not None:
            return self.few
        if self.index.total < gpus:   # all the type's free GPUs together are too few
            return ()
        return super().in_order(gpus)

    def first_fitting(self, gpus: int) -> str | None:
        if self.few is not None:
            return super().first_fitting(gpus)
        names, buckets = self.names, self.index.buckets
        best: int | None = None
        for bucket in buckets[max(gpus, 0):]:
            for at in bucket:
                if best is not None and at >= best:
                    break
                if self.allows(names[at], gpus):
                    best = at
                    break
        return None if best is None else names[best]

    def best_fitting(self, per: int, nodes: int) -> list[str] | None:
        if self.few is not None:
            return super().best_fitting(per, nodes)
        names = self.names
        chosen: list[str] = []
        for bucket in self.index.buckets[max(per, 0):]:
            for at in bucket:
                if self.allows(names[at], per):
                    chosen.append(names[at])
                    if len(chosen) == nodes:
                        return chosen
        return None

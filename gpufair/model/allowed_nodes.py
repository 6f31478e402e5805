"""Whether a few host names are all among a job's allowed nodes, without a set per check.

A job's ``allowed_nodes`` can name every node of a site (8,192 at issue 30's 100,000-job
size), and the guards ask :meth:`Job.placement_problem` for each placed job whether its one
to four hosts are allowed: building a set of 8,192 names for that was most of a round's
guard time (15 s of CPU under the profiler at 100,000 jobs). Keeping a set per distinct
tuple instead would cost ~300 KB each, and a site has over a thousand distinct tuples
(partitions less each job's ``--exclude``): hundreds of MB. The translation hands out sorted
tuples, so a binary search answers in ~13 comparisons with no extra memory; a tuple that is
not sorted (a running job's own nodes, a snapshot written by hand) is checked with a set,
as before. Whether a tuple is sorted is remembered by its identity (the translation shares
one tuple among the jobs of a combination), the tuple kept alive with the answer so its id
stays its own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from itertools import pairwise

from gpufair.model.identity_memo import IdentityMemo

#: whether each allowed-node tuple is sorted, by identity
_SORTED: IdentityMemo[tuple[str, ...], bool] = IdentityMemo(65_536)


def _sorted_strictly(names: tuple[str, ...]) -> bool:
    return all(a < b for a, b in pairwise(names))   # strictly: no duplicates


def all_allowed(hosts: Collection[str], allowed: tuple[str, ...]) -> bool:
    """``set(hosts) <= set(allowed)``, answered by binary search when ``allowed`` is
    sorted."""
    if type(allowed) is not tuple or len(allowed) < 16 \
            or not _SORTED.get(allowed, _sorted_strictly):
        return set(hosts) <= set(allowed)
    size = len(allowed)
    for host in hosts:
        at = bisect_left(allowed, host)
        if at == size or allowed[at] != host:
            return False
    return True

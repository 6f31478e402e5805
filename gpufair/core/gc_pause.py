"""A round runs with Python's cyclic garbage collector paused (issue 30).

A round on a large site holds millions of container objects at once (100,000 decoded job
records of ~110 fields, their translations, the history rows): each time the collector's
oldest generation is due it walks all of them, and does so more often the more the round
allocates, so its cost grew faster than the site (at 100,000 jobs a quarter or more of the
translation's CPU, measured with ``gc.disable()`` beside it). What a round allocates is
freed by reference counting as it goes (records, tuples, dataclasses: no cycles); the
collector runs again as soon as the round is over, and collects whatever cycle it left.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def gc_paused(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` run with the cyclic collector off, and on again after (unless it was off
    already: a caller that turned it off keeps it off)."""
    @functools.wraps(func)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            gc.enable()
    return paused

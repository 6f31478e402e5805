"""What the commands print for programs: strict JSON, and the numbers they check on the way in.

``json.dumps`` writes NaN and infinity as ``NaN``/``Infinity``, which no strict JSON parser
(``jq``, JavaScript, Go) reads; a metric that has no value (the mean of no jobs, an iteration
time a log never gave) is printed as ``null`` instead, in one place for every command.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

#: Seeds are handed to numpy's and Python's generators alike: non-negative, 32-bit.
MAX_SEED = 2**32 - 1


def jsonable(value: Any) -> Any:
    """``value`` with every non-finite float (at any depth) as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """Strict JSON of ``value`` (non-finite numbers as null)."""
    return json.dumps(jsonable(value), allow_nan=False, **options)


def print_snapshot(state: Any, adapter: Any) -> None:
    """``gpufair snapshot`` of any adapter: the snapshot document on stdout, what the adapter
    could not translate (its last view's problems) as warnings on stderr."""
    from gpufair.model.snapshot import state_to_dict
    view = getattr(adapter, "last_view", None)
    for problem in view.problems if view is not None else ():
        print(f"gpufair: warning: {problem}", file=sys.stderr)
    data = state_to_dict(state, source={"adapter": adapter.name})
    print(json.dumps(data, sort_keys=True, indent=2, allow_nan=False))


def seed(text: str) -> int:
    """``--seed`` (an argparse type): a whole number from 0 to 2**32 - 1, what every
    generator accepts; numpy refuses a negative seed only deep inside a policy."""
    try:
        number = int(text, 10) if len(text) <= 12 else -1
    except ValueError:
        number = -1
    if not 0 <= number <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {MAX_SEED}, "
                                         f"not {text!r}")
    return number

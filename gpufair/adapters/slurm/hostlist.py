"""Slurm host lists (``gpu-v100-[1-2,4],gpu-k80-1``) to and from node names.

Slurm prints node sets compressed; the model names every node, so the adapter expands them
(and the action builder passes explicit comma-separated names back, which Slurm accepts).
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """Names in Slurm's order. Raises ``ValueError`` naming the bad piece."""
    names: list[str] = []
    for piece in _split_top(text.strip()):
        if not piece:
            continue
        head, bracket, rest = piece.partition("[")
        if not bracket:
            names.append(piece)
            continue
        body, close, tail = rest.partition("]")
        if not close or "[" in tail:
            raise ValueError(f"unbalanced brackets in host list piece {piece!r}")
        for item in body.split(","):
            match = _RANGE.match(item)
            if match is None:
                raise ValueError(f"bad range {item!r} in host list piece {piece!r}")
            lo, hi = match.group(1), match.group(2) or match.group(1)
            if int(hi) < int(lo):
                raise ValueError(f"descending range {item!r} in host list piece {piece!r}")
            width = len(lo)
            names.extend(f"{head}{i:0{width}d}{tail}" for i in range(int(lo), int(hi) + 1))
    return names


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets."""
    if "[" not in text and "]" not in text:   # plain names (most): no character loop
        return text.split(",")
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts

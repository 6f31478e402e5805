"""GPU GRES strings as Slurm 22.05 prints them.

Without slurmdbd GPUs are not TRES (gotcha 4 of the loopback recipe), so the adapter reads
them from strings: node ``gres`` (``gpu:v100:4``, ``gpu:v100:4(S:0-1)``), node ``gres_used``
(``gpu:v100:2(IDX:0-1)``, ``gpu:k80:0(IDX:N/A)``), job ``gres_detail`` entries
(``gpu:k80:3(IDX:0-2)``, one per allocated node) and requests (``gres:gpu:2``,
``gres:gpu:v100:4``, ``gres/gpu:1``). Every parser raises ``ValueError`` naming the string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_GRES = re.compile(r"^(?:gres[:/])?gpu(?::(?P<type>[A-Za-z0-9_.-]+?))?:(?P<count>\d+)"
                   r"(?:\((?P<extra>[^)]*)\))?$")
_IDX = re.compile(r"IDX:([0-9,-]+|N/A)")


@dataclass(frozen=True, slots=True)
class GpuGres:
    """One GPU entry: type (None when untyped), count, and device indices when printed."""

    gpu_type: str | None
    count: int
    indices: tuple[int, ...] | None = None


def parse_gpu_entries(text: str | None) -> list[GpuGres]:
    """All GPU entries of a comma-separated GRES string; non-GPU GRES are ignored."""
    if text is None:
        return []
    return list(_gpu_entries(text))


@lru_cache(maxsize=1 << 14)
def _gpu_entries(text: str) -> tuple[GpuGres, ...]:
    """Cached: a site's 100,000 job records repeat a few dozen GRES strings (``gres:gpu:4``,
    ``gpu:a100:8(IDX:0-7)``), read three to five times per record each round (issue 30).
    A string that fails raises again at every call (exceptions are not cached)."""
    out: list[GpuGres] = []
    for piece in _split_entries(text.strip()):
        bare = piece.removeprefix("gres:").removeprefix("gres/")
        if not bare.startswith("gpu:"):
            continue  # other GRES, "(null)", "N/A" or empty
        match = _GRES.match(piece)
        if match is None:
            raise ValueError(f"unparsable GPU GRES {piece!r}")
        idx = _IDX.search(match.group("extra") or "")
        indices = None if idx is None else parse_indices(idx.group(1), piece)
        out.append(GpuGres(match.group("type"), int(match.group("count")), indices))
    return tuple(out)


def parse_indices(text: str, context: str) -> tuple[int, ...]:
    """``0-2,5`` → (0, 1, 2, 5); ``N/A`` → ()."""
    if text in ("N/A", ""):
        return ()
    result: list[int] = []
    for item in text.split(","):
        lo, dash, hi = item.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"bad GPU index range {item!r} in {context!r}")
        result.extend(range(int(lo), int(hi if dash else lo) + 1))
    return tuple(result)


def gpu_count(text: str | None) -> int:
    return sum(entry.count for entry in parse_gpu_entries(text))


def _split_entries(text: str) -> list[str]:
    # commas separate entries, but also appear inside "(IDX:0,2)" and "(S:0-1)"
    if "(" not in text:
        return [part.strip() for part in text.split(",")]
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts

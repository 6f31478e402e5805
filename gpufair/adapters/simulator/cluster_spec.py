"""Cluster specs for simulation: ``v100:32``, ``v100:8,p100:8,k80:8`` or Gavel's ``32:0:0``.

GPUs per server come from ``--gpus-per-server`` (a single number, or ``type:n,...``) or from a
``/n`` suffix per type (``v100:32/4``). The artifacts default to one GPU per server.
"""

from __future__ import annotations

import re

from gpufair.errors import InputError
from gpufair.model import Node

_GAVEL_TYPES = ("v100", "p100", "k80")
_PART = re.compile(r"^([A-Za-z][\w.-]*):(\d+)(?:/(\d+))?$")


def parse_cluster_spec(spec: str, gpus_per_server: str | int | None = None,
                       source: str = "--cluster") -> tuple[Node, ...]:
    """Nodes named ``<type>-<n>`` (e.g. ``v100-0``), one rack per GPU type."""
    spec = spec.strip()
    counts: list[tuple[str, int, int | None]] = []
    if re.fullmatch(r"\d+:\d+:\d+", spec):
        counts = [(t, int(n), None) for t, n in zip(_GAVEL_TYPES, spec.split(":"), strict=True)]
    else:
        for part in filter(None, (p.strip() for p in spec.split(","))):
            match = _PART.match(part)
            if not match:
                raise InputError(source, "expected TYPE:COUNT[/PER_SERVER] items separated by "
                                 "commas (e.g. 'v100:8,k80:8') or Gavel's 'V:P:K'",
                                 field="cluster", value=part)
            per = int(match.group(3)) if match.group(3) else None
            counts.append((match.group(1).lower(), int(match.group(2)), per))
    per_type = _per_server(gpus_per_server, source)
    nodes: list[Node] = []
    seen: set[str] = set()
    for gpu_type, total, per in counts:
        if gpu_type in seen:
            raise InputError(source, "GPU type listed twice", field="cluster", value=gpu_type)
        seen.add(gpu_type)
        if total == 0:
            continue
        size = per or per_type.get(gpu_type) or per_type.get("*") or 1
        if size < 1 or total % size:
            raise InputError(source, f"{total} {gpu_type} GPUs do not split into servers of "
                             f"{size}", field="gpus_per_server", value=size)
        nodes.extend(Node(name=f"{gpu_type}-{i}", gpu_type=gpu_type, gpus=size,
                          rack=f"rack-{gpu_type}") for i in range(total // size))
    if not nodes:
        raise InputError(source, "the cluster has no GPUs", field="cluster", value=spec)
    return tuple(nodes)


def _per_server(value: str | int | None, source: str) -> dict[str, int]:
    if value is None:
        return {}
    if isinstance(value, int):
        return {"*": value}
    text = str(value).strip()
    if text.isdigit():
        return {"*": int(text)}
    if re.fullmatch(r"\d+:\d+:\d+", text):
        return {t: int(n) for t, n in zip(_GAVEL_TYPES, text.split(":"), strict=True)}
    out: dict[str, int] = {}
    for part in text.split(","):
        name, _, n = part.partition(":")
        if not n.strip().isdigit():
            raise InputError(source, "expected N or TYPE:N,...", field="gpus_per_server",
                             value=part)
        out[name.strip().lower()] = int(n)
    return out

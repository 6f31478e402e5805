"""Cluster specs for simulation: ``v100:32``, ``v100:8,p100:8,k80:8`` or Gavel's ``32:0:0``.

GPUs per server come from ``--gpus-per-server`` (a single number, or ``type:n,...``) or from a
``/n`` suffix per type (``v100:32/4``). The artifacts default to one GPU per server.
"""

from __future__ import annotations

import re

from gpufair.errors import InputError
from gpufair.model import Node

_GAVEL_TYPES = ("v100", "p100", "k80")
_PART = re.compile(r"^([A-Za-z][\w.-]*):(\d{1,9})(?:/(\d{1,9}))?$", re.ASCII)
#: The largest cluster simulated (GPUs of one type) and server: enough for any real cluster,
#: and a typo such as ``v100:99999999999`` is an error, not a machine out of memory.
MAX_GPUS = 65536
_GAVEL = re.compile(r"\d{1,9}:\d{1,9}:\d{1,9}", re.ASCII)
MAX_PER_SERVER = 4096


def parse_cluster_spec(spec: str, gpus_per_server: str | int | None = None,
                       source: str = "--cluster") -> tuple[Node, ...]:
    """Nodes named ``<type>-<n>`` (e.g. ``v100-0``), one rack per GPU type."""
    spec = spec.strip()
    counts: list[tuple[str, int, int | None]] = []
    if _GAVEL.fullmatch(spec):
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
        if total > MAX_GPUS:
            raise InputError(source, f"at most {MAX_GPUS} GPUs of one type", field="cluster",
                             value=f"{gpu_type}:{total}")
        if total == 0:
            continue
        size = next((s for s in (per, per_type.get(gpu_type), per_type.get("*"))
                     if s is not None), 1)
        if not 1 <= size <= MAX_PER_SERVER:
            raise InputError(source, f"GPUs per server must be from 1 to {MAX_PER_SERVER}",
                             field="gpus_per_server", value=size)
        if total % size:
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
    if text.isascii() and text.isdigit() and len(text) <= 6:
        return {"*": int(text)}
    if _GAVEL.fullmatch(text):
        return {t: int(n) for t, n in zip(_GAVEL_TYPES, text.split(":"), strict=True)}
    out: dict[str, int] = {}
    for part in text.split(","):
        name, _, n = part.partition(":")
        n = n.strip()
        if not (n.isascii() and n.isdigit()) or len(n) > 6:
            raise InputError(source, "expected N or TYPE:N,... (N from 1 to "
                             f"{MAX_PER_SERVER})", field="gpus_per_server", value=part)
        out[name.strip().lower()] = int(n)
    return out

"""Reading the ResourceManager's JSON as it really is, not as its documentation tables say.

Jersey 1 + JAXB produce several shapes for one logical value (specs/yarn_rm_rest.md §1.2), and
every reader of an RM reply goes through these helpers so that each quirk is handled once:

- an empty collection is ``null`` (``{"apps":null}``), missing, ``[]`` or, in the "mapped"
  DAOs, a lone object where a list was meant: :func:`as_list`;
- numbers may come as strings (``"1536"``, ``"NaN"``) and booleans as ``"false"``:
  :func:`as_int`, :func:`as_float`, :func:`as_bool`;
- maps are ``entry`` lists whose JSON repeats the key ``"entry"`` inside one object
  (``{"entry":{..},"entry":{..}}``): :func:`loads` keeps every repetition, :func:`entries`
  reads every form into a dict;
- resources are ``{"memory","vCores","resourceInformations":{"resourceInformation":[...]}}``
  with extended types (``yarn.io/gpu``) only inside the list, or, on Hadoop-AI, a ``GPUs``
  count beside ``memory`` and ``vCores``: :func:`resource_amount`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from gpufair.errors import InputError

GPU = "yarn.io/gpu"
#: What a GPU is published as: YARN's own GPU plugin (3.1+), and the NVIDIA plugin of the
#: pluggable device framework (3.3+, ``nvidia.com/gpu``); a node has one or the other.
GPU_TYPES = (GPU, "nvidia.com/gpu")


class Repeated(list):
    """The values of a key repeated inside one JSON object (Jersey's map entries)."""


def _collect(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            previous = out[key]
            if not isinstance(previous, Repeated):
                previous = Repeated([previous])
            previous.append(value)
            out[key] = previous
        else:
            out[key] = value
    return out


def loads(text: str | bytes, source: str) -> Any:
    """JSON with repeated keys kept (as :class:`Repeated`), or a clear InputError."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    try:
        return json.loads(text, object_pairs_hook=_collect)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"not valid JSON ({exc.msg} at line {exc.lineno} column "
                         f"{exc.colno}): {text[:120]!r}") from exc
    except RecursionError:
        raise InputError(source, "JSON nested too deeply") from None


def as_list(value: Any) -> list[Any]:
    """``null``, missing, ``""``, one object or a list: always a list."""
    if value is None or value == "" or value == {}:
        return []
    if isinstance(value, list):
        return list(value)
    return [value]


def as_int(value: Any, default: int = 0) -> int:
    """A whole number sent as a number or as a string; ``default`` when absent or not one."""
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return int(number) if math.isfinite(number) else default


def as_float(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool) or value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def as_bool(value: Any, default: bool = False) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return default


def entries(value: Any) -> dict[str, str]:
    """A JAXB map in any of its JSON forms: ``{"entry":[...]}``, ``{"entry":{...}}``,
    repeated ``entry`` keys, a bare ``[{"key","value"}]`` list, ``{}``, ``""`` or absent."""
    if isinstance(value, Mapping):
        items = value.get("entry")
        if items is None and "key" in value:
            items = value
    else:
        items = value
    out: dict[str, str] = {}
    for item in as_list(items):
        if isinstance(item, Mapping) and "key" in item:
            out[str(item["key"])] = "" if item.get("value") is None else str(item["value"])
    return out


def resource_amount(resource: Any, name: str) -> int:
    """How much of resource type ``name`` a ResourceInfo object holds (0 when absent).

    ``memory-mb``/``vcores`` fall back to the top-level ``memory``/``vCores`` of 2.x shapes;
    every other type exists only in ``resourceInformations``. ``yarn.io/gpu`` stands for a
    GPU however published (:data:`GPU_TYPES`, and Hadoop-AI's ``GPUs``)."""
    if not isinstance(resource, Mapping):
        return 0
    infos = resource.get("resourceInformations")
    names = GPU_TYPES if name == GPU else (name,)
    if isinstance(infos, Mapping):
        listed = {str(item.get("name")): item for item in as_list(infos.get("resourceInformation"))
                  if isinstance(item, Mapping)}
        for wanted in names:
            if wanted in listed:
                return max(0, as_int(listed[wanted].get("value")))
    if name == GPU and name in resource:   # a flat form some clients and forks send
        return max(0, as_int(resource.get(name)))
    if name == GPU and "GPUs" in resource:  # Hadoop-AI (OpenPAI's 2.9 fork): in every object
        return max(0, as_int(resource.get("GPUs")))
    if name == "memory-mb":
        return max(0, as_int(resource.get("memory")))
    if name == "vcores":
        return max(0, as_int(resource.get("vCores", resource.get("virtualCores"))))
    return 0


def partition_name(value: Any) -> str:
    """A node-label partition as the RM names it: ``""``, missing or ``<DEFAULT_PARTITION>``
    (what some RMs print for an unset label expression) are the default partition, ``""``."""
    text = str(value or "").strip()
    return "" if text == "<DEFAULT_PARTITION>" else text


def unwrap(doc: Any, key: str, source: str) -> Any:
    """``doc[key]`` of a root-wrapped reply, or an error naming what came instead."""
    if not isinstance(doc, Mapping) or key not in doc:
        shown = sorted(doc)[:5] if isinstance(doc, Mapping) else type(doc).__name__
        raise InputError(source, f"expected an object with {key!r}, got {shown}")
    return doc[key]


def items(doc: Any, outer: str, inner: str, source: str) -> list[Any]:
    """The records of a list reply ``{"apps":{"app":[...]}}`` (``{"apps":null}`` when empty)."""
    wrapper = unwrap(doc, outer, source)
    if wrapper is None or wrapper == "":
        return []
    if not isinstance(wrapper, Mapping):
        raise InputError(source, f"{outer!r} is not an object", field=outer)
    return [r for r in as_list(wrapper.get(inner)) if isinstance(r, Mapping)]

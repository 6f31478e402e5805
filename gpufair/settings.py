"""Typed option sets: every configurable part declares its options once, as a frozen dataclass.

A policy, an adapter or the daemon writes its options as dataclass fields with
:func:`setting` (default, allowed range or choices, one line of help). :func:`parse_settings`
is then the one validator for all of them: unknown keys, wrong types and out-of-range values
become an :class:`~gpufair.errors.InputError` naming the file, the section and the key, and a
table or a JSON object becomes the typed object the code uses. Declaring options beside the
code that reads them is what keeps the schema and the behaviour from drifting apart.

It sits beside ``errors`` at the bottom of the package so that ``policy/`` and ``adapters/``
can use it without importing the app layer.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from gpufair.errors import InputError

T = TypeVar("T")
#: Every number an option may hold, whatever its own rule: no option means anything beyond
#: these (a round of 1e308 s, a seed of 10**20 that numpy refuses deep inside a policy), and
#: a bound here gives every option a checked range even where its declaration forgot one.
MAX_NUMBER = 1e12
MAX_INT = 2**32 - 1
_META = "gpufair.setting"


@dataclass(frozen=True)
class Rule:
    """What a value must satisfy beyond its type."""

    doc: str = ""
    choices: tuple[Any, ...] | None = None
    ge: float | None = None      # value >= ge
    gt: float | None = None      # value > gt
    le: float | None = None      # value <= le
    aliases: tuple[str, ...] = ()  # other spellings accepted (e.g. an artifact's config keys)


def setting(default: Any, doc: str = "", *, choices: tuple[Any, ...] | None = None,
            ge: float | None = None, gt: float | None = None, le: float | None = None,
            aliases: tuple[str, ...] = ()) -> Any:
    """A dataclass field that is also a documented, checked configuration option."""
    rule = Rule(doc, choices, ge, gt, le, aliases)
    if isinstance(default, (list, set)):
        raise TypeError("use a tuple for a list default")
    if isinstance(default, Mapping):  # unhashable: each instance gets its own read-only copy
        frozen = dict(default)
        return dataclasses.field(default_factory=lambda: types.MappingProxyType(dict(frozen)),
                                 metadata={_META: rule})
    return dataclasses.field(default=default, metadata={_META: rule})


def rule_of(field: dataclasses.Field) -> Rule:
    return field.metadata.get(_META, Rule())


def option_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a settings class that are options (``_``-prefixed ones are internal)."""
    return [f for f in dataclasses.fields(cls) if not f.name.startswith("_")]


def option_names(cls: type) -> list[str]:
    return [f.name for f in option_fields(cls)]


def parse_settings(cls: type[T], data: Mapping[str, Any] | T | None, *, source: str,
                   section: str, ignored: tuple[str, ...] = ()) -> T:
    """Check ``data`` against ``cls``'s options and build the typed object.

    An instance of ``cls`` is returned as it is (it was checked when it was made). Keys in
    ``ignored`` are accepted and dropped (an artifact's keys gpufair has no use for).
    """
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise InputError(source, "expected a table of options", field=section or None,
                         value=data)
    fields = {f.name: f for f in option_fields(cls)}
    spelled: dict[str, str] = {}
    for f in fields.values():
        for alias in rule_of(f).aliases:
            spelled[alias] = f.name
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{section}.{key}" if section else str(key)
        if key in ignored:
            continue
        name = key if key in fields else spelled.get(key)
        if name is None:
            known = sorted(fields) + sorted(spelled)
            raise InputError(source, f"unknown option; expected one of {', '.join(known)}"
                             if known else "this section takes no options", field=where)
        if name in values:
            raise InputError(source, f"given twice (as {name!r} and an alias)", field=where)
        values[name] = _check(value, hints[name], rule_of(fields[name]), source, where)
    try:
        return cls(**values)
    except ValueError as exc:  # a check across options (``__post_init__``)
        raise InputError(source, str(exc), field=section or None) from None


def describe(cls: type, section: str) -> list[tuple[str, str, Any, str]]:
    """(key, type, default, help) rows for docs and ``gpufair config --describe``."""
    hints = typing.get_type_hints(cls)
    rows = []
    for f in option_fields(cls):
        rule = rule_of(f)
        detail = rule.doc
        if rule.choices:
            detail += f" (one of {', '.join(map(str, rule.choices))})"
        default = f.default if f.default is not dataclasses.MISSING else dict(f.default_factory())
        rows.append((f"{section}.{f.name}", _type_name(hints[f.name]), default, detail))
    return rows


# ---- type checking --------------------------------------------------------------------------
def _check(given: Any, hint: Any, rule: Rule, source: str, where: str) -> Any:
    """The value as its type, within its rule; errors quote the value as the user wrote it."""
    value = _coerce(given, hint, source, where)
    if value is None:
        return None
    if rule.choices is not None and value not in rule.choices:
        raise InputError(source, f"expected one of {', '.join(map(repr, rule.choices))}",
                         field=where, value=given)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for bound, ok, text in ((rule.ge, lambda v, b: v >= b, ">="),
                                (rule.gt, lambda v, b: v > b, ">"),
                                (rule.le, lambda v, b: v <= b, "<=")):
            if bound is not None and not ok(value, bound):
                raise InputError(source, f"must be {text} {bound:g}", field=where, value=given)
    return value


def _coerce(value: Any, hint: Any, source: str, where: str) -> Any:
    """``value`` as the annotated type, or an InputError that says what was expected."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _coerce(value, inner[0], source, where)
        for candidate in inner:
            try:
                return _coerce(value, candidate, source, where)
            except InputError:
                continue
        raise InputError(source, f"expected {_type_name(hint)}", field=where, value=value)
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise InputError(source, "expected true or false", field=where, value=value)
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(source, "expected a whole number", field=where, value=value)
        if abs(value) > MAX_INT:
            raise InputError(source, f"out of range (at most {MAX_INT} in size)", field=where,
                             value=value)
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(source, "expected a number", field=where, value=value)
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(source, "expected a finite number", field=where, value=value)
        if abs(value) > MAX_NUMBER:
            raise InputError(source, f"out of range (at most {MAX_NUMBER:g} in size)",
                             field=where, value=value)
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise InputError(source, "expected a string", field=where, value=value)
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise InputError(source, f"expected a list ({_type_name(hint)})", field=where,
                             value=value)
        item = args[0] if args else Any
        return tuple(_coerce(v, item, source, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping, typing.Mapping) or hint is dict:
        if not isinstance(value, Mapping):
            raise InputError(source, f"expected a table ({_type_name(hint)})", field=where,
                             value=value)
        key_type, item = args if args else (Any, Any)
        out = {}
        for k, v in value.items():
            out[_coerce(k, key_type, source, where)] = _coerce(v, item, source, f"{where}.{k}")
        return types.MappingProxyType(out)
    raise TypeError(f"{where}: unsupported option type {hint!r}")  # a programming error


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        text = " or ".join(names)
        return text + " (or unset)" if type(None) in args else text
    if origin in (tuple, list):
        return f"list of {_type_name(args[0]) if args else 'values'}"
    if origin in (dict, Mapping, typing.Mapping):
        return f"table of {_type_name(args[1]) if args else 'values'}"
    return {bool: "boolean", int: "whole number", float: "number", str: "string"}.get(
        hint, getattr(hint, "__name__", str(hint)))

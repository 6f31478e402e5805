"""Errors that name what is wrong in an input, so an admin can fix it without reading code."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

#: The exit status of every command on bad input (a wrong file, field or argument).
EXIT_INPUT = 2


class InputError(ValueError):
    """Bad input (trace, throughputs, cluster spec, snapshot, config, log line, REST reply).

    The message always starts with where the problem is (``source:line`` or ``source: field``)
    so that it can be pasted into a bug report or grepped in a log.
    """

    def __init__(self, source: str, problem: str, *, line: int | None = None,
                 field: str | None = None, value: object = None) -> None:
        where = source if line is None else f"{source}:{line}"
        parts = [where]
        if field is not None:
            detail = f"field '{field}'"
            if value is not None:
                shown = repr(value)
                detail += f" = {shown[:80] + '...' if len(shown) > 80 else shown}"
            parts.append(detail)
        parts.append(problem)
        super().__init__(": ".join(parts))
        self.source = source
        self.line = line
        self.field = field
        self.value = value
        self.problem = problem


class RefusedToStart(RuntimeError):
    """A service will not start because it would be unsafe (e.g. a second daemon on one
    store). Not bad input: the command exits 1, not 2."""


def json_kind(value: object) -> str:
    """What a value read from JSON is, in the words an error message uses."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict) or hasattr(value, "keys"):
        return "an object"
    return type(value).__name__


# ---- reading an input file ------------------------------------------------------------------
# One place turns what can go wrong while reading a file (cannot open it, not UTF-8, not JSON,
# nested deeper than the parser can follow) into an InputError naming the file, so that each
# reader states only what its format means.


def read_text(path: str | os.PathLike[str], what: str, *, bom: bool = False) -> str:
    """The file's text; an unreadable file or bytes that are not UTF-8 are an InputError
    naming the file and the line of the first bad byte. ``bom``: a UTF-8 byte-order mark is
    accepted (files saved by editors that write one)."""
    source = os.fspath(path)
    try:
        with open(source, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise InputError(source, f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(source, f"not UTF-8 text (byte {data[exc.start]:#04x} at offset "
                         f"{exc.start})", line=line) from None


def parse_json(text: str, source: str, *, unique_keys: bool = True) -> Any:
    """``text`` as JSON. A key given twice in one object is an error (parsers silently keep
    the last one, which hides an edit mistake); so is nesting deeper than Python's parser can
    follow, which would otherwise surface as a RecursionError with no file named."""
    hook = _no_duplicate_keys(source) if unique_keys else None
    try:
        return json.loads(text, object_pairs_hook=hook)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"invalid JSON: {exc.msg} (column {exc.colno})",
                         line=exc.lineno) from None
    except RecursionError:
        raise too_deep(source) from None


def too_deep(source: str) -> InputError:
    return InputError(source, "nested too deeply (lists or objects inside each other more "
                      f"than about {sys.getrecursionlimit()} levels)")


def _no_duplicate_keys(source: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj:
                raise InputError(source, "key appears twice in one JSON object",
                                 field=key, value=value)
            obj[key] = value
        return obj
    return hook

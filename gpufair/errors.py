"""Errors that name what is wrong in an input, so an admin can fix it without reading code."""

from __future__ import annotations


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

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

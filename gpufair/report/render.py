"""The page: results read through :mod:`gpufair.results`, sections computed by
:mod:`gpufair.report.sections`, laid out by the jinja2 template shipped beside this module,
written to a temporary file beside the target and renamed over it (never half a report)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import jinja2

import gpufair
from gpufair.errors import InputError
from gpufair.report import sections
from gpufair.results import Results, read_results

TEMPLATE = "report.html.j2"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("gpufair.report", "templates"),
                              autoescape=jinja2.select_autoescape(["html", "j2"]),
                              undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)


def _asset(name: str) -> str:
    return (resources.files("gpufair.report") / "templates" / name).read_text("utf-8")


def render_report(results: Results, *, title: str | None = None, kept: bool = True) -> str:
    """The report's HTML text. ``kept`` False: the results directories were temporary
    (``--report`` without ``--out``), so the page does not name paths that are gone."""
    metas = results.metas
    first = metas[0]
    inputs = first["inputs"]
    workload = next((inputs[k] for k in ("trace", "history", "snapshot")
                     if isinstance(inputs.get(k), dict)), None)
    kinds = sorted(set(results.kinds))
    context = {
        "title": title or f"gpufair {' + '.join(kinds)}: {', '.join(results.runs)}",
        "gpufair_version": gpufair.__version__,
        "sources": [{"dir": (str(results.run_dirs[m["runs"][0]]) if m["runs"] else "?")
                     if kept else "(not kept: --out DIR keeps the results)",
                     "kind": m["kind"], "created": m["created"], "gpufair": m["gpufair"],
                     "command": " ".join(m["command"]), "runs": ", ".join(m["runs"])}
                    for m in metas],
        "workload": workload,
        "settings": {k: v for k, v in inputs.items()
                     if not isinstance(v, dict) and v is not None and k != "t0"},
        "policies": sections.policies(results),
        "tenants": sections.tenants(results),
        "cluster": sections.cluster(results),
        "replay": sections.replay(results),
        "dry_run": sections.dry_run(results),
        "style": _asset("report.css"),
        "script": _asset("sort.js"),
    }
    return _environment().get_template(TEMPLATE).render(**context)


def write_report(dirs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
                 title: str | None = None, kept: bool = True) -> Path:
    """Read ``dirs`` (refused if missing, truncated, of another version or mixed: an
    InputError naming the directory) and write the report to ``out`` atomically."""
    results = read_results(list(dirs))
    text = render_report(results, title=title, kept=kept)
    target = Path(out)
    if target.is_dir():
        raise InputError(str(target), "is a directory; name the report's file (-o FILE.html)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                         dir=target.parent)
    except OSError as exc:   # a path the user gave that cannot be written: bad input
        raise InputError(str(target), f"cannot write the report here: "
                         f"{exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)   # as an ordinary file (mkstemp makes 0600)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target

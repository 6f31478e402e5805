"""The public traces, throughputs and artifact results shipped inside the package.

They are here so that an installed gpufair can reproduce the published comparisons (and its
own tests can check them) with nothing beside it: ``gpufair simulate --trace
shockwave_120jobs_32gpus`` names a bundled file by its bare name. Where each file comes from,
its licence and what was changed are in ``README.md`` beside this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Bundled:
    """One bundled file: its name on the command line (the file name without extension),
    what kind of input it is, and a line saying what it is good for."""

    file: str
    kind: str
    about: str

    @property
    def name(self) -> str:
        return self.file.rsplit(".", 1)[0]


#: Every bundled input, in the order ``gpufair simulate --help`` lists them.
CATALOGUE: tuple[Bundled, ...] = (
    Bundled("demo_60jobs_16gpus.trace", "trace",
            "Shockwave canonical trace, first 60 jobs (the default; v100:16)"),
    Bundled("shockwave_120jobs_32gpus.trace", "trace",
            "Shockwave canonical trace, 120 jobs (v100:32, --round 120)"),
    Bundled("gavel_msr_51b7ef.trace", "trace",
            "Gavel's Philly VC 51b7ef, 18 jobs over 35 days (v100/p100/k80)"),
    Bundled("tacc_throughputs_v100.json", "throughputs",
            "the V100 part of tacc_throughputs (the default)"),
    Bundled("tacc_throughputs.json", "throughputs",
            "Shockwave's, measured on TACC (its v100 entries)"),
    Bundled("gavel_simulator_throughputs.json", "throughputs",
            "Gavel's simulator oracle for v100, p100, k80"),
    Bundled("tacc_32gpus.json", "config",
            "Shockwave's options for its canonical trace (--policy shockwave)"),
    Bundled("helios_dirlab_1k.csv", "history",
            "1,000 real Helios GPU-cluster jobs (SenseTime 2020), for gpufair replay"),
    Bundled("artifact_results.json", "results",
            "the Shockwave artifact's recorded results on the canonical trace"),
)


def data_dir() -> Path:
    """The directory holding the bundled files (inside site-packages once installed)."""
    return Path(str(resources.files(__name__)))


def path(name: str) -> Path | None:
    """The bundled file called ``name`` (with or without its extension), or None."""
    for entry in CATALOGUE:
        if name in (entry.file, entry.name):
            return data_dir() / entry.file
    return None


def resolve(arg: str | None) -> str | None:
    """What the command line should open for ``arg``.

    A file that exists, and anything with a directory part, is taken as given, so explicit
    paths behave exactly as without bundled data and a local file always shadows a bundled
    one. Only a bare name that is no file here falls back to the bundled file of that name;
    an unknown name is returned unchanged for the reader to report as missing.
    """
    if arg is None or Path(arg).name != arg or Path(arg).exists():
        return arg
    found = path(arg)
    return arg if found is None else str(found)


def listing() -> str:
    """The bundled inputs, one per line, for ``--help``: a researcher sees what can be named
    without a path, and where the files are to copy and modify."""
    width = max(len(entry.name) for entry in CATALOGUE)
    lines = [f"bundled data (name it without a path; files in {data_dir()}):"]
    lines += [f"  {entry.name:<{width}}  {entry.kind}: {entry.about}"
              for entry in CATALOGUE if entry.kind != "results"]
    return "\n".join(lines)


def artifact_results() -> dict[str, Any]:
    """The Shockwave artifact's recorded results (``artifact_results.json``): the numbers
    gpufair's artifact semantics are compared against."""
    return json.loads((data_dir() / "artifact_results.json").read_text(encoding="utf-8"))

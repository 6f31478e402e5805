"""Where the benches find ``shared/data`` (the public traces beside the repository).

The repository is checked out next to ``shared/`` (``../shared`` from its root), as on the
developers' machines and in CI's fresh clone; one definition, so no bench hard-codes a path
that only one machine has.
"""

from __future__ import annotations

from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
MSR_TRACES = SHARED_DATA / "gavel_msr"

"""The translated view of a squeue/sinfo pair as one digest: what the site-scale tests pin
(the translation must not change a byte of it unless on purpose) and what the decoding tests
compare (pruned and full records must translate alike)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from gpufair.adapters.slurm.translate import translate
from gpufair.model.snapshot import state_to_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from site_scale import NOW


def view_digest(jobs: dict, nodes: dict) -> tuple[str, int]:
    """sha256 of the view (state, job infos, problems, waiting jobs) and its job count."""
    view = translate(jobs, nodes, now=float(NOW), managed_partitions=("gpu", "gpu-long"),
                     source="cli")
    text = json.dumps({"state": state_to_dict(view.state),
                       "infos": [repr(view.jobs[k]) for k in sorted(view.jobs)],
                       "problems": list(view.problems),
                       "waiting": [[repr(j), w] for j, w in view.waiting]}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest(), len(view.state.jobs)

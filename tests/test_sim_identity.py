"""Simulation speed work must not move a single number: the ``simulate --json`` output of the
baselines on a generated 220-job / 64-GPU trace (both semantics) equals, to the bit, a
reference recorded with the code before the scale work of issue 15.

The trace is stored rather than generated, so a change to the generator cannot hide a change
to the simulator. Wall-clock fields (wall_s, policy_s, solver_s) and the trace path are the
only ones left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufair.cli.main import main

DATA = Path(__file__).parent / "data" / "sim_identity"
REFERENCE = json.loads((DATA / "reference_220_64.json").read_text())
UNTIMED = ("wall_s", "policy_s", "solver_s", "trace")


@pytest.mark.parametrize("case", sorted(REFERENCE))
def test_simulate_json_matches_the_recorded_reference(case: str, capsys) -> None:
    policy, semantics = case.split(".")
    assert main(["simulate", "--trace", str(DATA / "gen_220_64.trace"),
                 "--throughputs", "tacc_throughputs", "--cluster", "v100:64",
                 "--policy", policy, "--semantics", semantics, "--json", "-q"]) == 0
    got = json.loads(capsys.readouterr().out)
    for key in UNTIMED:
        got.pop(key)
    # compared as text: NaN equals NaN there, and every float must round-trip identically
    assert json.dumps(got, sort_keys=True) == json.dumps(REFERENCE[case], sort_keys=True)

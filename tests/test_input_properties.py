"""Property tests of the input contract on generated malformed inputs: snapshots, traces,
throughputs, configs, squeue/sinfo JSON, log lines and command-line values. Whatever the
input, a run ends within its time bound with exit 0, or exit 2 and one line naming the
input; never a traceback; ``--json`` is strict JSON. The makers are shared with
``bench/bad_inputs.py`` (tests/bad_inputs/generate.py).

Examples are few per kind (the suite runs on a shared 2-core machine); the benchmark runs
more of them.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from bad_inputs import generate
from bad_inputs import make_corpus as corpus
from bad_inputs.contract import judge, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufair.adapters.slurm.translate import translate

EXAMPLES = 12
_settings = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("kind", sorted(generate.MAKERS))
@_settings
@given(rng=st.randoms(use_true_random=False))
def test_every_generated_input_gets_a_clear_answer(kind: str, rng: random.Random) -> None:
    with tempfile.TemporaryDirectory(prefix="gpufair-prop-") as scratch:
        case = generate.MAKERS[kind](rng, Path(scratch))
        result = run(case.argv, env=case.env)
        verdict, why = judge(case, result)
    assert verdict == "ok", f"{verdict}: {why}\n  gpufair {' '.join(case.argv)}"


_GRES = st.text(alphabet=st.sampled_from(list("gpu:v10k8()IDX-,0123456789 x(")), max_size=24)


@_settings
@given(gres=_GRES, node=st.integers(0, 3))
def test_no_action_is_planned_for_what_could_not_be_read(gres: str, node: int) -> None:
    """A node whose GRES cannot be read takes its running jobs out of the round: they are
    listed as skipped, never in the state a policy plans on, and their other nodes are not
    offered (issue 13: such a job was planned for preemption)."""
    jobs, nodes = json.loads(corpus.squeue()), json.loads(corpus.sinfo())
    name = nodes["nodes"][node]["name"]
    nodes["nodes"][node]["gres"] = gres
    view = translate(jobs, nodes, now=1795305510.0)
    if not any(f"node {name}: skipped" in p for p in view.problems):
        return   # the GRES happened to be readable: nothing to check
    on_it = {str(j["job_id"]) for j in jobs["jobs"]
             if j["job_state"] in ("RUNNING", "SUSPENDED") and name in _expand(j["nodes"])}
    assert on_it, "the fixture has a job on every node"
    assert not on_it & {j.id for j in view.state.jobs}
    assert all(any(f"job {j}: skipped" in p for p in view.problems) for j in on_it)
    offered = {n.name for n in view.state.usable_nodes()}
    for j in jobs["jobs"]:
        if str(j["job_id"]) in on_it:
            assert not offered & set(_expand(j["nodes"]))


def _expand(hostlist: str) -> list[str]:
    from gpufair.adapters.slurm.hostlist import expand_hostlist
    return list(expand_hostlist(hostlist)) if hostlist else []


def test_the_dry_run_acts_on_no_job_of_an_unreadable_node(tmp_path: Path) -> None:
    """End to end: job 2 runs on gpu-v100-1 and -2; gpu-v100-1's GRES is garbage. The dry
    run's JSON lists both as skipped and has no action on job 2, and exits 0."""
    nodes = json.loads(corpus.sinfo())
    nodes["nodes"][2]["gres"] = "gpu:v100:(((("
    (tmp_path / "si.json").write_text(json.dumps(nodes))
    (tmp_path / "sq.json").write_bytes(corpus.squeue())
    result = run(["dry-run", "--squeue", str(tmp_path / "sq.json"), "--sinfo",
                  str(tmp_path / "si.json"), "--policy", "las", "--json"])
    assert result.code == 0, result.stderr
    out = json.loads(result.stdout)
    assert any("gpu-v100-1: skipped" in s for s in out["skipped"])
    assert any("job 2: skipped" in s for s in out["skipped"])
    assert "2" not in {a["job_id"] for a in out["actions"] + out["deferred"]}
    assert "job 2: skipped" in result.stderr   # the table's reader sees it too

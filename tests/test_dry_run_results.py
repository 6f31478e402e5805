"""``gpufair dry-run --out DIR``: each node's GPUs and their jobs before and after the planned
actions, and each action with its reason, as a results directory."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpufair.cli.main import main
from gpufair.model import ClusterState, Job, JobState, Migrate, Node, Preempt, SetPriority, Start
from gpufair.results import read_results
from gpufair.results.dry_run import NOT_OURS, action_rows, holders_after, holders_before, node_rows

DATA = Path(__file__).parent / "data" / "slurm"


def _state() -> ClusterState:
    nodes = (Node("a", "v100", 2), Node("b", "v100", 2, unavailable=(1,)), Node("c", "k80", 0))
    jobs = (Job(id="1", gpus=2, state=JobState.RUNNING, gpus_held=("a:0", "a:1")),
            Job(id="2", gpus=1, state=JobState.RUNNING, gpus_held=("b:0",)),
            Job(id="3", gpus=3, state=JobState.PENDING),
            Job(id="4", gpus=1, state=JobState.PENDING))
    return ClusterState(time_s=100.0, nodes=nodes, jobs=jobs)


def test_after_follows_the_actions_in_order():
    state = _state()
    before = holders_before(state)
    assert before == {"a:0": "1", "a:1": "1", "b:0": "2"}
    actions = [Preempt("1"), Migrate("2", ("a:1",)), Start("3", ("a:0", "b:0")),
               SetPriority("4", 5.0)]
    after = holders_after(before, actions)
    assert after == {"a:0": "3", "a:1": "2", "b:0": "3"}
    assert before == {"a:0": "1", "a:1": "1", "b:0": "2"}   # not changed in place
    rows = node_rows(state, "after", after)
    # a node with no GPUs has no rows; a GPU Slurm gives to others is shown as not ours
    assert rows == [("after", "a", "v100", 0, "3"), ("after", "a", "v100", 1, "2"),
                    ("after", "b", "v100", 0, "3"), ("after", "b", "v100", 1, NOT_OURS)]


def test_one_row_per_action_and_node_with_reasons_and_held_back_last():
    state = _state()
    rows = action_rows(state, [Preempt("1"), Start("3", ("a:0", "a:1", "b:0"))],
                       {"1": "preempt: rank 3/3", "3": "start: rank 1/3"},
                       held_back=[(Start("4", ("b:0",)), "preemption cap reached")])
    assert rows == [(0.0, "1", "preempt", "a", 2, "v100", "preempt: rank 3/3"),
                    (0.0, "3", "start", "a", 2, "v100", "start: rank 1/3"),
                    (0.0, "3", "start", "b", 1, "v100", "start: rank 1/3"),
                    (0.0, "4", "start (held back)", "b", 1, "v100", "preemption cap reached")]
    assert action_rows(state, [SetPriority("4", 2.0)], {}) == \
        [(0.0, "4", "setpriority", "", 0, "", "")]


def test_dry_run_out_of_raw_slurm_files(tmp_path, capsys):
    out = tmp_path / "dry"
    argv = ["dry-run", "--squeue", str(DATA / "squeue.json"), "--sinfo",
            str(DATA / "sinfo.json"), "--policy", "themis", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    results = read_results(out)
    assert results.kinds == ["dry-run"] and results.runs == ["themis"]
    assert results.metas[0]["inputs"]["t0"] == 1795305505.0
    actions = results.actions
    assert actions[["job_id", "action", "node", "gpus", "gpu_type"]].values.tolist() == \
        [["3", "resume", "gpu-k80-2", 3, "k80"]]
    assert actions.reason.iloc[0] == "resume: unranked; placed by themis"
    assert "resume" in printed and "placed by themis" in printed
    nodes = results.nodes
    assert len(nodes) == 2 * 16 and set(nodes.phase) == {"before", "after"}
    both = nodes.pivot_table(index=["node", "gpu_index"], columns="phase", values="job_id",
                             aggfunc="first")
    changed = both[both["before"] != both["after"]]
    # the suspended job holds its GPUs before and after its resume: nothing moves
    assert changed.empty
    counts = nodes[nodes.phase == "before"].groupby("job_id").size().to_dict()
    assert counts == {"": 3, "1": 2, "2": 8, "3": 3}
    assert isinstance(results.metrics, pd.DataFrame)
    assert results.metrics.set_index("run").loc["themis", "actions"] == 1

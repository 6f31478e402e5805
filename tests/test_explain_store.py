"""The store keeps each round's decision and reason per job: one row per run of rounds with
the same outcome, code and guard (figures and text the latest), pruned with the rounds."""

from __future__ import annotations

from dataclasses import replace

from gpufair.adapters.recording import RecordingAdapter
from gpufair.core.enrich import with_default_profiles
from gpufair.core.round import Round
from gpufair.model import ClusterState, Job, JobState, Node
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.store import Store
from gpufair.policy.registry import create_policy

NODES = (Node("n0", "v100", 4),)
HELD = tuple(f"n0:{g}" for g in range(4))


def first() -> ClusterState:
    return ClusterState(1000.0, nodes=NODES, jobs=(
        Job("a", gpus=4, state=JobState.RUNNING, start_s=0.0, gpus_held=HELD, owner_uid=1000),
        Job("b", gpus=4, arrival_s=10.0, owner_uid=1001)))


def daemon(tmp_path, state: ClusterState) -> tuple[Daemon, RecordingAdapter, Store]:
    adapter = RecordingAdapter(state)
    store = Store(tmp_path / "s.db")
    rounds = Round(create_policy("fifo"), enrichers=[with_default_profiles], explain=True)
    settings = ServiceSettings(hook_dir=str(tmp_path / "hooks"))
    return Daemon(adapter, rounds, store, settings, sleep=lambda s: None), adapter, store


def test_a_jobs_story_over_rounds_that_change(tmp_path):
    d, adapter, store = daemon(tmp_path, first())
    r1 = d.run_round()
    adapter.source = replace(first(), time_s=1120.0)
    r2 = d.run_round()
    a, b = first().jobs
    adapter.source = ClusterState(1240.0, nodes=NODES, jobs=(
        replace(a, state=JobState.COMPLETED, gpus_held=(), finish_s=1200.0), b))
    r3 = d.run_round()
    adapter.source = ClusterState(1360.0, nodes=NODES, jobs=(
        replace(b, state=JobState.RUNNING, start_s=1240.0, gpus_held=HELD),))
    r4 = d.run_round()
    story = [(row["from_round"], row["to_round"], row["outcome"], row["code"])
             for row in store.decisions("b")]
    assert story == [(r1, r2, "wait", "fifo.position"), (r3, r3, "start", "fifo.position"),
                     (r4, r4, "run", "fifo.position")]
    waited = store.decisions("b")[0]
    assert waited["figures"] == {"position": 2, "of": 2, "waited_s": 1110.0}   # round 2's
    assert waited["text"] == "waiting — fifo.position: position 2, of 2, waited s 1110"
    assert waited["owner_uid"] == 1001 and waited["to_s"] >= waited["from_s"]
    assert [row["outcome"] for row in store.decisions("a")] == ["run"]   # gone after r2
    assert store.decisions("nobody") == []


def test_a_restarted_daemon_carries_on_the_rows_it_left(tmp_path):
    d, _, store = daemon(tmp_path, first())
    r1 = d.run_round()
    store.close()
    d, _, store = daemon(tmp_path, replace(first(), time_s=1120.0))
    r2 = d.run_round()
    assert [(r["from_round"], r["to_round"]) for r in store.decisions("b")] == [(r1, r2)]


def test_decisions_are_pruned_with_their_rounds(tmp_path):
    d, _, store = daemon(tmp_path, first())
    d.run_round()
    store.prune(keep_finished_s=1e9, keep_rounds_s=10.0, now=4e9)
    assert store.decisions("b") == []
    d.run_round()   # the cache of each job's last row went with them: a fresh row
    assert len(store.decisions("b")) == 1


def test_a_job_a_slurm_limit_keeps_out_of_the_round_is_explained(tmp_path):
    """The Slurm adapter leaves out of the round a job a limit forbids (and one its owner
    holds...), listing it in its view's ``waiting`` with why: the round never decides on it,
    yet its owner asks ``gpufair explain``. Its story says which limit, TRES and use, round
    after round, also in a round where no job is left to plan at all."""
    d, adapter, store = daemon(tmp_path, first())
    capped = Job("c", gpus=4, arrival_s=5.0, owner_uid=1002)
    why = ("a Slurm limit forbids its start now: QOS capped MaxTRESPerJob gres/gpu: the job "
           "asks 4, the limit is 2")
    adapter.last_view = type("View", (), {"waiting": ((capped, why),)})()
    r1 = d.run_round()
    adapter.source = ClusterState(1100.0, nodes=NODES, jobs=())
    r2 = d.run_round()
    [row] = store.decisions("c")
    assert (row["from_round"], row["to_round"], row["outcome"], row["code"]) == \
        (r1, r2, "wait", "slurm.not_startable")
    assert row["text"] == f"waiting — slurm.not_startable: because {why}"
    assert row["owner_uid"] == 1002
    # the jobs the round did decide on keep their own reasons beside it
    assert [r["code"] for r in store.decisions("b")] == ["fifo.position"]

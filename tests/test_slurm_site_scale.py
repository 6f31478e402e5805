"""The Slurm read side at site scale (issue 30): faster translation, same snapshot out."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from gpufair.adapters.slurm.gres import parse_gpu_entries
from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.record_cache import RecordCache
from gpufair.adapters.slurm.translate import translate
from gpufair.model import Job, JobState, ThroughputProfile
from gpufair.model.records import job_replaced

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from site_scale import NOW, site_documents
from site_view import view_digest

#: sha256 of the translated view of ``site_documents(200, 16, seed=3)`` (state, job infos,
#: problems, waiting jobs) as made by main at 384ccfd, before the issue-30 speed-ups of the
#: translation: they must not change a byte of it. A deliberate change of the translation
#: (or of the generator) changes it too: regenerate with ``_view_digest()`` and say why.
#: Re-pinned once, on purpose: a running job now keeps its GPU type and allowed nodes (a
#: move onto another type stranded a job in the issue-29 soak; branch slurm-batch). And once
#: more: each job's info keeps its TRES request (``tres_req``, for the limits read ahead;
#: branch slurm-limits2); with that field blanked the digest is the one before. And once
#: more: a running job asking GPUs per node keeps its node count (22.05 hides -N n once a
#: job runs; a refused node count left a soak job unrunnable).
SITE_VIEW_SHA256 = "ce31d09ba27a76c8d758ce01a4ec77d1089904b4d8b63d2f08d3a49215764341"


def _view_digest() -> tuple[str, int]:
    return view_digest(*site_documents(200, 16, 3))


def test_the_generated_site_translates_to_the_same_view_as_before():
    digest, jobs = _view_digest()
    assert jobs == 327   # running, waiting and array tasks of the 200 records
    assert digest == SITE_VIEW_SHA256


def test_job_replaced_is_dataclasses_replace():
    job = Job("7", tenant="a", gpus=2, state=JobState.RUNNING, gpus_held=("n1:0", "n1:1"),
              throughput=ThroughputProfile({("a100", 2): 3.0}), allowed_nodes=("n1",))
    changes = {"attained_s": 12.5, "arrival_s": 3.0, "allowed_nodes": None, "id": "8"}
    fast, slow = job_replaced(job, **changes), dataclasses.replace(job, **changes)
    assert fast == slow and fast.__dict__ == slow.__dict__
    assert job.attained_s == 0.0 and job.id == "7"   # the original is untouched
    with pytest.raises(TypeError, match="no_such_field"):
        job_replaced(job, no_such_field=1)


def test_cached_parsers_hand_out_fresh_lists():
    """GRES strings are parsed once per string (cached): a caller changing the list it got
    must not change what the next caller gets."""
    first = parse_gpu_entries("gpu:a100:4(IDX:0-3)")
    first.clear()
    again = parse_gpu_entries("gpu:a100:4(IDX:0-3)")
    assert [(e.gpu_type, e.count, e.indices) for e in again] == [("a100", 4, (0, 1, 2, 3))]
    assert parse_gpu_entries("gres:gpu:2,gres:gpu:v100:1") != []
    with pytest.raises(ValueError):   # a bad string fails at every call, not only the first
        parse_gpu_entries("gpu:a100:x")
    with pytest.raises(ValueError):
        parse_gpu_entries("gpu:a100:x")


def test_plain_host_lists_split_as_before():
    assert expand_hostlist("n1,n2") == ["n1", "n2"]
    assert expand_hostlist("a],b") == ["a],b"]   # an unbalanced bracket: one odd name, as before
    assert expand_hostlist("n[1-2],m") == ["n1", "n2", "m"]


def _same_view(a, b) -> None:
    assert a.state == b.state
    assert dict(a.jobs) == dict(b.jobs)
    assert (a.problems, a.waiting, a.settling, a.held_back) == \
        (b.problems, b.waiting, b.settling, b.held_back)


def test_unchanged_records_are_not_translated_again_and_changes_are_seen():
    """The adapter's record cache (issue 30): a second read of the same records translates
    none of them again and gives the view a fresh translation gives, running jobs' attained
    service brought up to the new "now"; a record that changed in any field is translated
    afresh; one that fails is not cached."""
    jobs, nodes = site_documents(200, 16, 3)
    managed = ("gpu", "gpu-long")
    cache = RecordCache()
    first = translate(jobs, nodes, now=float(NOW), managed_partitions=managed, cache=cache)
    assert (cache.hits, cache.misses) == (0, 200)
    later = float(NOW) + 90.0
    again = translate(jobs, nodes, now=later, managed_partitions=managed, cache=cache)
    assert (cache.hits, cache.misses) == (200, 0)
    _same_view(again, translate(jobs, nodes, now=later, managed_partitions=managed))
    running = next(j for j in first.state.jobs if j.state is JobState.RUNNING and j.start_s)
    assert next(j for j in again.state.jobs if j.id == running.id).attained_s == \
        running.attained_s + 90.0

    records = jobs["jobs"]
    pending = next(r for r in records if r["job_state"] == "PENDING"
                   and r.get("array_task_id") is None and r["priority"] == 0)
    started = next(r for r in records if r["job_state"] == "RUNNING")
    pending["priority"] = 1000                       # released
    started["admin_comment"] += " gpufair:refused=Licenses@1"
    started["time_limit"] = 17                       # not in the model: still a new record
    records.append({"job_id": "not a number"})       # fails at every read, never cached
    changed = translate(jobs, nodes, now=later, managed_partitions=managed, cache=cache)
    assert (cache.hits, cache.misses) == (198, 3)   # two changed, the bad one again
    _same_view(changed, translate(jobs, nodes, now=later, managed_partitions=managed))
    assert changed.jobs[str(started["job_id"])].admin_comment.endswith("Licenses@1")
    assert any("job #200" in p for p in changed.problems)
    translate(jobs, nodes, now=later, managed_partitions=("gpu",), cache=cache)
    assert cache.hits == 0   # other managed partitions: every record translated afresh


def test_jobs_with_nothing_measured_share_one_neutral_profile_each_kind():
    """with_default_profiles makes one neutral profile per (types allowed, GPUs, types held)
    and hands it to every job of that kind: the same rates each job would get on its own."""
    from gpufair.core.enrich import _usable_types, _with_defaults, with_default_profiles
    from gpufair.model.records import node_of
    jobs, nodes = site_documents(200, 16, 3)
    state = translate(jobs, nodes, now=float(NOW), managed_partitions=("gpu", "gpu-long")).state
    enriched = with_default_profiles(state)
    type_of = {n.name: n.gpu_type for n in state.nodes}
    types = state.gpu_type_names()
    for before, after in zip(state.jobs, enriched.jobs, strict=True):
        usable = _usable_types(before, type_of)
        alone = _with_defaults(before, usable, [t for t in types if usable is None
                                                or t in usable], type_of, state.gpu_count())
        assert after == alone
    # shared: one profile per kind of job with nothing measured, not one per job
    kinds = {(tuple(t for t in types if (u := _usable_types(j, type_of)) is None or t in u),
              j.gpus, frozenset(type_of.get(node_of(g)) for g in j.gpus_held))
             for j in state.jobs if not (j.throughput.rates or j.elastic)}
    profiles = {id(j.throughput) for j in enriched.jobs}
    assert len(profiles) == len(kinds) < len(enriched.jobs) // 5


def test_the_cli_poll_tells_a_quiet_cluster_without_decoding_it(tmp_path):
    """Over the CLI, ``changed()`` compares what squeue prints (its bytes) and sinfo's records
    (without the load figures slurmd's pings move) with the last view's: a quiet cluster is
    not decoded nor translated at each poll; a change to any job or node field is seen."""
    import os

    from gpufair.adapters.slurm import CliTransport, SlurmAdapter, SlurmSettings
    jobs, nodes = site_documents(20, 4, 3)
    squeue, sinfo = tmp_path / "squeue.json", tmp_path / "sinfo.json"
    squeue.write_text(json.dumps(jobs))
    sinfo.write_text(json.dumps(nodes))
    for name, path in (("squeue", squeue), ("sinfo", sinfo)):
        (tmp_path / name).write_text(f"#!/bin/sh\nexec cat {path}\n")
        (tmp_path / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    adapter = SlurmAdapter(CliTransport(env=env), SlurmSettings(managed_partitions=("gpu",)))
    assert adapter.changed()   # nothing read yet
    adapter.view()
    assert not adapter.changed()
    nodes["nodes"][0]["cpu_load"] += 7          # a ping's figures: not a change
    nodes["nodes"][0]["free_memory"] -= 1000
    sinfo.write_text(json.dumps(nodes))
    assert not adapter.changed()
    nodes["nodes"][0]["state_flags"] = ["DRAIN"]
    sinfo.write_text(json.dumps(nodes))
    assert adapter.changed()
    adapter.view()
    assert not adapter.changed()
    jobs["jobs"][3]["comment"] = "gpufair:gpus=1-2"
    squeue.write_text(json.dumps(jobs))
    assert adapter.changed()
    adapter.view()
    assert not adapter.changed()
    squeue.unlink()   # squeue fails: a change (the full read says what is wrong)
    assert adapter.changed()


def test_a_round_runs_with_the_cyclic_collector_paused():
    """The daemon's round and poll run with gc off (a site's millions of objects were walked
    again and again), on again after, also when the round fails; a caller's own gc.disable()
    is left as it was."""
    import gc

    from gpufair.core.gc_pause import gc_paused
    from gpufair.plugin.daemon import Daemon
    assert getattr(Daemon.run_round, "__wrapped__", None) is not None
    assert getattr(Daemon._changed, "__wrapped__", None) is not None
    seen = []

    @gc_paused
    def work(fail: bool) -> None:
        seen.append(gc.isenabled())
        if fail:
            raise RuntimeError("round failed")

    assert gc.isenabled()
    work(False)
    with pytest.raises(RuntimeError):
        work(True)
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        work(False)
        assert not gc.isenabled()
    finally:
        gc.enable()

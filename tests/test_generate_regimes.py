"""The papers' regimes as generated traces: heavy-tailed lengths (AFS) and tenants that own
~20 jobs of one type and leave (OEF's JCT experiment). Seeded, so reproducible."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from gpufair.adapters.simulator.generate import (
    UserClass,
    format_trace,
    generate_app_trace,
    generate_heavy_tailed_trace,
    generate_tenant_trace,
    generate_trace,
    generate_user_class_trace,
)
from gpufair.adapters.simulator.trace import load_trace


def test_heavy_tails_keep_the_mix_and_arrivals_and_the_mean_load(canonical_trace) -> None:
    base = generate_trace(canonical_trace, 4000, num_gpus=64, seed=3)
    tailed = generate_heavy_tailed_trace(canonical_trace, 4000, num_gpus=64, seed=3)
    assert [(j.job_type, j.scale_factor, j.arrival_s) for j in tailed] == \
        [(j.job_type, j.scale_factor, j.arrival_s) for j in base]
    factor = np.array([t.total_steps / b.total_steps for t, b in zip(tailed, base, strict=True)])
    assert factor.mean() == pytest.approx(1.0, rel=0.1)            # same offered load
    assert np.median(factor) < 0.45                                 # most jobs shorter
    assert np.quantile(factor, 0.99) > 6                            # a few far longer
    assert generate_heavy_tailed_trace(canonical_trace, 50, num_gpus=64, seed=3, sigma=0.0) \
        == generate_trace(canonical_trace, 50, num_gpus=64, seed=3)


def test_heavy_tails_are_seeded(canonical_trace) -> None:
    a = generate_heavy_tailed_trace(canonical_trace, 40, num_gpus=16, seed=1)
    assert a == generate_heavy_tailed_trace(canonical_trace, 40, num_gpus=16, seed=1)
    assert a != generate_heavy_tailed_trace(canonical_trace, 40, num_gpus=16, seed=2)
    with pytest.raises(ValueError, match="sigma"):
        generate_heavy_tailed_trace(canonical_trace, 4, num_gpus=16, sigma=-1.0)


def test_tenants_own_one_job_type_and_about_twenty_jobs(canonical_trace, tmp_path) -> None:
    jobs, owner = generate_tenant_trace(canonical_trace, 50, 20, num_gpus=24, seed=0)
    assert len(jobs) == len(owner)
    assert [j.index for j in jobs] == list(range(len(jobs)))
    arrivals = [j.arrival_s for j in jobs]
    assert arrivals == sorted(arrivals)
    kinds: dict[str, set] = defaultdict(set)
    for j, t in zip(jobs, owner, strict=True):
        kinds[t].add((j.job_type, j.scale_factor, j.total_steps))
    assert len(kinds) == 50 and all(len(k) == 1 for k in kinds.values())
    assert len(jobs) / 50 == pytest.approx(20, rel=0.15)
    again = generate_tenant_trace(canonical_trace, 50, 20, num_gpus=24, seed=0)
    assert again == (jobs, owner)
    assert generate_tenant_trace(canonical_trace, 50, 20, num_gpus=24, seed=1)[0] != jobs
    path = tmp_path / "tenants.trace"   # the trace file round-trips (tenants kept aside)
    path.write_text(format_trace(jobs))
    assert [(j.job_type, j.arrival_s) for j in load_trace(str(path))] == \
        [(j.job_type, j.arrival_s) for j in jobs]


def test_a_tenant_with_one_job_and_bad_arguments(canonical_trace) -> None:
    jobs, owner = generate_tenant_trace(canonical_trace, 1, 0.01, num_gpus=8, seed=0)
    assert len(jobs) == 1 and owner == ["tenant000"] and jobs[0].arrival_s == 0.0
    with pytest.raises(ValueError):
        generate_tenant_trace(canonical_trace, 0, 20, num_gpus=8)
    with pytest.raises(ValueError):
        generate_tenant_trace([], 3, 20, num_gpus=8)


GANDIVA_USERS = (UserClass("ResNet-50 (batch size 16)", 1, 150, 4e4),
                 UserClass("ResNet-50 (batch size 16)", 2, 150, 2e4),
                 UserClass("ResNet-50 (batch size 16)", 4, 150, 1e4),
                 UserClass("A3C", 1, 150, 8e4))


def test_user_classes_own_their_jobs_and_round_trip(tmp_path) -> None:
    """The Gandiva_fair paper's heterogeneous experiment: 4 users x 150 jobs, each user one
    model and gang, all submitted at once; lengths vary around the mean; seeded."""
    jobs, owner = generate_user_class_trace(GANDIVA_USERS, seed=4)
    assert len(jobs) == 600 and [j.index for j in jobs] == list(range(600))
    by_user = defaultdict(list)
    for j, user in zip(jobs, owner, strict=True):
        by_user[user].append(j)
    assert sorted(by_user) == ["user1", "user2", "user3", "user4"]
    for user, cls in zip(("user1", "user2", "user3", "user4"), GANDIVA_USERS, strict=True):
        mine = by_user[user]
        assert len(mine) == 150 and all(j.arrival_s == 0.0 for j in mine)
        assert {(j.job_type, j.scale_factor) for j in mine} == {(cls.job_type, cls.gpus)}
        steps = np.array([j.total_steps for j in mine])
        assert steps.mean() == pytest.approx(cls.mean_steps, rel=0.15) and steps.std() > 0
    path = tmp_path / "users.trace"
    path.write_text(format_trace(jobs))
    assert [(j.job_type, j.total_steps, j.scale_factor) for j in load_trace(str(path))] == \
        [(j.job_type, j.total_steps, j.scale_factor) for j in jobs]
    again = generate_user_class_trace(GANDIVA_USERS, seed=4)
    assert again == (jobs, owner)
    assert generate_user_class_trace(GANDIVA_USERS, seed=5)[0] != jobs


def test_user_classes_with_arrivals_and_bad_arguments() -> None:
    """Poisson arrivals per user, in arrival order overall; a user of one job; bad input."""
    jobs, owner = generate_user_class_trace(
        (UserClass("A3C", 1, 1, 10.0), UserClass("A3C", 2, 40, 10.0)), seed=1,
        job_gap_s=600.0)
    arrivals = [j.arrival_s for j in jobs]
    assert arrivals == sorted(arrivals) and arrivals[-1] > 0
    assert owner.count("user1") == 1 and owner.count("user2") == 40
    for bad in ((), (UserClass("A3C", 1, 0, 10.0),), (UserClass("A3C", 0, 1, 10.0),),
                (UserClass("A3C", 1, 1, 0.0),)):
        with pytest.raises(ValueError, match="need users"):
            generate_user_class_trace(bad)
    with pytest.raises(ValueError, match="sigma"):
        generate_user_class_trace(GANDIVA_USERS, sigma=-1.0)


def test_apps_of_trials_share_a_model_and_arrive_together(canonical_trace) -> None:
    """THEMIS's Workload 1: ~10 % single-job apps, the others ~N trials of one 1- or 2-GPU
    model launched at once, trials of varied length; apps in arrival order; seeded."""
    jobs = generate_app_trace(canonical_trace, 200, 12, num_gpus=64, seed=2)
    apps = defaultdict(list)
    for j in jobs:
        apps[j.app].append(j)
    assert len(apps) == 200 and [j.index for j in jobs] == list(range(len(jobs)))
    assert all(j.scale_factor <= 2 for j in jobs)
    sizes = np.array([len(v) for v in apps.values()])
    assert 0.04 < np.mean(sizes == 1) < 0.18 and np.median(sizes[sizes > 1]) == \
        pytest.approx(12, abs=2)
    for trials in apps.values():
        assert len({(j.job_type, j.scale_factor, j.arrival_s) for j in trials}) == 1
        if len(trials) > 2:
            assert len({j.total_steps for j in trials}) > 1
    arrivals = [j.arrival_s for j in jobs]
    assert arrivals == sorted(arrivals)
    assert generate_app_trace(canonical_trace, 20, 5, num_gpus=16, seed=2) == \
        generate_app_trace(canonical_trace, 20, 5, num_gpus=16, seed=2)
    assert generate_app_trace(canonical_trace, 20, 5, num_gpus=16, seed=3) != \
        generate_app_trace(canonical_trace, 20, 5, num_gpus=16, seed=2)
    with pytest.raises(ValueError, match="jobs per app"):
        generate_app_trace(canonical_trace, 5, 1, num_gpus=16)
    with pytest.raises(ValueError, match="GPUs"):
        generate_app_trace([j for j in canonical_trace if j.scale_factor > 2], 5, 4,
                           num_gpus=16)


def test_a_generated_app_reaches_the_simulated_jobs(canonical_trace) -> None:
    """The simulator hands each job its trace app (THEMIS groups by it)."""
    from gpufair import data
    from gpufair.adapters.simulator.cluster_spec import parse_cluster_spec
    from gpufair.adapters.simulator.engine import TraceSimulator
    from gpufair.adapters.simulator.semantics import semantics_named
    from gpufair.adapters.simulator.throughputs import load_throughputs

    jobs = generate_app_trace(canonical_trace, 3, 3, num_gpus=8, seed=0)
    sim = TraceSimulator(jobs, load_throughputs(data.path("tacc_throughputs.json")),
                         parse_cluster_spec("v100:8", "4"), semantics_named("clean"), 120.0)
    state = sim.snapshot()
    assert {j.id: j.app for j in state.jobs} == {str(j.index): j.app for j in jobs
                                                 if j.arrival_s == 0.0}

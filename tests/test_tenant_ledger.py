"""The tenant ledger (tenant_metrics.TenantLedger): what it keeps between events must not
outlive what it was computed from, and the pairs it skips must be the ones worth nothing."""

from __future__ import annotations

import numpy as np

from gpufair.model import Job, ThroughputProfile
from gpufair.tenant_metrics import TenantLedger, _best_value, normalized_speedups

TYPES = ("v100", "k80")
CAPACITY = {"v100": 2, "k80": 2}


def job(job_id: str, tenant: str, v100: float, k80: float = 1.0, gpus: int = 1) -> Job:
    return Job(id=job_id, tenant=tenant, gpus=gpus,
               throughput=ThroughputProfile({("v100", gpus): v100, ("k80", gpus): k80}))


def test_a_job_whose_rates_change_between_events_counts_at_its_new_rates() -> None:
    ledger = TenantLedger(TYPES, "k80")
    first = job("1", "a", v100=2.0)
    ledger.add(10.0, [first], {"1": "v100"}, CAPACITY)
    assert ledger.got["a"] == 20.0
    # the same job id, measured again (a profiler's new rates): a new throughput profile
    ledger.add(10.0, [job("1", "a", v100=3.0)], {"1": "v100"}, CAPACITY)
    assert ledger.got["a"] == 50.0
    # a resized gang reads its rates at the new size
    ledger.add(10.0, [job("1", "a", v100=8.0, k80=2.0, gpus=2)], {"1": "v100"}, CAPACITY)
    assert ledger.got["a"] == 50.0 + 10.0 * 2 * 4.0


def test_envy_pairs_match_the_direct_values_with_idle_and_holding_tenants() -> None:
    """Three tenants, one holding nothing: every pair's value is _best_value of the other's
    bundle with the tenant's own demand, and a tenant holding nothing is worth 0 to others."""
    jobs = [job("1", "a", v100=4.0), job("2", "a", v100=1.5, gpus=2, k80=1.0),
            job("3", "b", v100=2.0), job("4", "c", v100=3.0)]
    running = {"1": "v100", "2": "k80", "3": "v100"}   # c waits
    ledger = TenantLedger(TYPES, "k80")
    ledger.add(5.0, jobs, running, CAPACITY)
    speed = {t: sum(j.gpus * normalized_speedups(j, TYPES, "k80") for j in jobs
                    if j.tenant == t) / sum(j.gpus for j in jobs if j.tenant == t)
             for t in "abc"}
    demand = {t: float(sum(j.gpus for j in jobs if j.tenant == t)) for t in "abc"}
    bundle = {"a": np.array([1.0, 2.0]), "b": np.array([1.0, 0.0]), "c": np.zeros(2)}
    for a in "abc":
        for b in "abc":
            if a != b:
                assert ledger.other_pair[a, b] == 5.0 * _best_value(speed[a], bundle[b],
                                                                    demand[a])
    assert ledger.other_pair["a", "c"] == ledger.other_pair["b", "c"] == 0.0
    assert ledger.other_pair["c", "a"] > 0

"""The rows of the OEF paper's Gavel: each tenant's normalized efficiency against what its
weighted equal share of every GPU type would give it (spec oef.md §5.4).

    max t  s.t.  E_l(x) ≥ t · V_l  for every tenant l,  capacity,  Σ_t x[j,t] ≤ 1 per job

E_l(x) = Σ_{jobs j of l} Σ_t gang_j · r_{j,t} · x[j,t], with r_{j,t} the job's rate on t over
its rate on its slowest usable type: throughput in slowest-GPU equivalents, the paper's
normalized throughput (§6.1), which OEF maximises too, so the two are compared in one unit.
V_l = Σ_t (G_t · π_l / Σπ) · r̄_{l,t}, where r̄_{l,t} is the gang-weighted mean of l's jobs'
r_{j,t} (0 for a job that cannot use t). For the paper's tenants, whose jobs are all of one
type, r̄_l is the tenant's speedup vector W_l and V_l is W_l·(m/n) exactly. The per-job cap is
what the spec found essential to reproduce the paper's eq. (3); for a tenant it sums to the
cap "the GPUs its jobs can use".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from gpufair.model import Job
from gpufair.policy.allocation_lp import FractionIndex


def normalized_efficiency(index: FractionIndex, heterogeneity_aware: bool) -> np.ndarray:
    """gang · rate / (the job's rate on its slowest usable type), per column (just the gang
    when types are not told apart)."""
    if not heterogeneity_aware:
        return index.gang.copy()
    slowest = np.full(index.num_jobs, np.inf)
    np.minimum.at(slowest, index.jobs, index.rates)
    return index.gang * index.rates / slowest[index.jobs]


def tenant_fair_rows(index: FractionIndex, jobs: Sequence[Job], capacity: Mapping[str, int],
                     weights: Mapping[str, float], heterogeneity_aware: bool
                     ) -> tuple[sp.csr_matrix, np.ndarray]:
    """(E, V): row l of E·x is tenant l's normalized efficiency and V_l its equal share's
    value, over the tenants with a runnable job (in order of first appearance). A tenant
    missing from ``weights`` weighs 1, as everywhere else in gpufair."""
    efficiency = normalized_efficiency(index, heterogeneity_aware)
    tenant_names = list(dict.fromkeys(jobs[j].tenant for j in index.runnable.tolist()))
    row_of = {name: i for i, name in enumerate(tenant_names)}
    job_row = np.array([row_of.get(job.tenant, -1) for job in jobs])
    rows = job_row[index.jobs]
    e = sp.csr_matrix((efficiency, (rows, np.arange(index.size))),
                      shape=(len(tenant_names), index.size))
    pi = np.array([float(weights.get(name, 1.0)) for name in tenant_names])
    share = np.array([capacity[t] for t in index.types], dtype=float)[None, :] \
        * (pi / pi.sum())[:, None]                                  # tenants x types, GPUs
    # Σ_j gang_j r_{j,t} per tenant and type, over the tenant's gang total (runnable jobs)
    speed_sum = np.zeros((len(tenant_names), len(index.types)))
    np.add.at(speed_sum, (rows, index.type_index), efficiency)
    runnable = index.runnable
    gang_sum = np.zeros(len(tenant_names))
    np.add.at(gang_sum, job_row[runnable],
              np.array([float(jobs[j].gpus) for j in runnable.tolist()]))
    value = np.sum(share * speed_sum / gang_sum[:, None], axis=1)
    return e, value

"""What reasons cost the daemon's round (issue 33): per policy, one round on a busy snapshot,
the policy's plan, then its reasons (``Plan.explain``), the round's decisions
(``core.explain.decide``) and the store's write of them (``Store.record_decisions``, a
fresh file store, then the same decisions again: the carried-on rows of a steady round).

    python bench/explain_cost.py [--jobs 900] [--cluster v100:128,p100:64,k80:64]
                                 [--policies las,max_min,...]

A simulation pays none of it (it never asks for reasons: checked by bench/scale.py's tables
before and after, and by tests/test_explain_round.py). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from scale import ROUND_S, busy_round, markdown, warm_up

from gpufair.core.explain import decide
from gpufair.core.round import Round
from gpufair.plugin.store import Store
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy


def cost(name: str, jobs: int, cluster: str) -> list[str]:
    state = busy_round(jobs, cluster)
    rounds = Round(create_policy(name, PolicyConfig(round_s=ROUND_S)))
    started = time.perf_counter()
    plan = rounds.policy.schedule(state, state.time_s)
    planned = time.perf_counter() - started
    actions = rounds.diff(state, plan, True)
    started = time.perf_counter()
    reasons = plan.reasons()
    explained = time.perf_counter() - started
    started = time.perf_counter()
    decisions = decide(state, plan, name, actions, [])
    decided = time.perf_counter() - started
    owners = {j.id: j.owner_uid for j in state.jobs}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "state.db")
        started = time.perf_counter()
        store.record_decisions(1, decisions, owners)
        first = time.perf_counter() - started
        started = time.perf_counter()
        store.record_decisions(2, decisions, owners)
        steady = time.perf_counter() - started
        store.close()
    return [name, str(len(reasons)), f"{planned * 1e3:.0f}", f"{explained * 1e3:.1f}",
            f"{decided * 1e3:.1f}", f"{first * 1e3:.1f}", f"{steady * 1e3:.1f}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=900)
    parser.add_argument("--cluster", default="v100:128,p100:64,k80:64")
    parser.add_argument("--policies", default="fifo,las,max_min,themis,shockwave,"
                        "gandiva_fair,afs,oef")
    args = parser.parse_args()
    rows = [["policy", "jobs explained", "plan ms", "reasons ms", "decisions ms",
             "store ms (new rows)", "store ms (carried on)"]]
    for name in [p for p in args.policies.split(",") if p]:
        warm_up(name)
        rows.append(cost(name, args.jobs, args.cluster))
    print(f"one round, {args.jobs} active jobs on {args.cluster}\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

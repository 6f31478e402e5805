"""Every script in ``bench/`` runs, at tiny sizes, and prints its table (issue 36).

Why: benches are not run by anything else, so they rot: ``bench_oef.py --parts sim`` crashed
as shipped for a whole release (its simulator wrapper lacked a method the runner had grown).
Each bench here runs as a user runs it (``python bench/NAME.py ARGS``, a fresh process, from
the repository root) and must exit 0 and print a line of its table. The figures are not
checked: benches measure, tests judge. Two at a time (the machine has two cores).

``bench/slurm_soak.py`` and ``bench/slurm_rpcs.py`` bring up a Slurm of their own and are
run by hand (ELSEWHERE). A new bench must be added to ``SMOKE`` (the last test fails
otherwise).
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
MSR_51B7EF = REPO / "gpufair" / "data" / "gavel_msr_51b7ef.trace"

#: script -> (tiny arguments, a string its table prints)
SMOKE: dict[str, tuple[list[str], str]] = {
    "bad_inputs.py": (["--generated", "2"], "met the contract"),
    "bench_afs.py": (["--quick", "--skip-round"], "| demo 60 jobs |"),
    "bench_daemon_store.py": (["--finished", "200", "--active", "5"], "after pruning"),
    "bench_gandiva_fair.py": (["--quick", "--time-limit", "2"], "cold round wall s"),
    "gandiva_fair_gap.py": (["--tiny"], "| 1-GPU jobs + moves unlimited |"),
    "bench_oef.py": (["--parts", "sim", "--trace", str(MSR_51B7EF), "--jobs", "5",
                      "--time-limit", "3"], "| oef non-coop | 5 |"),
    "bench_profiler.py": (["--quick", "--logs", "20"], "round s (median of"),
    "bench_profiler_memory.py": (["--sizes", "1"], "peak RSS MB"),
    "bench_shockwave.py": (["--time-limit", "2"], "certified"),
    "bench_simulation.py": (["--quick"], "avg JCT s"),
    "bench_themis.py": (["--reps", "1", "--mix", "insensitive"], "knapsack"),
    "bench_yarn.py": (["--apps", "4"], "snapshot wall s"),
    "capture_overhead.py": (["--policies", "fifo", "--repeat", "1", "--size", "30/8"],
                            "| fifo |"),
    "report_size.py": (["--jobs", "200", "--runs", "2", "--tenants", "4", "--days", "1"],
                       " MB |"),
    "site_scale.py": (["--jobs", "200", "--nodes", "16", "--policies", "fifo"], "| fifo |"),
    "slurm_backfill_fidelity.py": (["--histories", "one_node_c", "--sets", "default",
                                    "--seeds", "1"], "| one_node_c | 0.82 s mod 2"),
    "explain_cost.py": (["--jobs", "30", "--cluster", "v100:8", "--policies", "fifo"],
                        "| fifo | 30 |"),
    "hook_latency.py": (["--runs", "4"], "| stopped (no wake socket) | 4 |"),
    "host_room.py": (["--jobs", "30", "--spec", "v100:16,k80:16", "--repeat", "1"], "| fifo |"),
    # the relaxations come from a Shockwave run bounded in wall seconds: enough for one
    # above Gurobi's size limit even on a loaded machine (3 s was not, at load 14)
    "highs_objective_scale.py": (["--sizes", "460/128", "--time-limit", "20", "--scales",
                                  "0,4"], "| 460/128 |"),
    # a real run needs mutmut (the `mutation` extra) and minutes per module: the listing
    # still imports the bench and checks every module's source and tests exist
    "mutation.py": (["--list"], "gpufair/core/guards.py"),
    "paper_claims.py": (["--tiny", "--time-limit", "20"], "| Gandiva_fair | trading gain"),
    "planted_bugs.py": (["cap_ceil"], "1 of 1 caught by unit tests"),
    "replay_speed.py": (["--lines", "2000", "--history", "helios_dirlab_1k", "--jobs", "40",
                         "--policies", "fifo,tenant_max_min", "--time-limit", "30"],
                        "| tenant_max_min | "),
    "scale.py": (["--sizes", "30/8", "--policies", "fifo,las", "--skip-round",
                  "--time-limit", "10"], "| 30 jobs / 8 GPUs |"),
    "shockwave_certify.py": (["--cases", "30/8:clean", "--no-exact", "--loss-size", ""],
                             "| 30/8 clean |"),
    "slurm_limits.py": (["--accounts", "20", "--jobs", "50", "--repeat", "1"],
                        "| admit | 50 jobs |"),
    "sweep_speed.py": (["--cells", "12", "--jobs", "2"], "| sweep, 1 process |"),
    "shockwave_tradeoff.py": (["--exponents", "1", "--makespan-weights", "1",
                               "--artifact-budget-weights", "1"], "artifact recorded"),
}
#: not run here: a helper of other benches, and the two that bring up a loopback Slurm of
#: their own (minutes each; run by hand against a change to the Slurm adapter or daemon:
#: the figures in docs/deploy.md come from them)
ELSEWHERE = {"shared_data.py", "slurm_soak.py", "slurm_rpcs.py", "slurm_apply.py"}


def _run(script: str) -> str | None:
    """None when the bench ran and printed its table, else what went wrong."""
    args, marker = SMOKE[script]
    try:
        done = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=REPO,
                              capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        return f"{script}: no answer in 600 s"
    if done.returncode != 0 or marker not in done.stdout:
        return (f"{script} {' '.join(args)}: exit {done.returncode}, "
                f"{marker!r} {'in' if marker in done.stdout else 'not in'} its output\n"
                f"{done.stdout[-1500:]}\n{done.stderr[-3000:]}")
    return None


def test_every_bench_runs_at_tiny_sizes() -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        problems = [p for p in pool.map(_run, sorted(SMOKE)) if p]
    assert not problems, "\n\n".join(problems)


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")}
    assert scripts - ELSEWHERE == set(SMOKE), "add the new bench to SMOKE"

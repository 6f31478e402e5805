"""Site scale (issue 30): one daemon round on a large Slurm site, timed phase by phase.

    python bench/site_scale.py [--jobs 10000] [--nodes 1024] [--seed 0] [--policies a,b]
                               [--repeat N] [--timeout S] [--keep DIR] [--actions-to FILE]

First it writes a synthetic but well-formed Slurm 22.05 ``squeue --json`` / ``sinfo --json``
pair (:func:`site_documents`), built on the shapes of the records Slurm printed on the
loopback cluster (``tests/data/slurm/squeue.json``, ``sinfo.json``): every field the real
records carry, with the values a large GPU site shows. Then, per policy, it runs
``gpufair dry-run --squeue … --sinfo …`` in a fresh process (what an admin runs) and prints
one markdown row: the process's wall and CPU time and peak RSS, the daemon's round latency,
and where the round went — read (JSON parse), translate (Slurm records → model), enrich
(history and profiles), policy, diff, guards, fill, journal (the SQLite store) — measured by
wrapping those functions in the child process (``--child``), so nothing in gpufair carries
bench code. ``--repeat N`` runs each policy N times and shows the run with the least CPU
(a shared machine only ever slows a run down) and the p99 of the round over the N runs.

The site (per 1,024 nodes; ``--nodes`` and ``--jobs`` scale it):

- nodes of 8 GPUs, half ``a100`` (``gpu:a100:8``) and half ``v100``; all in partition
  ``gpu`` (managed), every fourth also in ``gpu-long`` (managed); ~2 % drained, ~1 % down
  (not responding), a few CPU-only login-class nodes in ``cpu`` (not managed);
- jobs: ~26 % running on ~85 % of the usable GPUs (1, 2, 4 or 8 GPUs on one node, and
  2- and 4-node gangs of 8), typed or untyped GRES per node or per job, array tasks among
  them; the rest pending, held by job_submit.lua (``JobHeldUser``, priority 0,
  ``gpufair:managed`` in the admin comment), among them whole pending arrays (one record
  standing for many tasks, some with a ``%N`` limit), dependencies met and unmet, owners'
  holds, feature constraints, excluded nodes, and some CPU-only jobs of the ``cpu``
  partition that gpufair leaves alone;
- 200 users in 40 accounts (scaled), submit times spread over the last three days.

``--poll N`` measures the daemon's poll on a quiet cluster instead: N polls in this process
through the CLI reader (``squeue``/``sinfo`` stand-ins on PATH print the documents, so their
CPU is the child's, as slurmctld's and squeue's is in a real poll), each as
``Daemon._changed`` does it (the adapter's change check, then a full read and the fill check
if it says so), timed in process CPU: the first poll (a full read, nothing cached) and the
median of the others.

The generator is seeded: the same ``--seed`` and sizes give the same bytes (``--keep DIR``
leaves them there for ``gpufair dry-run`` by hand, or to diff two gpufair versions' actions
with ``--actions-to``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from bisect import insort
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

NOW = 1_795_305_600          # the snapshot's "now" (a fixed epoch: reproducible bytes)
GPUS_PER_NODE = 8
TYPES = ("a100", "v100")
PHASES = ("read", "translate", "enrich", "policy", "diff", "guards", "fill", "journal")
BASELINES = ("fifo", "las", "srtf", "max_min", "max_sum_throughput", "min_total_duration")


# ---- the site's documents ---------------------------------------------------------------

def node_names(count: int) -> list[tuple[str, str]]:
    """(name, GPU type): the first half a100, the second v100, named as sites do."""
    half = count // 2
    return [(f"a100-{i + 1:04d}", "a100") for i in range(half)] + \
        [(f"v100-{i + 1:04d}", "v100") for i in range(count - half)]


def hostlist(names: list[str]) -> str:
    """Slurm's compressed form of names sharing a prefix (``a100-[0001-0002,0007]``)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        prefix, _, number = name.rpartition("-")
        groups.setdefault(prefix, []).append(number)
    parts = []
    for prefix, numbers in groups.items():
        if len(numbers) == 1:
            parts.append(f"{prefix}-{numbers[0]}")
            continue
        ranges, start = [], numbers[0]
        for prev, cur in zip(numbers, [*numbers[1:], None], strict=True):
            if cur is None or int(cur) != int(prev) + 1:
                ranges.append(start if start == prev else f"{start}-{prev}")
                start = cur
        parts.append(f"{prefix}-[{','.join(ranges)}]")
    return ",".join(parts)


def indices(idx: list[int]) -> str:
    """GPU indices as Slurm prints them in gres_detail (``0-1,4``)."""
    out, start = [], idx[0]
    for prev, cur in zip(idx, [*idx[1:], None], strict=True):
        if cur is None or cur != prev + 1:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return ",".join(out)


def base_job(job_id: int, user: tuple[str, int, str], rng: random.Random,
             waited: tuple[int, int] = (60, 2 * 86400)) -> dict[str, Any]:
    """Every field squeue --json of 22.05 prints for a job (tests/data/slurm/squeue.json),
    with neutral values; the caller sets what makes the job what it is. ``waited``: how
    long ago it was submitted (running jobs mostly came earlier than those still waiting)."""
    name, uid, account = user
    submit = NOW - rng.randint(*waited)
    return {
        "account": account, "accrue_time": submit, "admin_comment": "gpufair:managed",
        "array_job_id": 0, "array_task_id": None, "array_max_tasks": 0, "array_task_string": "",
        "association_id": 0, "batch_features": "", "batch_flag": True, "batch_host": "",
        "flags": [], "burst_buffer": "", "burst_buffer_state": "", "cluster": "site",
        "cluster_features": "", "command": f"/home/{name}/train.sh", "comment": "",
        "container": "", "contiguous": False, "core_spec": None, "thread_spec": None,
        "cores_per_socket": None, "billable_tres": 8.0, "cpus_per_task": None,
        "cpu_frequency_minimum": None, "cpu_frequency_maximum": None,
        "cpu_frequency_governor": None, "cpus_per_tres": "gres:gpu:8", "deadline": 0,
        "delay_boot": 0, "dependency": "", "derived_exit_code": 0, "eligible_time": submit,
        "end_time": 0, "excluded_nodes": "", "exit_code": 0, "features": "",
        "federation_origin": "", "federation_siblings_active": "",
        "federation_siblings_viable": "", "gres_detail": [], "group_id": uid,
        "group_name": name, "job_id": job_id, "job_resources": {}, "job_state": "PENDING",
        "last_sched_evaluation": NOW - rng.randint(0, 60), "licenses": "", "max_cpus": 0,
        "max_nodes": 0, "mcs_label": "", "memory_per_tres": "", "name": f"train-{job_id}",
        "nodes": "", "nice": None, "tasks_per_core": None, "tasks_per_node": 0,
        "tasks_per_socket": None, "tasks_per_board": 0, "cpus": 8, "node_count": 1,
        "tasks": 1, "het_job_id": 0, "het_job_id_set": "", "het_job_offset": 0,
        "partition": "gpu", "prefer": "", "memory_per_node": None, "memory_per_cpu": 8000,
        "minimum_cpus_per_node": 8, "minimum_tmp_disk_per_node": 0, "preempt_time": 0,
        "pre_sus_time": 0, "priority": 0, "profile": None, "qos": "normal", "reboot": False,
        "required_nodes": "", "requeue": True, "resize_time": 0, "restart_cnt": 0,
        "resv_name": "", "shared": None, "show_flags": ["SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"],
        "sockets_per_board": 0, "sockets_per_node": None, "start_time": 0,
        "state_description": "", "state_reason": "JobHeldUser", "standard_error": "",
        "standard_input": "/dev/null",
        "standard_output": f"/home/{name}/runs/slurm-%j.out", "submit_time": submit,
        "suspend_time": 0, "system_comment": "", "time_limit": 2880, "time_minimum": 0,
        "threads_per_core": None, "tres_bind": "", "tres_freq": "", "tres_per_job": "",
        "tres_per_node": "", "tres_per_socket": "", "tres_per_task": "",
        "tres_req_str": "cpu=8,mem=64000M,node=1,billing=8", "tres_alloc_str": "",
        "user_id": uid, "user_name": name, "wckey": "",
        "current_working_directory": f"/home/{name}/runs",
    }


def ask_gpus(job: dict[str, Any], gpus_per_node: int, nodes: int, gpu_type: str | None,
             per_job: bool) -> None:
    """The job's GPU request as Slurm prints it: per node (--gres, --gpus-per-node) or per job
    (--gpus), typed or not."""
    typed = f"gpu:{gpu_type}:" if gpu_type else "gpu:"
    if per_job:
        job["tres_per_job"] = f"gres:{typed}{gpus_per_node * nodes}"
    else:
        job["tres_per_node"] = f"gres:{typed}{gpus_per_node}"
    job["node_count"] = nodes
    job["cpus_per_tres"] = f"gres:gpu:{GPUS_PER_NODE}"


def site_documents(jobs: int = 10_000, nodes: int = 1_024, seed: int = 0
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(squeue --json, sinfo --json) of the synthetic site; see the module docstring."""
    rng = random.Random(seed)
    users = [(f"u{i:04d}", 20_000 + i, f"acct{i % max(1, jobs // 250):03d}")
             for i in range(max(1, jobs // 50))]
    named = node_names(nodes)
    drained = set(rng.sample(range(nodes), nodes // 50))
    down = set(rng.sample(sorted(set(range(nodes)) - drained), nodes // 100))
    usable = [i for i in range(nodes) if i not in drained | down]
    free = {i: list(range(GPUS_PER_NODE)) for i in usable}
    records: list[dict[str, Any]] = []
    next_id = iter(range(1_000_001, 10**8))
    target_busy = int(0.85 * GPUS_PER_NODE * len(usable))
    running_target = int(0.2579 * jobs)
    busy = 0
    # type -> free GPU count -> the usable nodes with that many free, in node order (so a
    # draw is the same as from a scan of every node, without one per job at 8,192 nodes)
    by_free = {t: [[] for _ in range(GPUS_PER_NODE + 1)] for t in TYPES}
    for i in usable:
        by_free[named[i][1]][GPUS_PER_NODE].append(i)

    def whole_nodes(gpu_type: str, count: int) -> list[int] | None:
        empty = by_free[gpu_type][GPUS_PER_NODE]
        return rng.sample(empty, count) if len(empty) >= count else None

    def partial_node(gpu_type: str, gpus: int) -> int | None:
        # pack, as cons_tres's best fit does: among the fullest nodes with room
        fullest = next((b for b in by_free[gpu_type][gpus:] if b), None)
        return None if fullest is None else rng.choice(fullest)

    def take(i: int, gpus: int) -> list[int]:
        bucket = by_free[named[i][1]]
        bucket[len(free[i])].remove(i)
        taken, free[i] = free[i][:gpus], free[i][gpus:]
        insort(bucket[len(free[i])], i)
        return taken

    running = 0
    while running < running_target and busy < target_busy:
        user = rng.choice(users)
        gpu_type = rng.choice(TYPES)
        shape = rng.random()
        per_node, count = ((1, 1) if shape < 0.55 else (2, 1) if shape < 0.75 else
                           (4, 1) if shape < 0.89 else (8, 1) if shape < 0.975 else
                           (8, 2) if shape < 0.995 else (8, 4))
        if busy + per_node * count > target_busy:
            per_node, count = 1, 1
        hosts = whole_nodes(gpu_type, count) if per_node == GPUS_PER_NODE else None
        if per_node < GPUS_PER_NODE:
            one = partial_node(gpu_type, per_node)
            hosts = None if one is None else [one]
        if hosts is None:
            if all(not free[i] for i in usable):
                break
            continue
        job = base_job(next(next_id), user, rng, waited=(7200, 3 * 86400))
        ask_gpus(job, per_node, count, gpu_type if rng.random() < 0.7 else None,
                 per_job=rng.random() < 0.2 and count == 1)
        start = rng.randint(max(job["submit_time"], NOW - 2 * 86400), NOW - 30)
        names, detail = [], []
        for i in sorted(hosts):
            taken = take(i, per_node)
            names.append(named[i][0])
            detail.append(f"gpu:{named[i][1]}:{per_node}(IDX:{indices(taken)})")
        job.update(job_state="RUNNING", state_reason="None", priority=rng.randint(1, 10**5),
                   nodes=hostlist(names), batch_host=names[0], gres_detail=detail,
                   start_time=start, end_time=start + 2880 * 60, eligible_time=start,
                   job_resources={"nodes": hostlist(names), "allocated_hosts": len(names)},
                   tres_alloc_str=f"cpu={8 * count},mem={64000 * count}M,node={count},"
                                  f"billing={8 * count},gres/gpu={per_node * count}",
                   restart_cnt=rng.choice([0] * 9 + [1]), flags=["JOB_WAS_RUNNING"])
        if rng.random() < 0.1:   # a running task of an array
            job.update(array_job_id=job["job_id"] - rng.randint(0, 50),
                       array_task_id=rng.randint(0, 99))
        records.append(job)
        busy += per_node * count
        running += 1

    array_ids: list[int] = []
    while len(records) < jobs:
        user = rng.choice(users)
        job = base_job(next(next_id), user, rng)
        shape = rng.random()
        per_node, count = ((1, 1) if shape < 0.4 else (2, 1) if shape < 0.6 else
                           (4, 1) if shape < 0.8 else (8, 1) if shape < 0.93 else
                           (8, 2) if shape < 0.98 else (8, 4))
        gpu_type = rng.choice(TYPES) if rng.random() < 0.6 else None
        ask_gpus(job, per_node, count, gpu_type, per_job=rng.random() < 0.2 and count == 1)
        kind = rng.random()
        if kind < 0.04:   # an owner's hold, kept by job_submit.lua in the comment
            job["comment"] = "gpufair:userhold"
        elif kind < 0.08:   # a dependency on a running or pending job
            parent = rng.choice(records)
            met = parent["job_state"] == "RUNNING"
            job["dependency"] = f"after{'' if met else 'ok'}:{parent['job_id']}" + \
                ("" if met else "(unfulfilled)")
            job["state_reason"] = "JobHeldUser"
        elif kind < 0.14:   # a whole pending array (one record for its tasks)
            size = rng.randint(2, 40)
            job.update(array_job_id=job["job_id"], array_task_id=None,
                       array_task_string=f"0-{size - 1}",
                       array_max_tasks=rng.choice([0, 0, 4, 8]))
            array_ids.append(job["job_id"])
        elif kind < 0.17:
            job["features"] = gpu_type or rng.choice(TYPES)
        elif kind < 0.19:
            job["excluded_nodes"] = hostlist(sorted(named[i][0]
                                                    for i in rng.sample(range(nodes), 3)))
        elif kind < 0.21:
            job["partition"] = "gpu-long"
            job["time_limit"] = 10080
        elif kind < 0.22:   # not gpufair's: a CPU job of the cpu partition
            job.update(partition="cpu", admin_comment="", tres_per_node="", tres_per_job="",
                       state_reason="Priority", priority=rng.randint(1, 10**5),
                       cpus_per_tres="")
        if kind >= 0.14 and rng.random() < 0.05:   # requeued by gpufair earlier
            job["restart_cnt"] = 1
            job["state_reason"] = "JobHeldUser"
        records.append(job)
    rng.shuffle(records)

    sinfo_nodes = []
    used_by: dict[int, int] = {i: GPUS_PER_NODE - len(free.get(i, [])) for i in range(nodes)}
    for i, (name, gpu_type) in enumerate(named):
        state, flags, reason = "idle", [], ""
        gpus_used = used_by[i] if i in free else 0
        if i in drained:
            flags, reason = ["DRAIN"], "nvidia-smi: ECC errors"
        elif i in down:
            state, flags, reason = "down", ["NOT_RESPONDING"], "Not responding"
        elif gpus_used == GPUS_PER_NODE:
            state = "allocated"
        elif gpus_used:
            state = "mixed"
        partitions = ["gpu", "gpu-long"] if i % 4 == 0 else ["gpu"]
        used = (f"gpu:{gpu_type}:{gpus_used}(IDX:{indices(list(range(gpus_used)))})"
                if gpus_used else f"gpu:{gpu_type}:0(IDX:N/A)")
        sinfo_nodes.append(sinfo_node(name, gpu_type, state, flags, reason, partitions, used))
    for k in range(max(1, nodes // 128)):
        sinfo_nodes.append(sinfo_node(f"cpu-{k + 1:04d}", None, "mixed", [], "", ["cpu"], ""))
    meta = {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
            "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5},
                      "release": "22.05.8"}}
    return ({"meta": meta, "errors": [], "jobs": records},
            {"meta": meta, "errors": [], "nodes": sinfo_nodes})


def sinfo_node(name: str, gpu_type: str | None, state: str, flags: list[str], reason: str,
               partitions: list[str], used: str) -> dict[str, Any]:
    """Every field sinfo --json of 22.05 prints for a node (tests/data/slurm/sinfo.json)."""
    return {
        "architecture": "x86_64", "burstbuffer_network_address": "", "boards": 1,
        "boot_time": NOW - 40 * 86400, "comment": "", "cores": 32, "cpu_binding": 0,
        "cpu_load": 1200, "extra": "", "free_memory": 200_000, "cpus": 64,
        "last_busy": NOW - 10, "features": gpu_type or "", "active_features": gpu_type or "",
        "gres": f"gpu:{gpu_type}:{GPUS_PER_NODE}" if gpu_type else "",
        "gres_drained": "N/A", "gres_used": used, "mcs_label": "", "name": name,
        "next_state_after_reboot": "invalid", "address": name, "hostname": name,
        "state": state, "state_flags": flags, "next_state_after_reboot_flags": [],
        "operating_system": "Linux 5.15.0-site", "owner": None, "partitions": partitions,
        "port": 6818, "real_memory": 512_000, "reason": reason,
        "reason_changed_at": NOW - 3600 if reason else 0, "reason_set_by_user": "root"
        if reason else None, "slurmd_start_time": NOW - 40 * 86400, "sockets": 2,
        "threads": 1, "temporary_disk": 0, "weight": 1,
        "tres": "cpu=64,mem=500G,billing=64" + (f",gres/gpu={GPUS_PER_NODE}"
                                                 if gpu_type else ""),
        "slurmd_version": "22.05.8", "alloc_memory": 0, "alloc_cpus": 0, "idle_cpus": 64,
        "tres_used": "", "tres_weighted": 64.0,
    }


# ---- the child: one dry run with its phases timed ----------------------------------------

def child(argv: list[str], report: str) -> int:
    """Run ``gpufair dry-run argv`` in this process with the round's phases timed; write the
    times (and the round latency, the actions) to ``report`` as JSON."""
    import contextlib
    import functools
    import resource

    import gpufair.adapters.slurm.adapter as slurm_adapter
    import gpufair.cli.dry_run as dry_run
    import gpufair.core.round as round_module
    import gpufair.plugin.daemon as daemon_module
    import gpufair.plugin.store as store_module
    from gpufair.cli.main import main

    spent = dict.fromkeys(PHASES, 0.0)       # wall seconds per phase
    spent_cpu = dict.fromkeys(PHASES, 0.0)   # CPU seconds per phase
    seen: dict[str, Any] = {}

    def timed(owner: Any, attr: str, phase: str) -> None:
        original = getattr(owner, attr)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started, cpu = time.perf_counter(), time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - started
                spent_cpu[phase] += time.process_time() - cpu
        setattr(owner, attr, wrapper)

    timed(dry_run, "_read_json", "read")
    timed(slurm_adapter.SlurmAdapter, "snapshot", "translate")
    timed(round_module, "plan_actions", "diff")
    timed(round_module, "fill_idle", "fill")
    timed(round_module.Round, "_guarded", "guards")
    for name in ("begin_round", "mark", "finish_round", "save_jobs", "job_history",
                 "journal", "done_keys", "save_policy_state", "skip_round"):
        timed(store_module.Store, name, "journal")
    round_run = round_module.Round.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.process_time()
        inner = ("diff", "fill", "guards", "journal")
        before = {p: (spent[p], spent_cpu[p]) for p in inner}
        result = round_run(self, *args, **kwargs)
        total = time.perf_counter() - started
        total_cpu = time.process_time() - cpu
        spent["policy"] += result.policy_s
        spent_cpu["policy"] += policy_cpu[-1]
        spent["enrich"] += total - result.policy_s - sum(spent[p] - before[p][0] for p in inner)
        spent_cpu["enrich"] += total_cpu - policy_cpu[-1] - sum(spent_cpu[p] - before[p][1]
                                                                for p in inner)
        seen["actions"] = [[type(a).__name__, a.job_id, list(getattr(a, "gpu_ids", ()))]
                           for a in result.actions]
        return result
    round_module.Round.run = run   # type: ignore[method-assign]
    policy_cpu = [0.0]   # CPU of the last schedule() (the round keeps only its wall time)
    from gpufair.core.round import Round

    def make_schedule(policy: Any) -> Any:
        schedule = policy.schedule

        def timed_schedule(*args: Any, **kwargs: Any) -> Any:
            cpu = time.process_time()
            try:
                return schedule(*args, **kwargs)
            finally:
                policy_cpu.append(time.process_time() - cpu)
        return timed_schedule
    round_init = Round.__init__

    def init(self: Any, policy: Any, *args: Any, **kwargs: Any) -> None:
        round_init(self, policy, *args, **kwargs)
        policy.schedule = make_schedule(policy)
    Round.__init__ = init   # type: ignore[method-assign]
    run_round = daemon_module.Daemon.run_round

    def timed_round(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        out = run_round(self, *args, **kwargs)
        seen["round_s"] = time.perf_counter() - started
        return out
    daemon_module.Daemon.run_round = timed_round   # type: ignore[method-assign]
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        code = main(["dry-run", *argv])
    seen.update(phases=spent, phases_cpu=spent_cpu, code=code,
                rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    Path(report).write_text(json.dumps(seen))
    return int(code or 0)


# ---- the parent: one fresh process per run ---------------------------------------------

def timed_child(squeue: Path, sinfo: Path, policy: str, timeout: float
                ) -> dict[str, Any]:
    """One dry run in a fresh process: its wall, CPU and RSS from the kernel, its phases
    from the child's report."""
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        argv = [sys.executable, __file__, "--child", report.name, "--squeue", str(squeue),
                "--sinfo", str(sinfo), "--policy", policy, "--partitions", "gpu,gpu-long"]
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"timeout": timeout}
            time.sleep(0.02)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.returncode != 0:
            return {"error": f"exit {proc.returncode}: {stderr.strip()[-300:]}"}
        data = json.loads(Path(report.name).read_text())
    data.update(wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime,
                rss_mb=usage.ru_maxrss / 1024)
    return data


def poll_times(squeue: Path, sinfo: Path, polls: int) -> list[float]:
    """Process CPU seconds of each of ``polls`` quiet-cluster polls through the CLI reader:
    what ``Daemon._changed`` does (a snapshot, the occupancy, the fill check)."""
    from gpufair.adapters.slurm import CliTransport, SlurmAdapter, SlurmSettings
    from gpufair.core.fill import may_fill, occupancy
    fake = Path(tempfile.mkdtemp(prefix="site-scale-bin-"))
    for name, path in (("squeue", squeue), ("sinfo", sinfo)):
        script = fake / name
        script.write_text(f"#!/bin/sh\nexec cat {path}\n")
        script.chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ.get('PATH', '')}")
    adapter = SlurmAdapter(CliTransport(env=env, timeout_s=60.0),
                           SlurmSettings(managed_partitions=("gpu", "gpu-long")))
    seen = None
    spent = []
    for _ in range(polls):
        cpu = time.process_time()
        if seen is None or getattr(adapter, "changed", lambda: True)():
            state = adapter.snapshot()   # the first poll, or a change: read in full
            if seen is None:
                seen = occupancy(state)
            may_fill(state)
            del state
        spent.append(time.process_time() - cpu)
    return spent


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows[1:])])


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def policies_from(text: str | None) -> list[str]:
    from gpufair.policy.registry import available_policies
    return list(available_policies()) if not text else [p for p in text.split(",") if p]


def bench(args: argparse.Namespace) -> Iterator[str]:
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="site-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    jobs_doc, nodes_doc = site_documents(args.jobs, args.nodes, args.seed)
    squeue, sinfo = folder / "squeue.json", folder / "sinfo.json"
    squeue.write_text(json.dumps(jobs_doc))
    sinfo.write_text(json.dumps(nodes_doc))
    running = sum(j["job_state"] == "RUNNING" for j in jobs_doc["jobs"])
    busy = sum(int(g.split("(")[0].rsplit(":", 1)[1])
               for j in jobs_doc["jobs"] if j["job_state"] == "RUNNING" for g in j["gres_detail"])
    yield (f"site: {args.nodes} nodes x {GPUS_PER_NODE} GPUs, {len(jobs_doc['jobs'])} job "
           f"records ({running} running on {busy} GPUs), seed {args.seed}; generated in "
           f"{time.perf_counter() - started:.1f} s into {folder}")
    import gpufair
    yield (f"gpufair from {Path(gpufair.__file__).parent}; load average before: "
           f"{load_average()} ({os.cpu_count()} CPUs)")
    yield ("phases in CPU seconds (a loaded machine stretches wall times, not these); "
           "journal also in wall seconds (its commits wait for the disk)")
    header = ["policy", "wall s", "cpu s", "rss MB", "round s (p99)", *PHASES,
              "journal wall", "actions"]
    rows = [header]
    actions: dict[str, Any] = {}
    for policy in policies_from(args.policies):
        runs = [timed_child(squeue, sinfo, policy, args.timeout) for _ in range(args.repeat)]
        bad = [r for r in runs if "wall_s" not in r]
        if bad:
            what = f"timeout {args.timeout:g} s" if "timeout" in bad[0] else bad[0]["error"]
            rows.append([policy, what] + [""] * (len(header) - 2))
            continue
        best = min(runs, key=lambda r: r["cpu_s"])
        rounds = [r["round_s"] for r in runs]
        actions[policy] = best["actions"]
        rows.append([policy, f"{best['wall_s']:.2f}", f"{best['cpu_s']:.2f}",
                     f"{best['rss_mb']:.0f}",
                     f"{best['round_s']:.2f} ({np.percentile(rounds, 99):.2f})",
                     *(f"{best['phases_cpu'][p]:.2f}" for p in PHASES),
                     f"{best['phases']['journal']:.2f}", str(len(best["actions"]))])
        print(f"  {policy}: {rows[-1][1]} s", file=sys.stderr, flush=True)
    yield markdown(rows)
    yield f"load average after: {load_average()}"
    if args.actions_to:
        Path(args.actions_to).write_text(json.dumps(actions, indent=0, sort_keys=True))
        yield f"actions per policy written to {args.actions_to}"


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[3:], sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", help="comma-separated (default: every installed one)")
    parser.add_argument("--baselines", action="store_true",
                        help=f"only the baselines ({', '.join(BASELINES)})")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="per dry run, seconds")
    parser.add_argument("--keep", help="write the documents into this directory")
    parser.add_argument("--actions-to", help="write each policy's actions (JSON) here")
    parser.add_argument("--poll", type=int, metavar="N",
                        help="time N quiet-cluster polls through the CLI reader instead")
    parser.add_argument("--generate-only", action="store_true",
                        help="write the documents (--keep DIR) and stop")
    args = parser.parse_args()
    if args.baselines and not args.policies:
        args.policies = ",".join(BASELINES)
    if args.generate_only:
        if not args.keep:
            parser.error("--generate-only needs --keep DIR")
        jobs_doc, nodes_doc = site_documents(args.jobs, args.nodes, args.seed)
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        (Path(args.keep) / "squeue.json").write_text(json.dumps(jobs_doc))
        (Path(args.keep) / "sinfo.json").write_text(json.dumps(nodes_doc))
        return 0
    if args.poll:
        with tempfile.TemporaryDirectory(prefix="site-scale-") as folder:
            jobs_doc, nodes_doc = site_documents(args.jobs, args.nodes, args.seed)
            squeue, sinfo = Path(folder) / "squeue.json", Path(folder) / "sinfo.json"
            squeue.write_text(json.dumps(jobs_doc))
            sinfo.write_text(json.dumps(nodes_doc))
            del jobs_doc, nodes_doc
            spent = poll_times(squeue, sinfo, max(2, args.poll))
        print(f"quiet-cluster poll, CLI reader, {args.jobs} jobs / {args.nodes} nodes; load "
              f"average {load_average()} ({os.cpu_count()} CPUs)")
        print(markdown([["polls", "first poll cpu s", "later polls cpu s (median)"],
                        [str(len(spent)), f"{spent[0]:.3f}",
                         f"{float(np.median(spent[1:])):.3f}"]]))
        return 0
    for block in bench(args):
        print(block, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

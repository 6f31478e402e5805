"""Soak benchmark of ``gpufair serve`` on the real loopback Slurm (not a test; not run in CI).

    sudo .venv/bin/python bench/slurm_soak.py [--minutes 10] [--users 4] [--policy las]
        [--seed 1] [--kill-every 120] [--ctld-restart-every 300] [--baseline|--no-baseline]
        [--keep] [--load 1.5] [--drain-minutes 20]

Why: the unit and integration tests check one property at a time on a quiet cluster. A
scheduler that holds every job is only safe if nothing goes wrong when everything happens at
once: users submitting, cancelling and poking at their jobs, the daemon SIGKILLed in the
middle of a round, slurmctld restarting under it. This bench runs all of that for
``--minutes`` on ``scripts/slurm/up.sh --hard`` (4 nodes of 4 fake GPUs, 2 v100 + 2 k80),
then drains, and prints one markdown table (also written as JSON next to the run directory).
With ``--baseline`` the identical submission stream (same seed, same users, same hostile
acts, same slurmctld restarts) is replayed on ``up.sh`` without ``--hard`` and no daemon:
Slurm alone, to tell gpufair's effects from Slurm's.

The workload: ``--users`` unprivileged accounts (``gpufair-soak-N``, created with ``useradd
--system`` when missing; the bench runs as root) each submit a seeded Poisson stream of
training jobs (``tests/integration/train_job.sh``, 2 s steps that checkpoint, so a requeued
job resumes): 1/2/4/8 GPUs (8 = ``-N 2``, 4 per node), 20-240 s, a quarter typed
(``--gres=gpu:v100:N``), some opted in to the checkpoint signal, some cancelled by their
owner (early: probably pending; late: probably running). Like a real site's jobs, each asks
for CPUs and memory (``--cpus-per-task``, ``--mem``: 1-8 CPUs and 8-31 GB per GPU, so a
node's 32 CPUs and 128 GB hold any four GPUs' worth), about one in ten waits for a begin
time (``--begin=now+20..90``), and about one in twelve is a job array of 2-6 one- or two-GPU
tasks (``--array=0-N``, a third with a ``%2`` limit); these come from an RNG of their own,
so the stream of sizes, lengths and times is the same as before they were added. The
stream's rate offers ``--load`` times the cluster's GPU-seconds over the run. Hostile acts,
on a fixed timetable: ``scontrol release``/``update Priority=``/``hold``/``release`` of the
user's own pending (held) job, ``scontrol requeue`` of the user's own running job, a job
whose ``-o`` is a FIFO (the user reads it, as a user would, or the job could never start),
one whose ``-o`` is a symlink to /etc/shadow, one with a non-UTF-8 name and comment, and a
burst of 1,000 wake datagrams to the daemon's wake socket by path (refused by the socket's
mode) plus 1,000 on a socket root connected and leaked to the user (refused only by the
daemon's credential check).

Files: the run directory ``/tmp/gpufair-soak-<time>-<pid>/`` keeps per mode the daemon's
stderr (``daemon.log``), its store, config, every sample (``samples.jsonl``) and what each
user did and Slurm answered (``ledger.json``); the table's JSON is ``<run dir>.json``. Job
tags ``uN-...`` belong to ``gpufair-soak-N``. The clusters (and the users' job directories)
are removed at the end unless ``--keep``; on Ctrl-C or SIGTERM the daemon, the users'
helper processes and the cluster (``down.sh``) are stopped all the same.

Definitions (what the table counts):

- *lost*: a workload job that vanished (neither in squeue nor in jobcomp.txt with an end
  state), is not finished when the drain ends, or ended in any state other than COMPLETED or
  CANCELLED-after-its-owner's-scancel. A job its owner still holds when the drain ends (their
  ``scontrol hold`` of a pending job, never released: the hostile acts pick the user's lowest
  pending job, which under gpufair may be one it just released) is counted apart, not lost,
  under gpufair and Slurm alone alike. *FAILED* (FAILED, NODE_FAIL, TIMEOUT, OOM, ...) is a
  subset of lost. Hostile jobs are reported apart (the /etc/shadow one FAILs under Slurm).
- *re-run after COMPLETED*: the job's log shows "run start" after "run done", or jobcomp has
  another record after a COMPLETED one, or a sample showed the job COMPLETED and later not.
- *bypass*: squeue samples (every 2 s) show a gpufair-managed job RUNNING with restart count
  r although the daemon's journal (``actions``) has no attempt to release incarnation r: a
  Start keyed ``start:JOB#r`` or a Migrate/Resize keyed ``JOB#(r-1)`` (the move requeues and
  re-releases), sent to Slurm (done, failed or applying with attempts > 0: a daemon killed
  after the release but before journalling it is not a bypass).
- *crash*: any exit of the daemon the bench did not cause (not our SIGKILL, not the final
  SIGTERM); *hang*: a gap > 3 x round_s between consecutive rows of ``rounds`` (also from
  the daemon's first start to the first row, and from the last row to its final stop).
- *idle GPU-s while a job fit*: every 2 s sample, a job is *waiting* if PENDING in the
  ``gpu`` partition and (gpufair) marked managed, held or not, or (Slurm alone) not held
  (priority > 0), and, either way, not held by its owner (a user's own hold is not the
  scheduler's fault; under gpufair the owner's hold is the mark job_submit.lua or gpufair
  gives it: ``gpufair:userhold`` in the comment, ``gpufair:ownerhold=`` in the admin
  comment). It *fits* node type t (its
  GRES type, or any type when untyped) if at least ``-N`` usable nodes of type t (not
  down/drained/not responding) each have at least its GPUs per node free. Each free GPU on a
  node of a type some waiting job fits counts as idle for the time since the previous sample
  (at most 2 samples' worth: no credit across slurmctld outages). CPU and memory are ignored
  (the nodes have plenty).
- *started before its begin time*: a job (or array task) sampled RUNNING before the begin
  time it asked for (its submission + the ``--begin=now+N``, less one sample).
- array tasks count as jobs of their own (their job ids as Slurm split them out; one never
  split out shares its array record's end, e.g. its owner's scancel of the pending array);
  a task started by gpufair as ``A_T`` is no bypass.
- *rounds over the cap*: per round, the GPUs of the jobs whose Preempt/Migrate/Resize was
  done in that round (the job's size as submitted) against floor(max_preempt_share x GPUs).
- round latency: ``rounds.latency_s`` of the rounds that finished.

Limits: one host with 2-ish CPUs plays slurmctld, four slurmd, the daemon, the users and the
sampler, so latencies are upper bounds and timing-dependent counts vary between runs; 2 s
sampling misses runs shorter than that (a bypass that runs < 2 s is not seen); the FIFO's
reader and the LAS thresholds (``[240, 960]`` GPU-s, so that 20-240 s jobs do get
preempted) are the bench's choices; the run measures the working tree as it is, and the
daemon re-imports it at every restart, so edits made during a run take effect at the next
SIGKILL (the git state at both ends is in the JSON). A submission is no hook event: the
daemon's poll (``[daemon] poll_s``, 5 s) notices it, and GPUs the plan leaves idle go to
waiting jobs that fit (``fill_idle``), so Slurm alone has no head start there.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import pwd
import random
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts" / "slurm"
TRAIN_JOB = REPO / "tests" / "integration" / "train_job.sh"

STEP_S = 2.0                        # one training step; a job is 10..120 of them
SIZES = ((1, 0.35), (2, 0.30), (4, 0.25), (8, 0.10))   # GPUs, weight; 8 = 2 nodes x 4
DURATION_S = (20.0, 240.0)
GPUS_PER_NODE = 4
CLUSTER_GPUS = 16                   # up.sh's default: 4 nodes x 4
ROUND_S = 30.0
MAX_PREEMPT_SHARE = 0.5
GRACE_S = 5.0
MIN_RUNTIME_S = 10.0                # below ROUND_S, as the default 30 s is below 120 s rounds
SAMPLE_S = 2.0
CPUS_PER_GPU = (1, 2, 4, 8)         # a node: 32 CPUs, 128,000 MB for its 4 GPUs
MEM_PER_GPU_MB = (8000, 16000, 24000, 31000)
BEGIN_S = (20.0, 90.0)
USER_PREFIX = "gpufair-soak-"
TERMINAL = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
                      "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"})
FAILED_STATES = TERMINAL - {"COMPLETED", "CANCELLED"}
USER_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ")


# ---- the seeded plan: what every user does, and when ------------------------------------
@dataclass(frozen=True)
class JobSpec:
    """One submission. ``kind`` is ``train`` (the workload) or a hostile variant."""

    tag: str
    user: int
    at: float
    gpus: int
    steps: int
    typed: bool = False
    checkpoint: bool = False
    cancel_after: float | None = None
    kind: str = "train"             # train | fifo | shadow | bytes
    cpus_per_gpu: int = 1
    mem_per_gpu_mb: int = 0         # 0: Slurm's default (DefMemPerCPU)
    begin_s: float | None = None    # --begin=now+N
    tasks: int = 0                  # --array=0-(tasks-1); 0: not an array
    task_limit: int = 0             # its %N

    @property
    def nodes(self) -> int:
        return 2 if self.gpus > GPUS_PER_NODE else 1

    @property
    def per_node(self) -> int:
        return self.gpus // self.nodes


@dataclass(frozen=True)
class Act:
    """A timed user action other than a submission."""

    at: float
    user: int
    kind: str                       # cancel | juggle | requeue | burst
    tag: str = ""                   # the job, for cancel


@dataclass(frozen=True)
class Plan:
    jobs: tuple[JobSpec, ...]
    acts: tuple[Act, ...]


def _mean_gpus() -> float:
    return sum(g * w for g, w in SIZES) / sum(w for _, w in SIZES)


def user_stream(seed: int, user: int, span_s: float, rate: float) -> list[JobSpec]:
    """A Poisson stream for one user, from its own RNG (a user's jobs do not change when
    ``--users`` does)."""
    rng = random.Random(f"{seed}-user-{user}")
    shape = random.Random(f"{seed}-user-{user}-shape")   # CPUs, memory, begin, arrays
    jobs, t, n = [], rng.expovariate(rate), 0
    while t < span_s:
        gpus = rng.choices([g for g, _ in SIZES], weights=[w for _, w in SIZES])[0]
        steps = round(rng.uniform(*DURATION_S) / STEP_S)
        cancel = None
        if rng.random() < 0.12:
            cancel = rng.uniform(3, 20) if rng.random() < 0.5 else rng.uniform(30, 150)
        spec = JobSpec(f"u{user + 1}-j{n:03d}", user, round(t, 2), gpus, steps,
                       typed=rng.random() < 0.25, checkpoint=rng.random() < 0.15,
                       cancel_after=cancel, cpus_per_gpu=shape.choice(CPUS_PER_GPU),
                       mem_per_gpu_mb=shape.choice(MEM_PER_GPU_MB))
        if shape.random() < 0.10:
            spec = replace(spec, begin_s=round(shape.uniform(*BEGIN_S)))
        if shape.random() < 0.08:   # a small array: as many tasks, fewer GPUs each
            tasks = shape.randint(2, 6)
            spec = replace(spec, kind="array", tasks=tasks, gpus=min(gpus, 2),
                           steps=max(10, spec.steps // 2),
                           task_limit=2 if shape.random() < 0.33 else 0)
        jobs.append(spec)
        n += 1
        t += rng.expovariate(rate)
    return jobs


def make_plan(seed: int, users: int, minutes: float, load: float) -> Plan:
    """The whole run's timetable, a pure function of the arguments, so the gpufair run and
    the Slurm-alone run replay exactly the same submissions and acts."""
    span = minutes * 60.0
    rate = load * CLUSTER_GPUS / (_mean_gpus() * sum(DURATION_S) / 2) / users
    jobs = [j for u in range(users) for j in user_stream(seed, u, span, rate)]
    rng = random.Random(f"{seed}-hostile")
    for frac, kind in ((0.10, "fifo"), (0.15, "shadow"), (0.20, "bytes")):
        who = rng.randrange(users)
        jobs.append(JobSpec(f"u{who + 1}-{kind}", who, round(frac * span, 2), 1, 10, kind=kind))
    acts = [Act(j.at + j.cancel_after, j.user, "cancel", j.tag) for j in jobs if j.cancel_after]
    acts += [Act(round(t, 2), rng.randrange(users), "juggle")
             for t in _every(span, 40.0, start=25.0)]
    acts += [Act(round(t, 2), rng.randrange(users), "requeue")
             for t in _every(span, 75.0, start=50.0)]
    acts.append(Act(round(0.35 * span, 2), rng.randrange(users), "burst"))
    return Plan(tuple(sorted(jobs, key=lambda j: j.at)), tuple(sorted(acts, key=lambda a: a.at)))


def _every(span: float, step: float, *, start: float) -> Iterator[float]:
    t = start
    while t < span:
        yield t
        t += step


# ---- accounts, directories, processes run as a user -------------------------------------
@dataclass
class User:
    pw: pwd.struct_passwd
    home: Path | None = None

    @property
    def name(self) -> str:
        return self.pw.pw_name

    def env(self, cluster_env: dict[str, str]) -> dict[str, str]:
        """A small environment of the user's own: sbatch exports it into the job, and root's
        (SLURM_JOB_ID of an enclosing job, tokens, ...) must not leak there."""
        env = {k: v for k, v in os.environ.items() if k in USER_ENV_KEEP}
        env.update(SLURM_CONF=cluster_env["SLURM_CONF"], USER=self.name, LOGNAME=self.name,
                   HOME=str(self.home or "/tmp"))
        return env

    def drop(self) -> dict[str, Any]:
        """Popen arguments that run the child as this user, with no supplementary groups
        (without ``extra_groups`` the child would keep root's)."""
        return {"user": self.pw.pw_uid, "group": self.pw.pw_gid, "extra_groups": [],
                "cwd": str(self.home or "/tmp")}


def ensure_users(count: int) -> list[User]:
    """``gpufair-soak-1..N``: system accounts without a home, created when missing."""
    users = []
    for i in range(1, count + 1):
        name = f"{USER_PREFIX}{i}"
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh",
                            name], check=True, capture_output=True)
            pw = pwd.getpwnam(name)
        users.append(User(pw))
    return users


def make_home(user: User, parent: Path) -> None:
    """A directory the user owns under a world-reachable run directory: the jobs' logs,
    checkpoints, the FIFO and the /etc/shadow symlink live there."""
    home = parent / user.name
    home.mkdir(parents=True)
    home.chmod(0o755)
    os.chown(home, user.pw.pw_uid, user.pw.pw_gid)
    user.home = home


# ---- the cluster ------------------------------------------------------------------------
class Cluster:
    """One loopback Slurm brought up by ``up.sh`` in ``base`` (its own free ports)."""

    def __init__(self, base: Path, *, hard: bool) -> None:
        self.base = base
        self.hard = hard
        self.up_done = False
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        self.env.update(SLURM_LO_BASE=str(base), GPUFAIR_PYTHON=sys.executable,
                        SLURM_CONF=str(base / "etc" / "slurm.conf"))

    @property
    def hook_dir(self) -> Path:
        return self.base / "gpufair"

    @property
    def conf(self) -> str:
        return self.env["SLURM_CONF"]

    def up(self) -> None:
        argv = ["bash", str(SCRIPTS / "up.sh"), *(["--hard"] if self.hard else [])]
        self.up_done = True      # even a failed up.sh may have started daemons: down.sh them
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise RuntimeError(f"up.sh failed:\n{done.stdout}\n{done.stderr}")

    def down(self, *, purge: bool) -> None:
        if not self.up_done:
            return
        subprocess.run(["bash", str(SCRIPTS / "down.sh"), *(["--purge"] if purge else [])],
                       env=self.env, capture_output=True, text=True, timeout=180, check=False)
        self.up_done = False

    def run(self, *argv: str, user: User | None = None, timeout: float = 30
            ) -> subprocess.CompletedProcess[str]:
        """A Slurm command as root or as ``user``; never raises on a non-zero exit."""
        extra = user.drop() if user else {}
        env = user.env(self.env) if user else self.env
        try:
            return subprocess.run(list(argv), env=env, capture_output=True, text=True,
                                  errors="replace", timeout=timeout, check=False, **extra)
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(argv, 124, "", f"timeout: {exc}")

    def read_json(self, *argv: str) -> dict[str, Any] | None:
        """squeue/sinfo --json, or None while slurmctld does not answer. Users' non-UTF-8
        names and comments come through as bytes: replaced, not fatal."""
        done = self.run(*argv)
        if done.returncode != 0:
            return None
        try:
            return json.loads(done.stdout)
        except ValueError:
            return None

    def ctld_pid(self) -> int | None:
        with suppress(OSError, ValueError):
            return int((self.base / "run" / "slurmctld.pid").read_text().strip())
        return None

    def ping(self) -> bool:
        return self.run("scontrol", "ping", timeout=10).returncode == 0

    def restart_ctld(self) -> dict[str, Any]:
        """Stop slurmctld as an admin would (``scontrol shutdown slurmctld``: state saved),
        then start it again. Not up.sh's exact command: that has ``-c`` (a clean start
        that throws every job away); the rest (``-f $SLURM_CONF``, daemonizing, its pid
        file) is the same, so down.sh still finds it."""
        started = time.time()
        old = self.ctld_pid()
        self.run("scontrol", "shutdown", "slurmctld")
        method = "scontrol shutdown slurmctld"
        if old and not _wait_gone(old, 30):
            method += ", then SIGKILL"
            with suppress(ProcessLookupError):
                os.kill(old, signal.SIGKILL)
            _wait_gone(old, 10)
        subprocess.run(["slurmctld", "-f", self.conf], env=self.env, capture_output=True,
                       timeout=60, check=False)
        ok = _wait_until(self.ping, 60)
        return {"at": started, "down_s": round(time.time() - started, 2), "ok": ok,
                "method": method}


def _wait_gone(pid: int, timeout: float) -> bool:
    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return _wait_until(gone, timeout)


def _wait_until(predicate: Any, timeout: float, step: float = 0.3) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


# ---- the daemon -------------------------------------------------------------------------
def write_config(path: Path, cluster: Cluster, store: Path, policy: str, seed: int) -> Path:
    """The run's gpufair.toml. LAS gets thresholds this workload crosses (the example's
    hours-long ones would never demote a 20-240 s job, so nothing would be preempted)."""
    lines = ["[daemon]", f"policy = {json.dumps(policy)}", f"seed = {seed}",
             f"round_s = {ROUND_S}", f"max_preempt_share = {MAX_PREEMPT_SHARE}",
             f"grace_s = {GRACE_S}", f"min_runtime_s = {MIN_RUNTIME_S}", 'mode = "hard"',
             f"hook_dir = {json.dumps(str(cluster.hook_dir))}", "metrics_port = 0",
             "[slurm]", 'managed_partitions = ["gpu"]',
             "[store]", f"path = {json.dumps(str(store))}"]
    if policy == "las":
        lines += ["[policies.las]", "queue_thresholds_gpu_s = [240, 960]"]
    path.write_text("\n".join(lines) + "\n")
    return path


class DaemonKeeper:
    """Runs ``gpufair serve``, SIGKILLs it on demand and restarts it at once, and tells its
    own kills from exits it did not cause (crashes). stderr of every run goes to one log."""

    def __init__(self, config: Path, log: Path, env: dict[str, str]) -> None:
        self.config, self.log, self.env = config, log, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.first_start: float | None = None
        self.stopped_at: float | None = None
        self.kills = 0
        self.crashes: list[dict[str, Any]] = []
        self.final_rc: int | None = None      # of the final SIGTERM: 0 is a clean stop

    def start(self) -> None:
        with self.log.open("ab") as err:
            # its own session: a Ctrl-C on the bench's terminal is for the bench, which then
            # stops the daemon itself
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gpufair.cli.main", "serve", "--config",
                 str(self.config)], env=self.env, cwd=REPO, stdout=subprocess.DEVNULL,
                stderr=err, start_new_session=True)
        self.first_start = self.first_start or time.time()

    def kill_and_restart(self) -> None:
        self.check()             # an exit just before our kill is still a crash
        with self.lock:
            if self.proc is None:
                return
            self.proc.kill()
            self.proc.wait()
            self.kills += 1
            self.start()

    def check(self) -> None:
        """An exit we did not cause is a crash: record it, restart (after a breath, so a
        daemon that cannot start does not spin)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is None:
                return
            self.crashes.append({"at": time.time(), "rc": self.proc.returncode,
                                 "log_tail": _tail(self.log, 1500)})
            time.sleep(1.0)
            self.start()

    def stop(self) -> int | None:
        """SIGTERM (the daemon finishes its current action), SIGKILL after 60 s."""
        with self.lock:
            proc, self.proc = self.proc, None
        if proc is None:
            return None
        self.stopped_at = time.time()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.final_rc = proc.returncode
        return proc.returncode


def _tail(path: Path, size: int) -> str:
    with suppress(OSError):
        data = path.read_bytes()
        return data[-size:].decode("utf-8", "replace")
    return ""


# ---- observation: squeue/sinfo every 2 s ------------------------------------------------
@dataclass
class JobSeen:
    """What the samples showed of one job id."""

    state: str = ""
    restarts: int = 0
    completed_at_restart: int | None = None
    rerun: bool = False
    ended_at: float | None = None


@dataclass
class Observer:
    """The sampler: per-job states, the managed incarnations seen RUNNING, and the
    idle-while-waiting and busy GPU-second integrals (definitions: module docstring)."""

    cluster: Cluster
    gpufair: bool
    jobs: dict[str, JobSeen] = field(default_factory=dict)
    running: dict[tuple[str, int], float] = field(default_factory=dict)
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: job id -> first time seen RUNNING; an array task's job id -> its name A_T
    first_run: dict[str, float] = field(default_factory=dict)
    task_names: dict[str, str] = field(default_factory=dict)
    #: array job id -> {task id: the task's job id}
    tasks: dict[int, dict[int, str]] = field(default_factory=dict)
    gpus: int = CLUSTER_GPUS
    idle_gpu_s: float = 0.0
    busy_gpu_s: float = 0.0
    total_gpu_s: float = 0.0
    samples: int = 0
    failed: int = 0
    last_ok: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def loop(self, stop: threading.Event, out: Path) -> None:
        with out.open("a") as log:
            while not stop.wait(SAMPLE_S):
                self.sample(log)

    def sample(self, log: Any = None) -> bool:
        now = time.time()
        jobs_doc = self.cluster.read_json("squeue", "--all", "--states=all", "--json")
        nodes_doc = self.cluster.read_json("sinfo", "--json")
        if jobs_doc is None or nodes_doc is None:
            with self.lock:
                self.failed += 1
                self.last_ok = None    # no credit across an outage
            return False
        jobs = {str(j["job_id"]): _job_row(j) for j in jobs_doc.get("jobs", ())}
        nodes = [_node_row(n) for n in nodes_doc.get("nodes", ())]
        with self.lock:
            self._record_jobs(jobs, now)
            self._integrate(jobs, nodes, now)
            self.latest = jobs
            self.samples += 1
        if log is not None:
            log.write(json.dumps({"t": round(now, 2), "jobs": jobs, "nodes": nodes}) + "\n")
        return True

    def _record_jobs(self, jobs: dict[str, dict[str, Any]], now: float) -> None:
        for job_id, row in jobs.items():
            seen = self.jobs.setdefault(job_id, JobSeen())
            if seen.completed_at_restart is not None and (
                    row["state"] != "COMPLETED" or row["restarts"] > seen.completed_at_restart):
                seen.rerun = True
            if row["state"] == "COMPLETED" and seen.completed_at_restart is None:
                seen.completed_at_restart = row["restarts"]
            if row["state"] in TERMINAL:
                seen.ended_at = seen.ended_at or now
            else:
                seen.ended_at = None
            seen.state, seen.restarts = row["state"], row["restarts"]
            if row["state"] == "RUNNING":   # Slurm's own start time: no sampling delay
                started = row["start"] or now
                self.first_run[job_id] = min(self.first_run.get(job_id, started), started)
            if row["state"] == "RUNNING" and row["managed"]:
                self.running.setdefault((job_id, row["restarts"]), now)
            if row["array"] and row["task"] is not None:
                self.task_names[job_id] = f"{row['array']}_{row['task']}"
                self.tasks.setdefault(row["array"], {})[row["task"]] = job_id

    def _integrate(self, jobs: dict[str, dict[str, Any]], nodes: list[dict[str, Any]],
                   now: float) -> None:
        usable = [n for n in nodes if n["usable"]]
        self.gpus = sum(n["total"] for n in nodes) or self.gpus
        dt = 0.0 if self.last_ok is None else min(now - self.last_ok, 2 * SAMPLE_S)
        self.last_ok = now
        waiting = [j for j in jobs.values() if self._waiting(j)]
        idle = 0
        for gpu_type in {n["type"] for n in usable}:
            of_type = [n for n in usable if n["type"] == gpu_type]
            if any(_fits(j, of_type) for j in waiting if j["type"] in (None, gpu_type)):
                idle += sum(n["total"] - n["used"] for n in of_type)
        self.idle_gpu_s += idle * dt
        self.busy_gpu_s += sum(n["used"] for n in nodes) * dt
        self.total_gpu_s += self.gpus * dt

    def _waiting(self, job: dict[str, Any]) -> bool:
        if job["state"] != "PENDING" or "gpu" not in job["partition"].split(","):
            return False
        if self.owner_held(job):    # its owner's choice, not the scheduler's: either way
            return False
        return job["managed"] if self.gpufair else job["priority"] > 0

    def owner_held(self, job: dict[str, Any]) -> bool:
        """Held by its owner: under gpufair the owner's mark (every managed job is held by
        gpufair too, so the reason alone cannot tell), under Slurm alone any user hold."""
        if job["state"] != "PENDING":
            return False
        if self.gpufair:
            return bool(job.get("owner_mark"))
        return job["priority"] == 0 and job["reason"] == "JobHeldUser"

    def pick(self, user: str, state: str, among: set[str]) -> str | None:
        """The user's lowest job id in ``state`` (of the bench's own jobs), per the last
        sample: a deterministic target for a hostile act."""
        with self.lock:
            ids = [i for i, j in self.latest.items()
                   if j["user"] == user and j["state"] == state and i in among]
        return min(ids, key=int) if ids else None


def _fits(job: dict[str, Any], nodes: list[dict[str, Any]]) -> bool:
    enough = [n for n in nodes if n["total"] - n["used"] >= job["per_node"]]
    return job["per_node"] > 0 and len(enough) >= job["nodes"]


_GRES = re.compile(r"gpu:(?:([A-Za-z]\w*):)?(\d+)")


def _gres(text: str) -> tuple[str | None, int]:
    match = _GRES.search(text or "")
    return (match.group(1), int(match.group(2))) if match else (None, 0)


def _job_row(raw: dict[str, Any]) -> dict[str, Any]:
    gpu_type, per_node = _gres(str(raw.get("tres_per_node") or ""))
    nodes = int(raw.get("node_count") or 1)
    if not per_node:     # GPUs per job: split evenly (the bench itself only uses per node)
        gpu_type, total = _gres(str(raw.get("tres_per_job") or ""))
        per_node = math.ceil(total / nodes) if total else 0
    priority = raw.get("priority")
    return {"state": str(raw.get("job_state") or "?"),
            "restarts": int(raw.get("restart_cnt") or 0),
            "priority": priority if isinstance(priority, int) else 0,
            "managed": "gpufair:managed" in str(raw.get("admin_comment") or ""),
            # the owner's own hold as gpufair marks it (job_submit.lua's mark of a user's
            # hold; gpufair's of a user's requeuehold): under Slurm alone see owner_held()
            "owner_mark": "gpufair:userhold" in str(raw.get("comment") or "")
                          or "gpufair:ownerhold=" in str(raw.get("admin_comment") or ""),
            "user": str(raw.get("user_name") or ""),
            "partition": str(raw.get("partition") or ""),
            "reason": str(raw.get("state_reason") or ""),
            "nodes": nodes, "per_node": per_node, "type": gpu_type,
            "on": str(raw.get("nodes") or ""),
            "pinned": str(raw.get("required_nodes") or ""),
            "start": raw.get("start_time") if isinstance(raw.get("start_time"), int) else 0,
            "array": int(raw.get("array_job_id") or 0),
            "task": _task_id(raw)}


def _task_id(raw: dict[str, Any]) -> int | None:
    """The array task a record is (None: not an array task, or a record of several)."""
    task = raw.get("array_task_id")
    return task if isinstance(task, int) and 0 <= task < 0xFFFFFFFE else None


def _node_row(raw: dict[str, Any]) -> dict[str, Any]:
    gpu_type, total = _gres(str(raw.get("gres") or ""))
    _, used = _gres(str(raw.get("gres_used") or ""))
    flags = {str(f).upper() for f in raw.get("state_flags") or ()}
    state = str(raw.get("state") or "").lower()
    usable = state in ("idle", "mixed", "allocated") and not flags & {
        "DRAIN", "DRAINING", "DRAINED", "DOWN", "NOT_RESPONDING", "FAIL"}
    return {"name": raw.get("name"), "type": gpu_type, "total": total, "used": used,
            "usable": usable}


# ---- the replay: users submit, cancel, and misbehave ------------------------------------
@dataclass
class Submitted:
    spec: JobSpec
    job_id: str | None = None
    at: float = 0.0
    tries: int = 0
    error: str = ""
    cancelled: bool = False          # its owner's scancel was accepted
    cancel_state: str = ""           # what the last sample showed then
    log: str = ""                    # its -o file (all runs: --open-mode=append)


@dataclass
class Ledger:
    """Everything the users did and what Slurm answered."""

    t0: float = 0.0
    jobs: dict[str, Submitted] = field(default_factory=dict)
    acts: list[dict[str, Any]] = field(default_factory=list)
    helpers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def ids(self, kind: str | None = None) -> dict[str, Submitted]:
        return {s.job_id: s for s in self.jobs.values()
                if s.job_id and (kind is None or s.spec.kind == kind)}


def make_fifo(user: User, ledger: Ledger) -> None:
    """The FIFO the fifo job writes to, made by the user, who also reads it (in a session
    of its own, so the bench can end it): nobody reading, the job could never start, under
    gpufair or not."""
    assert user.home is not None
    fifo = user.home / "out.fifo"
    subprocess.run(["mkfifo", str(fifo)], check=True, **user.drop())
    reader = subprocess.Popen(["/bin/sh", "-c", 'while [ -p "$1" ]; do cat "$1"; done', "sh",
                               str(fifo)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True, **user.drop())
    ledger.helpers.append(reader)


def make_shadow_link(user: User) -> None:
    """The shadow job's output: the user's symlink to /etc/shadow (slurmstepd opens it as
    the user, so the job fails; nothing running as root may follow it)."""
    assert user.home is not None
    subprocess.run(["ln", "-s", "/etc/shadow", str(user.home / "shadow.out")], check=True,
                   **user.drop())


def sbatch_argv(spec: JobSpec, user: User, script: Path) -> list[str]:
    assert user.home is not None
    home = user.home
    name, out = spec.tag, str(home / f"{spec.tag}.log")
    extra: list[str] = []
    if spec.kind == "fifo":
        out = str(home / "out.fifo")
    elif spec.kind == "shadow":
        out = str(home / "shadow.out")
    elif spec.kind == "bytes":
        name = os.fsdecode(spec.tag.encode() + b"\xff\xfe")
        extra = ["--comment", os.fsdecode(b"\xff\xfe")]
    if spec.checkpoint:
        extra.append("--comment=gpufair:checkpoint")
    if spec.kind in ("train", "array"):   # one task per node: its CPUs and memory per node
        extra += ["--ntasks-per-node=1", f"--cpus-per-task={spec.cpus_per_gpu * spec.per_node}"]
        if spec.mem_per_gpu_mb:
            extra.append(f"--mem={spec.mem_per_gpu_mb * spec.per_node}")
    if spec.begin_s is not None:
        extra.append(f"--begin=now+{spec.begin_s:g}")
    if spec.tasks:
        out = str(home / f"{spec.tag}_%a.log")
        extra.append(f"--array=0-{spec.tasks - 1}"
                     + (f"%{spec.task_limit}" if spec.task_limit else ""))
    gres = f"gpu:v100:{spec.per_node}" if spec.typed else f"gpu:{spec.per_node}"
    return ["sbatch", "--parsable", "-p", "gpu", "-J", name, "-o", out, "--open-mode=append",
            "-N", str(spec.nodes), f"--gres={gres}", *extra, str(script), str(home),
            str(spec.steps), str(STEP_S)]


def submit(cluster: Cluster, spec: JobSpec, user: User, script: Path) -> Submitted:
    """sbatch as the user; retried for up to 90 s (slurmctld may be restarting)."""
    assert user.home is not None
    record = Submitted(spec, at=time.time(), log=str(user.home / f"{spec.tag}.log"))
    deadline = time.monotonic() + 90
    while True:
        record.tries += 1
        done = cluster.run(*sbatch_argv(spec, user, script), user=user)
        if done.returncode == 0 and done.stdout.strip():
            record.job_id = done.stdout.strip().split(";")[0]
            return record
        record.error = done.stderr.strip()[-300:]
        if time.monotonic() > deadline:
            return record
        time.sleep(2)


def act(cluster: Cluster, observer: Observer, ledger: Ledger, step: Act,
        users: list[User]) -> None:
    """One hostile or ordinary user action; its outcome goes to the ledger. A juggle or
    requeue is done by the planned user on their own job, or, when they have none in the
    state it needs, by the next user who has one (so the act is not wasted)."""
    user = users[step.user]
    ours = set(ledger.ids())
    wanted = {"juggle": "PENDING", "requeue": "RUNNING"}.get(step.kind)
    if wanted:
        order = users[step.user:] + users[:step.user]
        user = next((u for u in order if observer.pick(u.name, wanted, ours)), user)
    entry: dict[str, Any] = {"kind": step.kind, "user": user.name,
                             "t": round(time.time() - ledger.t0, 1)}
    if step.kind == "cancel":
        record = ledger.jobs.get(step.tag)
        if record is None or record.job_id is None:
            return
        with observer.lock:
            record.cancel_state = observer.latest.get(record.job_id, {}).get("state", "?")
        done = cluster.run("scancel", record.job_id, user=user)
        record.cancelled = done.returncode == 0 and record.cancel_state not in TERMINAL
        entry.update(job=record.job_id, state=record.cancel_state, rc=done.returncode)
    elif step.kind == "juggle":
        job = observer.pick(user.name, "PENDING", ours)
        entry["job"] = job
        if job:
            ops = [["scontrol", "release", job],
                   ["scontrol", "update", f"JobId={job}", "Priority=1000000"],
                   ["scontrol", "hold", job], ["scontrol", "release", job]]
            entry["ops"] = [_outcome(cluster.run(*op, user=user), op) for op in ops]
    elif step.kind == "requeue":
        job = observer.pick(user.name, "RUNNING", ours)
        entry["job"] = job
        if job:
            entry["ops"] = [_outcome(cluster.run("scontrol", "requeue", job, user=user),
                                     ["scontrol", "requeue", job])]
    elif step.kind == "burst":
        entry.update(wake_burst(cluster, user))
    ledger.acts.append(entry)


def _outcome(done: subprocess.CompletedProcess[str], argv: list[str]) -> dict[str, Any]:
    return {"op": " ".join(argv[1:3]), "rc": done.returncode,
            "err": done.stderr.strip().splitlines()[-1][:160] if done.stderr.strip() else ""}


BURST = r"""
import json, socket, sys, time
path, fd = sys.argv[1], int(sys.argv[2])
def burst(send):
    sent, errors, end = 0, {}, time.monotonic() + 30
    for _ in range(1000):
        if time.monotonic() > end:
            errors["gave up after 30 s"] = 1000 - sent - sum(errors.values())
            break
        try:
            send(b"wake")
            sent += 1
        except OSError as exc:
            errors[exc.strerror or type(exc).__name__] = errors.get(
                exc.strerror or type(exc).__name__, 0) + 1
    return {"sent": sent, "errors": errors}
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setblocking(False)
out = {"by_path": burst(lambda m: s.sendto(m, path))}
if fd >= 0:
    leaked = socket.socket(fileno=fd)
    leaked.settimeout(1.0)   # wait while the daemon's queue is full: all 1,000 arrive
    out["leaked"] = burst(leaked.send)
print(json.dumps(out))
"""


def wake_burst(cluster: Cluster, user: User) -> dict[str, Any]:
    """1,000 datagrams by path as the user (the socket's 0600 mode must refuse them), then
    1,000 on a socket root connected and leaked to the user, as a misconfigured mode or a
    leaked descriptor would allow (only the daemon's SO_PASSCRED check can refuse those)."""
    path = str(cluster.hook_dir / "wake.sock")
    started = time.time()
    leaked = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    fd = -1
    try:
        leaked.connect(path)
        fd = leaked.fileno()
    except OSError:
        pass
    try:
        done = subprocess.run(["/usr/bin/python3", "-I", "-c", BURST, path, str(fd)],
                              capture_output=True, text=True, timeout=120,
                              pass_fds=(fd,) if fd >= 0 else (), **user.drop())
    finally:
        leaked.close()
    try:
        return {"burst": json.loads(done.stdout), "at": started}
    except ValueError:
        return {"burst": {"error": done.stderr[-300:]}, "at": started}


def replay(plan: Plan, users: list[User], cluster: Cluster, observer: Observer,
           ledger: Ledger, script: Path, stop: threading.Event) -> None:
    """Walk the timetable: each submission and act at its time after ``ledger.t0`` (later
    when the one before took long, e.g. sbatch waiting for a restarting slurmctld)."""
    steps: list[tuple[float, int, Any]] = [(j.at, 0, j) for j in plan.jobs]
    steps += [(a.at, 1, a) for a in plan.acts]
    for at, _, step in sorted(steps, key=lambda s: (s[0], s[1])):
        if stop.wait(max(0.0, ledger.t0 + at - time.time())):
            return
        if isinstance(step, JobSpec):
            ledger.jobs[step.tag] = submit(cluster, step, users[step.user], script)
        else:
            act(cluster, observer, ledger, step, users)


# ---- chaos: daemon SIGKILLs and slurmctld restarts ---------------------------------------
@dataclass
class Chaos:
    cluster: Cluster
    keeper: DaemonKeeper | None
    kill_every: float
    ctld_every: float
    ctld_restarts: list[dict[str, Any]] = field(default_factory=list)

    def loop(self, stop: threading.Event) -> None:
        start = time.monotonic()
        next_kill = start + self.kill_every if self.kill_every > 0 else math.inf
        next_ctld = start + self.ctld_every if self.ctld_every > 0 else math.inf
        while not stop.wait(0.5):
            if self.keeper is not None:
                self.keeper.check()
                if time.monotonic() >= next_kill:
                    self.keeper.kill_and_restart()
                    next_kill += self.kill_every
            if time.monotonic() >= next_ctld:
                self.ctld_restarts.append(self.cluster.restart_ctld())
                next_ctld += self.ctld_every


# ---- after the run: journal, logs, jobcomp ----------------------------------------------
_KEY = re.compile(r"^(\w+):(\d+(?:_\d+)?)#(\d+)")


def read_store(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The daemon's rounds and actions, read-only (the daemon has stopped by now)."""
    if not path.exists():
        return [], []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rounds = [dict(r) for r in db.execute("SELECT * FROM rounds ORDER BY id")]
        actions = [dict(r) for r in db.execute("SELECT * FROM actions ORDER BY round_id, seq")]
    finally:
        db.close()
    return rounds, actions


def released_incarnations(actions: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """(job, restart count) of every run gpufair tried to let start (see *bypass*)."""
    out: set[tuple[str, int]] = set()
    for a in actions:
        tried = a["status"] == "done" or (a["status"] in ("failed", "applying")
                                          and a["attempts"] > 0)
        match = _KEY.match(a["key"] or "")
        if not tried or match is None:
            continue
        kind, job, restarts = match.group(1), match.group(2), int(match.group(3))
        if kind == "start":
            out.add((job, restarts))
        elif kind in ("migrate", "resize"):
            out.add((job, restarts + 1))
    return out


def round_stats(rounds: list[dict[str, Any]], actions: list[dict[str, Any]],
                sizes: dict[str, int], gpus: int, keeper: DaemonKeeper,
                burst_at: float | None) -> dict[str, Any]:
    """Latency, hangs, and the preemption cap, from the journal."""
    latencies = sorted(r["latency_s"] for r in rounds if r["latency_s"] is not None)
    marks = [keeper.first_start or 0.0, *sorted(r["started_at"] for r in rounds),
             keeper.stopped_at or time.time()]
    gaps = [b - a for a, b in itertools.pairwise(marks)]
    cap = math.floor(MAX_PREEMPT_SHARE * gpus + 1e-9)
    taken: dict[int, int] = {}
    kinds: dict[str, int] = {}
    for a in actions:
        if a["status"] != "done":
            continue
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
        if a["kind"] in ("Preempt", "Migrate", "Resize"):
            taken[a["round_id"]] = taken.get(a["round_id"], 0) + sizes.get(a["job_id"], 1)
    around_burst = None
    if burst_at is not None:
        around_burst = [sum(1 for r in rounds if lo <= r["started_at"] - burst_at < lo + 20)
                        for lo in (-20, 0)]
    return {"rounds": len(rounds),
            "skipped": sum(1 for r in rounds if r["status"] == "skipped"),
            "latency_p50_s": _pct(latencies, 50), "latency_p99_s": _pct(latencies, 99),
            "hangs": sum(1 for g in gaps if g > 3 * ROUND_S),
            "max_gap_s": round(max(gaps), 1) if gaps else None,
            "cap_gpus": cap, "max_taken_gpus": max(taken.values(), default=0),
            "rounds_over_cap": sum(1 for t in taken.values() if t > cap),
            "actions_done": kinds, "rounds_around_burst": around_burst}


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[p - 1]
                 if p < 100 else values[-1], 3)


_JOBCOMP = re.compile(rb"^JobId=(\d+) .*? JobState=(\S+) ")


def read_jobcomp(path: Path) -> dict[str, list[str]]:
    """Job id → the states of its ends, in order (a requeue is logged as PENDING)."""
    out: dict[str, list[str]] = {}
    with suppress(OSError):
        for line in path.read_bytes().splitlines():
            match = _JOBCOMP.match(line)
            if match:
                out.setdefault(match.group(1).decode(), []).append(match.group(2).decode())
    return out


def end_state(job_id: str, observer: Observer, jobcomp: dict[str, list[str]]) -> str:
    """The final state: squeue's, else jobcomp's last record, else 'VANISHED'; a job still
    queued after the drain is 'UNFINISHED:<state>'."""
    row = observer.latest.get(job_id)
    if row is not None and observer.owner_held(row):
        return "HELD_BY_OWNER"      # still held by its owner when the drain ended
    if row is not None:
        return row["state"] if row["state"] in TERMINAL else f"UNFINISHED:{row['state']}"
    ends = jobcomp.get(job_id, [])
    if not ends and "_" in job_id:
        # a task never split out of its array record ("A_T" was never seen): it shares the
        # record's end, under the array's own id (its owner's scancel of the pending array:
        # counted lost before, under gpufair and Slurm alone alike)
        ends = jobcomp.get(job_id.split("_", 1)[0], [])
    return ends[-1] if ends and ends[-1] in TERMINAL else "VANISHED"


def reran_after_completion(record: Submitted, observer: Observer,
                           jobcomp: dict[str, list[str]]) -> bool:
    assert record.job_id is not None
    ends = jobcomp.get(record.job_id, [])
    if "COMPLETED" in ends[:-1]:
        return True
    seen = observer.jobs.get(record.job_id)
    if seen is not None and seen.rerun:
        return True
    log = b""
    with suppress(OSError):
        log = Path(record.log).read_bytes()
    done = log.find(b"run done")
    return done >= 0 and log.find(b"run start", done) >= 0


def workload_of(ledger: Ledger, observer: Observer) -> dict[str, Submitted]:
    """The workload's jobs by job id: the plain ones, and every task of an array as a job of
    its own (its job id as Slurm split it out, its own log; ``A_T`` if never seen)."""
    out = ledger.ids("train")
    for job_id, record in ledger.ids("array").items():
        split = observer.tasks.get(int(job_id), {})
        for task in range(record.spec.tasks):
            task_id = split.get(task, f"{job_id}_{task}")
            out[task_id] = replace(record, job_id=task_id, log=str(
                Path(record.log).with_name(f"{record.spec.tag}_{task}.log")))
    return out


def started_early(workload: dict[str, Submitted], observer: Observer) -> list[str]:
    """Jobs Slurm shows started before the begin time they asked for (1 s of slack: the
    bench notes its submission time just before sbatch)."""
    return sorted(i for i, r in workload.items() if r.spec.begin_s is not None
                  and i in observer.first_run
                  and observer.first_run[i] < r.at + r.spec.begin_s - 1.0)


def summarize(name: str, ledger: Ledger, observer: Observer, chaos: Chaos,
              keeper: DaemonKeeper | None, cluster: Cluster, store: Path,
              daemon_log: Path, shadow_same: bool) -> dict[str, Any]:
    jobcomp = read_jobcomp(cluster.base / "log" / "jobcomp.txt")
    workload = workload_of(ledger, observer)
    ends = {i: end_state(i, observer, jobcomp) for i in workload}
    lost = {i: s for i, s in ends.items()
            if s not in ("COMPLETED", "HELD_BY_OWNER")
            and not (s == "CANCELLED" and workload[i].cancelled)}
    finished = [observer.jobs[i].ended_at for i, s in ends.items()
                if s == "COMPLETED" and i in observer.jobs and observer.jobs[i].ended_at]
    jcts = [observer.jobs[i].ended_at - workload[i].at for i, s in ends.items()
            if s == "COMPLETED" and observer.jobs.get(i) and observer.jobs[i].ended_at]
    out: dict[str, Any] = {
        "mode": name,
        "submitted": len(workload),
        "array_tasks": sum(1 for r in workload.values() if r.spec.tasks),
        "with_begin": sum(1 for r in workload.values() if r.spec.begin_s is not None),
        "started_before_begin": started_early(workload, observer),
        "submit_failed": sum(1 for s in ledger.jobs.values() if s.job_id is None),
        "completed": sum(1 for s in ends.values() if s == "COMPLETED"),
        "held_by_owner": sorted(i for i, s in ends.items() if s == "HELD_BY_OWNER"),
        "cancelled_by_owner": sum(1 for i, s in ends.items()
                                  if s == "CANCELLED" and workload[i].cancelled),
        "lost": len(lost),
        "lost_jobs": {workload[i].spec.tag: f"{i}:{s}" for i, s in lost.items()},
        "vanished": sum(1 for s in lost.values() if s == "VANISHED"),
        "unfinished": sum(1 for s in lost.values() if s.startswith("UNFINISHED")),
        "failed": sum(1 for s in ends.values() if s in FAILED_STATES),
        "rerun_after_completed": sorted(i for i, r in workload.items()
                                        if reran_after_completion(r, observer, jobcomp)),
        "makespan_s": round(max(finished) - ledger.t0, 1) if finished else None,
        "mean_jct_s": round(statistics.fmean(jcts), 1) if jcts else None,
        "idle_gpu_s_while_fit": round(observer.idle_gpu_s),
        "gpu_busy_share": round(observer.busy_gpu_s / observer.total_gpu_s, 3)
        if observer.total_gpu_s else None,
        "samples": observer.samples, "failed_samples": observer.failed,
        "ctld_restarts": chaos.ctld_restarts,
        "hostile_jobs": {r.spec.kind: end_state(i, observer, jobcomp)
                         for i, r in ledger.ids().items() if r.spec.kind != "train"},
        "acts": ledger.acts,
        "shadow_unchanged": shadow_same,
    }
    out.update(_hostile_counts(ledger.acts))
    if keeper is not None:
        out.update(_daemon_summary(ledger, observer, keeper, store, daemon_log))
    return out


def _hostile_counts(acts: list[dict[str, Any]]) -> dict[str, Any]:
    juggle = [o for a in acts if a["kind"] == "juggle" for o in a.get("ops", ())]
    requeue = [o for a in acts if a["kind"] == "requeue" for o in a.get("ops", ())]
    burst = next((a["burst"] for a in acts if a["kind"] == "burst"), {})
    return {"priority_ops": len(juggle),
            "priority_ops_accepted": sum(1 for o in juggle if o["rc"] == 0),
            "requeues": len(requeue), "requeues_accepted": sum(1 for o in requeue
                                                               if o["rc"] == 0),
            "burst": burst}


def _daemon_summary(ledger: Ledger, observer: Observer, keeper: DaemonKeeper, store: Path,
                    daemon_log: Path) -> dict[str, Any]:
    rounds, actions = read_store(store)
    released = released_incarnations(actions)
    ours = ledger.ids()
    ours.update(workload_of(ledger, observer))
    names = observer.task_names      # an array task gpufair started as A_T
    bypasses = [{"job": j, "restart": r, "tag": ours[j].spec.tag if j in ours else "?",
                 "seen_at_s": round(t - ledger.t0, 1)}
                for (j, r), t in sorted(observer.running.items())
                if (j, r) not in released and (names.get(j), r) not in released]
    sizes = {i: s.spec.gpus for i, s in ours.items()}
    burst_at = next((a.get("at") for a in ledger.acts if a["kind"] == "burst"), None)
    text = daemon_log.read_bytes().decode("utf-8", "replace") if daemon_log.exists() else ""
    errors = [line for line in text.splitlines() if '"level": "error"' in line]
    return {"bypasses": bypasses, "kills": keeper.kills, "crashes": keeper.crashes,
            "final_stop_rc": keeper.final_rc,
            **round_stats(rounds, actions, sizes, observer.gpus, keeper, burst_at),
            "log_errors": len(errors), "log_tracebacks": text.count("Traceback"),
            "log_error_samples": sorted({_error_msg(e) for e in errors})[:10]}


def _error_msg(line: str) -> str:
    with suppress(ValueError):
        return str(json.loads(line).get("msg", ""))[:200]
    return line[:200]


# ---- one mode, start to finish -----------------------------------------------------------
def _sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@contextmanager
def running(target: Any, *args: Any) -> Iterator[threading.Event]:
    """A background loop with its stop event; stopped (and joined) on the way out."""
    stop = threading.Event()
    thread = threading.Thread(target=target, args=(stop, *args), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(120)


def drain(ledger: Ledger, observer: Observer, deadline: float) -> None:
    """Wait until every submitted job has ended (or left squeue), or the deadline."""
    def all_ended() -> bool:
        with observer.lock:
            latest = dict(observer.latest)
        arrays = {int(i) for i, s in ledger.ids().items() if s.spec.tasks}
        return all(latest.get(i, {}).get("state", "COMPLETED") in TERMINAL
                   for i in ledger.ids()) and all(
            row["state"] in TERMINAL for row in latest.values() if row["array"] in arrays)
    while time.time() < deadline and not all_ended():
        time.sleep(SAMPLE_S)


def run_mode(name: str, args: argparse.Namespace, plan: Plan, users: list[User],
             root: Path) -> dict[str, Any]:
    """Bring a cluster up, replay the plan under chaos, drain, measure, tear down."""
    gpufair = name == "gpufair"
    mode_dir = root / name
    mode_dir.mkdir(mode=0o755)
    cluster = Cluster(mode_dir / "cluster", hard=gpufair)
    ledger = Ledger()
    keeper: DaemonKeeper | None = None
    store, daemon_log = mode_dir / "store.db", mode_dir / "daemon.log"
    try:
        print(f"[{name}] bringing up Slurm in {cluster.base}", file=sys.stderr)
        cluster.up()
        for user in users:
            make_home(user, mode_dir / "users")
        make_fifo(next(users[j.user] for j in plan.jobs if j.kind == "fifo"), ledger)
        make_shadow_link(next(users[j.user] for j in plan.jobs if j.kind == "shadow"))
        script = root / "train_job.sh"
        if gpufair:
            config = write_config(mode_dir / "gpufair.toml", cluster, store, args.policy,
                                  args.seed)
            keeper = DaemonKeeper(config, daemon_log, cluster.env)
            keeper.start()
            if not _wait_until(lambda: bool(read_store(store)[0]), 120, 1.0):
                raise RuntimeError(f"the daemon made no round: {_tail(daemon_log, 2000)}")
        shadow = _sha256("/etc/shadow")
        observer = Observer(cluster, gpufair)
        chaos = Chaos(cluster, keeper, args.kill_every, args.ctld_restart_every)
        ledger.t0 = time.time()
        with running(observer.loop, mode_dir / "samples.jsonl"), running(chaos.loop) as stop:
            print(f"[{name}] replaying {len(plan.jobs)} jobs, {len(plan.acts)} acts over "
                  f"{args.minutes:g} min", file=sys.stderr)
            replay(plan, users, cluster, observer, ledger, script, stop)
            print(f"[{name}] draining (at most {args.drain_minutes:g} min)", file=sys.stderr)
            drain(ledger, observer, time.time() + args.drain_minutes * 60)
        _wait_until(cluster.ping, 60)
        if keeper is not None:
            keeper.stop()
        observer.sample()
        result = summarize(name, ledger, observer, chaos, keeper, cluster, store, daemon_log,
                           shadow == _sha256("/etc/shadow"))
        result["wall_s"] = round(time.time() - ledger.t0, 1)
        (mode_dir / "ledger.json").write_text(json.dumps(
            {tag: {**asdict(s.spec), "job_id": s.job_id, "tries": s.tries, "error": s.error,
                   "cancelled": s.cancelled, "cancel_state": s.cancel_state}
             for tag, s in ledger.jobs.items()}, indent=1))
        return result
    finally:
        if keeper is not None:
            keeper.stop()
        for helper in ledger.helpers:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(helper.pid, signal.SIGKILL)
            helper.wait()
        print(f"[{name}] down.sh{'' if args.keep else ' --purge'}", file=sys.stderr)
        cluster.down(purge=not args.keep)
        if not args.keep:
            shutil.rmtree(mode_dir / "users", ignore_errors=True)


# ---- the table -----------------------------------------------------------------------------
def _n(value: Any) -> str:
    return "–" if value is None else str(value)


def _burst(r: dict[str, Any]) -> str:
    b = r.get("burst") or {}
    if "by_path" not in b:
        return _n(b.get("error"))
    path = f"{b['by_path']['sent']}/1000 by path"
    leaked = b.get("leaked")
    return path + (f", {leaked['sent']}/1000 on a leaked socket" if leaked else
                   ", no socket to leak")


ROWS: tuple[tuple[str, bool, Any], ...] = (
    # label, needs the daemon, value
    ("jobs submitted (array tasks; with a begin time)", False, lambda r: f"{r['submitted']}"
     + (f" (+{r['submit_failed']} refused)" if r["submit_failed"] else "")
     + f" ({r['array_tasks']}; {r['with_begin']})"),
    ("jobs completed", False, lambda r: r["completed"]),
    ("jobs cancelled by their owner", False, lambda r: r["cancelled_by_owner"]),
    ("jobs still held by their owner at the end", False,
     lambda r: len(r.get("held_by_owner", ()))),
    ("jobs lost (vanished / unfinished / other end)", False, lambda r:
     f"{r['lost']} ({r['vanished']} / {r['unfinished']} / "
     f"{r['lost'] - r['vanished'] - r['unfinished']})"),
    ("jobs FAILED", False, lambda r: r["failed"]),
    ("jobs re-run after COMPLETED", False, lambda r: len(r["rerun_after_completed"])),
    ("jobs started before their begin time", False,
     lambda r: len(r["started_before_begin"])),
    ("bypasses (runs gpufair did not release)", True, lambda r: len(r["bypasses"])),
    ("daemon SIGKILLs / crashes / hangs", True, lambda r:
     f"{r['kills']} / {len(r['crashes'])} / {r['hangs']} (max gap {r['max_gap_s']} s)"),
    ("slurmctld restarts (ok)", False, lambda r:
     f"{len(r['ctld_restarts'])} ({sum(1 for c in r['ctld_restarts'] if c['ok'])})"),
    ("idle GPU-s while a waiting job fit", False, lambda r: r["idle_gpu_s_while_fit"]),
    ("GPU busy share", False, lambda r: _n(r["gpu_busy_share"])),
    ("makespan (s, from the first submission)", False, lambda r: _n(r["makespan_s"])),
    ("mean JCT of completed jobs (s)", False, lambda r: _n(r["mean_jct_s"])),
    ("rounds (skipped: Slurm unavailable)", True, lambda r: f"{r['rounds']} ({r['skipped']})"),
    ("round latency p50 / p99 (s)", True, lambda r:
     f"{_n(r['latency_p50_s'])} / {_n(r['latency_p99_s'])}"),
    ("actions done (Start / Preempt / Migrate+Resize)", True, lambda r:
     f"{r['actions_done'].get('Start', 0)} / {r['actions_done'].get('Preempt', 0)} / "
     f"{r['actions_done'].get('Migrate', 0) + r['actions_done'].get('Resize', 0)}"),
    ("rounds over the preemption cap (max GPUs taken / cap)", True, lambda r:
     f"{r['rounds_over_cap']} ({r['max_taken_gpus']} / {r['cap_gpus']})"),
    ("user release/Priority/hold of own job accepted", False, lambda r:
     f"{r['priority_ops_accepted']}/{r['priority_ops']}"),
    ("user requeue of own running job accepted", False, lambda r:
     f"{r['requeues_accepted']}/{r['requeues']}"),
    ("hostile jobs' end (fifo, shadow, bytes)", False, lambda r: ", ".join(
        _n(r["hostile_jobs"].get(k)) for k in ("fifo", "shadow", "bytes"))),
    ("wake datagrams the user got sent", False, _burst),
    ("rounds in the 20 s before / after the burst", True, lambda r:
     " / ".join(map(str, r["rounds_around_burst"] or ["–"]))),
    ("/etc/shadow unchanged", False, lambda r: "yes" if r["shadow_unchanged"] else "NO"),
    ("daemon log: error lines / tracebacks", True, lambda r:
     f"{r['log_errors']} / {r['log_tracebacks']}"),
)


def render(results: dict[str, dict[str, Any]], policy: str) -> str:
    names = {"gpufair": f"gpufair ({policy})", "slurm": "Slurm alone"}
    cols = list(results)
    lines = ["| | " + " | ".join(names[c] for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for label, daemon_only, value in ROWS:
        cells = ["n/a" if daemon_only and "kills" not in results[c] else str(value(results[c]))
                 for c in cols]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- main --------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0, help="submission period")
    p.add_argument("--users", type=int, default=4)
    p.add_argument("--policy", default="las")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kill-every", type=float, default=120.0,
                   help="SIGKILL the daemon every N s (restarted at once); 0: never")
    p.add_argument("--ctld-restart-every", type=float, default=300.0,
                   help="restart slurmctld every N s; 0: never")
    p.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True,
                   help="also replay the workload on Slurm alone (up.sh without --hard)")
    p.add_argument("--keep", action="store_true", help="keep the cluster and user dirs")
    p.add_argument("--load", type=float, default=1.5,
                   help="offered GPU-seconds as a multiple of the cluster's, over the run")
    p.add_argument("--drain-minutes", type=float, default=20.0,
                   help="after the submissions, wait at most this long for jobs to end")
    args = p.parse_args(argv)
    if args.users < 1 or args.minutes <= 0:
        p.error("--users and --minutes must be positive")
    return args


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def git_state() -> dict[str, Any]:
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True,
                              check=False).stdout.strip()
    return {"commit": git("rev-parse", "HEAD"),
            "dirty": git("status", "--porcelain", "--untracked-files=no").splitlines()}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("run as root: the bench creates users and runs Slurm", file=sys.stderr)
        return 2
    # Ctrl-C and SIGTERM both unwind through the clean-up (SIGINT set explicitly: a shell
    # starts background jobs with it ignored, and Python would keep ignoring it)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    plan = make_plan(args.seed, args.users, args.minutes, args.load)
    users = ensure_users(args.users)
    root = Path(f"/tmp/gpufair-soak-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    shutil.copy(TRAIN_JOB, root / "train_job.sh")
    (root / "train_job.sh").chmod(0o755)
    (root / "plan.json").write_text(json.dumps(
        {"jobs": [asdict(j) for j in plan.jobs], "acts": [asdict(a) for a in plan.acts]},
        indent=1))
    results: dict[str, dict[str, Any]] = {}
    git_start = git_state()   # the daemon re-imports the tree at every restart: note both ends
    try:
        results["gpufair"] = run_mode("gpufair", args, plan, users, root)
        if args.baseline:
            results["slurm"] = run_mode("slurm", args, plan, users, root)
    except KeyboardInterrupt:
        print(f"interrupted; cleaned up (run dir {root})", file=sys.stderr)
        return 130
    table = render(results, args.policy)
    print(table)
    out = Path(f"{root}.json")
    out.write_text(json.dumps({"args": vars(args), "git_start": git_start,
                               "git_end": git_state(), "run_dir": str(root),
                               "plan": {"jobs": len(plan.jobs), "acts": len(plan.acts)},
                               "results": results, "table": table}, indent=1, default=str))
    print(f"\nJSON: {out}  run dir: {root}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

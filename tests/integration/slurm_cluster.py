"""Helpers for the loopback-Slurm integration tests: the cluster handle, config, daemon."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "slurm"
TRAIN_JOB = Path(__file__).with_name("train_job.sh")


#: job states that hold nothing and never run again
ENDED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                   "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"})


@dataclass
class Cluster:
    base: Path
    env: dict[str, str]
    restd_port: int

    @property
    def hook_dir(self) -> Path:
        return self.base / "gpufair"

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              errors="replace", timeout=30, check=check)

    def sbatch(self, name: str, workdir: Path, *, nodes: int = 1, gpus_per_node: int = 4,
               steps: int = 16, step_s: float = 0.5) -> str:
        out = self.run("sbatch", "--parsable", "-J", name, "-o", str(workdir / f"{name}.log"),
                       "--open-mode=append", "-N", str(nodes), f"--gres=gpu:{gpus_per_node}",
                       str(TRAIN_JOB), str(workdir), str(steps), str(step_s)).stdout
        return out.strip().split(";")[0]

    def jobs(self) -> dict[str, dict[str, Any]]:
        doc = json.loads(self.run("squeue", "--all", "--states=all", "--json").stdout)
        return {str(j["job_id"]): j for j in doc["jobs"]}

    def nodes(self) -> dict[str, dict[str, Any]]:
        doc = json.loads(self.run("sinfo", "--json").stdout)
        return {n["name"]: n for n in doc["nodes"]}

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.3)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; "
                             f"jobs: {[(k, v['job_state']) for k, v in self.jobs().items()]}")

    def clear(self) -> None:
        """Cancel every job and wait until nothing holds resources.

        Cancelled again on every poll, not once: a job caught mid-requeue (REQUEUED,
        CONFIGURING, ...) when the first scancel ran comes back PENDING or RUNNING later."""
        def left() -> list[str]:
            ids = [k for k, j in self.jobs().items() if j["job_state"] not in ENDED]
            if ids:
                self.run("scontrol", "resume", *ids, check=False)
                self.run("scancel", *ids, check=False)
            return ids
        self.wait_for("an empty queue", lambda: not left(), 60)

    def drained(self) -> list[str]:
        return [name for name, n in self.nodes().items()
                if {"DRAIN", "DRAINED", "DRAINING"} & set(n.get("state_flags") or ())
                or str(n.get("state")).lower() in ("drain", "drained", "down")]


def write_config(path: Path, cluster: Cluster, store: Path, **daemon: Any) -> Path:
    lines = ["[daemon]"]
    # min_runtime_s 0: these tests watch the policy's own decisions at 2 s rounds (the 30 s
    # default would stop every preemption a test waits for)
    settings = {"round_s": 2, "max_preempt_share": 1.0, "min_runtime_s": 0,
                "hook_dir": str(cluster.hook_dir), "metrics_port": 0, **daemon}
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    lines += ["[policies.las]", "queue_thresholds_gpu_s = [40]",
              "[slurm]", 'managed_partitions = ["gpu"]',
              "[store]", f"path = {json.dumps(str(store))}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_daemon(cluster: Cluster, config: Path, log: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gpufair.cli.main", "serve", "--config",
                             str(config), *extra], env=cluster.env,
                            stdout=subprocess.DEVNULL, stderr=log.open("ab"))


def stop_daemon(proc: subprocess.Popen) -> None:
    """SIGTERM (the daemon finishes its current action), then SIGKILL after 20 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_daemon_between_rounds(proc: subprocess.Popen, log: Path, timeout: float = 60.0
                               ) -> None:
    """Stop the daemon right after it ends a timer round, then as :func:`stop_daemon`.

    The daemon stops after its current *action*: a SIGTERM in the middle of a round leaves
    the rest of that round in the journal, and the next ``serve`` finishes it first (its
    recovery) before it plans a round of its own, so a dry run of the stopped cluster cannot
    show what that ``serve`` does. Right after a timer round the next round is at least
    ``event_min_interval_s`` (5 s) away: a stop then falls between rounds. The daemon's JSON
    log says when a round ended (its ``round`` event, the last thing a round logs)."""
    offset = log.stat().st_size if log.exists() else 0
    pending = b""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        with log.open("rb") as stream:
            stream.seek(offset)
            chunk = stream.read()
        offset += len(chunk)
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "round" \
                    and event.get("preemptive") is True:
                stop_daemon(proc)
                return
        time.sleep(0.02)
    stop_daemon(proc)   # no round ended in time: stopped anyway (the caller's checks tell)


def store_rounds(store_path: Path) -> int:
    """How many rounds the daemon's store holds: the tests' clock of its progress."""
    from gpufair.plugin.store import Store
    store = Store(store_path)
    try:
        return int(store.db.execute("SELECT count(*) FROM rounds").fetchone()[0])
    finally:
        store.close()

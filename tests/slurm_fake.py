"""An in-memory stand-in for slurmctld, for unit tests of the daemon's journal and recovery.

It speaks the adapter's Transport interface with v0.0.38-shaped documents and models only
what the daemon relies on: held jobs, release onto the pinned nodes, requeue(hold) with
restart counts, suspend/resume. Every verb is counted so tests can prove "never repeated".
The real behaviour is covered by the integration tests against the loopback Slurm.
"""

from __future__ import annotations

from collections import Counter

from gpufair.adapters.slurm.hostlist import expand_hostlist
from gpufair.adapters.slurm.transport import CommandResult


class Crash(BaseException):
    """Raised to simulate SIGKILL at a chosen point (BaseException: nothing catches it)."""


class FakeSlurm:
    name = "fake"

    def __init__(self, nodes: dict[str, tuple[str, int]]) -> None:
        self.node_gres = nodes
        self.jobs: dict[str, dict] = {}
        self.verbs: Counter[tuple[str, str]] = Counter()
        self.crash_after: tuple[str, str] | None = None   # (verb, job): crash once it's done
        self.clock = 1000.0
        self.reads = 0                                    # squeue documents served
        self.many: list[tuple[str, tuple[str, ...]]] = []  # calls for several jobs at once
        self.unavailable_after: int | None = None   # calls answered before Slurm goes away

    def submit(self, job_id: str, gpus_per_node: int, nodes: int = 1, *, held: bool = True
               ) -> None:
        self.jobs[job_id] = {
            "job_id": int(job_id), "job_state": "PENDING", "partition": "gpu",
            "state_reason": "JobHeldUser" if held else "Priority", "priority": 0 if held else 1,
            "admin_comment": "gpufair:managed", "nodes": "", "node_count": nodes,
            "tres_per_node": f"gres:gpu:{gpus_per_node}", "tres_per_job": "",
            "gres_detail": [], "submit_time": self.clock + int(job_id), "start_time": 0,
            "restart_cnt": 0, "user_name": "u", "account": "", "nice": None,
            "standard_output": f"/tmp/{job_id}.out"}

    def run_now(self, job_id: str, nodes: list[str]) -> None:
        job = self.jobs[job_id]
        per = int(job["tres_per_node"].rsplit(":", 1)[1])
        gpu_type = self.node_gres[nodes[0]][0]
        job.update(job_state="RUNNING", state_reason="None", priority=1, nodes=",".join(nodes),
                   node_count=len(nodes), start_time=self.clock,
                   gres_detail=[f"gpu:{gpu_type}:{per}(IDX:0-{per - 1})" for _ in nodes])

    # ---- Transport ------------------------------------------------------------------------
    def read_jobs(self) -> dict:
        self.reads += 1
        return {"errors": [], "jobs": [dict(j) for j in self.jobs.values()]}

    def read_nodes(self) -> dict:
        return {"errors": [], "nodes": [
            {"name": n, "state": "idle", "state_flags": [], "partitions": ["gpu"],
             "gres": f"gpu:{t}:{c}"} for n, (t, c) in self.node_gres.items()]}

    def control_many(self, verb: str, job_ids: list[str]) -> dict[str, CommandResult]:
        """As ``scontrol VERB 1,2,3``: each id in turn, each its own outcome (a crash
        between two ids leaves the first carried out, as a kill mid-call could)."""
        self.many.append((verb, tuple(job_ids)))
        return {job_id: self.control(verb, job_id) for job_id in job_ids}

    def control(self, verb: str, job_id: str, fields: dict | None = None) -> CommandResult:
        if self.unavailable_after is not None:
            if self.unavailable_after <= 0:
                return CommandResult(False, "scontrol: no answer in 10 s", unavailable=True)
            self.unavailable_after -= 1
        self.verbs[(verb, job_id)] += 1
        job = self.jobs.get(job_id)
        if job is None:
            return CommandResult(False, "Invalid job id specified")
        if verb == "update" and set(fields or {}) == {"AdminComment"}:   # a reason shown
            job["admin_comment"] = (fields or {})["AdminComment"]
        elif verb == "update":
            job["pinned"] = expand_hostlist((fields or {}).get("NodeList", job.get("pinned", "")))
            job["required_nodes"] = ",".join(job["pinned"])
        elif verb == "release":
            if job["job_state"] != "PENDING":
                return CommandResult(False, "Job is not pending")
            self.run_now(job_id, job["pinned"])
        elif verb in ("requeuehold", "requeue"):
            if job["job_state"] != "RUNNING":
                return CommandResult(False, "Job is not running")
            job.update(job_state="PENDING", nodes="", gres_detail=[], priority=0,
                       restart_cnt=job["restart_cnt"] + 1,
                       # 22.05 resets submit_time to the requeue (never before the submission)
                       submit_time=max(self.clock, job["submit_time"]),
                       state_reason="job requeued in held state")
        elif verb == "suspend":
            job["job_state"] = "SUSPENDED"
        elif verb == "resume":
            job["job_state"] = "RUNNING"
        if self.crash_after == (verb, job_id):
            self.crash_after = None
            raise Crash(f"killed after {verb} {job_id}")
        return CommandResult(True, verb)

"""``gpufair dry-run``: the daemon's round on a saved cluster state, and why it decides so.

It is not a separate decision path: it builds the daemon ``serve`` would build from the same
configuration (policy and its options, seed, round length, guards, soft/hard mode, solver) and
runs one round of it against a :class:`~gpufair.adapters.recording.RecordingAdapter`, so it
prints exactly the actions ``serve`` would take on that state. With ``--store`` it starts
from a copy of the daemon's store (job history, policy state); the store is never written.

Input is a gpufair snapshot (``gpufair snapshot --slurm``: the state the daemon's round sees)
or raw ``squeue --json`` + ``sinfo --json`` files, read through the Slurm adapter's own
snapshot logic. Nothing reads the clock: "now" is the snapshot's time (for raw files, the
latest timestamp in them), so the same input and configuration print the same bytes.

A store whose last round was cut off (the daemon stopped or crashed between two of its
actions) makes ``serve`` finish that round before it plans its own (``Daemon.recover``). The
dry run lists those actions first, as ``recovering``: they are not planned from the snapshot,
and the round after them runs on what Slurm then shows, which no saved snapshot holds.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufair.cli.output import seed
from gpufair.cli.report import add_report_option, report_after
from gpufair.core.gc_pause import gc_paused
from gpufair.errors import InputError
from gpufair.model import Action, ClusterState, Job, JobState, Preempt, SetPriority
from gpufair.plugin.wording import SLURM, Words, describe, verb, words_for

if TYPE_CHECKING:   # the daemon's modules load only when a dry run runs: every gpufair
    # command builds this parser, and importing them cost each one ~0.3 s of start-up
    from gpufair.adapters.slurm.adapter import SlurmAdapter
    from gpufair.core.config import Config
    from gpufair.core.round import RoundResult
    from gpufair.plugin.daemon import Daemon
    from gpufair.plugin.store import JournalEntry, Store


def add_parsers(sub: argparse._SubParsersAction) -> None:
    dry = sub.add_parser("dry-run", help="what the daemon would do with a saved state, and why")
    dry.add_argument("snapshot", nargs="?", help="gpufair snapshot JSON")
    dry.add_argument("--squeue", help="raw `squeue --json` output instead of a snapshot")
    dry.add_argument("--sinfo", help="raw `sinfo --json` output (with --squeue)")
    dry.add_argument("--assoc-mgr", metavar="FILE", help="saved `scontrol show assoc_mgr "
                     "flags=assoc,qos` output (with --squeue): the association and QOS "
                     "limits the daemon reads ahead; a job one forbids waits, with why")
    dry.add_argument("--partitions", help="managed partitions for raw Slurm files "
                     "(comma-separated; default: [slurm] managed_partitions)")
    dry.add_argument("--config", help="gpufair.toml: the daemon's policy, options, guards")
    dry.add_argument("--policy", help="override [daemon] policy")
    dry.add_argument("--seed", type=seed, help="override [daemon] seed")
    dry.add_argument("--store", help="start from (a copy of) the daemon's state store")
    dry.add_argument("--json", action="store_true",
                     help="one JSON object: the decisions (with the policy's reason for each"
                     " job), actions and held-back actions")
    dry.add_argument("--out", metavar="DIR", help="also write the results directory DIR "
                     "(docs/FORMATS.md section 9): each node's GPUs and their jobs before and "
                     "after the actions, each action with its reason; for `gpufair report`")
    add_report_option(dry)
    dry.set_defaults(func=run)


@dataclass(frozen=True)
class Decision:
    job_id: str
    tenant: str
    state: str
    gpus: int
    now_on: str
    decision: str
    planned_on: str
    why: str
    #: the policy's own reason for the job (code and figures: docs/explain.md), "" if none
    reason: str = ""


@gc_paused   # one process, one round: decoding squeue and explaining every job, too, make
# millions of objects and no cycles; the collector walked them all again and again (with it
# on, a quarter of a 100,000-job dry run's CPU went to decoding and explaining, issue 30)
def run(args: argparse.Namespace) -> int:
    from gpufair.adapters.recording import RecordingAdapter
    from gpufair.core.config import load_config
    from gpufair.model.snapshot import load_snapshot
    from gpufair.plugin.service import build_daemon
    from gpufair.plugin.store import scratch_copy
    if args.snapshot is None and args.squeue is None:
        raise InputError("dry-run", "give a snapshot file, or --squeue and --sinfo")
    if args.assoc_mgr is not None and args.squeue is None:
        raise InputError("dry-run", "--assoc-mgr goes with --squeue and --sinfo (a snapshot "
                         "holds only the jobs the limits already let through)")
    config = load_config(args.config)
    if args.seed is not None:
        config = replace(config, daemon=replace(config.daemon, seed=args.seed))
    slurm = None
    taken_by = None
    if args.snapshot is not None:
        source: Any = load_snapshot(args.snapshot)
        taken_by = snapshot_adapter(args.snapshot)
    else:
        slurm = raw_slurm_adapter(config, args.squeue, args.sinfo, args.partitions,
                                  args.assoc_mgr)
        source = slurm
    adapter = RecordingAdapter(source)
    recovering: list[JournalEntry] = []
    with scratch_copy(args.store) as store:
        daemon = build_daemon(config, adapter, store, policy=args.policy, dry_run=True)
        if taken_by is not None:        # a YARN snapshot is explained in YARN's words
            daemon.words = words_for(taken_by, config.daemon.adapter)
        if args.store:
            daemon.restore_policy_state()
            recovering = interrupted_actions(store)
        daemon.run_round(preemptive=True)
    result = daemon.last
    if result is None:   # the recording adapter cannot be unavailable; be explicit anyway
        raise InputError("dry-run", "no round was run")
    left = []
    waiting: tuple[tuple[Job, str], ...] = ()
    if slurm is not None and slurm.last_view is not None:
        seen = {j.id for j in result.state.jobs}
        left = [j for j in slurm.last_view.state.active_jobs() if j.id not in seen]
        waiting = slurm.last_view.waiting
    rows = explain(result, adapter.recorded, daemon) + [
        Decision(j.id, j.tenant, j.state.value, j.gpus, _nodes(j.gpus_held), "left to Slurm",
                 "", "not held by gpufair (unmanaged partition or released already)")
        for j in left] + [
        Decision(j.id, j.tenant, j.state.value, j.gpus, "", "waits", "", why)
        for j, why in waiting]
    if args.json:   # what could not be read is on stderr too (the adapter's warnings)
        skipped = slurm.last_view.problems if slurm and slurm.last_view else ()
        print(render_json(daemon.policy.name, result, rows, skipped, recovering))
    else:
        print(render_table(daemon.policy.name, result, rows, recovering, daemon.words))
    if args.out is not None or args.report is not None:
        write_results(args, daemon.policy.name, result, adapter.recorded, rows)
    return 0


def write_results(args: argparse.Namespace, policy: str, result: RoundResult,
                  recorded: list[Action], rows: list[Decision]) -> None:
    """``--out``, ``--report``: the dry run as a results directory, and its report (pandas,
    jinja2 and matplotlib load for these options only)."""
    from gpufair.results import input_file
    from gpufair.results.dry_run import write_dry_run
    inputs: dict[str, Any] = {
        "snapshot": input_file(args.snapshot if args.snapshot is not None else args.squeue),
        "sinfo": None if args.sinfo is None else input_file(args.sinfo),
        "config": None if args.config is None else input_file(args.config),
        "store": args.store, "policy": policy, "seed": args.seed,
        "partitions": args.partitions}
    state = result.state
    metrics = {"policy": policy, "time_s": state.time_s, "gpus": state.gpu_count(),
               "jobs": len(state.active_jobs()), "actions": len(recorded),
               "held_back": len(result.deferred), "reason": result.plan.reason}
    report_after(args.out, args.report, lambda out: write_dry_run(
        out, policy=policy, state=state, actions=recorded,
        reasons={r.job_id: f"{r.decision}: {r.why}" for r in rows},
        held_back=[(d.action, d.reason) for d in result.deferred], metrics=metrics,
        inputs=inputs, command=args.argv))


def snapshot_adapter(path: str) -> str | None:
    """The adapter that took a snapshot (its ``source.adapter``), if the file says."""
    try:
        with open(path, encoding="utf-8") as handle:
            source = json.load(handle).get("source")
    except (OSError, ValueError, AttributeError):
        return None          # load_snapshot has read it already: only the metadata is missing
    adapter = source.get("adapter") if isinstance(source, dict) else None
    return adapter if isinstance(adapter, str) else None


def interrupted_actions(store: Store) -> list[JournalEntry]:
    """The actions ``serve`` carries out first on this store: those of its interrupted rounds
    not done yet (nor done by an earlier round under the same key), in journal order. Each
    is still checked against Slurm then; one already in effect is only marked done."""
    from gpufair.plugin.store import APPLYING, PLANNED
    out: list[JournalEntry] = []
    for round_id in store.unfinished_rounds():
        entries = [e for e in store.journal(round_id) if e.status in (PLANNED, APPLYING)]
        done = store.done_keys([e.key for e in entries if e.key], round_id)
        out += [e for e in entries if e.key not in done]
    return out


def raw_slurm_adapter(config: Config, squeue: str, sinfo: str | None,
                      partitions: str | None, assoc_mgr: str | None = None) -> SlurmAdapter:
    from gpufair.adapters.slurm.adapter import SlurmAdapter
    from gpufair.adapters.slurm.transport import FileTransport
    if sinfo is None:
        raise InputError("dry-run", "--squeue needs --sinfo too")
    jobs = _read_json(squeue, "jobs")
    nodes = _read_json(sinfo, "nodes")
    saved = {} if assoc_mgr is None else _read_assoc_mgr(assoc_mgr)
    settings = config.slurm
    if partitions is not None:
        settings = replace(settings, managed_partitions=tuple(
            p for p in partitions.split(",") if p))
    latest = _latest_time(jobs)
    return SlurmAdapter(FileTransport(jobs, nodes, saved), settings, clock=lambda: latest,
                        mode=config.daemon.mode)


def _read_assoc_mgr(path: str) -> dict[tuple[str, ...], str]:
    """The saved limits, as the file transport answers the daemon's read of them; text
    22.05 does not print is an error naming its line (the daemon's live read would go on
    without limits, but a file given on purpose is checked)."""
    from gpufair.adapters.slurm.limits import ASSOC_MGR_ARGV, BadLimits, parse_assoc_mgr
    try:
        text = Path(path).read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from exc
    try:
        parse_assoc_mgr(text)
    except BadLimits as exc:
        raise InputError(path, exc.problem, line=exc.line) from None
    return {ASSOC_MGR_ARGV: text}


def _read_json(path: str, key: str) -> dict[str, Any]:
    from gpufair.adapters.slurm.job_fields import loads_jobs
    try:
        text = Path(path).read_bytes().decode("utf-8", "replace")
        data = loads_jobs(text) if key == "jobs" else json.loads(text)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from exc
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise InputError(path, f"expected the output of {'squeue' if key == 'jobs' else 'sinfo'}"
                         f" --json (an object with a {key!r} list)", field=key)
    return data


def _latest_time(doc: Mapping[str, Any]) -> float:
    """The newest event in the document (a pending job's start_time is a forecast: skipped)."""
    keys = ("submit_time", "start_time", "suspend_time")
    times = [0.0]
    for job in doc.get("jobs", ()):
        if not isinstance(job, dict):
            continue
        for key in keys[:1] if job.get("job_state") == "PENDING" else keys:
            value = job.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and 0 <= value < 1e11:   # a finite epoch time (not NaN, not 10**400)
                times.append(float(value))
    return max(times)


def explain(result: RoundResult, recorded: list[Action], daemon: Daemon) -> list[Decision]:
    """One row per active job: the action the round took on it (or held back), and why."""
    state, plan = result.state, result.plan
    acted = {a.job_id: a for a in recorded}
    held = {d.action.job_id: d for d in result.deferred}
    placed = plan.by_job()
    ranked = sorted(plan.priorities.items(), key=lambda kv: (-kv[1], kv[0]))
    rank = {job_id: i + 1 for i, (job_id, _) in enumerate(ranked)}
    free_after = state.gpu_count() - sum(a.size for a in plan.assignments)
    name = daemon.policy.name
    words = daemon.words
    rows = []
    for job in state.active_jobs():
        action = acted.get(job.id)
        assignment = placed.get(job.id)
        order = f"rank {rank[job.id]}/{len(rank)}" if job.id in rank else "unranked"
        if isinstance(action, SetPriority):
            decision = "priority"
            why = f"{order}; soft mode: {words.rm} places ({action.priority:g})"
        elif isinstance(action, Preempt):
            decision, why = words.preempt, f"{order}; its GPUs go to higher-ranked {words.jobs}"
        elif action is not None:
            decision = type(action).__name__.lower()
            why = f"{order}; placed by {name}" if decision in ("start", "resume") else \
                f"{order}; the plan gives it {assignment.size if assignment else 0} GPUs " \
                "elsewhere"
        elif job.id in held:
            decision = f"not {verb(held[job.id].action, words)}"
            why = f"{order}; held back: {held[job.id].reason}"
        elif assignment is not None:
            decision, why = "keep", f"{order}; stays where it runs"
        elif job.state is JobState.SUSPENDED:
            decision, why = "stay suspended", f"{order}; not in the plan"
        else:
            decision = "keep running" if job.state is JobState.RUNNING else "wait"
            why = f"{order}; asks {job.gpus} GPUs, {free_after} free after the plan"
        told = result.decisions.get(job.id)
        rows.append(Decision(job.id, job.tenant, job.state.value, job.gpus,
                             _nodes(job.gpus_held), decision,
                             _nodes(assignment.gpu_ids) if assignment else "", why,
                             told.reason.text() if told is not None else ""))
    return rows


def _nodes(gpu_ids: tuple[str, ...]) -> str:
    counts: dict[str, int] = {}
    for gpu in gpu_ids:
        node = gpu.rpartition(":")[0]
        counts[node] = counts.get(node, 0) + 1
    return ",".join(f"{n}:{c}" for n, c in counts.items())


def render_json(policy: str, result: RoundResult, rows: list[Decision],
                skipped: Sequence[str] = (), recovering: Sequence[JournalEntry] = ()) -> str:
    state: ClusterState = result.state
    data = {"policy": policy, "time_s": state.time_s, "reason": result.plan.reason,
            "gpus": state.gpu_count(), "jobs": [row.__dict__ for row in rows],
            "recovering": [{"round": e.round_id, "kind": type(e.action).__name__,
                            "job_id": e.action.job_id, "key": e.key,
                            "gpu_ids": list(getattr(e.action, "gpu_ids", ()))}
                           for e in recovering],
            "actions": [{"kind": type(a).__name__, "job_id": a.job_id, "key": k,
                         "gpu_ids": list(getattr(a, "gpu_ids", ()))}
                        for a, k in zip(result.actions, result.keys, strict=True)],
            "deferred": [{"kind": type(d.action).__name__, "job_id": d.action.job_id,
                          "reason": d.reason} for d in result.deferred],
            "skipped": list(skipped)}
    return json.dumps(data, sort_keys=True, indent=2, allow_nan=False)


def render_table(policy: str, result: RoundResult, rows: list[Decision],
                 recovering: Sequence[JournalEntry] = (), words: Words = SLURM) -> str:
    state = result.state
    header = (words.job, "tenant", "state", "gpus", "now on", "decision", "planned on", "why")
    cells = [header] + [(r.job_id, r.tenant, r.state, str(r.gpus), r.now_on or "-", r.decision,
                         r.planned_on or "-", r.why) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header) - 1)]
    lines = [f"serve first finishes interrupted round {e.round_id}: "
             f"{describe(e.action, words)}" for e in recovering]
    if recovering:
        lines.append(f"(unless {words.rm} already shows them; the round after them plans on"
                     f" what {words.rm} then shows, which this state does not)")
    lines += [f"policy {policy} at t={state.time_s:g} on {state.gpu_count()} GPUs: "
              f"{result.plan.reason} (dry run: nothing applied)"]
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True))
                     + "  " + row[-1])
    return "\n".join(lines)

"""Wiring from the configuration to a running daemon: round, store, profiler, metrics, logs.

The resource manager comes in from the caller (``gpufair.cli.slurm`` builds the Slurm
adapter; YARN's will come the same way), so nothing here knows which one it drives. ``serve``
and ``dry-run`` build their daemon with the same :func:`build_daemon`: the only differences
are the adapter (live, or recording) and the store (the daemon's, or a scratch copy).
"""

from __future__ import annotations

import logging
import signal
from dataclasses import replace
from pathlib import Path

from gpufair.adapters.base import ResourceManager
from gpufair.core.config import Config
from gpufair.core.enrich import measure, with_default_profiles
from gpufair.core.round import Enricher, Round
from gpufair.plugin.daemon import Daemon, ServiceSettings
from gpufair.plugin.events import read_key
from gpufair.plugin.lock import InstanceLock
from gpufair.plugin.logs import setup_logging
from gpufair.plugin.metrics import Metrics, serve_metrics
from gpufair.plugin.store import Store, scratch_copy
from gpufair.plugin.wording import words_for
from gpufair.policy.registry import create_policy
from gpufair.profiler.profiler import Profiler
from gpufair.profiler.store import JsonOffsetStore

log = logging.getLogger("gpufair.service")


def live_round(config: Config, *, policy: str | None = None,
               profiler: Profiler | None = None) -> Round:
    """The round of a live cluster: history is merged by the daemon's store; measured
    profiles from the jobs' logs (when a profiler is given), neutral ones for the rest."""
    enrichers: list[Enricher] = []
    if profiler is not None:
        enrichers.append(lambda state: measure(state, profiler))
    enrichers.append(with_default_profiles)
    name = policy or config.daemon.policy
    return Round(create_policy(name, config.policy_config(name)), config.daemon.rules(),
                 enrichers=enrichers, explain=True)


def daemon_profiler(store_path: str) -> Profiler:
    """Log offsets beside the store, so a restarted daemon reads only what is new; reports
    may reuse a window estimate up to half a window old (no re-sort per job per round)."""
    path = Path(store_path)
    return Profiler(JsonOffsetStore(str(path.with_name(path.name + ".logs.json"))),
                    exact_reports=False)


def build_daemon(config: Config, adapter: ResourceManager, store: Store, *,
                 policy: str | None = None, profiler: Profiler | None = None,
                 dry_run: bool = False, metrics: Metrics | None = None,
                 shadow: bool = False) -> Daemon:
    d = config.daemon
    settings = ServiceSettings(round_s=d.round_s, dry_run=dry_run or shadow, shadow=shadow,
                               action_interval_s=d.action_interval_s,
                               apply_batch=d.apply_batch, hook_dir=d.hook_dir,
                               event_min_interval_s=d.event_min_interval_s,
                               poll_s=d.poll_s, poll_soon_s=d.poll_soon_s,
                               wake_group=d.wake_group, event_listen=d.event_listen,
                               event_key=read_key(d.event_key_file) if d.event_key_file
                               else None,
                               keep_finished_s=config.store.keep_finished_s,
                               keep_rounds_s=config.store.keep_rounds_s,
                               explain_socket=None if dry_run else d.explain_socket,
                               admin_group=d.admin_group)
    daemon = Daemon(adapter, live_round(config, policy=policy, profiler=profiler), store,
                    settings, metrics or Metrics())
    daemon.words = words_for(getattr(adapter, "name", None), d.adapter)
    return daemon


def serve(config: Config, adapter: ResourceManager, *, dry_run: bool = False,
          policy: str | None = None, max_rounds: int | None = None,
          verbose: bool = False, shadow: bool = False) -> int:
    """The daemon. ``shadow``: beside the resource manager's own scheduler, before gpufair
    acts (docs/shadow.md) — every round planned as in hard mode, every action recorded and
    none taken (a recording adapter: nothing is sent, not even a job's reason), and what the
    resource manager itself did recorded next to the plan in the daemon's store, for
    ``gpufair shadow-report``. ``adapter`` must read every job (Slurm: soft mode, as no
    job_submit.lua holds them)."""
    setup_logging(json_lines=config.daemon.log_format == "json", verbose=verbose)
    if dry_run:
        return _serve_dry(config, adapter, policy, max_rounds)
    lock = InstanceLock(config.store.path).acquire()
    store = Store(config.store.path)
    try:
        if shadow:
            from gpufair.adapters.recording import RecordingAdapter
            adapter = RecordingAdapter(adapter)
            config = replace(config, daemon=replace(config.daemon, mode="hard"))
        daemon = build_daemon(config, adapter, store, policy=policy, shadow=shadow,
                              profiler=daemon_profiler(config.store.path))
        _run(daemon, config, max_rounds, metrics=True)
    finally:
        store.close()
        lock.release()
    return 0


def _serve_dry(config: Config, adapter: ResourceManager, policy: str | None,
               max_rounds: int | None) -> int:
    """``serve --dry-run`` touches nothing of the daemon's: a scratch copy of its store (no
    lock: the real daemon may be running), a private hook dir (its spool is the real
    daemon's to consume), no metrics port, no event listener. It wakes on its timer and its
    poll only, and every action goes to a recording adapter."""
    from gpufair.adapters.recording import RecordingAdapter
    existing = config.store.path if Path(config.store.path).is_file() else None
    with scratch_copy(existing) as store:
        scratch = Path(store.path).parent
        (scratch / "hooks").mkdir(mode=0o700)   # private: nobody else's hooks come here
        config = replace(config, daemon=replace(
            config.daemon, hook_dir=str(scratch / "hooks"), event_listen=None,
            event_key_file=None))
        daemon = build_daemon(config, RecordingAdapter(adapter), store, policy=policy,
                              dry_run=True, profiler=daemon_profiler(store.path))
        _run(daemon, config, max_rounds, metrics=False)
    return 0


def _run(daemon: Daemon, config: Config, max_rounds: int | None, *, metrics: bool) -> None:
    port = config.daemon.metrics_port
    server = None
    if metrics and port > 0:
        server = serve_metrics(daemon.metrics, config.daemon.metrics_host, port)
        log.info("metrics on http://%s:%d/metrics", *server.server_address[:2],
                 extra={"fields": {"event": "metrics", "port": server.server_address[1]}})

    def stop(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping after the current action", signum)
        daemon.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    dry_run = daemon.settings.dry_run
    from gpufair import __version__
    from gpufair.profiler.scan import NATIVE
    log.info("gpufair %s serving: policy %s, mode %s, adapter %s%s; log scanner %s", __version__,
             daemon.policy.name, config.daemon.mode, daemon.adapter.name,
             " (dry run)" if dry_run else "", "native" if NATIVE else
             "pure Python (GPUFAIR_NATIVE_SCANNER=1 builds the native one: docs/deploy.md)",
             extra={"fields": {"event": "start", "policy": daemon.policy.name,
                               "dry_run": dry_run, "version": __version__,
                               "native_scanner": NATIVE}})
    try:
        daemon.serve(max_rounds=max_rounds)
    finally:
        if server is not None:
            server.shutdown()

"""Wiring from gpufair.toml to a running daemon: adapter, policy, store, metrics, logs."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any

from gpufair.adapters.slurm import CliTransport, RestTransport, SlurmAdapter, SlurmSettings
from gpufair.core.config import Config
from gpufair.errors import InputError
from gpufair.model import PreemptMode
from gpufair.plugin.daemon import Daemon, DaemonSettings
from gpufair.plugin.logs import setup_logging
from gpufair.plugin.metrics import Metrics, serve_metrics
from gpufair.plugin.service_config import ServiceConfig, service_config
from gpufair.plugin.store import Store
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import create_policy
from gpufair.profiler.profiler import Profiler
from gpufair.profiler.store import JsonOffsetStore

log = logging.getLogger("gpufair.service")


def build_adapter(slurm: dict[str, Any], *, mode: str = "hard") -> SlurmAdapter:
    timeout = float(slurm.get("timeout_s", 10))
    cli = CliTransport(timeout_s=timeout)
    transport: Any = cli
    if slurm.get("transport", "cli") == "rest":
        url = slurm.get("rest_url")
        if not url:
            raise InputError("config", "transport rest needs rest_url", field="slurm.rest_url")
        token = None
        if slurm.get("token_file"):
            try:
                token = Path(slurm["token_file"]).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise InputError(slurm["token_file"], f"cannot read token: {exc.strerror}",
                                 field="slurm.token_file") from exc
            token = token.removeprefix("SLURM_JWT=")
        transport = RestTransport(url, user=slurm.get("user"), token=token, timeout_s=timeout,
                                  cli=cli)
    settings = SlurmSettings(
        managed_partitions=tuple(slurm.get("managed_partitions", ("gpu",))), mode=mode,
        retries=int(slurm.get("retries", 3)), backoff_s=float(slurm.get("backoff_s", 0.5)),
        checkpoint_signal=str(slurm.get("checkpoint_signal", "USR1")))
    return SlurmAdapter(transport=transport, settings=settings)


def daemon_settings(section: dict[str, Any], *, dry_run: bool) -> DaemonSettings:
    return DaemonSettings(
        round_s=float(section.get("round_s", 60)), mode=section.get("mode", "hard"),
        dry_run=dry_run, max_preempt_share=float(section.get("max_preempt_share", 0.5)),
        grace_s=float(section.get("grace_s", 0)),
        preempt_mode=PreemptMode(section.get("preempt_mode", "requeue")),
        action_interval_s=float(section.get("action_interval_s", 0)),
        hook_dir=section.get("hook_dir", "/var/spool/gpufair"))


def build_daemon(config: Config, *, dry_run: bool = False, policy: str | None = None
                 ) -> tuple[Daemon, ServiceConfig]:
    svc = service_config(config.sections)
    name = policy or svc.daemon.get("policy", "las")
    settings = daemon_settings(svc.daemon, dry_run=dry_run)
    pconfig = PolicyConfig(round_s=settings.round_s, seed=int(svc.daemon.get("seed", 0)),
                           solver_backend=config.solver.backend or "auto",
                           options=config.policy_options(name))
    adapter = build_adapter(svc.slurm, mode=settings.mode)
    path = Path(svc.store.get("path", "/var/lib/gpufair/state.db"))
    store = Store(path)
    # log offsets beside the store, so a restarted daemon reads only what is new; reports
    # may reuse a window estimate up to half a window old (no re-sort per job per round)
    profiler = Profiler(JsonOffsetStore(str(path.with_name(path.name + ".logs.json"))),
                        exact_reports=False)
    return Daemon(adapter, create_policy(name, pconfig), store, settings, Metrics(),
                  profiler=profiler), svc


def serve(config: Config, *, dry_run: bool = False, policy: str | None = None,
          max_rounds: int | None = None, verbose: bool = False) -> int:
    svc = service_config(config.sections)
    setup_logging(json_lines=svc.daemon.get("log_format", "json") == "json", verbose=verbose)
    daemon, svc = build_daemon(config, dry_run=dry_run, policy=policy)
    port = int(svc.daemon.get("metrics_port", 9464))
    server = None
    if port > 0:
        server = serve_metrics(daemon.metrics, svc.daemon.get("metrics_host", "127.0.0.1"),
                               port)
        log.info("metrics on http://%s:%d/metrics", *server.server_address[:2],
                 extra={"fields": {"event": "metrics", "port": server.server_address[1]}})

    def stop(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping after the current action", signum)
        daemon.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("gpufair serving: policy %s, mode %s%s", daemon.policy.name, daemon.settings.mode,
             " (dry run)" if dry_run else "",
             extra={"fields": {"event": "start", "policy": daemon.policy.name,
                               "dry_run": dry_run}})
    try:
        daemon.serve(max_rounds=max_rounds)
    finally:
        if server is not None:
            server.shutdown()
        daemon.store.close()
    return 0

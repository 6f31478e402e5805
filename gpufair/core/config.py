"""gpufair's configuration: one schema, checked once, one typed object every command reads.

``gpufair.toml`` has these sections; each is a frozen dataclass of options declared with
:func:`gpufair.settings.setting` where its code lives, and :func:`load_config` checks them all
(unknown sections and keys, wrong types, out-of-range values are errors naming the file, the
section and the key):

- ``[solver]``: :class:`SolverOptions` (below);
- ``[daemon]``: :class:`DaemonOptions` (below): the round, its guards, the service;
- ``[slurm]``: :class:`gpufair.adapters.slurm.adapter.SlurmSettings`;
- ``[yarn]``: :class:`gpufair.adapters.yarn.adapter.YarnSettings`;
- ``[store]``: :class:`StoreOptions` (below);
- ``[policies.NAME]``: the ``Options`` class of that policy (``gpufair/policy/...``).

A ``.json`` file is taken as the options of the policy being run, so artifact configuration
files (e.g. Shockwave's ``tacc_32gpus.json``) are accepted as they are.

:meth:`Config.policy_config` is the one place a policy's configuration is put together, for
``simulate``, ``serve`` and ``dry-run`` alike.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpufair.adapters.slurm.adapter import SlurmSettings
from gpufair.adapters.yarn.adapter import YarnSettings
from gpufair.core.round import RoundRules
from gpufair.errors import InputError, parse_json, read_text, too_deep
from gpufair.model import PreemptMode
from gpufair.policy.base import PolicyConfig
from gpufair.policy.registry import policy_class, resolve_policy
from gpufair.settings import describe, parse_settings, setting

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: The round length of the papers' simulators (Gavel, Shockwave) and of the daemon's timer.
DEFAULT_ROUND_S = 120.0
#: The daemon's floor on a job's run time before anything takes its GPUs. Why not 0: a job
#: that started a moment ago has paid its start-up (scheduling, container, data loaders,
#: CUDA init) and nothing more, and rounds act on snapshots a few seconds old, so without a
#: floor a job a fill-only round started between timer rounds was preempted or moved at
#: 0.4-0.8 s of run time by the next one (issue 29). Why 30 s: well below any sane round
#: (the papers' 120 s, the example's 60 s), so a job one timer round started is the policy's
#: to stop at the next; the simulator's rounds have no guards and are not affected.
DEFAULT_MIN_RUNTIME_S = 30.0


@dataclass(frozen=True)
class SolverOptions:
    """``[solver]``: which LP/MILP backend, and how long it may take."""

    backend: str | None = setting(
        None, "auto: Gurobi when licensed for the model, else HiGHS; unset: the caller's"
        " default (artifact simulations use ECOS)", choices=("auto", "gurobi", "highs", "ecos"))
    time_limit_s: float | None = setting(None, "per solve", gt=0.0)
    threads: int | None = setting(None, "solver threads", ge=1)


@dataclass(frozen=True)
class DaemonOptions:
    """``[daemon]``: the policy and round of ``gpufair serve`` (and of ``dry-run``, which is
    the same round), the guards on its actions, and the service around it."""

    policy: str = setting("las", "any installed policy (gpufair policies)")
    adapter: str = setting("slurm", "the resource manager serve drives: slurm ([slurm]) or"
                           " yarn ([yarn])", choices=("slurm", "yarn"))
    round_s: float = setting(DEFAULT_ROUND_S, "timer rounds (may preempt); hook events add"
                             " fill-only rounds", gt=0.0, le=86400.0)
    seed: int = setting(0, "seed of the policy's random choices", ge=0)
    mode: str = setting("hard", "hard: gpufair starts/places/preempts; soft: priorities only",
                        choices=("hard", "soft"))
    max_preempt_share: float = setting(
        0.5, "at most this share of all GPUs taken from running jobs per round (preemptions,"
        " migrations and resizes alike)", ge=0.0, le=1.0)
    min_runtime_s: float = setting(
        DEFAULT_MIN_RUNTIME_S, "a job that started less than this long ago keeps its GPUs"
        " (preemptions, migrations and resizes), whoever started it: a timer round, a"
        " fill-only round or Slurm; keep it below round_s", ge=0.0, le=30 * 86400.0)
    grace_s: float = setting(0.0, "checkpoint signal, then this long, then the preemption",
                             ge=0.0, le=3600.0)
    preempt_mode: str = setting("requeue", "requeue, or suspend (suspended Slurm jobs keep"
                                " their GPUs)", choices=("requeue", "suspend"))
    fill_idle: bool = setting(True, "hard mode: GPUs the plan leaves idle go to waiting jobs"
                              " that fit, until the next timer round (work conservation)")
    poll_s: float = setting(5.0, "between rounds, look this often for new jobs or freed GPUs"
                            " (one snapshot); a change with idle GPUs runs a fill-only round;"
                            " 0: hook events and the timer only", ge=0.0, le=3600.0)
    poll_soon_s: float = setting(1.0, "a hook event or a submission (job_submit.lua's stamp)"
                                 " brings the poll forward, to at least this long after the"
                                 " last one; a poll that finds room for a new or changed job"
                                 " runs its fill-only round at once; 0: off (polls every"
                                 " poll_s only; large sites: docs/deploy.md)",
                                 ge=0.0, le=3600.0)
    action_interval_s: float = setting(0.0, "pause between actions (spreads load on the"
                                       " resource manager): at most 1/this actions a"
                                       " second, a group of apply_batch paused for all"
                                       " its actions at once", ge=0.0, le=60.0)
    apply_batch: int = setting(100, "consecutive actions sent together (Slurm: starts share"
                               " their reads and one scontrol release of all their ids);"
                               " 1: one at a time", ge=1, le=256)
    hook_dir: str = setting("/var/spool/gpufair", "spool and wake socket shared with the"
                            " hooks")
    event_min_interval_s: float = setting(5.0, "hook events coalesce: at most one fill-only"
                                          " round per this many seconds", ge=0.0, le=3600.0)
    wake_group: str | None = setting(None, "group allowed to wake the daemon (SlurmUser's);"
                                     " unset: root and the daemon's user only")
    event_listen: str | None = setting(None, "HOST:PORT where hooks on other hosts send"
                                       " their events (UDP, HMAC-signed); unset: none")
    event_key_file: str | None = setting(None, "shared HMAC key of those events (root and"
                                         " SlurmUser only, like munge's key)")
    explain_socket: str | None = setting(
        "/run/gpufair/explain.sock", "unix socket where `gpufair explain` asks why a job"
        " waits: owners see their own jobs, admins all (docs/explain.md); unset: none")
    admin_group: str | None = setting(None, "group whose members `gpufair explain` any job"
                                      " (besides root, the daemon's user and SlurmUser)")
    metrics_host: str = setting("127.0.0.1", "address of the Prometheus endpoint")
    metrics_port: int = setting(9464, "port of /metrics; 0: no endpoint", ge=0, le=65535)
    log_format: str = setting("json", "json: one object per line; text", choices=("json",
                                                                                  "text"))

    def __post_init__(self) -> None:
        if (self.event_listen is None) != (self.event_key_file is None):
            raise ValueError("event_listen and event_key_file go together")

    def rules(self) -> RoundRules:
        return RoundRules(mode=self.mode, max_preempt_share=self.max_preempt_share,
                          min_runtime_s=self.min_runtime_s, grace_s=self.grace_s,
                          preempt_mode=PreemptMode(self.preempt_mode),
                          fill_idle=self.fill_idle)


@dataclass(frozen=True)
class StoreOptions:
    """``[store]``: where the daemon keeps its journal, history and policy state."""

    path: str = setting("/var/lib/gpufair/state.db", "SQLite database (WAL)")
    keep_finished_s: float = setting(7 * 86400.0, "history of a job is kept this long after"
                                     " it finished (or was last seen)", gt=0.0)
    keep_rounds_s: float = setting(30 * 86400.0, "rounds, their actions and hook events are"
                                   " kept this long", gt=0.0)


SECTIONS: Mapping[str, type] = MappingProxyType({
    "solver": SolverOptions, "daemon": DaemonOptions, "slurm": SlurmSettings,
    "yarn": YarnSettings, "store": StoreOptions})


@dataclass(frozen=True)
class Config:
    source: str = "<defaults>"
    solver: SolverOptions = field(default_factory=SolverOptions)
    daemon: DaemonOptions = field(default_factory=DaemonOptions)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    yarn: YarnSettings = field(default_factory=YarnSettings)
    store: StoreOptions = field(default_factory=StoreOptions)
    #: policy name → its checked options object (from ``[policies.NAME]``)
    policies: Mapping[str, Any] = field(default_factory=dict)
    #: a JSON config file: options of whichever policy runs, checked when it is named
    policy_json: Mapping[str, Any] | None = None

    def policy_config(self, name: str | None = None, *, round_s: float | None = None,
                      seed: int | None = None, recompute_interval_s: float = 0.0,
                      default_backend: str = "auto",
                      preempt_cost_s: float | None = None) -> PolicyConfig:
        """The policy's configuration: [daemon] round and seed unless the caller overrides
        them (a simulation's --round and --seed), [solver], and the policy's own options."""
        name = resolve_policy(name or self.daemon.policy)
        options: Any = self.policies.get(name, {})
        if self.policy_json is not None:
            options = self.policy_json
        return PolicyConfig(
            round_s=self.daemon.round_s if round_s is None else round_s,
            recompute_interval_s=recompute_interval_s,
            seed=self.daemon.seed if seed is None else seed,
            solver_backend=self.solver.backend or default_backend,
            solver_time_limit_s=self.solver.time_limit_s, solver_threads=self.solver.threads,
            options=options, options_source=self.source, preempt_cost_s=preempt_cost_s)


def load_config(path: str | Path | None) -> Config:
    if path is None:
        return Config()
    path = Path(path)
    text = read_text(path, "config")
    if path.suffix == ".json":
        data = parse_json(text, str(path))
        if not isinstance(data, dict):
            raise InputError(str(path), "expected a JSON object of policy options")
        return Config(source=str(path), policy_json=data)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), f"invalid TOML: {exc}") from exc
    except RecursionError:
        raise too_deep(str(path)) from None
    return config_from_dict(data, str(path))


def config_from_dict(data: Mapping[str, Any], source: str = "<config>") -> Config:
    known = [*SECTIONS, "policies"]
    for key in data:
        if key not in known:
            raise InputError(source, f"unknown section; expected one of {', '.join(known)}",
                             field=key)
    sections = {name: parse_settings(cls, data.get(name), source=source, section=name)
                for name, cls in SECTIONS.items()}
    policies = data.get("policies", {})
    if not isinstance(policies, Mapping):
        raise InputError(source, "expected [policies.NAME] tables", field="policies")
    checked: dict[str, Any] = {}
    for raw_name, options in policies.items():
        name = resolve_policy(raw_name, source=source, field=f"policies.{raw_name}")
        schema = getattr(policy_class(name), "Options", None)
        if schema is None:  # a third-party policy without a declared schema checks its own
            checked[name] = options
            continue
        checked[name] = parse_settings(schema, options, source=source,
                                       section=f"policies.{raw_name}",
                                       ignored=getattr(schema, "ARTIFACT_UNUSED", ()))
    resolve_policy(sections["daemon"].policy, source=source, field="daemon.policy")
    lease, period = sections["yarn"].lease_s, sections["daemon"].round_s
    if 0 < lease <= 2 * period:   # renewed at a round once less than half is left
        raise InputError(source, f"must be over twice [daemon] round_s ({period:g} s): a"
                         " lease is renewed at a round once less than half of it is left,"
                         " and a shorter one would end between two rounds",
                         field="yarn.lease_s", value=lease)
    return Config(source=source, policies=checked, **sections)


def schema_rows() -> list[tuple[str, str, Any, str]]:
    """Every option of every section (policies included): the reference table."""
    from gpufair.policy.registry import available_policies
    rows = [row for name, cls in SECTIONS.items() for row in describe(cls, name)]
    for name in available_policies():
        schema = getattr(policy_class(name), "Options", None)
        if schema is not None:
            rows += describe(schema, f"policies.{name}")
    return rows

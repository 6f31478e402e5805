"""The ``[daemon]``, ``[slurm]`` and ``[store]`` sections of gpufair.toml, validated.

```toml
[daemon]
policy = "las"              # any registered policy
round_s = 60                # timer rounds (preemptive); hook events add fill-only rounds
mode = "hard"               # hard: gpufair starts/places/preempts; soft: priorities only
max_preempt_share = 0.5     # at most this share of all GPUs preempted per round
grace_s = 30                # checkpoint signal, then this long, then requeue
preempt_mode = "requeue"    # or "suspend" (suspended jobs keep their GPUs!)
action_interval_s = 0       # pause between actions
hook_dir = "/var/spool/gpufair"
metrics_host = "127.0.0.1"
metrics_port = 9464         # 0: no endpoint
log_format = "json"         # or "text"

[slurm]
transport = "cli"           # cli | rest
rest_url = "unix:/run/slurmrestd.sock"   # or http://127.0.0.1:6820 (+ user, token_file)
managed_partitions = ["gpu"]
timeout_s = 10
retries = 3

[store]
path = "/var/lib/gpufair/state.db"
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufair.errors import InputError

_NUM = (int, float)
DAEMON_KEYS: dict[str, Any] = {
    "policy": str, "round_s": _NUM, "mode": str, "max_preempt_share": _NUM, "grace_s": _NUM,
    "preempt_mode": str, "action_interval_s": _NUM, "hook_dir": str, "metrics_host": str,
    "metrics_port": int, "log_format": str, "seed": int,
}
SLURM_KEYS: dict[str, Any] = {
    "transport": str, "rest_url": str, "user": str, "token_file": str,
    "managed_partitions": list, "timeout_s": _NUM, "retries": int, "backoff_s": _NUM,
    "checkpoint_signal": str,
}
STORE_KEYS: dict[str, Any] = {"path": str}
_CHOICES = {"daemon.mode": ("hard", "soft"), "daemon.preempt_mode": ("requeue", "suspend"),
            "daemon.log_format": ("json", "text"), "slurm.transport": ("cli", "rest")}


@dataclass(frozen=True)
class ServiceConfig:
    daemon: dict[str, Any] = field(default_factory=dict)
    slurm: dict[str, Any] = field(default_factory=dict)
    store: dict[str, Any] = field(default_factory=dict)


def check_section(data: Any, name: str, keys: Mapping[str, Any], source: str
                  ) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(source, "expected a table", field=name)
    for key, value in data.items():
        kind = keys.get(key)
        where = f"{name}.{key}"
        if kind is None:
            raise InputError(source, f"unknown key; expected one of {sorted(keys)}",
                             field=where)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise InputError(source, "wrong type", field=where, value=value)
        if where in _CHOICES and value not in _CHOICES[where]:
            raise InputError(source, f"expected one of {', '.join(_CHOICES[where])}",
                             field=where, value=value)
        if isinstance(value, (int, float)) and value < 0:
            raise InputError(source, "must be >= 0", field=where, value=value)
    share = data.get("max_preempt_share")
    if share is not None and not 0 <= share <= 1:
        raise InputError(source, "must be between 0 and 1", field=f"{name}.max_preempt_share",
                         value=share)
    parts = data.get("managed_partitions")
    if parts is not None and not all(isinstance(p, str) and p for p in parts):
        raise InputError(source, "expected a list of partition names",
                         field=f"{name}.managed_partitions", value=parts)
    return dict(data)


def service_config(sections: Mapping[str, Any], source: str = "<config>") -> ServiceConfig:
    return ServiceConfig(daemon=check_section(sections.get("daemon"), "daemon", DAEMON_KEYS,
                                              source),
                         slurm=check_section(sections.get("slurm"), "slurm", SLURM_KEYS,
                                             source),
                         store=check_section(sections.get("store"), "store", STORE_KEYS,
                                             source))

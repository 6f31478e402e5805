"""Policy registry: built-ins plus anything installed under the ``gpufair.policies`` entry-point
group, so a site can add its own policy without forking gpufair."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from gpufair.errors import InputError
from gpufair.policy.base import Policy, PolicyConfig

BUILTIN = {
    "fifo": "gpufair.policy.fifo:FifoPolicy",
    "srtf": "gpufair.policy.srtf:SrtfPolicy",
    "las": "gpufair.policy.las:LasPolicy",
    "max_min": "gpufair.policy.max_min:MaxMinPolicy",
    "max_sum_throughput": "gpufair.policy.max_sum_throughput:MaxSumThroughputPolicy",
    "min_total_duration": "gpufair.policy.min_total_duration:MinTotalDurationPolicy",
    "themis": "gpufair.policy.themis.policy:ThemisPolicy",
    "shockwave": "gpufair.policy.shockwave.policy:ShockwavePolicy",
}
ALIASES = {"gavel": "max_min", "max_min_fairness": "max_min", "mst": "max_sum_throughput",
           "max_sum_throughput_perf": "max_sum_throughput", "ossp": "min_total_duration",
           "tiresias": "las"}


def _targets() -> dict[str, str]:
    targets = dict(BUILTIN)
    for ep in entry_points(group="gpufair.policies"):
        targets.setdefault(ep.name, ep.value)
    return targets


def available_policies() -> tuple[str, ...]:
    return tuple(sorted(_targets()))


def create_policy(name: str, config: PolicyConfig | None = None) -> Policy:
    key = ALIASES.get(name, name)
    targets = _targets()
    if key not in targets:
        raise InputError("--policy", f"unknown policy; available: {', '.join(sorted(targets))}",
                         field="policy", value=name)
    module, _, attr = targets[key].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    return cls(config or PolicyConfig())

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
    "gandiva_fair": "gpufair.policy.gandiva_fair.policy:GandivaFairPolicy",
    "afs": "gpufair.policy.afs.policy:AfsPolicy",
    "oef": "gpufair.policy.oef.policy:OefPolicy",
    "slurm_backfill": "gpufair.policy.slurm_backfill:SlurmBackfillPolicy",
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


def resolve_policy(name: str, *, source: str = "--policy", field: str = "policy") -> str:
    """The registered name of ``name`` (aliases resolved), or an error listing what is there."""
    key = ALIASES.get(name, name)
    targets = _targets()
    if key not in targets:
        raise InputError(source, f"unknown policy; available: {', '.join(sorted(targets))}",
                         field=field, value=name)
    return key


def policy_class(name: str) -> type:
    """The class of a registered policy. Its ``Options`` (a settings dataclass) is the
    schema of ``[policies.NAME]``; a third-party class without one gets its table as is."""
    module, _, attr = _targets()[resolve_policy(name)].partition(":")
    return getattr(importlib.import_module(module), attr)


def create_policy(name: str, config: PolicyConfig | None = None) -> Policy:
    return policy_class(name)(config or PolicyConfig())

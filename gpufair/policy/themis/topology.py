"""Placement sensitivity: the slowdown S(G) of a bundle and the placement score 1/S.

S depends only on the *placement level* of a gang, the highest level of the hierarchy its
GPUs span (the paper's appendix: "Slowdown is determined by the slowest network interconnect
between the machines"), so it is a lookup, not a function of GPU ids. Levels here are
machine < rack < cluster (slots are not modelled by the cluster model). Defaults are the
paper's crude pre-profiling values (footnote 3); per-model tables come from profiles, from the
options, or from the throughput files' ``*_unconsolidated`` entries.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpufair.model import ClusterState, node_of

LEVELS = ("machine", "rack", "cluster")
DEFAULT_SLOWDOWN: Mapping[str, float] = {"machine": 1.0, "rack": 1.1, "cluster": 1.3}


@dataclass(frozen=True)
class Topology:
    """GPU → machine → rack, grouped by GPU type (a gang never mixes types)."""

    machine_of: Mapping[str, str]
    rack_of: Mapping[str, str]  # machine → rack
    type_of: Mapping[str, str]  # machine → GPU type
    machines: tuple[str, ...] = field(default=())

    @classmethod
    def of(cls, state: ClusterState) -> Topology:
        machine_of, rack_of, type_of = {}, {}, {}
        for node in state.usable_nodes():
            rack_of[node.name] = node.rack or node.switch or "rack-0"
            type_of[node.name] = node.gpu_type
            for g in node.gpu_ids():
                machine_of[g] = node.name
        return cls(machine_of, rack_of, type_of, tuple(rack_of))

    def level(self, gpus: Iterable[str]) -> str:
        """The highest hierarchy level the GPUs span ("machine" for one GPU or none)."""
        machines = {self.machine_of.get(g, node_of(g)) for g in gpus}
        if len(machines) <= 1:
            return "machine"
        racks = {self.rack_of.get(m, "rack-0") for m in machines}
        return "rack" if len(racks) == 1 else "cluster"


@dataclass(frozen=True)
class SlowdownModel:
    """Per-model S by level; unknown models use ``default``. S is non-decreasing by level."""

    default: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_SLOWDOWN))
    per_model: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def slowdown(self, model: str | None, level: str, gpus: int) -> float:
        if gpus <= 1:
            return 1.0
        table = self.per_model.get(model or "", self.default)
        value = 1.0
        for lv in LEVELS:  # monotone even if a profile is noisy
            value = max(value, float(table.get(lv, self.default.get(lv, 1.0))))
            if lv == level:
                return value
        raise ValueError(f"unknown placement level {level!r}")

    def score(self, model: str | None, level: str, gpus: int) -> float:
        """The paper's placement score (≤ 1), inversely proportional to S."""
        return 1.0 / self.slowdown(model, level, gpus)

    @classmethod
    def from_options(cls, options: Any) -> SlowdownModel:
        """From Themis's options (``slowdown``, ``slowdown_per_model``)."""
        default = dict(DEFAULT_SLOWDOWN)
        default.update({k: float(v) for k, v in options.slowdown.items()})
        per_model = {m: {k: float(v) for k, v in t.items()}
                     for m, t in options.slowdown_per_model.items()}
        return cls(default, per_model)


def slowdowns_from_unconsolidated(
        consolidated: Mapping[str, Mapping[tuple[str, int], float]],
        unconsolidated: Mapping[str, Mapping[tuple[str, int], float]],
        model_of: Mapping[str, str] | None = None) -> dict[str, dict[str, float]]:
    """Per-model S at the cross-machine level: the median over GPU types and gang sizes > 1
    of consolidated / unconsolidated throughput (Table 1's 103.6 / 80.4 for VGG16).

    ``model_of`` maps a job type ("ResNet-18 (batch size 32)") to the model name the job
    record carries; by default the text before " (" is the model. Cross-rack uses the same
    ratio scaled by the default cluster/rack ratio, as no trace measures it.
    """
    ratios: dict[str, list[float]] = {}
    for gpu_type, table in unconsolidated.items():
        for (job_type, sf), spread in table.items():
            packed = consolidated.get(gpu_type, {}).get((job_type, sf))
            if sf <= 1 or not packed or not spread or spread <= 0:
                continue
            model = (model_of or {}).get(job_type, job_type.split(" (")[0])
            ratios.setdefault(model, []).append(max(1.0, packed / spread))
    scale = DEFAULT_SLOWDOWN["cluster"] / DEFAULT_SLOWDOWN["rack"]
    return {m: {"machine": 1.0, "rack": statistics.median(r),
                "cluster": statistics.median(r) * scale} for m, r in sorted(ratios.items())}

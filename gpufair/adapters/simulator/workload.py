"""Per-model constants and batch-size adaptation rules of the Shockwave workload.

Two different rule sets exist on purpose (SIMULATION.md §1): the *profile* rules (§1.2-1.3)
give each job's per-epoch batch sizes and hence T_exclusive, the denominator of the
finish-time-fairness ρ; the *run-time* rules (§1.4) decide when a running job actually
switches. The artifact's numbers come from that mismatch, so both are kept verbatim.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from gpufair.model import Adaptation

#: module names for the modes: an enum member read through its class costs ~0.1 µs on Python
#: 3.11, and the switch rules ask for every active job at every round boundary
_ACCORDION, _GNS = Adaptation.ACCORDION, Adaptation.GNS

SAMPLES_PER_EPOCH = {
    "ResNet-18": 50_000, "ResNet-50": 100_000, "Transformer": 10_000, "LM": 59_675,
    "Recommendation": 117_907, "A3C": 4, "CycleGAN": 6_287,
}
# Largest batch size an adapting job may reach (Accordion's target, GNS's cap).
MAX_BATCH = {"ResNet-18": 256, "ResNet-50": 128, "Transformer": 128, "LM": 80,
             "Recommendation": 8192}
# Accordion's profile keeps b0 for Transformer (and models without a batch size).
_ACCORDION_PROFILE_MAX = {m: b for m, b in MAX_BATCH.items() if m != "Transformer"}

# GNS stages: (model, b0, sf) -> ((start epoch, multiplier), ...)
GNS_STAGES: dict[tuple[str, int, int], tuple[tuple[int, int], ...]] = {
    ("ResNet-18", 16, 1): ((31, 2), (41, 4), (51, 8), (71, 16)),
    ("ResNet-18", 32, 1): ((21, 2), (31, 4), (51, 8)),
    ("ResNet-18", 64, 1): ((11, 2), (31, 4)),
    ("ResNet-18", 128, 1): ((11, 2),),
    ("ResNet-18", 16, 2): ((21, 2), (31, 4), (91, 8), (111, 16)),
    ("ResNet-18", 32, 2): ((11, 2), (21, 4), (41, 8)),
    ("ResNet-18", 64, 2): ((21, 2), (41, 4)),
    ("ResNet-18", 128, 2): ((41, 2),),
    ("ResNet-18", 16, 4): ((11, 2), (21, 4), (81, 8), (91, 16)),
    ("ResNet-18", 32, 4): ((21, 2), (31, 4), (61, 8)),
    ("ResNet-18", 64, 4): ((11, 2), (61, 4)),
    ("ResNet-18", 128, 4): ((11, 2),),
    ("ResNet-50", 64, 1): ((101, 2),),
    ("ResNet-50", 32, 2): ((101, 2), (111, 4)),
    ("ResNet-50", 64, 2): ((81, 2),),
    ("ResNet-50", 32, 4): ((131, 2), (221, 4)),
    ("ResNet-50", 64, 4): ((191, 2),),
    ("LM", 5, 1): ((31, 2), (41, 4), (61, 8), (71, 16)),
    ("LM", 10, 1): ((11, 2), (21, 4), (41, 8)),
    ("LM", 20, 1): ((11, 2), (41, 4)),
    ("LM", 40, 1): ((11, 2),),
    ("LM", 5, 2): ((31, 2), (51, 4), (61, 8), (71, 16)),
    ("LM", 10, 2): ((11, 2), (31, 4), (41, 8)),
    ("LM", 20, 2): ((31, 2), (41, 4)),
    ("LM", 40, 2): ((11, 2),),
    ("LM", 5, 4): ((11, 2), (31, 4), (71, 8), (91, 16)),
    ("LM", 10, 4): ((11, 2), (31, 4), (61, 8)),
    ("LM", 20, 4): ((11, 2), (61, 4)),
    ("LM", 40, 4): ((61, 2),),
    ("Recommendation", 512, 1): ((21, 2), (41, 4), (71, 8), (91, 16)),
    ("Recommendation", 1024, 1): ((21, 2), (51, 4), (91, 8)),
    ("Recommendation", 2048, 1): ((21, 2), (41, 4)),
    ("Recommendation", 4096, 1): ((41, 2),),
}


def samples_per_epoch(model: str) -> int | None:
    return SAMPLES_PER_EPOCH.get(model)


@lru_cache(maxsize=4096)
def iterations_per_epoch(model: str, batch_size: int) -> int:
    """Cached: a simulator asks for every running job at every event, over a handful of
    (model, batch size) pairs."""
    return math.ceil(SAMPLES_PER_EPOCH[model] / batch_size)


def num_epochs(model: str, b0: int, total_steps: int) -> int:
    return math.ceil(total_steps / iterations_per_epoch(model, b0))


def _accordion_critical_profile(model: str, b0: int, e: int) -> bool:
    if model == "ResNet-18":
        head = 20 if b0 == 256 else 10
        return e < head or 150 <= e < 160 or 250 <= e < 260
    if model == "ResNet-50":
        return e < 600 and e % 30 < 10
    if model == "LM":
        return e < 10
    if model == "Recommendation":
        return e < _recommendation_head(b0) or 60 <= e < 70 or 80 <= e < 90
    return True


def _recommendation_head(b0: int) -> int:
    return {512: 30, 1024: 30, 2048: 40}.get(b0, 10)


def accordion_profile(model: str, b0: int, n: int) -> list[int]:
    top = _ACCORDION_PROFILE_MAX.get(model)
    if top is None:
        return [b0] * n
    return [top if not _accordion_critical_profile(model, b0, e) and e > 0.3 * n else b0
            for e in range(n)]


def gns_batch(model: str, b0: int, sf: int, epoch: int) -> int:
    """GNS batch size of one epoch, without the profile's quirks (the run-time look-ahead)."""
    stages = GNS_STAGES.get((model, b0, sf), ())
    multiplier = 1
    for start, factor in stages:
        if epoch < start:
            break
        multiplier = factor
    return min(MAX_BATCH.get(model, b0), b0 * multiplier) if multiplier > 1 else b0


def gns_schedule(model: str, b0: int, sf: int, n: int) -> list[int]:
    """The profile's per-epoch GNS batch sizes, with the artifact's two quirks (§1.3)."""
    stages = GNS_STAGES.get((model, b0, sf))
    if not stages or n <= stages[0][0]:
        return [b0] * n
    sizes = [gns_batch(model, b0, sf, e) for e in range(n)]
    if len(stages) >= 2 and n - 1 >= stages[1][0]:
        sizes[-1] = b0  # the final epoch keeps b0 once it falls in stage 2 or later
    return sizes


@lru_cache(maxsize=4096)
def epoch_profile(model: str, b0: int, sf: int, mode: Adaptation, n: int) -> tuple[int, ...]:
    if mode is Adaptation.ACCORDION:
        return tuple(accordion_profile(model, b0, n))
    if mode is Adaptation.GNS:
        return tuple(gns_schedule(model, b0, sf, n))
    return (b0,) * n


def exclusive_time(model: str, batch_sizes: Sequence[int],
                   rate_at: Callable[[int], float | None]) -> float:
    """T_exclusive = Σ_e (D / b_e) / θ(b_e): D/b, not ceil, exactly as the artifact."""
    d = SAMPLES_PER_EPOCH[model]
    total = 0.0
    for b, epochs in Counter(batch_sizes).items():
        rate = rate_at(b)
        if not rate:
            return math.inf
        total += epochs * ((d / b) / rate)
    return total


@dataclass
class SwitchFlags:
    up: bool = False
    down: bool = False


def update_switch_flags(flags: SwitchFlags, model: str, mode: Adaptation, b0: int, b_cur: int,
                        sf: int, epoch: int) -> None:
    """Run-time rules of §1.4, evaluated at a round boundary with c = ``epoch``."""
    top = MAX_BATCH.get(model)
    at_max = top is not None and b_cur == top
    if mode is _ACCORDION:
        if model == "ResNet-18":
            critical = _accordion_critical_profile(model, b0, epoch)
        elif model == "ResNet-50":
            critical = epoch % 30 < 10
        elif model == "LM":
            critical = epoch < 10
        elif model == "Recommendation":
            critical = epoch < _recommendation_head(b0)
        else:
            return  # Transformer and models without adaptation never switch
        if b_cur == b0 and not critical and not at_max:
            flags.up = True
        if b_cur != b0 and critical:
            flags.down = True
    elif mode is _GNS:
        ahead = max(gns_batch(model, b0, sf, epoch), gns_batch(model, b0, sf, epoch + 1))
        if ahead > b_cur and not at_max:
            flags.up = True


def next_batch_size(flags: SwitchFlags, model: str, mode: Adaptation, b0: int,
                    b_cur: int) -> int | None:
    """Batch size a pending flag asks for (None: nothing to apply). Clears the flag used."""
    if flags.up:
        flags.up = False
        return 2 * b_cur if mode is _GNS else MAX_BATCH.get(model, b_cur)
    if flags.down:
        flags.down = False
        return b0
    return None


def rescale_steps(model: str, total_steps: int, steps_run: int, b_old: int,
                  b_new: int) -> tuple[int, int]:
    """The artifact's step conversion: keeps the epoch count, rounds a partial epoch up."""
    ipe_old = iterations_per_epoch(model, b_old)
    ipe_new = iterations_per_epoch(model, b_new)
    epochs = math.ceil(total_steps / ipe_old)
    new_total = math.ceil(total_steps * b_old / b_new)
    if math.ceil(new_total / ipe_new) != epochs:
        new_total = ipe_new * epochs
    new_run = math.ceil(steps_run / ipe_old) * ipe_new
    return new_total, new_run

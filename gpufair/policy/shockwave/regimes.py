"""Shockwave's Bayesian prediction of batch-size regimes (paper §5, spec §3).

A job's regime *configurations* are fixed by its adaptation rule (Accordion alternates two
batch sizes, GNS doubles up to a limit, static has one), so only how many epochs each regime
lasts is uncertain. The prior is Dir(E/K, ..., E/K) over K regimes; when regime k ends after
m_k epochs the "restatement" update keeps the observed m_1..m_k and splits the remaining
epochs evenly over the regimes still to come. The posterior mean is the single trajectory
the planner uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpufair.model import Adaptation

ACCORDION_REGIMES = 2


def configs_from_now(mode: Adaptation, initial: int, current: int, maximum: int | None,
                     completed: int, accordion_regimes: int = ACCORDION_REGIMES) -> list[int]:
    """Batch sizes of the current regime and of every regime still to come, in order.

    GNS doubles from the current batch size up to the limit (a job at its limit has no future
    regime). Accordion alternates between the initial and the large batch size; its K is
    ``accordion_regimes``, grown to one more than observed when the job has already used
    them up while at the small size (spec §3.4).
    """
    top = maximum or current
    if mode is Adaptation.GNS:
        ladder = [current]
        while ladder[-1] * 2 <= top:
            ladder.append(ladder[-1] * 2)
        return ladder
    if mode is Adaptation.ACCORDION and top != initial:
        regimes = max(accordion_regimes, completed + (2 if current == initial else 1))
        other = top if current == initial else initial
        return [current if i % 2 == 0 else other for i in range(regimes - completed)]
    return [current]


def restated_posterior(epochs: float, regimes: int, completed: Sequence[float]) -> list[float]:
    """Dirichlet concentrations after the restatement rule.

    ``completed`` holds m_1..m_k, the observed lengths of the finished regimes. The result
    sums to ``epochs``: Dir(m_1, ..., m_k, S_k, ..., S_k) with S_k = (E - Σm) / (K - k).
    """
    k = len(completed)
    if k >= regimes:
        return list(completed)
    share = max(0.0, epochs - sum(completed)) / (regimes - k)
    return [*completed, *([share] * (regimes - k))]


@dataclass(frozen=True)
class Trajectory:
    """Predicted remaining epochs per regime (current first) and each regime's epoch time."""

    remaining_epochs: tuple[float, ...]
    epoch_seconds: tuple[float, ...]

    @property
    def remaining_seconds(self) -> float:
        return sum(e * s for e, s in zip(self.remaining_epochs, self.epoch_seconds,
                                         strict=True))

    def epochs_after(self, seconds: float) -> float:
        """Epochs completed after ``seconds`` of exclusive run time (the G_j of spec §2.7)."""
        done = 0.0
        for epochs, per in zip(self.remaining_epochs, self.epoch_seconds, strict=True):
            need = epochs * per
            if seconds >= need:
                done += epochs
                seconds -= need
            else:
                return done + (seconds / per if per > 0 else epochs)
        return done


def predict(epochs_total: int, epochs_done: float, completed: Sequence[float],
            epoch_seconds: Sequence[float]) -> Trajectory:
    """Posterior-mean trajectory from now on (spec §3.2, with the §3.4 edge cases).

    ``completed`` are the lengths m_1..m_k of the finished regimes; ``epoch_seconds`` has one
    entry for the current regime and one per regime still to come (so K = k + its length).
    The current regime has run ``epochs_done - Σm`` epochs; if it has already outlasted its
    predicted share, it is predicted to last one epoch more than seen.
    """
    k = len(completed)
    regimes = k + max(1, len(epoch_seconds))
    remaining = max(0.0, epochs_total - epochs_done)
    if remaining == 0:
        return Trajectory((), ())
    alphas = restated_posterior(epochs_total, regimes, completed)
    in_current = max(0.0, epochs_done - sum(completed))
    future = regimes - k - 1
    current_length = alphas[k] if future else epochs_total - sum(completed)
    if future and current_length <= in_current:
        current_length = in_current + 1
    current_left = min(remaining, max(0.0, current_length - in_current))
    per_future = (remaining - current_left) / future if future else 0.0
    lengths = [current_left] + [per_future] * future
    keep = [(e, s) for e, s in zip(lengths, epoch_seconds, strict=True) if e > 0]
    return Trajectory(tuple(e for e, _ in keep), tuple(s for _, s in keep))

"""``bench/paper_claims.py``'s entitlement-level trading gain, against the Gandiva_fair
paper's own worked example (Table 3): the column that tells a trade's price apart from how the
pools realise it must reproduce the paper's numbers before it explains a gap."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from paper_claims import entitlement_gains


class _Speedups:
    """Rates per GPU in K80 units: Table 3's VAE, DCGAN and ResNext (1.25, 5.0, 6.25x)."""

    def __init__(self, rates: dict[str, float] | None = None) -> None:
        self.rates = rates or {"VAE": 1.25, "DCGAN": 5.0, "ResNext": 6.25}

    def rate(self, gpu_type: str, job_type: str, gpus: int) -> float:
        return (self.rates[job_type] if gpu_type == "v100" else 1.0) * gpus


def test_table_3_of_the_paper():
    """12 V100 + 60 K80, three users: fair 20 K80 + 4 V100 each (aggregates 25, 40, 45 in
    K80 units); after trading A holds 40 K80, B 20 K80 + 4 V100, C 8 V100 (40, 40, 50)."""
    users = (("VAE", 1), ("DCGAN", 1), ("ResNext", 1))
    gains = entitlement_gains(users, "v100:12,k80:60", _Speedups())
    assert gains == pytest.approx({"user1": 40 / 25 - 1, "user2": 0.0, "user3": 50 / 45 - 1})


def test_no_trade_below_the_threshold():
    """Two users whose speedups differ by less than the threshold keep their fair shares."""
    gains = entitlement_gains((("a", 1), ("b", 1)), "v100:4,k80:4",
                              _Speedups({"a": 2.0, "b": 2.1}))
    assert gains == {"user1": 0.0, "user2": 0.0}

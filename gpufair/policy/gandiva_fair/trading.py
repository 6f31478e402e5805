"""Heterogeneity: per-user entitlement to each GPU type, and the automated trade (§3.4-3.5).

A user with share s_u of all tickets is entitled to s_u of every GPU type. Users value fast
GPUs differently (their jobs' measured speedups differ), so for each (fast, slow) pair the
user with the highest speedup buys one fast GPU from the user with the lowest, paying the
second-highest speedup in slow GPUs (a Vickrey price: neither can gain by faking a speed);
with only two bidders they split the surplus (the midpoint). Trades are kept as a list and
replayed on the current base entitlements, so those that a newcomer's share or a departure
makes impossible, or that changed speeds make unprofitable, are undone and logged as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Entitlements = dict[str, dict[str, float]]    # user -> GPU type -> GPUs


@dataclass(frozen=True)
class Trade:
    """``buyer`` (highest speedup) got one ``fast`` GPU from ``seller`` for ``price`` ``slow``
    GPUs. ``undone`` marks the log record of a reversal (the paper logs it as a negative
    rate)."""

    time_s: float
    fast: str
    slow: str
    buyer: str
    seller: str
    price: float
    undone: bool = False

    def as_dict(self) -> dict[str, object]:
        return {"time_s": self.time_s, "fast": self.fast, "slow": self.slow,
                "buyer": self.buyer, "seller": self.seller, "price": self.price,
                "undone": self.undone}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Trade:
        return cls(float(data["time_s"]), str(data["fast"]), str(data["slow"]),
                   str(data["buyer"]), str(data["seller"]), float(data["price"]),
                   bool(data.get("undone", False)))


def base_entitlements(tickets: Mapping[str, float], capacity: Mapping[str, int]
                      ) -> Entitlements:
    """E[u][m] = t_u / sum(t) x N_m: the statically partitioned cluster each user is owed."""
    total = sum(tickets.values())
    return {u: {m: t * n / total for m, n in capacity.items()} for u, t in tickets.items()}


def _apply(ent: Entitlements, trade: Trade, sign: float = 1) -> None:
    ent[trade.buyer][trade.fast] += sign
    ent[trade.seller][trade.fast] -= sign
    ent[trade.buyer][trade.slow] -= sign * trade.price
    ent[trade.seller][trade.slow] += sign * trade.price


def replay(ent: Entitlements, trades: Sequence[Trade],
           speedups: Mapping[tuple[str, str], Mapping[str, float]]
           ) -> tuple[list[Trade], list[Trade]]:
    """Apply the recorded trades in order onto ``ent``; (kept, undone). A trade is kept while
    both users are present, both can still pay (the seller has the fast GPU, the buyer the
    slow ones) and the buyer still values the fast GPU more than the seller does."""
    kept, undone = [], []
    for trade in trades:
        sigma = speedups.get((trade.fast, trade.slow), {})
        ok = trade.buyer in ent and trade.seller in ent \
            and trade.buyer in sigma and trade.seller in sigma \
            and sigma[trade.buyer] > sigma[trade.seller] \
            and ent[trade.seller][trade.fast] >= 1 - 1e-9 \
            and ent[trade.buyer][trade.slow] >= trade.price - 1e-9
        if ok:
            _apply(ent, trade)
            kept.append(trade)
        else:
            undone.append(trade)
    return kept, undone


def second_price(sigma: Mapping[str, float], buyer: str, seller: str) -> float:
    """The highest speedup of the other bidders; the midpoint with two."""
    others = [s for u, s in sigma.items() if u not in (buyer, seller)]
    price = max(others) if others else (sigma[buyer] + sigma[seller]) / 2
    return min(max(price, sigma[seller]), sigma[buyer])


def trade_round(ent: Entitlements, speedups: Mapping[tuple[str, str], Mapping[str, float]],
                demand: Mapping[str, float], now: float, threshold: float) -> list[Trade]:
    """At most one trade per (fast, slow) pair: the buyer is the bidder with the highest
    speedup who still has slow GPUs to pay with and jobs to use one more fast GPU (``demand``:
    the GPUs its jobs ask for), the seller the one with the lowest speedup who still has a
    fast GPU and jobs enough to use the slow GPUs it is paid (else it would lose by it). No
    trade unless the buyer's speedup beats the seller's by more than ``threshold``
    (relative) and the buyer can pay the price. ``speedups`` is ordered
    by the caller (fast types first); changes ``ent`` in place."""
    made = []
    for (fast, slow), sigma in speedups.items():
        bidders = {u: s for u, s in sigma.items() if u in ent}
        if len(bidders) < 2:
            continue
        buyers = [u for u in bidders if ent[u][slow] > 1e-9
                  and demand.get(u, 0) >= ent[u][fast] + 1 - 1e-9]
        if not buyers:
            continue
        buyer = max(buyers, key=lambda u: (bidders[u], u))
        sellers = [u for u in bidders if u != buyer and ent[u][fast] >= 1 - 1e-9]
        if not sellers:
            continue
        seller = min(sellers, key=lambda u: (bidders[u], u))
        if bidders[buyer] <= bidders[seller] * (1 + threshold):
            continue
        price = second_price(bidders, buyer, seller)
        if ent[buyer][slow] < price - 1e-9:
            continue
        if demand.get(seller, 0) < sum(ent[seller].values()) - 1 + price - 1e-9:
            continue   # it could not use the slow GPUs it is paid: the trade would cost it
        trade = Trade(now, fast, slow, buyer, seller, price)
        _apply(ent, trade)
        made.append(trade)
    return made

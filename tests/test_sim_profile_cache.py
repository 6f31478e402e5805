"""The simulator's per-trace caches answer what the throughputs table answers, once per key."""

from __future__ import annotations

from gpufair import data
from gpufair.adapters.simulator.jobs import ProfileCache
from gpufair.adapters.simulator.throughputs import load_throughputs


def test_batch_rates_are_the_tables_and_read_once(monkeypatch) -> None:
    table = load_throughputs(data.path("tacc_throughputs.json"))
    calls = []
    real = type(table).batch_rates

    def counting(self, gpu_type, model, sf):
        calls.append((gpu_type, model, sf))
        return real(self, gpu_type, model, sf)

    monkeypatch.setattr(type(table), "batch_rates", counting)
    cache = ProfileCache(table, table.gpu_types())
    got = cache.batch_rates("v100", "ResNet-18", 1)
    assert got == real(table, "v100", "ResNet-18", 1) and len(got) > 1
    assert [b for b, _ in got] == sorted(b for b, _ in got)   # by batch size
    assert cache.batch_rates("v100", "ResNet-18", 1) is got
    assert cache.batch_rates("v100", "ResNet-18", 2) == real(table, "v100", "ResNet-18", 2)
    assert calls == [("v100", "ResNet-18", 1), ("v100", "ResNet-18", 2)]

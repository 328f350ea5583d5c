"""LoRA adapters: GPU slots with LRU eviction, a batch cap on distinct adapters, and thrash when the working
set outgrows the slots."""

from __future__ import annotations

import numpy as np
import pytest

from engine_model.config import EngineConfig
from engine_model.lora import AdapterCache, adapter_bytes
from engine_model.profiles import get_model
from engine_model.request import Request
from engine_model.simulation import FleetSpec, PoolSpec, Simulation


def test_adapter_bytes_of_a_rank_16_llama_8b_adapter() -> None:
    # 32 layers x 16 x (8192 + 2 x 5120 + 8192 + 3 x 18432) bf16 elements
    assert adapter_bytes(get_model("Llama-3.1-8B"), 16) == 83_886_080
    assert adapter_bytes(get_model("Llama-3.1-8B"), 64) == 4 * 83_886_080


def test_slots_evict_the_least_recently_used_adapter_and_the_host_cache_spares_the_disk() -> None:
    cache = AdapterCache(slots=2, host_slots=3, bytes_per_adapter=24_000_000)
    h2d, disk = cache.load_time_s(False), cache.load_time_s(True)
    assert h2d == pytest.approx(0.001) and disk == pytest.approx(0.013)
    assert cache.activate({1, 2}) == pytest.approx(2 * disk)
    assert cache.activate({1}) == 0.0  # resident: 1 is now the most recently used
    assert cache.activate({3}) == pytest.approx(disk)  # evicts 2, the least recently used
    assert list(cache.gpu) == [1, 3]
    assert cache.activate({2}) == pytest.approx(h2d)  # 2 is still in the host cache
    assert (cache.loads_total, cache.disk_loads_total) == (4, 3)
    with pytest.raises(ValueError):
        cache.activate({4, 5, 6})


def run(adapters: int, max_loras: int, *, host: int = 0, seed: int = 3) -> Simulation:
    """One H100 at a moderate load; each request names one of `adapters` adapters, uniformly."""
    rng = np.random.default_rng(seed)
    t, reqs = 0.0, []
    for i in range(1800):
        t += rng.exponential(1 / 15)
        prompt, output, adapter = int(rng.integers(300, 900)), int(rng.integers(50, 250)), rng.random()
        reqs.append(Request(i, t, prompt, output, prompt_hash=1 + i,
                            lora=1 + int(adapter * adapters) if adapters else 0))
    cfg = EngineConfig().with_changes(max_loras=max_loras, max_cpu_loras=host)
    sim = Simulation(FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 1, cfg)), reqs, [], t + 1)
    sim.run()
    return sim


def mean_e2e(sim: Simulation) -> float:
    cols = sim.req_cols
    return float(np.mean(np.asarray(cols["finish_s"]) - np.asarray(cols["arrival_s"])))


def test_lora_off_ignores_the_adapters_requests_name() -> None:
    plain, named = run(0, 0), run(8, 0)
    assert repr(plain.req_cols["finish_s"]) == repr(named.req_cols["finish_s"])
    assert named.replicas[0].adapters is None


def test_a_working_set_larger_than_the_slots_thrashes() -> None:
    fits, thrash = run(4, 4), run(16, 4)
    a_fits, a_thrash = fits.replicas[0].adapters, thrash.replicas[0].adapters
    assert a_fits is not None and a_thrash is not None
    assert a_fits.loads_total == 4  # each adapter loaded once, then resident
    assert a_thrash.loads_total > 20 * a_fits.loads_total
    # the batch cap (4 distinct adapters a step) and the loads make requests wait
    assert mean_e2e(thrash) > 2.0 * mean_e2e(fits)
    assert set(thrash.req_cols["status"]) == {"ok"}


def test_the_host_cache_turns_disk_reads_into_copies() -> None:
    """Host slots for the whole working set: every adapter comes from disk once, then by copy only."""
    gpu_only, with_host = run(16, 4), run(16, 4, host=16)
    a, b = gpu_only.replicas[0].adapters, with_host.replicas[0].adapters
    assert a is not None and b is not None
    assert a.disk_loads_total == a.loads_total
    assert b.disk_loads_total == 16 and b.loads_total > 100
    assert b.load_s_total < 0.3 * a.load_s_total

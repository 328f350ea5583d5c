"""`servedrill calc` figures: complete, JSON-ready, and identical to what the simulation's models compute."""

from __future__ import annotations

import json
import math

import pytest

from engine_model.config import EngineConfig
from engine_model.estimates import TARGET_UTILIZATION, calc, compute_bound_batch, format_calc
from engine_model.memory import plan_memory
from engine_model.profiles import GPUS, MODELS
from engine_model.step_cost import StepCostModel

REQUIRED = {
    "weight_bytes_total",
    "weight_bytes_per_gpu",
    "kv_bytes_per_token",
    "kv_capacity_tokens",
    "max_concurrent_requests",
    "decode_step_floor_s",
    "decode_step_floor_bound",
    "decode_step_s",
    "compute_bound_batch",
    "prefill_time_s",
    "spec_tokens_per_step",
}


def test_has_required_keys_and_is_json_ready() -> None:
    r = calc("Llama-3.1-8B", "H100-SXM", rps=5.0)
    assert REQUIRED | {"gpus_needed", "gpus_needed_assumption"} <= set(r)
    assert json.loads(json.dumps(r)) == r
    assert "gpus_needed" not in calc("Llama-3.1-8B", "H100-SXM")


def test_figures_come_from_the_simulation_models() -> None:
    r = calc("Llama-3.1-70B", "H100-SXM", tp=4, context=8192, batch=16, kv_dtype="fp8")
    h100 = GPUS["H100-SXM"]  # calc starts from vLLM V1's defaults for the GPU, as the engine does
    cfg = EngineConfig.for_gpu(h100.name, h100.hbm_gib, tensor_parallel_size=4, kv_cache_dtype="fp8",
                               max_model_len=8192)
    cost = StepCostModel(MODELS["Llama-3.1-70B"], GPUS["H100-SXM"], cfg)
    plan = plan_memory(MODELS["Llama-3.1-70B"], GPUS["H100-SXM"], cfg)
    assert r["decode_step_s"] == cost.step_time(0, 0, 16, 16 * 8192)
    assert r["decode_step_floor_s"] == cost.step_time(0, 0, 1, 8192)
    assert r["prefill_time_s"] == cost.prefill_time(8192)
    assert r["kv_capacity_tokens"] == plan.kv_tokens
    assert r["weight_bytes_per_gpu"] == plan.weight_bytes
    assert r["kv_bytes_per_token"] == MODELS["Llama-3.1-70B"].kv_bytes_per_token("fp8")
    # requests of `context` tokens need whole blocks each
    assert r["max_concurrent_requests"] == plan.num_blocks // math.ceil(8192 / plan.block_size)


def test_bounds_and_compute_bound_batch() -> None:
    r = calc("Llama-3.1-8B", "H100-SXM", context=4096, batch=8)
    assert r["decode_step_floor_bound"] == "memory"
    assert r["compute_bound_batch"] is None  # at 4k context KV reads grow as fast as FLOPs
    b = r["compute_bound_batch_short_context"]
    assert 150 <= b <= 400
    cost = StepCostModel(MODELS["Llama-3.1-8B"], GPUS["H100-SXM"], EngineConfig())
    assert cost.breakdown(0, 0, b, b).bound == "compute"
    assert cost.breakdown(0, 0, b - 1, b - 1).bound == "memory"
    # MoE touches every expert once the batch is large, so it needs a much bigger batch to turn compute-bound
    moe = compute_bound_batch(StepCostModel(MODELS["Mixtral-8x7B"], GPUS["H200"], EngineConfig()), 1)
    assert moe is not None and moe > 2 * b


def test_speculation_figures() -> None:
    plain = calc("Llama-3.1-8B", "H100-SXM", context=1024)
    spec = calc("Llama-3.1-8B", "H100-SXM", context=1024, spec_k=4, spec_acceptance=0.8)
    assert spec["spec_tokens_per_step"] == pytest.approx(3.3616)
    assert plain["spec_tokens_per_step"] == 1.0
    assert spec["inter_token_latency_s"] < 0.6 * plain["inter_token_latency_s"]
    assert spec["decode_step_s"] > plain["decode_step_s"]


def test_fp8_kv_doubles_concurrency() -> None:
    base = calc("Qwen2.5-7B", "L40S", context=8192)
    fp8 = calc("Qwen2.5-7B", "L40S", context=8192, kv_dtype="fp8")
    assert fp8["max_concurrent_requests"] >= 2 * base["max_concurrent_requests"] - 1
    # fp8 KV is read at 1 byte per element: decode steps get cheaper, the more so the more KV they read
    assert fp8["decode_step_s"] < base["decode_step_s"]
    big_b, big_f = (calc("Qwen2.5-7B", "L40S", context=8192, batch=32, kv_dtype=d) for d in ("auto", "fp8"))
    assert big_f["decode_step_s"] / big_b["decode_step_s"] < fp8["decode_step_s"] / base["decode_step_s"]


def test_fleet_sizing_scales_with_traffic() -> None:
    low = calc("Llama-3.1-70B", "H100-SXM", tp=4, rps=2.0)
    high = calc("Llama-3.1-70B", "H100-SXM", tp=4, rps=40.0)
    for r in (low, high):
        assert r["gpus_needed"] == r["replicas_needed"] * 4
        assert r["replicas_needed"] * r["replica_capacity_rps"] * TARGET_UTILIZATION >= r["rps"]
        assert (r["replicas_needed"] - 1) * r["replica_capacity_rps"] * TARGET_UTILIZATION < r["rps"]
        assert "80%" in r["gpus_needed_assumption"]
    assert high["replicas_needed"] > 5 * low["replicas_needed"] or low["replicas_needed"] == 1
    assert high["gpus_needed"] > low["gpus_needed"]
    longer = calc("Llama-3.1-70B", "H100-SXM", tp=4, rps=40.0, output=1024)
    assert longer["replica_capacity_rps"] < high["replica_capacity_rps"]


def test_model_that_does_not_fit() -> None:
    r = calc("Llama-3.1-70B", "L40S", rps=1.0)
    assert r["fits"] is False
    assert "No available memory" in r["memory_error"]
    assert r["kv_capacity_tokens"] == 0 and r["gpus_needed"] is None
    assert "does not fit" in r["gpus_needed_assumption"]
    assert "DOES NOT FIT" in format_calc(r)


def test_bad_inputs() -> None:
    with pytest.raises(KeyError, match="H100-SXM"):
        calc("Llama-3.1-8B", "H1000")
    with pytest.raises(KeyError, match="Mixtral"):
        calc("GPT-5", "H100-SXM")
    with pytest.raises(ValueError, match="weight_dtype"):
        calc("Llama-3.1-8B", "H100-SXM", dtype="int3")
    with pytest.raises(ValueError):
        calc("Llama-3.1-8B", "H100-SXM", batch=0)
    note = calc("Llama-2-7B", "H100-SXM", context=8192)["notes"]
    assert note and "max_position" in note[0]


def test_format_calc_shows_units() -> None:
    text = format_calc(calc("Mixtral-8x7B", "H200", dtype="fp8", batch=32, rps=3.0))
    for fragment in ("Mixtral-8x7B", "GiB", " ms", "tokens/s", "KiB", "GPUs needed", "memory-bound"):
        assert fragment in text
    assert "nan" not in text.lower()

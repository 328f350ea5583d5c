"""Start-up memory plan and the step OOM rule."""

from __future__ import annotations

import pytest

from engine_model.config import EngineConfig
from engine_model.memory import (
    cuda_graph_capture_sizes,
    kv_bytes_per_token_per_gpu,
    plan_memory,
    profile_activation_bytes,
    step_activation_bytes,
    weight_bytes_per_gpu,
)
from engine_model.profiles import GIB, GPUS, MODELS

H100 = GPUS["H100-SXM"]
L8 = MODELS["Llama-3.1-8B"]
L70 = MODELS["Llama-3.1-70B"]


def plan(model=L8, gpu=H100, **knobs):
    return plan_memory(model, gpu, EngineConfig(**knobs))


@pytest.mark.parametrize(
    ("model", "gpu", "knobs"),
    [
        ("Llama-3.1-8B", "H100-SXM", {}),
        ("Llama-3.1-8B", "L40S", {"kv_cache_dtype": "fp8"}),
        ("Llama-3.1-70B", "H100-SXM", {"tensor_parallel_size": 4}),
        ("Llama-3.1-70B", "H100-SXM", {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}),
        ("Mixtral-8x7B", "H200", {"weight_dtype": "fp8", "enforce_eager": True}),
        ("Qwen2.5-7B", "A100-80GB", {"tensor_parallel_size": 8}),
    ],
)
def test_plan_invariants(model: str, gpu: str, knobs: dict) -> None:
    p = plan_memory(MODELS[model], GPUS[gpu], EngineConfig(**knobs))
    assert p.total_bytes == GPUS[gpu].hbm_bytes
    assert p.requested_bytes <= p.total_bytes
    assert p.weight_bytes + p.activation_peak_bytes + p.non_torch_bytes + p.kv_bytes <= p.requested_bytes
    assert p.kv_tokens == p.num_blocks * p.block_size
    assert p.num_blocks * p.block_bytes <= p.kv_bytes < (p.num_blocks + 1) * p.block_bytes
    assert p.headroom_bytes == p.total_bytes - p.requested_bytes - p.cuda_graph_bytes
    assert p.kv_tokens >= p.max_model_len


def test_llama8b_on_h100_capacity_from_first_principles() -> None:
    p = plan()
    # 0.9 x 79.19 GiB minus 16.06 GB of weights leaves ~55 GiB before activations: at 128 KiB per token
    # that is ~450k tokens (vLLM logs about this much for this pair)
    assert 420_000 < p.kv_tokens < 470_000
    assert p.weight_bytes == L8.weight_bytes("bf16")
    assert p.max_concurrency == pytest.approx(p.kv_tokens / 32768)


def test_fp8_kv_doubles_capacity() -> None:
    assert plan(kv_cache_dtype="fp8").kv_tokens == pytest.approx(2 * plan().kv_tokens, rel=0.001)


def test_tensor_parallel_splits_weights_and_multiplies_kv_room() -> None:
    one, two = plan(), plan(tensor_parallel_size=2)
    assert two.weight_bytes == pytest.approx(one.weight_bytes / 2, rel=1e-6)
    # each GPU holds half the KV heads and has more free memory: more than twice the tokens
    assert two.kv_tokens > 2 * one.kv_tokens


def test_pipeline_stage_holds_its_layers() -> None:
    cfg = EngineConfig(tensor_parallel_size=2, pipeline_parallel_size=2)
    flat = EngineConfig(tensor_parallel_size=2)
    staged = weight_bytes_per_gpu(L70, cfg)
    assert 0.45 * weight_bytes_per_gpu(L70, flat) < staged < 0.55 * weight_bytes_per_gpu(L70, flat)
    assert kv_bytes_per_token_per_gpu(L70, cfg) == L70.kv_bytes_per_token() // 4


def test_kv_heads_replicate_beyond_their_count() -> None:
    qwen = MODELS["Qwen2.5-7B"]  # 4 KV heads
    per_gpu = [kv_bytes_per_token_per_gpu(qwen, EngineConfig(tensor_parallel_size=tp)) for tp in (1, 2, 4, 8)]
    assert per_gpu[0] == qwen.kv_bytes_per_token()
    assert per_gpu[1] == per_gpu[0] // 2 and per_gpu[2] == per_gpu[0] // 4
    assert per_gpu[3] == per_gpu[2]  # 8 ranks, 4 heads: one head each, replicated


def test_knobs_move_the_plan_the_right_way() -> None:
    base = plan()
    assert plan(gpu_memory_utilization=0.95).kv_tokens > base.kv_tokens
    assert plan(gpu_memory_utilization=0.95).headroom_bytes < base.headroom_bytes
    bigger_budget = plan(max_num_batched_tokens=32768)
    assert bigger_budget.activation_peak_bytes > base.activation_peak_bytes
    assert bigger_budget.kv_tokens < base.kv_tokens
    eager = plan(enforce_eager=True)
    assert eager.cuda_graph_bytes == 0 and eager.headroom_bytes > base.headroom_bytes
    assert 0.2 * GIB < base.cuda_graph_bytes < 2 * GIB
    assert plan(block_size=32).kv_tokens == pytest.approx(base.kv_tokens, abs=32)


def test_capture_sizes_follow_vllm() -> None:
    sizes = cuda_graph_capture_sizes(EngineConfig())
    assert sizes[:4] == [1, 2, 4, 8] and sizes[-1] == 512
    assert len(sizes) == 3 + len(range(8, 256, 8)) + len(range(256, 513, 16))
    assert cuda_graph_capture_sizes(EngineConfig(max_num_seqs=8, max_num_batched_tokens=8192)) == [
        1,
        2,
        4,
        8,
        16,
    ]
    assert cuda_graph_capture_sizes(EngineConfig(enforce_eager=True)) == []


def test_start_up_failures_use_vllms_messages() -> None:
    with pytest.raises(ValueError, match="No available memory for the cache blocks"):
        plan(L70)
    with pytest.raises(ValueError, match=r"max seq len \(32768\)"):
        plan(L70, tensor_parallel_size=2)
    assert plan(L70, tensor_parallel_size=2, max_model_len=8192).kv_tokens >= 8192
    with pytest.raises(ValueError, match="max_num_seqs"):
        plan(max_num_seqs=1024, max_num_batched_tokens=512)


def test_activation_grows_with_tokens_and_sampled_rows() -> None:
    cfg = EngineConfig()
    sizes = [step_activation_bytes(L8, cfg, t, 1) for t in (1, 512, 2048, 8192)]
    assert sizes == sorted(sizes) and sizes[-1] > 4 * sizes[1]
    assert step_activation_bytes(L8, cfg, 256, 256, 256) > step_activation_bytes(L8, cfg, 256, 256, 0)
    # prompt_logprobs over an 8k prompt: fp32 logits for every prompt row are gigabytes
    assert step_activation_bytes(L8, cfg, 8192, 1, 8192) > 20 * GIB


def test_profile_run_underestimates_real_sampling() -> None:
    cfg = EngineConfig(max_num_seqs=1024)
    rows_only_profile = profile_activation_bytes(L8, cfg)
    assert step_activation_bytes(L8, cfg, 1024, 1024, 1024) > rows_only_profile


def test_ordinary_peak_steps_do_not_oom_at_default_utilization() -> None:
    cfg = EngineConfig()
    p = plan_memory(L8, H100, cfg)
    peak_prefill = step_activation_bytes(
        L8, cfg, cfg.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_num_seqs
    )
    full_decode = step_activation_bytes(L8, cfg, cfg.max_num_seqs, cfg.max_num_seqs, cfg.max_num_seqs)
    assert not p.would_oom(peak_prefill)
    assert not p.would_oom(full_decode)
    # and a raised max_num_seqs is still safe at 0.9
    big = EngineConfig(max_num_seqs=1024)
    assert not plan_memory(L8, H100, big).would_oom(step_activation_bytes(L8, big, 1024, 1024, 1024))


@pytest.mark.parametrize("utilization", [0.97, 0.98])
def test_high_utilization_with_many_sequences_ooms_at_a_big_batch(utilization: float) -> None:
    cfg = EngineConfig(gpu_memory_utilization=utilization, max_num_seqs=1024)
    p = plan_memory(L8, H100, cfg)
    assert p.would_oom(step_activation_bytes(L8, cfg, 1024, 1024, 1024))
    # the same utilisation with the default max_num_seqs survives its own biggest batch
    small = cfg.with_changes(max_num_seqs=256)
    assert not plan_memory(L8, H100, small).would_oom(step_activation_bytes(L8, small, 256, 256, 256))


def test_leaks_eat_the_headroom() -> None:
    cfg = EngineConfig()
    p = plan_memory(L8, H100, cfg)
    step = step_activation_bytes(L8, cfg, 256, 256, 256)
    assert not p.would_oom(step, leaked_bytes=p.headroom_bytes // 2)
    assert p.would_oom(step, leaked_bytes=p.headroom_bytes + p.activation_peak_bytes)
    assert p.oom_margin_bytes(step) == p.activation_peak_bytes + p.headroom_bytes - step


def test_startup_log_lines_read_like_vllm() -> None:
    lines = plan().startup_log_lines()
    assert any(line.startswith("Available KV cache memory: ") and line.endswith(" GiB") for line in lines)
    tokens = next(line for line in lines if line.startswith("GPU KV cache size: "))
    assert f"{plan().kv_tokens:,} tokens" in tokens
    assert any("Maximum concurrency for 32,768 tokens per request" in line for line in lines)

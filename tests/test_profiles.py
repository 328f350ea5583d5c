"""Hardware and model figures against published numbers (model cards, datasheets), not against the code."""

from __future__ import annotations

import dataclasses

import pytest

from engine_model.profiles import GIB, GPUS, LINKS, MODELS, get_gpu, get_model

# Published parameter counts (serving-facts 5.2, from the model cards): (total, active) in billions.
PUBLISHED_PARAMS = {
    "Llama-3.1-8B": (8.03, 8.03),
    "Llama-3.1-70B": (70.6, 70.6),
    "Qwen2.5-7B": (7.62, 7.62),
    "Mixtral-8x7B": (46.7, 12.9),
    "Llama-2-7B": (6.74, 6.74),
    "Llama-2-70B": (68.98, 68.98),  # Hugging Face's count for meta-llama/Llama-2-70b-hf: 68,976,648,192
    "Qwen3-8B": (8.19, 8.19),
    "Llama-3.1-405B": (405.9, 405.9),  # Hugging Face's count for meta-llama/Llama-3.1-405B
}
# KV bytes per token in bf16 (serving-facts 5.2), KiB.
PUBLISHED_KV_KIB = {
    "Llama-3.1-8B": 128,
    "Llama-3.1-70B": 320,
    "Qwen2.5-7B": 56,
    "Mixtral-8x7B": 128,
    "Llama-2-7B": 512,
    "Llama-2-70B": 320,  # 80 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
    "Qwen3-8B": 144,
    "Llama-3.1-405B": 504,  # 126 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
}


def test_required_keys_exist() -> None:
    assert {"A100-80GB", "H100-SXM", "H200", "B200", "L40S", "MI300X"} <= set(GPUS)
    assert {"Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-7B", "Mixtral-8x7B", "Llama-2-7B"} <= set(MODELS)
    needed = {"nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5", "infinity_fabric"}
    assert needed | {"ethernet_100g", "infiniband_400g"} <= set(LINKS)


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_model_cards(name: str) -> None:
    total, active = PUBLISHED_PARAMS[name]
    m = MODELS[name]
    assert m.params_total / 1e9 == pytest.approx(total, rel=0.01)
    assert m.params_active / 1e9 == pytest.approx(active, rel=0.01)


@pytest.mark.parametrize("name", sorted(PUBLISHED_KV_KIB))
def test_kv_bytes_per_token_match_published(name: str) -> None:
    m = MODELS[name]
    assert m.kv_bytes_per_token() == PUBLISHED_KV_KIB[name] * 1024
    assert m.kv_bytes_per_token("auto") == m.kv_bytes_per_token("bf16")
    assert m.kv_bytes_per_token("fp8") * 2 == m.kv_bytes_per_token()


def test_weight_bytes_by_dtype() -> None:
    m = MODELS["Llama-3.1-8B"]
    assert m.weight_bytes("bf16") == 2 * m.params_total
    # public FP8 (llm-compressor) and AWQ-INT4 Llama-3.1-8B checkpoints are ~9.1 GB and ~5.7 GB because
    # the embedding and LM head stay 16-bit
    assert 8.9e9 < m.weight_bytes("fp8") < 9.3e9
    assert 5.4e9 < m.weight_bytes("int4") < 6.0e9
    for model in MODELS.values():
        assert model.weight_bytes("int4") < model.weight_bytes("fp8") < model.weight_bytes("bf16")


def test_int4_carries_scale_overhead() -> None:
    m = MODELS["Llama-3.1-70B"]
    quantized_half_byte = m.quantizable_params * 0.5 + 2 * (m.params_total - m.quantizable_params)
    assert m.weight_bytes("int4") > quantized_half_byte
    assert m.weight_bytes("int4") < quantized_half_byte * 1.05


def test_flops_per_token_is_about_twice_active_params() -> None:
    for m in MODELS.values():
        # the embedding lookup is a gather, so FLOPs sit a little under 2 * active parameters
        assert 0.85 * 2 * m.params_active < m.flops_per_token() <= 2 * m.params_active
    mixtral = MODELS["Mixtral-8x7B"]
    assert mixtral.flops_per_token() < 0.35 * 2 * mixtral.params_total


def test_moe_and_bias_flags() -> None:
    assert MODELS["Mixtral-8x7B"].is_moe
    assert not MODELS["Llama-3.1-8B"].is_moe
    qwen = MODELS["Qwen2.5-7B"]
    no_bias = dataclasses.replace(qwen, qkv_bias=False)
    assert qwen.params_total - no_bias.params_total == qwen.num_layers * (qwen.q_dim + 2 * qwen.kv_dim)


def test_compute_figures_are_dense_not_sparse() -> None:
    # sparse figures are double the dense ones: H100 1979 bf16 and L40S 1466 fp8 would be the sparse trap
    assert GPUS["H100-SXM"].bf16_tflops < 1000
    assert GPUS["L40S"].fp8_tflops is not None and GPUS["L40S"].fp8_tflops < 800
    assert GPUS["A100-80GB"].fp8_tflops is None
    for g in GPUS.values():
        if g.fp8_tflops is not None:
            assert g.fp8_tflops == pytest.approx(2 * g.bf16_tflops, rel=0.03)


@pytest.mark.parametrize(
    ("name", "marketing_gb"),
    [("A100-80GB", 80), ("H100-SXM", 80), ("H200", 141), ("B200", 180), ("L40S", 48), ("MI300X", 192)],
)
def test_reported_memory_is_just_below_marketing_capacity(name: str, marketing_gb: float) -> None:
    g = GPUS[name]
    assert 0.9 * marketing_gb < g.hbm_gib < marketing_gb
    assert g.hbm_bytes == int(g.hbm_gib * GIB)


def test_links_and_power_are_physical() -> None:
    assert LINKS["nvlink4"].bw_gbs == 450  # 900 GB/s bidirectional
    assert LINKS["pcie4"].bw_gbs == 32  # 64 GB/s bidirectional
    assert LINKS["nvlink3"].bw_gbs < LINKS["nvlink4"].bw_gbs < LINKS["nvlink5"].bw_gbs
    assert LINKS["pcie4"].bw_gbs < LINKS["pcie5"].bw_gbs < LINKS["nvlink3"].bw_gbs
    for link in LINKS.values():
        assert 0 < link.efficiency <= 1 and link.latency_s > 0
    for g in GPUS.values():
        assert 0 < g.idle_w < 0.25 * g.tdp_w
        assert 1000 < g.sm_clock_mhz < 3000
    assert GPUS["L40S"].link.name == "pcie4"
    assert GPUS["H100-SXM"].hbm_bw_gbs > GPUS["A100-80GB"].hbm_bw_gbs


def test_unknown_names_list_known_ones() -> None:
    with pytest.raises(KeyError, match=r"H100-SXM"):
        get_gpu("H101")
    with pytest.raises(KeyError, match=r"Llama-3\.1-8B"):
        get_model("Llama-9")
    assert get_gpu("B200") is GPUS["B200"]
    assert get_model("Qwen2.5-7B") is MODELS["Qwen2.5-7B"]

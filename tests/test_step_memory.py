"""`servedrill calc` says at what batch a step runs out of memory: checked against a hand calculation from
Llama-3.1-8B's config.json (shared reference serving-facts.md: 32 layers, hidden 4096, 32 query / 8 KV heads
of 128, FFN 14336, vocabulary 128256) and vLLM's start-up arithmetic (vllm-engine-knobs.md section 2), and
against the simulation's own OOM rule."""

from __future__ import annotations

import json

from click.testing import CliRunner

from engine_model.config import EngineConfig
from engine_model.estimates import calc
from engine_model.memory import plan_memory, step_activation_bytes
from engine_model.profiles import GIB, GPUS, MODELS
from engine_model.step_memory import smallest_failing
from game.cli.commands import main

LAYERS, HIDDEN, Q_HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 32, 4096, 32, 8, 128, 14336, 128256
A100_GIB = 79.15  # what an A100-SXM4-80GB reports


def hand_figures(utilization: float, max_num_seqs: int = 256, tokens: int = 2048,
                 context: int = 4096) -> dict[str, int]:
    """The memory plan and the failing steps worked out by hand (bf16 everywhere, TP 1, block 16). The knobs
    default to vLLM V1's for an A100 (256 sequences, 2048 batched tokens: vllm-engine-knobs.md section 1)."""
    q, kv = Q_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    layer = 2 * q * HIDDEN + 2 * kv * HIDDEN + 3 * HIDDEN * FFN + 2 * HIDDEN  # q,o k,v gate,up,down, 2 norms
    params = LAYERS * layer + 2 * VOCAB * HIDDEN + HIDDEN  # untied embedding and LM head, final norm
    weights = 2 * params
    kv_per_token = 2 * KV_HEADS * HEAD_DIM * 2 * LAYERS  # K and V, bf16: 128 KiB
    # activations per token: hidden state and residual plus the widest layer intermediate (gate_up + act)
    per_token = 2 * (2 * HIDDEN + max(q + 2 * kv + q, 3 * FFN))
    # start-up profile: `tokens` tokens, min(tokens, max_num_seqs) greedy rows at 6 bytes per logit
    reservation = max(tokens * per_token, tokens * HIDDEN * 2 + min(tokens, max_num_seqs) * VOCAB * 6)
    total = int(A100_GIB * GIB)
    requested = int(total * utilization)
    kv_bytes = requested - weights - reservation - int(0.4 * GIB)
    blocks = kv_bytes // (16 * kv_per_token)
    top = min(2 * max_num_seqs, 512)
    captures = len([s for s in [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)] if s <= top])
    graphs = top * per_token + captures * LAYERS * (1 << 18)
    budget = reservation + (total - requested - graphs)
    # a decode step of n sequences samples n rows with top-k/top-p buffers: 28 bytes per vocabulary entry
    per_decode_seq = max(per_token, HIDDEN * 2 + VOCAB * 28)
    return {
        "weights": weights,
        "kv_per_token": kv_per_token,
        "reservation": reservation,
        "concurrent": blocks // (context // 16),
        "budget": budget,
        "oom_decode": budget // per_decode_seq + 1,
        "oom_prefill": budget // per_token + 1,  # the forward pass outgrows one row's sampler at this size
    }


def test_llama_8b_on_an_80gb_gpu_matches_the_hand_calculation() -> None:
    hand = hand_figures(0.9)
    r = calc("Llama-3.1-8B", "A100-80GB", context=4096)
    assert r["weight_bytes_per_gpu"] == hand["weights"] and r["kv_bytes_per_token"] == 128 * 1024
    assert r["activation_peak_bytes"] == hand["reservation"]
    assert r["max_concurrent_requests"] == hand["concurrent"] == 111
    assert r["max_running_seqs"] == 111  # the KV cache binds before max_num_seqs 256
    assert r["step_activation_budget_bytes"] == hand["budget"]
    assert r["oom_decode_batch_seqs"] == r["oom_decode_batch_tokens"] == hand["oom_decode"]
    assert 2200 < hand["oom_decode"] < 2400  # about 7.7 GiB / 3.4 MiB per sampled sequence
    assert r["oom_prefill_step_tokens"] == hand["oom_prefill"]
    # the largest step: a whole max_model_len prompt (more than the 2048-token budget) plus 256 decodes
    assert r["largest_step_tokens"] == 4096 + 256 and r["largest_step_fits"] and r["batch_step_fits"]


def test_a_high_memory_share_and_many_sequences_reach_the_failing_batch() -> None:
    hand = hand_figures(0.98, max_num_seqs=1024)
    r = calc("Llama-3.1-8B", "A100-80GB", context=512, gpu_memory_utilization=0.98, max_num_seqs=1024, batch=700)
    assert r["step_activation_budget_bytes"] == hand["budget"]
    assert r["oom_decode_batch_seqs"] == hand["oom_decode"]
    assert hand["oom_decode"] < 1024 <= r["max_running_seqs"] + 100  # short requests get there
    assert not r["largest_step_fits"] and not r["batch_step_fits"]
    assert r["largest_step_sampled_rows"] == 1024


def test_the_answer_is_the_simulations_rule_at_the_boundary() -> None:
    """The step calc names fails under MemoryPlan.would_oom (what a replica crashes on) and one fewer does not,
    with speculative decoding too (k + 1 sampled tokens per sequence)."""
    for spec_k in (0, 3):
        model, gpu = MODELS["Llama-3.1-8B"], GPUS["H100-SXM"]
        config = EngineConfig.for_gpu(gpu.name, gpu.hbm_gib, max_model_len=4096, gpu_memory_utilization=0.97,
                                      num_speculative_tokens=spec_k)
        plan = plan_memory(model, gpu, config)
        r = calc("Llama-3.1-8B", "H100-SXM", gpu_memory_utilization=0.97, spec_k=spec_k)
        n, k1 = r["oom_decode_batch_seqs"], spec_k + 1
        assert r["oom_decode_batch_tokens"] == n * k1
        decode = [step_activation_bytes(model, config, s * k1, s, s * k1) for s in (n - 1, n)]
        assert not plan.would_oom(decode[0]) and plan.would_oom(decode[1])
        p = r["oom_prefill_step_tokens"]
        prefill = [step_activation_bytes(model, config, t, 1, 1) for t in (p - 1, p)]
        assert not plan.would_oom(prefill[0]) and plan.would_oom(prefill[1])


def test_smallest_failing_bisects_and_says_never() -> None:
    assert smallest_failing(lambda n: n >= 1, 100) == 1
    assert smallest_failing(lambda n: n * 7 > 1000, 1 << 20) == 143
    assert smallest_failing(lambda n: False, 100) is None


def test_calc_says_it_in_plain_words_and_under_json() -> None:
    runner = CliRunner()
    args = ["calc", "--model", "Llama-3.1-8B", "--gpu", "A100-80GB", "--gpu-memory-utilization", "0.98",
            "--max-num-seqs", "1024", "--context", "4096"]
    text = runner.invoke(main, args).output
    hand = hand_figures(0.98, max_num_seqs=1024)
    assert f"decode batch runs out at {hand['oom_decode']:,} sequences" in text
    assert "not at this context (122 fit in the KV cache), but shorter requests can reach it" in text
    assert "KV cache holds           122 sequences of 4,096 tokens at once" in text
    assert "RUNS OUT OF MEMORY: a busy engine crashes" in text
    data = json.loads(runner.invoke(main, [*args, "--json"]).output)
    assert data["oom_decode_batch_seqs"] == hand["oom_decode"] and data["max_num_seqs"] == 1024
    bad = runner.invoke(main, [*args[:5], "--max-num-seqs", "0"])
    assert bad.exit_code == 1 and "max_num_seqs and max_num_batched_tokens must be at least 1" in bad.output
    assert "Traceback" not in bad.output

"""Start-up memory plan (how many KV blocks a replica gets) and the activation memory of one step.

Follows vLLM V1 start-up arithmetic (shared reference `vllm-engine-knobs.md` section 2):

1. requested = total device memory * gpu_memory_utilization (a fraction of TOTAL memory, per instance).
2. A profile run pushes max_num_batched_tokens tokens spread over min(tokens, max_num_seqs) dummy requests
   through the model, then samples one row per request; its peak is the activation reservation.
3. available KV = requested - (weights + activation peak + non-torch memory); "No available memory for the
   cache blocks" when that is not positive.
4. num_blocks = available // (page bytes per layer * layers), page = 2 * block_size * kv_heads * head_dim
   * dtype bytes (K and V); capacity in tokens = num_blocks * block_size.
5. CUDA graphs are captured after the KV cache is allocated. In the v0.11-era code modelled here their
   memory is NOT inside the utilisation budget: it comes out of the (1 - utilisation) remainder, so at
   0.97-0.98 little is left (vllm-project/vllm#11251, #19186, #57475). Newer releases subtract an estimate.

Why a step can out-run its reservation: vLLM's own profiling note (v1 gpu_model_runner
`_dummy_sampler_run`) says the profile's sampler may skip top-k, top-p and logprobs and so use less memory
than real execution. Here the profile run materialises PROFILE_SAMPLER_BYTES_PER_LOGIT per vocabulary entry
per row and a real step RUNTIME_SAMPLER_BYTES_PER_LOGIT, so a step OOMs when

    step_activation_bytes(...) + leaked_bytes > activation_peak_bytes + headroom_bytes

which at 0.9 utilisation never happens for an ordinary step, and at 0.97-0.98 with a large max_num_seqs
happens once a big batch samples with top-k/top-p. All sizes are bytes; GiB = 2**30 bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine_model.config import EngineConfig
from engine_model.profiles import GIB, GPUProfile, ModelProfile, kv_element_bytes, weight_element_bytes
from engine_model.records import frozen_reduce

MIB = 1 << 20

# Non-torch memory: CUDA context, cuBLAS workspaces, NCCL buffers. 0.39 GiB on one GPU in the V0 start-up
# log quoted in vllm-project/vllm#11251; the multi-GPU extra for NCCL and custom all-reduce buffers is an
# assumption.
NON_TORCH_BYTES = int(0.4 * GIB)
NON_TORCH_MULTI_GPU_BYTES = int(0.35 * GIB)

# Sampler working set per vocabulary entry per sampled row. Profile run (greedy path, top-k/top-p/logprobs
# skipped): bf16 logits plus their fp32 copy. Runtime with top-k/top-p and logprobs: bf16 and fp32 logits,
# sorted values (fp32) and indices (int64), probabilities, log-probabilities and a cumulative sum/mask.
PROFILE_SAMPLER_BYTES_PER_LOGIT = 6
RUNTIME_SAMPLER_BYTES_PER_LOGIT = 28

# CUDA graphs: one private pool sized by the largest captured batch, plus per-graph bookkeeping. The
# per-graph-per-layer figure is an assumption that lands 8B models near the ~0.5 GiB and 70B/TP4 near
# ~1 GiB that vLLM's "Graph capturing finished ..., took X GiB" log line commonly reports.
GRAPH_BYTES_PER_GRAPH_LAYER = int(0.25 * MIB)
MAX_CAPTURE_SIZE = 512


def cuda_graph_capture_sizes(config: EngineConfig) -> list[int]:
    """Batch sizes (tokens) vLLM captures: [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16), up to
    max = min(2 * max_num_seqs, 512); empty with enforce_eager."""
    if config.enforce_eager:
        return []
    top = min(2 * config.max_num_seqs, MAX_CAPTURE_SIZE)
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, top + 1, 16)]
    return [s for s in sizes if s <= top]


def layers_per_gpu(model: ModelProfile, config: EngineConfig) -> int:
    """Decoder layers held by the fullest pipeline stage."""
    return math.ceil(model.num_layers / max(1, config.pipeline_parallel_size))


def weight_bytes_per_gpu(model: ModelProfile, config: EngineConfig) -> int:
    """Weight bytes on the fullest GPU: layers split over pipeline stages (the first stage also holds the
    embedding, the last the LM head), everything split over tensor-parallel ranks."""
    tp = max(1, config.tensor_parallel_size)
    pp = max(1, config.pipeline_parallel_size)
    dtype = config.weight_dtype
    layer = (model.attn_linear_params + model.num_experts * model.expert_params) * weight_element_bytes(
        dtype
    ) + 2 * model.layer_small_params
    embed = 2 * model.embedding_params
    head = 2 * model.hidden + (0 if model.tie_embeddings else 2 * model.lm_head_params)
    stage_layers = layers_per_gpu(model, config) * layer
    stage = stage_layers + embed + head if pp == 1 else stage_layers + max(embed, head)
    return int(stage / tp)


def kv_bytes_per_token_per_gpu(model: ModelProfile, config: EngineConfig) -> int:
    """KV bytes one token occupies on one GPU (its pipeline stage's layers, its TP rank's KV heads; vLLM
    replicates KV heads when there are fewer than TP ranks)."""
    kv_heads = math.ceil(model.num_kv_heads / max(1, config.tensor_parallel_size))
    return (
        2
        * kv_heads
        * model.head_dim
        * kv_element_bytes(config.kv_cache_dtype)
        * layers_per_gpu(model, config)
    )


def _forward_bytes(model: ModelProfile, config: EngineConfig, num_tokens: int) -> int:
    """Peak live activations of a forward pass over `num_tokens` tokens on one GPU: hidden state and
    residual plus the wider of the attention and MLP intermediates of one layer (bf16)."""
    tp = max(1, config.tensor_parallel_size)
    attn = (model.q_dim + 2 * model.kv_dim) / tp + model.q_dim / tp
    # gate_up output and the activated half; an MoE token carries it for each chosen expert
    mlp = model.experts_per_token * 3 * model.intermediate / tp
    return int(num_tokens * 2 * (2 * model.hidden + max(attn, mlp)))


def _activation(
    model: ModelProfile, config: EngineConfig, num_tokens: int, logits_rows: int, bytes_per_logit: int
) -> int:
    forward = _forward_bytes(model, config, num_tokens)
    # after the forward pass only the final hidden states stay live while logits are sampled
    sampling = num_tokens * model.hidden * 2 + logits_rows * model.vocab * bytes_per_logit
    return int(max(forward, sampling))


def step_activation_bytes(
    model: ModelProfile, config: EngineConfig, num_tokens: int, num_seqs: int, logits_rows: int = 0
) -> int:
    """Activation workspace of one running step on one GPU, in bytes.

    Grows with num_tokens (forward intermediates) and with logits_rows, the rows of fp32 logits the sampler
    materialises: pass num_seqs normally (num_seqs * (k + 1) with k speculative tokens), more with
    prompt_logprobs. With logits_rows 0 the sampler is not counted. Runtime sampling uses top-k/top-p and
    logprobs buffers the profile run skipped (see module docstring).
    """
    del num_seqs  # per-sequence metadata lives in persistent buffers sized at start-up
    return _activation(model, config, num_tokens, logits_rows, RUNTIME_SAMPLER_BYTES_PER_LOGIT)


def failing_allocation_bytes(model: ModelProfile, config: EngineConfig, num_tokens: int, logits_rows: int = 0) -> int:
    """The one allocation of a step that a caching allocator would fail on when the step's workspace does not
    fit, in bytes: the largest single tensor it asks for, the MLP's gate_up output (an MoE token's for each
    chosen expert) or the sampler's fp32 logits, never more than the step's whole workspace. PyTorch's
    "Tried to allocate" names this tensor, not the whole step (the smaller ones were allocated before it)."""
    tp = max(1, config.tensor_parallel_size)
    gate_up = num_tokens * model.experts_per_token * 2 * model.intermediate // tp * 2
    logits = logits_rows * model.vocab * 4
    workspace = step_activation_bytes(model, config, num_tokens, 0, logits_rows)
    return int(min(workspace, max(gate_up, logits)))


def largest_step_activation_bytes(model: ModelProfile, config: EngineConfig) -> int:
    """step_activation_bytes of the largest step the config allows, in bytes: max(max_num_batched_tokens,
    max_model_len) tokens plus every sequence's (k + 1) verify tokens, with a logits row for each. When
    it fits in a plan's activation reservation plus headroom, no step of that engine can run out of
    memory (leaks aside)."""
    k1 = config.num_speculative_tokens + 1
    tokens = max(config.max_num_batched_tokens, config.max_model_len) + config.max_num_seqs * k1
    return step_activation_bytes(model, config, tokens, config.max_num_seqs, config.max_num_seqs * k1)


def profile_activation_bytes(model: ModelProfile, config: EngineConfig) -> int:
    """Activation peak vLLM's start-up profile run measures, in bytes: max_num_batched_tokens tokens over
    min(tokens, max_num_seqs) requests, one greedy sampled row per request."""
    tokens = config.max_num_batched_tokens
    rows = min(tokens, config.max_num_seqs)
    return _activation(model, config, tokens, rows, PROFILE_SAMPLER_BYTES_PER_LOGIT)


def cuda_graph_bytes(model: ModelProfile, config: EngineConfig) -> int:
    """Device memory CUDA graph capture takes on one GPU, in bytes (0 with enforce_eager)."""
    sizes = cuda_graph_capture_sizes(config)
    if not sizes:
        return 0
    pool = _forward_bytes(model, config, max(sizes))
    return pool + len(sizes) * layers_per_gpu(model, config) * GRAPH_BYTES_PER_GRAPH_LAYER


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU start-up memory plan, all in bytes except block and token counts.

    Invariants: weight + activation_peak + non_torch + kv <= requested <= total;
    num_blocks * block_bytes <= kv_bytes; kv_tokens = num_blocks * block_size; cuda_graph_bytes sits
    outside `requested` (v0.11-era behaviour), so headroom = total - requested - cuda_graph_bytes.
    """

    total_bytes: int
    requested_bytes: int
    weight_bytes: int
    activation_peak_bytes: int
    cuda_graph_bytes: int
    non_torch_bytes: int
    kv_bytes: int
    num_blocks: int
    block_size: int
    kv_tokens: int
    headroom_bytes: int
    block_bytes: int = 0  # one block over all of this GPU's layers
    max_model_len: int = 0

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)

    @property
    def max_concurrency(self) -> float:
        """Requests of max_model_len tokens the KV cache holds at once (vLLM's "Maximum concurrency")."""
        return self.kv_tokens / self.max_model_len if self.max_model_len else 0.0

    def oom_margin_bytes(self, step_bytes: int, leaked_bytes: int = 0) -> int:
        """Bytes left before a step OOMs; negative means it does."""
        return self.activation_peak_bytes + self.headroom_bytes - step_bytes - leaked_bytes

    def would_oom(self, step_bytes: int, leaked_bytes: int = 0) -> bool:
        """The simulation's OOM rule: step activation + leaked bytes > activation peak + headroom."""
        return self.oom_margin_bytes(step_bytes, leaked_bytes) < 0

    def startup_log_lines(self) -> list[str]:
        """Messages vLLM V1 logs at start-up for this plan (no timestamp or logger prefix)."""
        return [
            f"Model loading took {self.weight_bytes / GIB:.4f} GiB",
            f"Available KV cache memory: {self.kv_bytes / GIB:.2f} GiB",
            f"GPU KV cache size: {self.kv_tokens:,} tokens",
            f"Maximum concurrency for {self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x",
            f"Graph capturing finished, took {self.cuda_graph_bytes / GIB:.2f} GiB",
        ]


def _no_cache_error() -> ValueError:
    return ValueError(
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine."
    )


def plan_memory(model: ModelProfile, gpu: GPUProfile, config: EngineConfig) -> MemoryPlan:
    """vLLM V1 start-up memory arithmetic for one GPU of a replica (see module docstring).

    Raises ValueError with vLLM's message when no memory is left for KV blocks, or when the KV cache cannot
    hold one request of max_model_len tokens (capped at the model's max_position).
    """
    config.validate()
    total = gpu.hbm_bytes
    requested = int(total * config.gpu_memory_utilization)
    weights = weight_bytes_per_gpu(model, config)
    activation = profile_activation_bytes(model, config)
    world = max(1, config.tensor_parallel_size) * max(1, config.pipeline_parallel_size)
    non_torch = NON_TORCH_BYTES + (NON_TORCH_MULTI_GPU_BYTES if world > 1 else 0)
    graphs = cuda_graph_bytes(model, config)

    kv_bytes = requested - weights - activation - non_torch
    if kv_bytes <= 0:
        raise _no_cache_error()
    block_bytes = config.block_size * kv_bytes_per_token_per_gpu(model, config)
    num_blocks = kv_bytes // block_bytes
    if num_blocks <= 0:
        raise _no_cache_error()
    kv_tokens = num_blocks * config.block_size

    max_len = min(config.max_model_len, model.max_position)
    if kv_tokens < max_len:
        needed = max_len * kv_bytes_per_token_per_gpu(model, config)
        raise ValueError(
            f"To serve at least one request with the models's max seq len ({max_len}), "
            f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({kv_bytes / GIB:.2f} GiB). Based on the available memory, the estimated maximum "
            f"model length is {kv_tokens}. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."
        )

    return MemoryPlan(
        total_bytes=total,
        requested_bytes=requested,
        weight_bytes=weights,
        activation_peak_bytes=activation,
        cuda_graph_bytes=graphs,
        non_torch_bytes=non_torch,
        kv_bytes=kv_bytes,
        num_blocks=num_blocks,
        block_size=config.block_size,
        kv_tokens=kv_tokens,
        headroom_bytes=total - requested - graphs,
        block_bytes=block_bytes,
        max_model_len=max_len,
    )

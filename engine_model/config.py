"""Engine configuration: the vLLM-style knobs one replica runs with.

Defaults follow vLLM V1's OpenAI server: see shared reference `vllm-engine-knobs.md` section 1
(`vllm/engine/arg_utils.py`, `vllm/config/cache.py`, `vllm/config/scheduler.py`). Two of them depend on
the GPU in vLLM, so a fleet builds its config with `EngineConfig.for_gpu` (`v1_batch_defaults`); the
dataclass's own `max_num_seqs` 256 / `max_num_batched_tokens` 8192 are what a config made without a
GPU gets (tests, the speed benchmark's fixed fleet), and match no single GPU's vLLM default.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from engine_model.records import frozen_reduce

WEIGHT_DTYPES = ("bf16", "fp8", "int4")

# vLLM V1's GPU-aware scheduler limits for its OpenAI server (`vllm serve`), from
# `EngineArgs._set_default_args` in vllm/engine/arg_utils.py (later `get_batch_defaults`), set by PR #17885
# (May 2025, so in every release from v0.9): a device reporting at least 70 GiB whose name does not contain
# "a100" (H100, H200, B200, MI300X) gets 1024 sequences and 8192 batched tokens; A100 (excluded because large
# budgets cut its throughput) and smaller cards (L40S) get 256 and 2048. The `LLM` class (offline) uses
# 16384 / 8192 tokens instead; this fleet is always served. Shared reference vllm-engine-knobs.md section 1.
LARGE_GPU_MIN_GIB = 70.0  # GiB the device reports (torch's total), not the marketing capacity
LARGE_GPU_LIMITS = (1024, 8192)  # (max_num_seqs, max_num_batched_tokens)
SMALL_GPU_LIMITS = (256, 2048)


def v1_batch_defaults(gpu_name: str, device_gib: float) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM V1's OpenAI server defaults to on a GPU named
    `gpu_name` (any spelling; vLLM tests the lower-cased device name for "a100") that reports
    `device_gib` GiB of memory."""
    if device_gib >= LARGE_GPU_MIN_GIB and "a100" not in gpu_name.lower():
        return LARGE_GPU_LIMITS
    return SMALL_GPU_LIMITS
KV_DTYPES = ("auto", "fp8")
SCHEDULING_POLICIES = ("fcfs", "priority")
"""vLLM's --scheduling-policy: arrival order, or each request's `priority` (lower first, ties by arrival)."""
KNOB_CHOICES: dict[str, tuple[str, ...]] = {
    "weight_dtype": WEIGHT_DTYPES, "kv_cache_dtype": KV_DTYPES, "scheduling_policy": SCHEDULING_POLICIES,
}
"""The text knobs that take one of a few words (validate refuses any other)."""


@dataclass(frozen=True)
class EngineConfig:
    """Knobs of one engine replica. Token counts are tokens, memory fractions are 0..1."""

    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 32768
    weight_dtype: str = "bf16"
    kv_cache_dtype: str = "auto"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    enforce_eager: bool = False
    # speculative decoding: k draft tokens per step, acceptance rate a per token
    num_speculative_tokens: int = 0
    spec_acceptance_rate: float = 0.0
    # determinism: batch-invariant kernels make output independent of batch shape
    batch_invariant: bool = False
    seed_pinned: bool = True
    scheduling_policy: str = "fcfs"  # one of SCHEDULING_POLICIES
    # 0 = no cap; >0 caps the new prefill tokens one request may take per step
    long_prefill_token_threshold: int = 0
    # LoRA (vLLM --enable-lora): GPU adapter slots (--max-loras; 0 = LoRA off, vLLM's default when enabled
    # is 1), host cache (--max-cpu-loras; below max_loras counts as max_loras), --max-lora-rank (default 16)
    max_loras: int = 0
    max_cpu_loras: int = 0
    max_lora_rank: int = 16

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)

    @staticmethod
    def for_gpu(gpu_name: str, device_gib: float, **knobs: Any) -> EngineConfig:
        """The config vLLM V1's server starts with on that GPU (`v1_batch_defaults`), `knobs` set on top.
        As in vLLM, a default max_num_seqs is clamped to the batched-token budget (an explicit one is not:
        `validate` refuses it), so `--max-num-batched-tokens 256` alone runs 256 sequences at most."""
        seqs, tokens = v1_batch_defaults(gpu_name, device_gib)
        tokens = int(knobs.get("max_num_batched_tokens", tokens))
        seqs = int(knobs.get("max_num_seqs", min(seqs, tokens)))
        return EngineConfig(max_num_seqs=seqs, max_num_batched_tokens=tokens).with_changes(**knobs)

    def with_changes(self, **changes: Any) -> EngineConfig:
        """Copy with knobs changed; unknown knob names raise KeyError."""
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise KeyError(f"unknown engine knob(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes)

    def validate(self) -> None:
        """Raise ValueError on a configuration vLLM itself would refuse."""
        if self.max_num_seqs > self.max_num_batched_tokens:
            raise ValueError("max_num_seqs must not exceed max_num_batched_tokens")
        if self.block_size not in (1, 8, 16, 32, 64, 128):
            raise ValueError("block_size must be one of 1, 8, 16, 32, 64, 128")
        if not 0.05 <= self.gpu_memory_utilization <= 1.0:
            raise ValueError("gpu_memory_utilization must be within 0.05..1.0")
        if self.max_loras < 0 or self.max_cpu_loras < 0 or self.max_lora_rank < 1:
            raise ValueError("max_loras and max_cpu_loras must be >= 0 and max_lora_rank >= 1")
        for knob, choices in KNOB_CHOICES.items():
            value = getattr(self, knob)
            if value not in choices:
                raise ValueError(f"{knob} must be one of {choices}, not {value!r}")


ENGINE_KNOBS: tuple[str, ...] = tuple(f.name for f in fields(EngineConfig))

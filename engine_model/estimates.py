"""The figures of `servedrill calc`: back-of-envelope serving numbers from the same code the simulation runs.

Every number comes from profiles, StepCostModel and plan_memory; nothing here re-derives physics, so calc
and the simulation cannot disagree. `calc` returns a JSON-ready dict whose keys carry their units
(`_bytes`, `_s`, `_tokens`, `_per_s`); `format_calc` renders it for people.
"""

from __future__ import annotations

import math
from typing import Any

from engine_model.config import EngineConfig
from engine_model.frontend import FrontendConfig
from engine_model.memory import kv_bytes_per_token_per_gpu, plan_memory, weight_bytes_per_gpu
from engine_model.profiles import GIB, GPU_REFERENCES, GPUS, MODELS, resolve_gpu, resolve_model
from engine_model.step_cost import StepCostModel
from engine_model.step_memory import oom_lines, smallest_failing, step_memory

# Sizing keeps every replica below this fraction of its modelled throughput, leaving room for bursts and
# queueing; a stated planning assumption, not a measured figure.
TARGET_UTILIZATION = 0.8
_SEARCH_LIMIT_SEQS = 1 << 16


def compute_bound_batch(cost: StepCostModel, context: int, limit: int = _SEARCH_LIMIT_SEQS) -> int | None:
    """Smallest number of decode sequences, each with `context` tokens of context, at which a decode step's
    matmul/attention kernels are compute-bound (StepBreakdown.bound); None if not even at `limit`.

    Bisection is valid because FLOP time and byte time both grow linearly with the batch while the weight
    reads stay fixed, so their ratio only rises with the batch.
    """

    def is_compute(b: int) -> bool:
        return cost.breakdown(0, 0, b, b * context).bound == "compute"

    return smallest_failing(is_compute, limit)


def _marginal_prefill_s(cost: StepCostModel, prompt: int, batch: int, ctx_per_seq: float) -> float:
    """Seconds a prompt adds when its chunks ride along decode steps of `batch` sequences."""
    budget = max(1, cost.config.max_num_batched_tokens - batch)
    base = cost.step_time(0, 0, batch, int(batch * ctx_per_seq))
    added = 0.0
    done = 0
    while done < prompt:
        c = min(budget, prompt - done)
        step = cost.step_time(c, c * (done + c / 2.0), batch, int(batch * ctx_per_seq), prefill_seqs=1)
        added += step - base
        done += c
    return added


MAX_TOKENS = 10_000_000
MAX_BATCH = 1_000_000
MAX_TP = 1024
MAX_SPEC_K = 64
MAX_RPS = 10_000_000.0


def api_server_s(prompt_tokens: int, frontend: FrontendConfig | None = None) -> float:
    """Seconds vLLM's API server adds to one request's TTFT on an idle replica: its intake (parsing and
    tokenising `prompt_tokens`), the hand-off latency to the engine, and streaming the first token."""
    f = frontend if frontend is not None else FrontendConfig()
    return f.intake_s(prompt_tokens) + f.latency_s + f.per_output_token_s


def calc(
    model: str,
    gpu: str,
    *,
    tp: int = 1,
    dtype: str = "bf16",
    kv_dtype: str = "auto",
    context: int = 4096,
    batch: int = 1,
    spec_k: int = 0,
    spec_acceptance: float = 0.0,
    rps: float | None = None,
    prompt: int = 1024,
    output: int = 256,
    gpu_memory_utilization: float | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
) -> dict[str, Any]:
    """Serving estimates for `model` on `gpu` with `tp` tensor-parallel ranks (one replica = tp GPUs).

    model / gpu: profile names in any case, Hugging Face ids or short names (profiles.resolve_model /
    resolve_gpu); the result names the profile used (`model`, `gpu`) and how it matched
    (`model_match`, `gpu_match`: exact, case-insensitive or alias). context: tokens per request for
    capacity, decode context and the prefill figure [tokens]; batch: decode sequences per step; prompt /
    output: one request's prompt and generated tokens, for TTFT (`ttft_prompt_tokens`), request latency and
    sizing; rps: requests/s to size a fleet for; gpu_memory_utilization: the share of each GPU's memory the
    engine may use (None: vLLM's default); max_num_seqs / max_num_batched_tokens: the scheduler's limits (None:
    vLLM V1's defaults for the GPU, config.v1_batch_defaults), which size the activation reservation and the
    largest step. With too little KV cache left for one request of `context` tokens the engine would not start:
    `fits` is False and `memory_error` is its start-up error. Otherwise the `oom_*` keys say at what batch a
    step runs out of memory (engine_model.step_memory). Raises KeyError for unknown model/GPU names and
    ValueError for invalid settings.
    """
    if context < 1 or batch < 1 or tp < 1:
        raise ValueError("context, batch and tp must be at least 1")
    if (max_num_seqs is not None and max_num_seqs < 1) or (max_num_batched_tokens is not None
                                                           and max_num_batched_tokens < 1):
        raise ValueError("max_num_seqs and max_num_batched_tokens must be at least 1")
    # bounds far beyond any real deployment, so that a typo cannot make the estimate run for minutes
    for name, value, top in (("context", context, MAX_TOKENS), ("prompt", prompt, MAX_TOKENS),
                             ("output", output, MAX_TOKENS), ("batch", batch, MAX_BATCH), ("tp", tp, MAX_TP),
                             ("spec_k", spec_k, MAX_SPEC_K), ("max_num_seqs", max_num_seqs or 1, MAX_BATCH),
                             ("max_num_batched_tokens", max_num_batched_tokens or 1, MAX_TOKENS)):
        if value > top:
            raise ValueError(f"{name} {value} is beyond what this estimate covers (at most {top:,})")
    if rps is not None and not 0 < rps <= MAX_RPS:
        raise ValueError(f"rps must be within 0..{MAX_RPS:,}")
    m_match, g_match = resolve_model(model), resolve_gpu(gpu)
    m = MODELS[m_match.name]
    g = GPUS[g_match.name]
    given = {"gpu_memory_utilization": gpu_memory_utilization, "max_num_seqs": max_num_seqs,
             "max_num_batched_tokens": max_num_batched_tokens}
    # vLLM V1's defaults for this GPU (1024 sequences / 8192 tokens on large non-A100 cards, else 256 / 2048)
    config = EngineConfig.for_gpu(
        g.name, g.hbm_gib,
        tensor_parallel_size=tp,
        weight_dtype=dtype,
        kv_cache_dtype=kv_dtype,
        max_model_len=context,
        num_speculative_tokens=spec_k,
        spec_acceptance_rate=spec_acceptance,
        **{knob: value for knob, value in given.items() if value is not None},
    )
    config.validate()
    cost = StepCostModel(m, g, config)
    notes: list[str] = []
    if context > m.max_position:
        notes.append(f"context {context} exceeds the model's max_position {m.max_position}")

    result: dict[str, Any] = {
        "model": m.name,
        "gpu": g.name,
        "model_query": model,
        "model_match": m_match.how,
        "gpu_query": gpu,
        "gpu_match": g_match.how,
        "gpu_reference": GPU_REFERENCES.get(g.name),
        "gpu_estimated": g.name not in GPU_REFERENCES,
        "tp": tp,
        "gpus_per_replica": tp,
        "weight_dtype": dtype,
        "kv_cache_dtype": kv_dtype,
        "context_tokens": context,
        "batch": batch,
        "max_num_seqs": config.max_num_seqs,
        "max_num_batched_tokens": config.max_num_batched_tokens,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "params_total": m.params_total,
        "params_active": m.params_active,
        "weight_bytes_total": m.weight_bytes(dtype),
        "weight_bytes_per_gpu": weight_bytes_per_gpu(m, config),
        "kv_bytes_per_token": m.kv_bytes_per_token(kv_dtype),
        "kv_bytes_per_token_per_gpu": kv_bytes_per_token_per_gpu(m, config),
        "gpu_memory_bytes": g.hbm_bytes,
    }

    try:
        plan = plan_memory(m, g, config)
    except ValueError as err:
        plan = None
        result.update(
            fits=False,
            memory_error=str(err),
            kv_cache_bytes_per_gpu=0,
            kv_capacity_tokens=0,
            max_concurrent_requests=0,
        )
    if plan is not None:
        blocks_per_request = math.ceil(context / plan.block_size)
        result.update(
            fits=True,
            memory_error=None,
            kv_cache_bytes_per_gpu=plan.kv_bytes,
            kv_capacity_tokens=plan.kv_tokens,
            max_concurrent_requests=plan.num_blocks // blocks_per_request,
            activation_peak_bytes=plan.activation_peak_bytes,
            cuda_graph_bytes=plan.cuda_graph_bytes,
            non_torch_bytes=plan.non_torch_bytes,
            headroom_bytes=plan.headroom_bytes,
            max_running_seqs=min(config.max_num_seqs, plan.num_blocks // blocks_per_request),
        )
        sm = step_memory(m, config, plan, batch)
        result.update(
            step_activation_budget_bytes=sm.budget_bytes,
            oom_decode_batch_seqs=sm.oom_decode_seqs,
            oom_decode_batch_tokens=sm.oom_decode_tokens,
            oom_prefill_step_tokens=sm.oom_prefill_tokens,
            largest_step_tokens=sm.largest_step_tokens,
            largest_step_sampled_rows=sm.largest_step_rows,
            largest_step_activation_bytes=sm.largest_step_bytes,
            largest_step_fits=sm.largest_step_fits,
            batch_step_activation_bytes=sm.batch_step_bytes,
            batch_step_fits=sm.batch_step_fits,
        )

    tps = cost.tokens_per_decode_step
    floor = cost.breakdown(0, 0, 1, context)
    step = cost.breakdown(0, 0, batch, batch * context)
    result.update(
        spec_tokens_per_step=tps,
        decode_step_floor_s=floor.total_s,
        decode_step_floor_bound=floor.bound,
        decode_step_s=step.total_s,
        decode_step_bound=step.bound,
        decode_step_device_s=step.device_s,
        decode_step_compute_s=step.compute_s,
        decode_step_memory_s=step.memory_s,
        decode_step_comm_s=step.comm_s,
        decode_step_overhead_s=step.overhead_s,
        inter_token_latency_s=step.total_s / tps,
        decode_tokens_per_s=batch * tps / step.total_s,
        compute_bound_batch=compute_bound_batch(cost, context),
        compute_bound_batch_short_context=compute_bound_batch(cost, 1),
        prefill_time_s=cost.prefill_time(context),
        prefill_tokens_per_s=context / cost.prefill_time(context),
        ttft_prompt_tokens=prompt,
        ttft_s=cost.prefill_time(prompt),
        ttft_served_s=cost.prefill_time(prompt) + api_server_s(prompt),
        request_output_tokens=output,
        request_latency_s=cost.prefill_time(prompt)
        + cost.decode_run_time(math.ceil(output / tps), batch, batch * prompt, growth_per_seq=tps),
    )

    if rps is not None:
        result["rps"] = rps
        if plan is None:
            result.update(
                gpus_needed=None,
                replicas_needed=None,
                gpus_needed_assumption="the model does not fit this GPU/TP setting; no sizing possible",
            )
        else:
            per_request = prompt + output
            kv_limit = plan.num_blocks // math.ceil(per_request / plan.block_size)
            n = max(1, min(config.max_num_seqs, kv_limit))
            ctx = prompt + output / 2.0
            t_dec = cost.step_time(0, 0, n, int(n * ctx))
            replica_s_per_request = _marginal_prefill_s(cost, prompt, n, ctx) + output * t_dec / (n * tps)
            capacity = 1.0 / replica_s_per_request
            replicas = max(1, math.ceil(rps / (capacity * TARGET_UTILIZATION)))
            result.update(
                capacity_batch=n,
                replica_capacity_rps=capacity,
                replicas_needed=replicas,
                gpus_needed=replicas * tp,
                capacity_inter_token_latency_s=t_dec / tps,
                gpus_needed_assumption=(
                    f"steady state with {n} running sequences per replica (min of max_num_seqs and KV room "
                    f"for {per_request}-token requests); each request adds its {prompt}-token prefill to "
                    f"running decode steps and shares {output} decode tokens' steps with the others; "
                    f"replicas run at {TARGET_UTILIZATION:.0%} of that throughput; no prefix-cache hits; "
                    "latency targets not considered"
                ),
            )
    result["notes"] = notes
    return result


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms"


def _row(label: str, text: str) -> str:
    return f"  {label:<25}{text}"


def _match_lines(r: dict[str, Any]) -> list[str]:
    """'profile: ...' lines for names that matched a profile other than literally."""
    out = []
    for kind in ("model", "gpu"):
        how = r.get(f"{kind}_match", "exact")
        if how != "exact":
            out.append(f"{kind} {r[f'{kind}_query']!r} matched profile {r[kind]} ({how})")
    return out


def format_calc(result: dict[str, Any]) -> str:
    """Human-readable rendering of a `calc` result, every figure with its unit."""
    r = result
    title = f"{r['model']} on {r['tp']} x {r['gpu']}"
    lines = [
        f"{title} (weights {r['weight_dtype']}, KV cache {r['kv_cache_dtype']})",
        *_match_lines(r),
        *([f"estimated: no measurement of {r['gpu']} was replayed (its figures are datasheet values and "
           "assumptions); treat its times as a sketch"] if r.get("gpu_estimated") else []),
        "",
        "memory (per GPU)",
        _row("device memory", f"{_gib(r['gpu_memory_bytes'])}, the engine may use "
             f"{r['gpu_memory_utilization']:.0%} (gpu_memory_utilization {r['gpu_memory_utilization']:g})"),
        _row("weights", f"{_gib(r['weight_bytes_per_gpu'])} (whole model {_gib(r['weight_bytes_total'])})"),
        _row(
            "KV per token",
            f"{r['kv_bytes_per_token'] / 1024:.1f} KiB model-wide, "
            f"{r['kv_bytes_per_token_per_gpu'] / 1024:.1f} KiB on each GPU",
        ),
    ]
    if r["fits"]:
        lines += [
            _row("KV cache", f"{_gib(r['kv_cache_bytes_per_gpu'])} = {r['kv_capacity_tokens']:,} tokens"),
            _row(
                "activation reservation",
                f"{_gib(r['activation_peak_bytes'])}; CUDA graphs {_gib(r['cuda_graph_bytes'])}; "
                f"headroom {_gib(r['headroom_bytes'])}",
            ),
            _row(
                "concurrent requests",
                f"{r['max_concurrent_requests']:,} at {r['context_tokens']:,} tokens each",
            ),
        ]
        lines += oom_lines(r, _row)
    else:
        lines.append(f"  DOES NOT FIT: {r['memory_error']}")
    cb = r["compute_bound_batch"]
    cbs = r["compute_bound_batch_short_context"]
    turns = f"{cb:,} sequences" if cb is not None else "never (KV reads grow as fast as FLOPs)"
    if cbs is not None:
        turns += f"; {cbs:,} sequences at near-zero context"
    lines += [
        "",
        f"decode (context {r['context_tokens']:,} tokens per sequence)",
        *(
            [_row("batch 1 step", f"{_ms(r['decode_step_floor_s'])} ({r['decode_step_floor_bound']}-bound)")]
            if r["batch"] != 1
            else []
        ),
        _row(
            f"batch {r['batch']} step",
            f"{_ms(r['decode_step_s'])} ({r['decode_step_bound']}-bound): "
            f"GPU {_ms(r['decode_step_device_s'])} (compute {_ms(r['decode_step_compute_s'])}, "
            f"memory {_ms(r['decode_step_memory_s'])}), "
            f"comm {_ms(r['decode_step_comm_s'])}, host {_ms(r['decode_step_overhead_s'])}",
        ),
        _row(
            "inter-token latency",
            f"{_ms(r['inter_token_latency_s'])}; {r['decode_tokens_per_s']:,.0f} tokens/s per replica",
        ),
        _row("tokens per step", f"{r['spec_tokens_per_step']:.2f} per sequence"),
        _row("turns compute-bound at", turns),
        "",
        "prefill",
        _row(
            f"{r['context_tokens']:,}-token prompt",
            f"{_ms(r['prefill_time_s'])} ({r['prefill_tokens_per_s']:,.0f} tokens/s)",
        ),
        _row(
            "TTFT (no queue)",
            f"{_ms(r['ttft_s'])} for a {r['ttft_prompt_tokens']:,}-token prompt (--prompt, not --context); "
            f"{_ms(r['ttft_served_s'])} through vLLM's API server",
        ),
        _row(
            "request latency",
            f"{r['request_latency_s']:.2f} s for {r['ttft_prompt_tokens']:,} prompt + "
            f"{r['request_output_tokens']:,} output tokens at batch {r['batch']}",
        ),
    ]
    if "rps" in r:
        lines += ["", f"sizing for {r['rps']:g} requests/s"]
        if r.get("gpus_needed") is None:
            lines.append(f"  {r['gpus_needed_assumption']}")
        else:
            lines += [
                _row(
                    "one replica serves",
                    f"{r['replica_capacity_rps']:.2f} requests/s at {r['capacity_batch']} sequences "
                    f"(ITL {_ms(r['capacity_inter_token_latency_s'])})",
                ),
                _row("GPUs needed", f"{r['gpus_needed']} ({r['replicas_needed']} replicas x {r['tp']})"),
                f"  assumption: {r['gpus_needed_assumption']}",
            ]
    for note in r.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines)

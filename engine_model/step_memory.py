"""At what batch a step runs out of memory: the activation side of `servedrill calc`.

A replica's memory plan (engine_model.memory.plan_memory) leaves a step's activation workspace the
profile run's reservation plus the headroom outside gpu_memory_utilization; a step whose workspace
(memory.step_activation_bytes) is larger crashes with CUDA out of memory, the simulation's rule
(MemoryPlan.would_oom, nothing leaked here). The workspace grows with the step's tokens and with its
sampled rows, so for one config there is a smallest step that fails:

- a decode batch of n sequences: n * (k + 1) tokens, each a sampled row (top-k/top-p buffers, 28 bytes
  per vocabulary entry per row), which is what usually fails first;
- a single prompt's prefill chunk of n tokens: one sampled row, the forward intermediates grow.

Whether a running engine can reach them is the config's largest step (memory.largest_step_activation_bytes:
max_num_seqs sampled rows plus a max_num_batched_tokens chunk). Sizes in bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine_model.config import EngineConfig
from engine_model.memory import MemoryPlan, largest_step_activation_bytes, step_activation_bytes
from engine_model.profiles import GIB, ModelProfile

SEARCH_LIMIT = 1 << 24
"""Largest step (tokens or sequences) the search looks at; beyond it the answer is None (never)."""


def smallest_failing(fails: Callable[[int], bool], limit: int = SEARCH_LIMIT) -> int | None:
    """Smallest n in 1..limit with fails(n), for a `fails` that stays true once true; None if none.
    (Also the compute-bound batch of engine_model.estimates: any monotone threshold.)"""
    if not fails(limit):
        return None
    lo, hi = 0, limit  # fails(hi) holds; fails(lo) does not (lo = 0 is "no step")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class StepMemory:
    """Where steps run out of memory on one GPU of a replica (nothing leaked)."""

    budget_bytes: int
    """Activation reservation plus headroom: the most a step's workspace may take."""
    oom_decode_seqs: int | None
    """Smallest decode batch (sequences) whose step fails; None: no batch up to SEARCH_LIMIT does."""
    oom_decode_tokens: int | None
    """That step in tokens: sequences * (speculative tokens + 1)."""
    oom_prefill_tokens: int | None
    """Smallest prefill chunk of one prompt (tokens, one sampled row) whose step fails."""
    largest_step_tokens: int
    largest_step_rows: int
    largest_step_bytes: int
    batch_seqs: int
    batch_step_bytes: int
    """The decode step of `batch_seqs` sequences."""

    @property
    def largest_step_fits(self) -> bool:
        return self.largest_step_bytes <= self.budget_bytes

    @property
    def batch_step_fits(self) -> bool:
        return self.batch_step_bytes <= self.budget_bytes


def _decode_bytes(model: ModelProfile, config: EngineConfig, seqs: int) -> int:
    rows = seqs * (config.num_speculative_tokens + 1)
    return step_activation_bytes(model, config, rows, seqs, rows)


def step_memory(model: ModelProfile, config: EngineConfig, plan: MemoryPlan, batch: int = 1) -> StepMemory:
    """The step sizes that run out of memory under `plan` (model and config as planned)."""
    budget = plan.activation_peak_bytes + plan.headroom_bytes
    oom_seqs = smallest_failing(lambda n: _decode_bytes(model, config, n) > budget)
    oom_prefill = smallest_failing(lambda n: step_activation_bytes(model, config, n, 1, 1) > budget)
    k1 = config.num_speculative_tokens + 1
    return StepMemory(
        budget_bytes=budget,
        oom_decode_seqs=oom_seqs,
        oom_decode_tokens=None if oom_seqs is None else oom_seqs * k1,
        oom_prefill_tokens=oom_prefill,
        largest_step_tokens=max(config.max_num_batched_tokens, config.max_model_len) + config.max_num_seqs * k1,
        largest_step_rows=config.max_num_seqs * k1,
        largest_step_bytes=largest_step_activation_bytes(model, config),
        batch_seqs=batch,
        batch_step_bytes=_decode_bytes(model, config, batch),
    )


def _size(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


def oom_lines(r: Mapping[str, Any], row: Callable[[str, str], str]) -> list[str]:
    """The 'out of memory' section of `servedrill calc` for its result `r` (one line per `row(label, text)`):
    how many sequences the KV cache holds, and at what batch a step's activations run out."""
    seqs, tokens, prefill = r["oom_decode_batch_seqs"], r["oom_decode_batch_tokens"], r["oom_prefill_step_tokens"]
    limit, kv_room = r["max_num_seqs"], r["max_concurrent_requests"]
    running = r["max_running_seqs"]
    if seqs is None:
        decode = "never"
    elif seqs <= running:
        decode = f"{seqs:,} sequences ({tokens:,} tokens): reachable, {running:,} can run at once at this context"
    elif seqs <= limit:
        decode = (f"{seqs:,} sequences ({tokens:,} tokens): not at this context ({running:,} fit in the KV cache), "
                  f"but shorter requests can reach it (max_num_seqs {limit:,})")
    else:
        decode = f"{seqs:,} sequences ({tokens:,} tokens): beyond max_num_seqs {limit:,}, never reached"
    chunk = "never" if prefill is None else f"{prefill:,} tokens in one step, " + (
        "within" if prefill <= r["max_num_batched_tokens"] else "beyond") \
        + f" max_num_batched_tokens {r['max_num_batched_tokens']:,}"
    largest = "fits" if r["largest_step_fits"] else "RUNS OUT OF MEMORY: a busy engine crashes"
    batch = "fits" if r["batch_step_fits"] else "RUNS OUT OF MEMORY"
    binds = "one more waits or is preempted" if kv_room < limit else f"max_num_seqs {limit:,} binds first"
    return [
        "",
        f"out of memory (nothing leaked; a step's activations may take {_size(r['step_activation_budget_bytes'])}:"
        f" reservation {_size(r['activation_peak_bytes'])} + headroom {_size(r['headroom_bytes'])})",
        row("KV cache holds", f"{kv_room:,} sequences of {r['context_tokens']:,} tokens at once; {binds}"),
        row("decode batch runs out at", decode),
        row("one prompt's prefill at", chunk),
        row("largest step allowed", f"{r['largest_step_tokens']:,} tokens, {r['largest_step_sampled_rows']:,} of "
            f"them sampled, needs {_size(r['largest_step_activation_bytes'])}: {largest}"),
        row(f"batch {r['batch']} decode step", f"needs {_size(r['batch_step_activation_bytes'])}: {batch}"),
    ]

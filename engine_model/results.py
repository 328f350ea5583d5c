"""What a simulation run produces: per-request records, per-replica samples and an event stream.

Columns are kept as plain lists while the simulation appends (cheap), and turned into
numpy arrays by the consumer. Times are simulated seconds from the start of the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mypy_extensions import mypyc_attr

REQUEST_FIELDS: tuple[str, ...] = (
    "request_id", "arrival_s", "gateway_s", "engine_arrival_s", "first_scheduled_s", "first_token_s", "finish_s",
    "prompt_tokens", "cached_tokens", "output_tokens", "num_preemptions", "replica",
    "route", "model", "model_version", "status", "finish_reason", "output_hash",
    "batch_at_first_token", "app", "tenant", "temperature", "seed", "prompt_hash", "first_logprob",
    "attempt", "first_request_id", "lora",
)

SAMPLE_FIELDS: tuple[str, ...] = (
    "t", "replica", "up", "running", "waiting", "kv_usage", "kv_blocks_total",
    "prompt_tokens_total", "generation_tokens_total", "preemptions_total",
    "prefix_queries_total", "prefix_hits_total", "spec_draft_tokens_total", "spec_accepted_tokens_total",
    "spec_drafts_total", "requests_finished_total", "busy_s_total", "compute_s_total", "memory_s_total",
    "steps_total", "itl_counts", "itl_sum", "clock_factor", "hbm_bw_factor", "link_factor",
    "memory_used_bytes", "memory_total_bytes", "max_lora", "lora_running", "lora_waiting",
)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class EngineEvent:
    """Something an engine or the router did that a real system would log."""

    t: float
    replica: str
    kind: str
    detail: dict[str, Any] = field(default_factory=dict)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass
class SimResult:
    """Output of one run. `requests` and `samples` map a field name to one list per column."""

    requests: dict[str, list[Any]]
    samples: dict[str, list[Any]]
    events: list[EngineEvent]
    replicas: list[str]
    duration_s: float
    sample_interval_s: float
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def num_requests(self) -> int:
        return len(self.requests["request_id"])


def empty_columns(names: tuple[str, ...]) -> dict[str, list[Any]]:
    return {name: [] for name in names}

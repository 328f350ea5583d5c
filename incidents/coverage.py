"""What the library must teach: the topics of an inference interview loop and the symptom families a
fleet pages for, each recognised by incident tags. The picker and `servedrill list` show how many
incidents cover each topic; a test keeps every topic covered."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """One thing to learn. An incident covers it when one of its tags is in `tags`."""

    key: str
    title: str
    tags: tuple[str, ...]
    family: bool = False  # a symptom family (what pages) rather than a concept


TOPICS: tuple[Topic, ...] = (
    Topic("slow-first-token", "Slow first token: queueing, prompt length, prefill, prefix caching",
          ("ttft", "queueing", "prefix-caching")),
    Topic("compute-vs-bandwidth", "Prefill compute-bound vs decode bandwidth-bound",
          ("prefill-compute-bound", "decode-memory-bound")),
    Topic("continuous-batching", "Continuous batching: throughput against latency",
          ("continuous-batching", "throughput-vs-latency")),
    Topic("speculative-decoding", "Speculative decoding that stopped helping", ("speculative-decoding",)),
    Topic("kv-capacity", "KV cache capacity: concurrency ceiling, long contexts, preemption",
          ("preemption", "long-context")),
    Topic("paged-kv", "Paged KV and prefix sharing: fragmentation, block size, eviction", ("paged-kv",)),
    Topic("cost-levers", "Cost levers gone wrong: quantized weights or KV cache", ("cost-levers", "quantization")),
    Topic("moe-and-reasoning", "MoE expert imbalance; reasoning outputs that grew", ("moe", "reasoning-models")),
    Topic("parallelism", "Tensor parallelism over a slow or degraded link; pipeline bubbles",
          ("interconnect", "pipeline-parallel")),
    Topic("fallback", "A fallback route that silently switched models", ("fallback",)),
    Topic("retries", "Client timeouts and retries: a retry storm that outlives its trigger",
          ("retry-storm", "metastable")),
    Topic("multi-lora", "Multi-LoRA serving: adapter slots per batch, the host cache, loading adapters",
          ("multi-lora", "lora")),
    Topic("ttft-after-deploy", "p99 TTFT tripled after a deploy", ("ttft-after-deploy",), family=True),
    Topic("oom-at-peak", "OOM at peak", ("oom-at-peak",), family=True),
    Topic("nondeterministic-outputs", "Nondeterministic outputs", ("nondeterministic-outputs",), family=True),
    Topic("one-slow-replica", "One slow replica", ("one-slow-replica",), family=True),
    Topic("quantized-regression", "A quantized model regressed on one task", ("quantized-regression",),
          family=True),
)


def covers(tags: Iterable[str], topic: Topic) -> bool:
    """Whether an incident with these tags teaches `topic` (exact tag match, case-insensitive)."""
    return any(t.lower() in topic.tags for t in tags)


def topic_coverage(incidents: Sequence[tuple[str, Iterable[str]]]) -> dict[str, list[str]]:
    """Topic key -> ids of the incidents that cover it, for (id, tags) pairs; every topic is a key."""
    pairs = [(incident_id, [t.lower() for t in tags]) for incident_id, tags in incidents]
    return {topic.key: [i for i, tags in pairs if covers(tags, topic)] for topic in TOPICS}


SYMPTOM_TAGS: frozenset[str] = frozenset(
    {"latency", "ttft", "tpot", "itl-tail", "e2e-latency", "errors", "availability", "quality", "quality-drift",
     "eval-regression", "memory", "queueing", "streaming", "capacity", "throughput"}
    | {tag for topic in TOPICS if topic.family for tag in topic.tags}
)
"""Tags that describe what pages (a symptom), shown before the debrief; topic tags name concepts, which
can give the cause away, so players see them only in the debrief."""


def visible_tags(tags: Iterable[str]) -> list[str]:
    """The tags a player may see before the debrief: symptom families only."""
    return [t for t in tags if t.lower() in SYMPTOM_TAGS]

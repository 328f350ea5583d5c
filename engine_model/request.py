"""A request as the engine sees it: lengths, shared-prefix identity and sampling parameters."""

from __future__ import annotations

from dataclasses import dataclass

from mypy_extensions import mypyc_attr


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class Request:
    """One inference request.

    Invariants: 0 <= prefix_tokens <= prompt_tokens; output_tokens >= 1.
    `prefix_key` names content shared with other requests (a system prompt or an
    earlier conversation turn): two requests with the same key share their first
    `prefix_tokens` tokens exactly, which is what prefix caching can reuse.
    `prompt_hash` identifies the whole prompt's content (replays share it).
    """

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    app: str = "chat"
    tenant: str = "default"
    prefix_key: int = 0
    prefix_tokens: int = 0
    session_key: int = 0
    prompt_hash: int = 0
    priority: int = 0
    temperature: float = 0.0
    seed: int | None = None
    n: int = 1
    max_tokens: int = 4096
    # False for a prompt known never to recur: its blocks could never be hit, so the engine
    # model returns them to the free pool instead of the prefix cache (saves work, changes
    # only the eviction order among blocks nothing will ever ask for)
    cache_prompt: bool = True
    # seconds the client waits for the whole response before it disconnects; the engine then aborts
    # the request (vLLM does on disconnect). 600 s is the OpenAI Python client's default timeout.
    timeout_s: float = 600.0
    # the client asked for logprobs (vLLM's SamplingParams.logprobs): only then does the engine report
    # the first token's, so ordinary traffic does not pay for computing it
    logprobs: bool = False
    # seconds the request spent in the API gateway in front of the router: `arrival_s` is its arrival at
    # the router, and the client sent it at arrival_s - gateway_s (its timeout runs from then)
    gateway_s: float = 0.0
    # closed-loop pool this request belongs to (-1: open loop, sent at arrival_s). A pool's request with
    # arrival_s = inf is held until an earlier one of the pool ends; it is then sent think_s seconds
    # later (engine_model.clients)
    loop: int = -1
    think_s: float = 0.0
    # LoRA adapter the request names (0: the base model) and that adapter's rank (0: the engine's
    # max_lora_rank); the rank sizes the adapter's weights and so its load time, see lora.py
    lora: int = 0
    lora_rank: int = 0
    # which send of its client's request this is (1: the first; a retry is a new request, see retries.py)
    attempt: int = 1
    # request_id of the first attempt when this is a retry (-1: this is the first attempt)
    first_request_id: int = -1

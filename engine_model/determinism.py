"""Which output a request gets: the hash that stands in for the generated text.

Floating-point reductions are not associative, so unless the kernels are batch-invariant
the logits (and with greedy decoding, eventually a token) depend on how many sequences
shared the step. Sampling with temperature > 0 is reproducible only with a seed that the
engine honours. Everything else about the text (prompt, model version) is deterministic.
"""

from __future__ import annotations

import hashlib


def _h(*parts: object) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def output_hash(
    prompt_hash: int,
    model_version: str,
    *,
    temperature: float,
    seed: int | None,
    batch_invariant: bool,
    seed_pinned: bool,
    batch_size: int,
    request_id: int,
    output_tokens: int,
) -> str:
    """Hex digest identifying the generated text.

    Invariants: with batch-invariant kernels, greedy decoding (temperature 0) gives the
    same hash for the same prompt and version at any batch size; a seeded sampled request
    is reproducible only while seeds are pinned; an unseeded sampled request is unique
    (it hashes its request id).
    """
    batch_part = 0 if batch_invariant else batch_size
    if temperature <= 0.0:
        return _h("greedy", prompt_hash, model_version, output_tokens, batch_part)
    if seed is not None and seed_pinned:
        return _h("seeded", prompt_hash, model_version, output_tokens, seed, batch_part)
    return _h("sampled", request_id, prompt_hash, model_version)


def logprob_drift(batch_invariant: bool, batch_size: int, reference_batch: int) -> float:
    """Max absolute difference of a probe's first-token logprob against its reference run (nats).

    Zero with batch-invariant kernels or an identical batch size; otherwise a small
    drift that grows with how different the batch shapes were (order 1e-3, as reported
    for bf16 kernels).
    """
    if batch_invariant or batch_size == reference_batch:
        return 0.0
    ratio = max(batch_size, reference_batch) / max(1, min(batch_size, reference_batch))
    return round(1e-3 * (1.0 + 0.5 * (ratio - 1.0) ** 0.5), 6)

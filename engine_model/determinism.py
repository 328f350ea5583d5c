"""Which output a request gets: the hash that stands in for the generated text.

Floating-point reductions are not associative, so unless the kernels are batch-invariant
the logits (and with greedy decoding, eventually a token) depend on how many sequences
shared the step. Sampling with temperature > 0 is reproducible only with a seed that the
engine honours. Everything else about the text (prompt, model version) is deterministic.
"""

from __future__ import annotations

import hashlib

# Each hash is taken over the text of a tuple's repr, e.g. "('greedy', 7, 'v1', 40, 0)". The keys are
# built with f-strings that spell that text exactly (ints and a repr'd str), which is cheaper than
# building and repr-ing the tuple, and keeps every hash what earlier versions of the engine gave.


# The f-strings hold no `!r` conversion: compiled, one makes mypyc fall back to str.format for the whole
# f-string, which cost about as much as the hash itself (an output hash per request); the repr is taken first.
_BLAKE8 = hashlib.blake2b(digest_size=8)
"""An empty 8-byte blake2b: copying it and feeding the key gives blake2b(key, digest_size=8) without a
keyword call into the constructor per hash."""


def _h(key: str) -> str:
    h = _BLAKE8.copy()
    h.update(key.encode())
    return h.hexdigest()


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
    mv = repr(model_version)  # spelled out, not `{model_version!r}`: see _BLAKE8
    if temperature <= 0.0:
        return _h(f"('greedy', {prompt_hash}, {mv}, {output_tokens}, {batch_part})")
    if seed is not None and seed_pinned:
        return _h(f"('seeded', {prompt_hash}, {mv}, {output_tokens}, {seed}, {batch_part})")
    return _h(f"('sampled', {request_id}, {prompt_hash}, {mv})")


def first_token_logprob(prompt_hash: int, model_version: str, *, batch_invariant: bool, batch_size: int) -> float:
    """Log-probability (nats) of the first generated token as the engine computed it.

    The clean value depends on prompt and version only; batch-variant kernels add a
    perturbation of order 1e-3 that depends on the batch shape, as reported for bf16
    reductions. Batch-invariant kernels give the same value at every batch size.
    """
    mv = repr(model_version)  # not `{model_version!r}`: see _BLAKE8
    digest = hashlib.blake2b(f"({prompt_hash}, {mv})".encode(), digest_size=8).digest()
    clean = -0.05 - 2.0 * int.from_bytes(digest, "big") / 2**64
    if batch_invariant:
        return clean
    noise = hashlib.blake2b(f"({prompt_hash}, {mv}, {batch_size})".encode(), digest_size=8).digest()
    return clean + 2e-3 * (int.from_bytes(noise, "big") / 2**64 - 0.5)

"""Output hashes and first-token logprobs: the determinism rules, and stability across versions."""

from __future__ import annotations

from engine_model.determinism import first_token_logprob, output_hash


def _hash(temperature: float, seed: int | None, *, invariant: bool = False, pinned: bool = True,
          batch: int = 7, request_id: int = 99) -> str:
    return output_hash(123456789, "v1", temperature=temperature, seed=seed, batch_invariant=invariant,
                       seed_pinned=pinned, batch_size=batch, request_id=request_id, output_tokens=321)


def test_hashes_are_what_earlier_versions_gave() -> None:
    # values from the engine as of the first library (transcripts and cached databases hold them)
    assert _hash(0.0, None) == "3d9ab48b66e9f8bf"
    assert _hash(0.7, 42) == "5df22d29ea401894"
    assert _hash(0.7, None) == "dbdb98c7f6a4bcf5"
    assert first_token_logprob(123456789, "v1", batch_invariant=False, batch_size=7) == -0.33893572255685517
    assert first_token_logprob(123456789, "v1", batch_invariant=True, batch_size=7) == -0.33942172662989034


def test_greedy_output_depends_on_batch_only_without_batch_invariant_kernels() -> None:
    assert _hash(0.0, None, invariant=True, batch=1) == _hash(0.0, None, invariant=True, batch=64)
    assert _hash(0.0, None, batch=1) != _hash(0.0, None, batch=64)
    assert _hash(0.0, None, batch=8) == _hash(0.0, None, batch=8, request_id=5)


def test_seeded_sampling_reproduces_only_while_seeds_are_pinned() -> None:
    assert _hash(0.7, 42, invariant=True, request_id=1) == _hash(0.7, 42, invariant=True, request_id=2)
    assert _hash(0.7, 42, pinned=False, request_id=1) != _hash(0.7, 42, pinned=False, request_id=2)
    assert _hash(0.7, None, request_id=1) != _hash(0.7, None, request_id=2)


def test_logprob_drift_is_small_and_vanishes_with_batch_invariant_kernels() -> None:
    clean = first_token_logprob(5, "v1", batch_invariant=True, batch_size=1)
    assert clean == first_token_logprob(5, "v1", batch_invariant=True, batch_size=33)
    drifts = [first_token_logprob(5, "v1", batch_invariant=False, batch_size=b) - clean for b in range(1, 40)]
    assert all(abs(d) <= 1e-3 for d in drifts) and len(set(drifts)) > 30

"""The engine's speed paths against the plain definitions they replaced (issue 32: a faster engine, same
telemetry). Each fast path must give exactly what the slower code gave; the library's telemetry digests
check the whole, these check the parts on states the library may not reach.

- KVCache counts consecutive prefix hits in place (`_hit_count`), where it sliced the prefix index and
  scanned the slice; `_hits` builds the same block list from that count.
- KVCache moves block ids between its lists as the int objects they are (`_release`, `_register_run`,
  `_compact_lru`), and holds blocks that can never be cached or shared as a count (private blocks): same
  cached blocks, same eviction order, invariants intact.
- ClientTimeouts.next_time answers from its last scan while no queue changed and the head it found is live.
- replica.itl_bucket scans the inter-token-latency bounds where bisect_left was called.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import deque

import pytest

from engine_model.kv_cache import KVCache
from engine_model.replica import ITL_BUCKETS, itl_bucket
from engine_model.request import Request
from engine_model.scheduler import Sequence
from engine_model.sources import LIVE, ClientTimeouts, Deadline


def _leading_run(entries: list[int]) -> list[int]:
    """The entries before the first hole (-1)."""
    if -1 in entries:
        return entries[: entries.index(-1)]
    return entries


def reference_hits(kv: KVCache, prompt_tokens: int, prefix_key: int, prefix_tokens: int,
                   prompt_hash: int) -> list[int]:
    """KVCache._hits as it was before the in-place count: slices of the prefix index, cut at the first hole."""
    if not kv.enable_prefix_caching:
        return []
    bs = kv.block_size
    p_full = min(prefix_tokens, prompt_tokens) // bs if prefix_key else 0
    q_full = prompt_tokens // bs if prompt_hash else 0
    limit = min(max(p_full, q_full), (prompt_tokens - 1) // bs)
    if limit <= 0:
        return []
    n_p = min(p_full, limit)
    hits: list[int] = []
    if n_p:
        entries = kv._p_index.get(prefix_key)
        if entries is None:
            return hits
        hits = _leading_run(entries[:n_p])
        if len(hits) < n_p:
            return hits
    if limit > n_p:
        entries = kv._q_index.get(prompt_hash)
        if entries is not None:
            hits += _leading_run(entries[n_p:limit])
    return hits


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("caching", [True, False])
def test_prefix_hits_match_the_slicing_definition_under_churn(seed: int, caching: bool) -> None:
    """Random admissions, growth and frees over a small pool (so blocks are evicted and index lists get
    holes): before every admission, the hit count and hit blocks equal the old slicing definition."""
    rng = random.Random(seed)
    bs = 16
    kv = KVCache(96, bs, enable_prefix_caching=caching)
    live: dict[int, int] = {}  # seq_id -> tokens held
    next_id = 0
    checked = 0
    for _ in range(400):
        if live and (rng.random() < 0.45 or len(live) > 6):
            sid = rng.choice(sorted(live))
            if rng.random() < 0.3:
                kv.grow(sid, live[sid] + rng.randint(1, 40))  # may fail: the pool is small
                live[sid] = kv.num_tokens(sid)
            else:
                kv.free(sid)
                del live[sid]
        else:
            # few prefix keys and prompt hashes, so prompts recur and share blocks
            prompt = rng.randint(1, 200)
            prefix_key = rng.choice([0, 1, 2])
            prefix_tokens = rng.randint(0, prompt) if prefix_key else 0
            prompt_hash = rng.choice([0, 11, 12, 13])
            args = (prompt, prefix_key, prefix_tokens, prompt_hash)
            want = reference_hits(kv, *args)
            assert kv._hits(*args) == want
            assert kv.lookup_prefix(*args) == len(want) * bs
            checked += 1
            next_id += 1
            first = max(len(want) * bs, min(prompt, rng.randint(1, 120)))
            if kv.admit(next_id, *args, first) is not None:
                live[next_id] = first
        kv.check_invariants()
    assert checked > 100


def test_released_blocks_keep_their_order_and_identity() -> None:
    """Blocks released by a sequence come back in the documented order (tail first to the free list;
    cached blocks to the LRU, evicted least recently released first), and are the same ids."""
    kv = KVCache(32, 16)
    # 100-token prompt with a 48-token shared prefix: blocks 0-2 prefix, 3-5 prompt blocks, 6 partial
    assert kv.admit(1, 100, prefix_key=5, prefix_tokens=48, prompt_hash=9, num_tokens=100) == 0
    table = kv.block_table(1)
    assert len(table) == 6 and kv.private_blocks(1) == 1  # block 6, partial: never cached, held as a count
    assert kv.grow(1, 150)  # generated tokens: blocks 7-9, never cached
    assert kv.block_table(1) == table and kv.num_blocks_held(1) == 10
    free_before = kv.num_free
    kv.free(1)
    kv.check_invariants()
    assert kv.num_free == free_before + 10 - 6  # the six full prompt blocks stay cached
    # cached blocks in eviction order: within one release, tail before head
    assert kv.evictable_blocks() == table[5::-1]
    # the uncached tail's blocks are free again: a successor takes them before evicting any cached block
    assert kv.admit(2, 200, 0, 0, 0, num_tokens=kv.num_free * 16) == 0
    assert kv.evictions == 0 and kv.evictable_blocks() == table[5::-1]
    # then the least recently released cached block first: the prompt's last, then back towards its head
    assert kv.grow(2, kv.num_tokens(2) + 32)
    assert kv.evictions == 2 and kv.evictable_blocks() == table[3::-1]


def _seq(seq_id: int) -> Sequence:
    return Sequence(Request(request_id=seq_id, arrival_s=0.0, prompt_tokens=10, output_tokens=5), seq_id, 10)


def _reference_next(queues: dict[float, deque[Deadline]]) -> float:
    """ClientTimeouts.next_time before it remembered its answer: scan every head, drop a dead earliest
    head and scan again (mutates `queues` as the original did)."""
    while True:
        t_next = float("inf")
        due = None
        for queue in queues.values():
            if queue and queue[0][0] < t_next:
                t_next, due = queue[0][0], queue
        if due is None or due[0][2].state in LIVE:
            return t_next
        due.popleft()


@pytest.mark.parametrize("seed", range(5))
def test_client_timeouts_answer_as_a_fresh_scan(seed: int) -> None:
    """Adds, requests ending (their state leaves LIVE) and repeated asks, in random order: every answer, and
    every queue's contents, equal those of the full scan on a copy."""
    rng = random.Random(seed)
    timeouts = ClientTimeouts()
    seqs: list[Sequence] = []
    t = 0.0
    for i in range(600):
        r = rng.random()
        if r < 0.4:
            t += rng.random()
            seq = _seq(i)
            seq.state = rng.choice(["frontend", "waiting", "decoding"])
            seqs.append(seq)
            timeout = rng.choice([30.0, 60.0, 600.0])
            # gateway jitter: a deadline may fall before the last few of its queue
            timeouts.add(timeout, t + timeout - rng.random() * 2.0, 0, seq)
        elif r < 0.7 and seqs:
            rng.choice(seqs).state = rng.choice(["done", "aborted", "failed", "decoding"])
        copy = {k: deque(q) for k, q in timeouts.queues.items()}
        want = _reference_next(copy)
        assert timeouts.next_time() == want
        assert {k: list(q) for k, q in timeouts.queues.items()} == {k: list(q) for k, q in copy.items()}
        if want < float("inf"):
            assert timeouts.due is not None and timeouts.due[0][0] == want and timeouts.due[0][2].state in LIVE


def test_itl_bucket_is_bisect_left() -> None:
    """Every bound, just below and above it, far outside the range, infinities and NaN."""
    values = [0.0, -1.0, 1e-12, 1e9, math.inf, -math.inf, math.nan]
    for b in ITL_BUCKETS:
        values += [b, math.nextafter(b, 0.0), math.nextafter(b, math.inf)]
    rng = random.Random(3)
    values += [rng.uniform(0.0, 100.0) for _ in range(500)] + [rng.expovariate(30.0) for _ in range(500)]
    for v in values:
        assert itl_bucket(v) == bisect.bisect_left(ITL_BUCKETS, v), v

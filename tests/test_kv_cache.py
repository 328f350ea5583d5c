"""Tests of the paged KV block manager: unit tests per behaviour, then a stateful property test."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine_model.kv_cache import KVCache, block_hash


def snapshot(cache: KVCache) -> dict[str, Any]:
    """Every attribute of the cache, deep-copied: equal snapshots mean nothing changed (LRU order too).
    Per-sequence records are compared by their attributes."""
    return {name: copy.deepcopy(_plain(getattr(cache, name))) for name in _attrs(cache)}


def _attrs(obj: object) -> list[str]:
    # a mypyc-compiled class has no __dict__; it lists its attributes instead
    return list(getattr(type(obj), "__mypyc_attrs__", None) or vars(obj))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "table") and hasattr(value, "num_tokens"):  # a sequence's allocation record
        return {name: getattr(value, name) for name in _attrs(value)}
    return value


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ---- hash classes ---------------------------------------------------------------------------------


def test_block_hash_classes() -> None:
    # prefix of 40 tokens, prompt of 100, block 16: blocks 0,1 in the prefix, 2..5 full prompt blocks.
    args = (16, 100, 7, 40, 99)
    assert block_hash(0, *args) == ("p", 7, 0)
    assert block_hash(1, *args) == ("p", 7, 1)
    assert block_hash(2, *args) == ("q", 99, 2)  # straddles the prefix end
    assert block_hash(5, *args) == ("q", 99, 5)
    assert block_hash(6, *args) is None  # tokens 96..112: partial prompt block
    assert block_hash(1, 16, 100, 0, 40, 99) == ("q", 99, 1)  # prefix_key 0 names no shared content
    assert block_hash(2, 16, 100, 7, 40, 0) is None  # unique prompt outside the prefix
    assert block_hash(0, 16, 100, 0, 0, 0) is None


def test_prefix_hit_shares_prefix_blocks_only() -> None:
    kv = KVCache(64, 16)
    assert kv.admit(1, 100, prefix_key=7, prefix_tokens=40, prompt_hash=11, num_tokens=100) == 0
    # another prompt with the same system prompt: only the two blocks inside the prefix match
    assert kv.lookup_prefix(100, 7, 40, 12) == 32
    assert kv.admit(2, 100, 7, 40, 12, 100) == 32
    assert kv.block_table(2)[:2] == kv.block_table(1)[:2]
    assert not set(kv.block_table(2)[2:]) & set(kv.block_table(1))
    # a different prefix key shares nothing
    assert kv.lookup_prefix(100, 8, 40, 13) == 0
    kv.check_invariants()


def test_prompt_replay_hits_every_full_block_but_leaves_one_token() -> None:
    kv = KVCache(64, 16)
    kv.admit(1, 100, 0, 0, prompt_hash=5, num_tokens=100)
    assert kv.lookup_prefix(100, 0, 0, 5) == 96
    kv.admit(2, 96, 0, 0, prompt_hash=6, num_tokens=96)
    # a prompt that is exactly 6 full blocks may reuse only 5: the last token must be computed
    assert kv.lookup_prefix(96, 0, 0, 6) == 80
    assert kv.admit(3, 96, 0, 0, 6, 96) == 80
    assert kv.num_in_use == 7 + 6 + 1
    kv.check_invariants()


def test_unique_prompt_and_generated_tokens_are_not_cached() -> None:
    kv = KVCache(32, 16)
    kv.admit(1, 40, prefix_key=0, prefix_tokens=0, prompt_hash=0, num_tokens=40)
    kv.free(1)
    assert (kv.num_free, kv.num_evictable, kv.num_cached) == (32, 0, 0)
    # prompt of 20 tokens then 80 generated: only the one full prompt block is cacheable
    kv.admit(2, 20, 0, 0, prompt_hash=9, num_tokens=20)
    assert kv.grow(2, 100)
    assert kv.num_cached == 1
    kv.free(2)
    assert (kv.num_evictable, kv.num_free) == (1, 31)
    kv.check_invariants()


def test_chunked_prefill_registers_blocks_as_they_fill() -> None:
    kv = KVCache(32, 16)
    kv.admit(1, 100, 0, 0, prompt_hash=3, num_tokens=40)
    assert kv.lookup_prefix(100, 0, 0, 3) == 32  # block 2 is still partial
    assert kv.grow(1, 80)
    assert kv.lookup_prefix(100, 0, 0, 3) == 80
    assert kv.grow(1, 100)
    assert kv.lookup_prefix(100, 0, 0, 3) == 96
    kv.check_invariants()


def test_prefix_caching_off() -> None:
    kv = KVCache(32, 16, enable_prefix_caching=False)
    assert kv.admit(1, 100, 7, 64, 5, 100) == 0
    assert kv.lookup_prefix(100, 7, 64, 5) == 0
    assert kv.admit(2, 100, 7, 64, 5, 100) == 0
    assert not set(kv.block_table(1)) & set(kv.block_table(2))
    kv.free(1)
    kv.free(2)
    assert (kv.num_free, kv.num_evictable, kv.num_cached) == (32, 0, 0)
    assert kv.prefix_queries_tokens == kv.prefix_hits_tokens == 0
    kv.check_invariants()


# ---- reuse, eviction, LRU ------------------------------------------------------------------------


def test_hit_after_owner_finished_reuses_evictable_blocks() -> None:
    kv = KVCache(200, 16)
    kv.admit(1, 1000, prefix_key=7, prefix_tokens=512, prompt_hash=1, num_tokens=1000)
    kv.free(1)
    assert kv.num_evictable == 62  # 62 full prompt blocks; the partial 63rd went to the free list
    free_before = kv.num_free
    assert kv.admit(2, 1000, 7, 512, prompt_hash=2, num_tokens=1000) == 512
    assert kv.num_in_use == 63
    assert free_before - kv.num_free == 63 - 32  # only the non-shared part is new
    assert kv.num_evictable == 62 - 32  # the first request's own prompt blocks are still cached
    assert kv.prefix_queries_tokens == 2000
    assert kv.prefix_hits_tokens == 512


def test_lru_evicts_oldest_released_first_and_tail_before_head() -> None:
    kv = KVCache(16, 16)
    for sid, h in ((1, 101), (2, 102), (3, 103)):
        kv.admit(sid, 65, 0, 0, h, 65)  # 4 full blocks + 1 partial
    for sid in (1, 2, 3):
        kv.free(sid)
    assert (kv.num_free, kv.num_evictable) == (4, 12)
    # a newcomer needing 5 blocks takes the 4 free ones, then evicts exactly one: seq 1's tail
    kv.admit(4, 80, 0, 0, 0, 80)
    assert kv.evictions == 1
    assert kv.lookup_prefix(65, 0, 0, 101) == 48
    assert kv.lookup_prefix(65, 0, 0, 102) == 64
    kv.free(4)
    # a hit refreshes recency: seq 2's blocks become the oldest
    kv.admit(5, 65, 0, 0, 101, 65)
    kv.free(5)
    kv.admit(6, 16 * 8, 0, 0, 0, 16 * 8)  # 4 free + 4 evictions: all of seq 2
    assert kv.lookup_prefix(65, 0, 0, 102) == 0
    assert kv.lookup_prefix(65, 0, 0, 103) == 64
    assert kv.lookup_prefix(65, 0, 0, 101) == 64
    kv.check_invariants()


def test_lru_order_survives_many_revivals() -> None:
    """A popular prompt goes in and out of the LRU on every request; the entries that churn leaves
    behind must never disturb the order of blocks released long ago."""
    kv = KVCache(24, 16)
    kv.admit(1, 65, 0, 0, 201, 65)
    kv.free(1)
    old = kv.evictable_blocks()
    assert len(old) == 4
    for sid in range(2, 200):  # far more releases than the pool has blocks
        assert kv.admit(sid, 65, 0, 0, 301, 65) == (0 if sid == 2 else 64)
        kv.free(sid)
        hot = kv.evictable_blocks()[4:]
        assert kv.evictable_blocks() == old + hot and len(hot) == 4
    kv.check_invariants()
    # the oldest go first, tail before head, then the popular prompt's
    kv.admit(500, 16 * 20, 0, 0, 0, 16 * 20)  # 16 free + 4 evictions
    assert kv.evictions == 4 and kv.evictable_blocks() == hot
    kv.admit(501, 16 * 2, 0, 0, 0, 16 * 2)
    assert kv.evictable_blocks() == hot[2:]
    kv.check_invariants()


def test_hits_stop_at_the_first_missing_block() -> None:
    kv = KVCache(6, 16)
    kv.admit(1, 65, 0, 0, prompt_hash=1, num_tokens=16)  # W: block 0 cached
    assert kv.admit(2, 65, 0, 0, prompt_hash=1, num_tokens=32) == 16  # V: caches block 1
    assert kv.grow(1, 65)  # W's block 1 duplicates V's and stays uncached; W caches blocks 2 and 3
    assert kv.lookup_prefix(65, 0, 0, 1) == 64
    kv.free(2)
    kv.admit(3, 10, 0, 0, 0, 10)  # evicts V's block 1: the cache now has blocks 0, 2, 3 of prompt 1
    assert kv.evictions == 1
    assert kv.lookup_prefix(65, 0, 0, 1) == 16
    kv.check_invariants()


def test_partial_last_block_returns_to_free_list() -> None:
    kv = KVCache(8, 16)
    kv.admit(1, 40, 0, 0, prompt_hash=4, num_tokens=40)
    kv.free(1)
    assert (kv.num_free, kv.num_evictable) == (6, 2)


def test_reset_prefix_cache_keeps_live_blocks() -> None:
    kv = KVCache(16, 16)
    kv.admit(1, 64, 0, 0, 1, 64)
    kv.admit(2, 64, 0, 0, 2, 64)
    kv.free(1)
    kv.reset_prefix_cache()
    assert (kv.num_evictable, kv.num_free, kv.num_in_use) == (0, 12, 4)
    assert kv.lookup_prefix(64, 0, 0, 1) == 0
    assert kv.lookup_prefix(64, 0, 0, 2) == 48  # seq 2 still holds its blocks
    kv.check_invariants()


def test_private_blocks_are_a_count_and_reused_before_any_eviction() -> None:
    # Blocks past reg_bound can never be cached or shared: they are held as a count, not ids, and return to
    # the free blocks as one; a successor takes free blocks before it evicts a cached one.
    kv = KVCache(64, 16)
    kv.admit(1, 100, prefix_key=7, prefix_tokens=32, prompt_hash=0, num_tokens=100)
    assert kv.grow(1, 300)  # 19 blocks: 2 cacheable prefix blocks, 17 that are never cached
    assert (len(kv.block_table(1)), kv.private_blocks(1), kv.num_blocks_held(1)) == (2, 17, 19)
    assert (kv.num_in_use, kv.num_free) == (19, 45)
    kv.free(1)
    assert (kv.num_evictable, kv.num_free, kv.num_in_use) == (2, 62, 0)
    assert kv.admit(2, 300, 0, 0, 0, 300) == 0  # nothing cacheable: every block private
    assert (kv.block_table(2), kv.private_blocks(2)) == ([], 19)
    assert (kv.num_evictable, kv.num_free, kv.evictions) == (2, 43, 0)
    assert kv.grow(2, 300 + 43 * 16)  # the last free block: still no eviction
    assert (kv.num_free, kv.evictions) == (0, 0)
    assert kv.grow(2, 300 + 44 * 16)  # one more: the least recently released cached block goes
    assert (kv.num_evictable, kv.evictions, kv.num_cached) == (1, 1, 1)
    assert not kv.grow(2, 300 + 46 * 16)  # two more than there are: refused, nothing changed
    assert kv.private_blocks(2) == 63
    kv.check_invariants()


@pytest.mark.parametrize("first", [1, 2])
def test_forked_long_sequence_keeps_shared_blocks_until_the_last_holder_goes(first: int) -> None:
    kv = KVCache(64, 16)
    kv.admit(1, 100, prefix_key=7, prefix_tokens=32, prompt_hash=0, num_tokens=100)
    assert kv.grow(1, 200)  # 13 blocks, the last one partial
    kv.fork(1, 2)
    assert kv.grow(2, 300)  # the child copies the partial block, then takes 6 more
    assert kv.num_in_use == 13 + 1 + 6
    kv.free(first)
    # the 12 full blocks are still held by the other sequence; only the freed one's private blocks go
    assert kv.num_in_use == (20 - 1 if first == 1 else 20 - 7)
    kv.check_invariants()
    kv.free(3 - first)
    assert (kv.num_in_use, kv.num_evictable, kv.num_free) == (0, 2, 62)
    kv.check_invariants()


# ---- refusals change nothing -------------------------------------------------------------------------


def test_admit_counts_its_own_hits_against_available_blocks() -> None:
    kv = KVCache(4, 16)
    kv.admit(1, 49, prefix_key=3, prefix_tokens=32, prompt_hash=1, num_tokens=49)
    kv.free(1)
    assert (kv.num_free, kv.num_evictable) == (1, 3)
    # needs 5 blocks: 2 hits + 3 new, but only 1 free + 1 evictable that is not one of its own hits
    before = snapshot(kv)
    assert kv.admit(2, 80, 3, 32, 2, 80) is None
    assert snapshot(kv) == before
    # a replay needing 4 blocks (3 hits + 1 new) fits exactly
    assert kv.admit(3, 49, 3, 32, 1, 49) == 48
    kv.check_invariants()


def test_refusals_leave_state_unchanged() -> None:
    kv = KVCache(4, 16)
    kv.admit(1, 30, 0, 0, 1, 30)
    kv.fork(1, 2)
    kv.admit(3, 32, 0, 0, 2, 32)
    before = snapshot(kv)
    assert kv.grow(3, 33 + 16) is False  # needs 2, has 0 free
    assert kv.ensure_writable_last(2) is False  # shared partial block, no block for the copy
    assert kv.admit(4, 10, 0, 0, 0, 10) is None
    assert kv.lookup_prefix(30, 0, 0, 1) == 16
    assert snapshot(kv) == before


def test_errors() -> None:
    kv = KVCache(8, 16)
    kv.admit(1, 20, 0, 0, 0, 20)
    with pytest.raises(ValueError):
        kv.admit(1, 20, 0, 0, 0, 20)
    with pytest.raises(KeyError):
        kv.free(2)
    kv.free(1)
    with pytest.raises(KeyError):
        kv.free(1)  # double free
    kv.admit(2, 100, 0, 0, 5, 100)
    with pytest.raises(ValueError):
        kv.admit(3, 100, 0, 0, 5, 16)  # fewer tokens than the 96 it would reuse
    with pytest.raises(ValueError):
        KVCache(0)


# ---- fork and copy-on-write ---------------------------------------------------------------------------


def test_fork_shares_then_copy_on_write_privatises_last_block() -> None:
    kv = KVCache(16, 16)
    kv.admit(1, 40, 0, 0, 0, 40)
    kv.fork(1, 2)
    assert kv.block_table(2) == kv.block_table(1)
    assert kv.num_in_use == 3
    assert kv.ensure_writable_last(2)
    t1, t2 = kv.block_table(1), kv.block_table(2)
    assert t1[:2] == t2[:2] and t1[2] != t2[2]
    assert kv.num_in_use == 4
    # the parent's last block is now private: no second copy
    assert kv.ensure_writable_last(1)
    assert kv.block_table(1) == t1
    kv.free(1)
    assert kv.num_in_use == 3  # only the parent's private last block was released
    kv.free(2)
    assert kv.num_free == 16
    kv.check_invariants()


def test_grow_copies_a_shared_partial_block_before_writing() -> None:
    kv = KVCache(8, 4)
    kv.admit(1, 9, prefix_key=1, prefix_tokens=8, prompt_hash=0, num_tokens=6)
    kv.fork(1, 2)
    assert kv.blocks_needed(1, 8) == 1  # no new slot needed, only the copy
    assert kv.grow(1, 8)
    assert kv.block_table(1)[1] != kv.block_table(2)[1]
    # the sibling's block still holds 2 tokens: it must not have entered the cache as full block 1
    kv.free(1)
    free_before = kv.num_free
    kv.free(2)
    assert kv.num_free == free_before + 1
    assert kv.lookup_prefix(9, 1, 8, 0) == 8  # block 1 is cached through seq 1's private copy
    kv.check_invariants()


def test_full_last_block_needs_no_copy() -> None:
    kv = KVCache(8, 16)
    kv.admit(1, 32, 0, 0, 0, 32)
    kv.fork(1, 2)
    before = snapshot(kv)
    assert kv.ensure_writable_last(2)
    assert snapshot(kv) == before


# ---- stateful property test ---------------------------------------------------------------------------

# Content library: a prompt_hash fixes the whole prompt, a prefix_key fixes its prefix length.
PREFIX_LEN = {0: 0, 1: 8, 2: 20, 3: 33}
PROMPTS = [  # (prompt_tokens, prefix_key, prompt_hash)
    (9, 1, 0),
    (24, 1, 1),
    (24, 2, 2),
    (40, 2, 3),
    (13, 0, 4),
    (33, 3, 5),
    (50, 3, 0),
    (5, 0, 0),
    (16, 0, 6),
]


class KVCacheMachine(RuleBasedStateMachine):
    """Random admit/grow/free/fork/CoW/reset/lookup sequences against an independent model of the
    allocation policy (free list first, then LRU eviction) and of block ownership."""

    def __init__(self) -> None:
        super().__init__()
        self.kv = KVCache(1)
        self.next_id = 0
        # seq -> (family, hit blocks, prompt index); a forked child joins its parent's family
        self.seqs: dict[int, tuple[int, int, int]] = {}
        # the expected LRU, least recently released first, kept from what each operation must do to it
        self.lru: list[int] = []

    @initialize(
        num_blocks=st.integers(3, 24),
        block_size=st.sampled_from([1, 4, 8, 16]),
        caching=st.booleans(),
    )
    def setup(self, num_blocks: int, block_size: int, caching: bool) -> None:
        self.kv = KVCache(num_blocks, block_size, caching)

    def live_blocks(self) -> Counter[int]:
        return Counter(b for sid in self.seqs for b in self.kv.block_table(sid))

    def private_blocks(self) -> int:
        """Blocks the live sequences hold as counts (past their reg_bound, unforked: no ids)."""
        return sum(self.kv.private_blocks(sid) for sid in self.seqs)

    def expect_allocation(self, before: tuple[int, int, int], n_new: int, revived: int) -> None:
        free0, evict0, evictions0 = before
        kv = self.kv
        from_free = min(n_new, free0)
        assert kv.num_free == free0 - from_free
        assert kv.evictions - evictions0 == n_new - from_free
        assert kv.num_evictable == evict0 - revived - (n_new - from_free)

    def expect_evictions(self, evictions0: int, evictable_before: set[int], revived: list[int],
                         fresh: list[int]) -> None:
        """Hits taken out of the LRU leave it; the k blocks evicted (k: the eviction counter's step) must be
        its k oldest entries (`consistent` then finds exactly the rest in the LRU), and every fresh block with
        an id that came from it must be one of them (a private block's id is not visible)."""
        self.lru = [b for b in self.lru if b not in revived]
        k = self.kv.evictions - evictions0
        evicted = [b for b in fresh if b in evictable_before]
        assert set(evicted) <= set(self.lru[:k]), "eviction did not take the least recently released blocks"
        assert evicted == [b for b in self.lru[:k] if b in evicted], "evicted blocks handed out out of order"
        del self.lru[:k]

    def counts(self) -> tuple[int, int, int]:
        return self.kv.num_free, self.kv.num_evictable, self.kv.evictions

    @rule(p=st.integers(0, len(PROMPTS) - 1), chunk=st.integers(0, 60))
    def admit(self, p: int, chunk: int) -> None:
        kv = self.kv
        prompt, key, phash = PROMPTS[p]
        args = (prompt, key, PREFIX_LEN[key], phash)
        cached = kv.lookup_prefix(*args)
        num_tokens = cached + chunk
        live = self.live_blocks()
        before, state, q0, h0 = self.counts(), snapshot(kv), kv.prefix_queries_tokens, kv.prefix_hits_tokens
        evictable = set(kv.evictable_blocks())
        sid = self.next_id
        self.next_id += 1
        got = kv.admit(sid, *args, num_tokens)
        if got is None:
            assert snapshot(kv) == state
            return
        assert got == cached
        table = kv.block_table(sid)
        hits = cached // kv.block_size
        held = kv.num_blocks_held(sid)
        assert held == ceil_div(num_tokens, kv.block_size)
        bs = kv.block_size
        # blocks that may be cached get ids (the prefix's, and the prompt's when it has a hash); the rest
        # of an unforked sequence's blocks are private
        by_id = max(min(PREFIX_LEN[key], prompt) // bs if key else 0, prompt // bs if phash else 0)
        assert len(table) == min(held, by_id if kv.enable_prefix_caching else 0)
        assert kv.private_blocks(sid) == held - len(table)
        assert all(b not in live for b in table[hits:]), "a fresh block was taken from a live sequence"
        self.expect_allocation(before, held - hits, sum(1 for b in table[:hits] if b not in live))
        self.expect_evictions(before[2], evictable, [b for b in table[:hits] if b in evictable], table[hits:])
        if kv.enable_prefix_caching:
            assert (kv.prefix_queries_tokens - q0, kv.prefix_hits_tokens - h0) == (prompt, cached)
        self.seqs[sid] = (sid, hits, p)
        if kv.enable_prefix_caching and num_tokens >= prompt:
            # with the whole prompt resident, every cacheable block of it must now be hittable
            bs = kv.block_size
            cacheable = prompt // bs if phash else (PREFIX_LEN[key] // bs if key else 0)
            assert kv.lookup_prefix(*args) == min(cacheable, (prompt - 1) // bs) * bs

    @precondition(lambda self: self.seqs)
    @rule(data=st.data(), extra=st.integers(0, 40))
    def grow(self, data: st.DataObject, extra: int) -> None:
        kv = self.kv
        sid = data.draw(st.sampled_from(sorted(self.seqs)))
        old_table, old_tokens, old_held = kv.block_table(sid), kv.num_tokens(sid), kv.num_blocks_held(sid)
        target = old_tokens + extra
        live = self.live_blocks()
        # the last block is the table's last unless private blocks follow (those are never shared)
        last_by_id = len(old_table) == old_held
        cow = extra > 0 and old_tokens % kv.block_size != 0 and last_by_id and live[old_table[-1]] > 1
        need = kv.blocks_needed(sid, target)
        assert need == max(0, ceil_div(target, kv.block_size) - old_held) + cow
        before, state = self.counts(), snapshot(kv)
        evictable = set(kv.evictable_blocks())
        if not kv.grow(sid, target):
            assert need > before[0] + before[1] and not kv.can_allocate(need)
            assert snapshot(kv) == state
            return
        table = kv.block_table(sid)
        kept = len(old_table) - cow
        assert table[:kept] == old_table[:kept]
        assert kv.num_tokens(sid) == target
        assert all(b not in live for b in table[kept:]), "grow wrote into a block another sequence holds"
        assert kv.num_blocks_held(sid) == ceil_div(target, kv.block_size)
        self.expect_allocation(before, need, 0)
        self.expect_evictions(before[2], evictable, [], table[kept:])

    @precondition(lambda self: self.seqs)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        kv = self.kv
        sid = data.draw(st.sampled_from(sorted(self.seqs)))
        table, tokens, private = kv.block_table(sid), kv.num_tokens(sid), kv.private_blocks(sid)
        free0, evict0, in_use0 = kv.num_free, kv.num_evictable, kv.num_in_use
        del self.seqs[sid]
        released = set(table) - set(self.live_blocks())
        evictable = set(kv.evictable_blocks())
        kv.free(sid)
        # released cached blocks join the LRU's young end, the sequence's tail before its head
        now = set(kv.evictable_blocks())
        assert now - evictable <= released and evictable <= now
        self.lru += [b for b in reversed(table) if b in now - evictable]
        assert kv.num_in_use == in_use0 - len(released) - private
        assert kv.num_free - free0 + kv.num_evictable - evict0 == len(released) + private
        if not kv.enable_prefix_caching:
            assert kv.num_evictable == 0
        if tokens % kv.block_size and not private and table[-1] in released:
            assert kv.num_free > free0, "a partial last block was cached instead of freed"
        with pytest.raises(KeyError):
            kv.free(sid)

    @precondition(lambda self: self.seqs)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        kv = self.kv
        parent = data.draw(st.sampled_from(sorted(self.seqs)))
        before = self.counts(), kv.num_in_use
        child = self.next_id
        self.next_id += 1
        kv.fork(parent, child)
        assert kv.block_table(child) == kv.block_table(parent)
        assert kv.private_blocks(child) == kv.private_blocks(parent) == 0  # a fork gives every block an id
        assert len(kv.block_table(child)) == ceil_div(kv.num_tokens(child), kv.block_size)
        assert kv.num_tokens(child) == kv.num_tokens(parent)
        assert (self.counts(), kv.num_in_use) == before
        self.seqs[child] = self.seqs[parent]

    @precondition(lambda self: self.seqs)
    @rule(data=st.data())
    def copy_on_write(self, data: st.DataObject) -> None:
        kv = self.kv
        sid = data.draw(st.sampled_from(sorted(self.seqs)))
        table, tokens = kv.block_table(sid), kv.num_tokens(sid)
        live = self.live_blocks()
        shared_partial = (bool(table) and not kv.private_blocks(sid) and tokens % kv.block_size != 0
                          and live[table[-1]] > 1)
        before, state = self.counts(), snapshot(kv)
        evictable = set(kv.evictable_blocks())
        ok = kv.ensure_writable_last(sid)
        if not shared_partial:
            assert ok and snapshot(kv) == state
            return
        if not ok:
            assert before[0] + before[1] == 0 and snapshot(kv) == state
            return
        new = kv.block_table(sid)
        assert new[:-1] == table[:-1] and new[-1] not in live
        assert self.live_blocks()[table[-1]] == live[table[-1]] - 1
        self.expect_allocation(before, 1, 0)
        self.expect_evictions(before[2], evictable, [], new[-1:])

    @rule()
    def reset(self) -> None:
        kv = self.kv
        in_use = kv.num_in_use
        tables = {sid: kv.block_table(sid) for sid in self.seqs}
        kv.reset_prefix_cache()
        self.lru = []
        assert (kv.num_evictable, kv.num_free, kv.num_in_use) == (0, kv.num_blocks - in_use, in_use)
        assert tables == {sid: kv.block_table(sid) for sid in self.seqs}
        if not self.seqs:
            assert all(kv.lookup_prefix(n, k, PREFIX_LEN[k], h) == 0 for n, k, h in PROMPTS)

    @rule(p=st.integers(0, len(PROMPTS) - 1))
    def lookup(self, p: int) -> None:
        prompt, key, phash = PROMPTS[p]
        state = snapshot(self.kv)
        got = self.kv.lookup_prefix(prompt, key, PREFIX_LEN[key], phash)
        assert 0 <= got < prompt and got % self.kv.block_size == 0
        if not self.kv.enable_prefix_caching:
            assert got == 0
        assert snapshot(self.kv) == state

    @invariant()
    def consistent(self) -> None:
        kv = self.kv
        kv.check_invariants()
        assert kv.evictable_blocks() == self.lru
        live = self.live_blocks()
        assert kv.num_in_use == len(live) + self.private_blocks()
        assert kv.num_free >= 0 and kv.num_evictable >= 0
        assert kv.num_free + kv.num_evictable + kv.num_in_use == kv.num_blocks
        assert 0.0 <= kv.usage <= 1.0
        # A block held by several sequences: same position everywhere (fork copies, hits match by index),
        # and at most one fork family holds it outside its prefix-hit region (the one that filled it).
        where: dict[int, set[int]] = {}
        owners: dict[int, set[int]] = {}
        for sid, (family, hits, _) in self.seqs.items():
            for i, b in enumerate(kv.block_table(sid)):
                where.setdefault(b, set()).add(i)
                if i >= hits:
                    owners.setdefault(b, set()).add(family)
        for b, positions in where.items():
            assert len(positions) == 1, f"block {b} at positions {positions}"
            assert len(owners.get(b, ())) <= 1, f"block {b} handed to unrelated sequences {owners[b]}"


KVCacheMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestKVCacheStateful = pytest.mark.slow(KVCacheMachine.TestCase)  # hypothesis: ~17 s on a busy machine

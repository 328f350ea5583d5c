"""Paged KV cache block manager for one replica: block pool, prefix cache with LRU eviction, fork and CoW.

Modelled on vLLM V1's block pool (`vllm/v1/core/block_pool.py`, `kv_cache_manager.py`): a fixed pool of
physical blocks of `block_size` token slots, each with a reference count. Full blocks whose content is
known are registered in a prefix cache keyed by a content hash; when their last user goes away they stay
resident as "evictable" and are reclaimed least recently used first, only once the free list is empty.

The simulation carries no tokens, so content identity comes from the request's ids (see `block_hash`):
a block inside the shared prefix is named by `prefix_key`, any other full prompt block by `prompt_hash`.
This gives the same hits as vLLM's chained block hashes for these two content classes, because either id
fixes every token before and inside the block.

Simplifications, each deliberate:
- Blocks holding generated tokens are never cached: a sampled continuation practically never recurs.
- One block per hash. When a second block fills with content that is already cached (vLLM keeps both),
  the newcomer stays unregistered and returns to the free list when released.
- Free blocks are used before any cached block is evicted. vLLM keeps one queue for both, which can
  evict a cached block while never-used blocks remain; preferring the free list keeps more hits.

Every operation costs O(blocks touched) with plain lists and dicts (amortised: the LRU is compacted
now and then); nothing loops over tokens or over the whole pool, except `check_invariants`, which is for
tests. The simulator calls grow/free once per sequence per block boundary, so work per block is kept
off the common path: a free block's refcount slot already holds 1 (the count it is handed out with).

Private blocks are a count, not ids. A block of an unforked sequence past its `reg_bound` can never carry
a hash nor be shared: nothing ever looks it up, so which physical block it is cannot matter. Such blocks
(about nine in ten of the standard fleet's: long unique prompts after a short shared prefix) are held as
a number per sequence, and the pool counts them against its free ids (`num_free` = free ids - private
blocks). Ids are handed out only to blocks that may be cached or shared; a fork gives the parent's private
blocks ids first. Every count, hit and eviction is what it was when each block had an id: before, each
request's ~150 prompt block ids were sliced off the free list and later put back, a reference-count write
per id on objects scattered over the heap (a fifth of the standard fleet's simulation).

Why one module of ~600 lines: the block pool, the prefix hash index and the free list are one data structure
whose invariants (reference counts, evictable blocks, hash ownership) span every method; splitting them would
separate code that must change together.
"""

from __future__ import annotations

from collections import deque
from typing import Final, cast

from mypy_extensions import mypyc_attr

BlockHash = tuple[str, int, int]
"""("p", prefix_key, block_index) or ("q", prompt_hash, block_index)."""


def block_hash(
    index: int, block_size: int, prompt_tokens: int, prefix_key: int, prefix_tokens: int, prompt_hash: int
) -> BlockHash | None:
    """Content hash of full block `index` (0-based) of a prompt, or None when the block is not cacheable.

    Token counts are tokens. Block i spans tokens [i*block_size, (i+1)*block_size). It is a prefix block
    ("p", prefix_key, i) when it lies entirely within the first `prefix_tokens` tokens and prefix_key != 0;
    otherwise a prompt block ("q", prompt_hash, i) when it lies entirely within the prompt and
    prompt_hash != 0; otherwise None (partial block, generated tokens, or content that never recurs).
    """
    end = (index + 1) * block_size
    if prefix_key and end <= min(prefix_tokens, prompt_tokens):
        return ("p", prefix_key, index)
    if prompt_hash and end <= prompt_tokens:
        return ("q", prompt_hash, index)
    return None


def _as_objects(blocks: list[int]) -> list[object]:
    """The same list, typed as holding objects: compiled code then copies its items between lists without
    unboxing and re-boxing them (see KVCache._release). A cast, no copy."""
    return cast("list[object]", blocks)


_FEW_BLOCKS: Final = 8
"""Up to this many blocks, _take_free moves them one by one (a decode top-up takes 1 to 4); more go as slices."""


def _take_free(table: list[int], free: list[int], n: int) -> None:
    """Append the last n blocks of the free list to table, the last first (free[-1], free[-2], ...), and
    drop them from the free list; the caller has checked that n <= len(free)."""
    if n <= _FEW_BLOCKS:
        # a pop and an append per block beat the slice, delete, reverse and extend, each of which builds or
        # walks a list, for the few blocks a decode step needs; the ids move as objects (see _release)
        into, source = _as_objects(table), _as_objects(free)
        for _ in range(n):
            into.append(source.pop())
        return
    got = free[-n:]
    del free[-n:]
    got.reverse()
    table += got


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class _Seq:
    """One sequence's allocation: its block table and the content ids its prompt blocks hash from.

    p_full / reg_bound (blocks): block i is a cacheable prefix block when i < p_full, a cacheable prompt
    block when p_full <= i < reg_bound; blocks at i >= reg_bound never carry a hash (0 with caching off).
    shared: set by fork on parent and child; while False, every unhashed block of the table is held by
    this sequence alone (only a prefix hit, which needs a hash, or a fork can share a block).
    table and private: the sequence's blocks are its table's ids, then `private` blocks held as a count
    (see the module docstring). Unforked, the table holds its first min(blocks, reg_bound) blocks and the
    rest are private; forked (shared), the table holds every block and private is 0.
    A plain class, not a dataclass: mypyc compiles its __init__ (one per request).
    """

    def __init__(self, table: list[int], num_tokens: int, prompt_tokens: int, prefix_key: int,
                 prefix_tokens: int, prompt_hash: int, p_full: int = 0, reg_bound: int = 0,
                 shared: bool = False, private: int = 0) -> None:
        self.table = table
        self.private = private
        self.num_tokens = num_tokens
        self.prompt_tokens = prompt_tokens
        self.prefix_key = prefix_key
        self.prefix_tokens = prefix_tokens
        self.prompt_hash = prompt_hash
        self.p_full = p_full
        self.reg_bound = reg_bound
        self.shared = shared


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class KVCache:
    """Block manager of one replica's KV pool.

    Invariants (checked by `check_invariants`): num_free + num_evictable + num_in_use == num_blocks; a
    block's refcount equals the number of live block tables holding it, never negative; a block with
    refcount 0 is either on the free list or evictable, never both; evictable blocks are exactly the
    cached blocks with refcount 0; a sequence of n tokens holds ceil(n / block_size) blocks.

    Storage: `_ref[b]` is block b's refcount unless b is on the free list, where the slot holds 1, the
    count b gets when handed out; so neither allocating from nor releasing to the free list writes it.
    The free list holds every id no table and no LRU run holds; `_n_private` of those stand for the
    private blocks sequences hold as counts, so the blocks really free are the rest (`num_free`).
    """

    def __init__(self, num_blocks: int, block_size: int = 16, enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1:
            raise ValueError("num_blocks must be >= 1")
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self._ref: list[int] = [1] * num_blocks  # all blocks start on the free list (see class docstring)
        # Popped from the end, so a fresh pool hands out block 0 first.
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))
        self._n_private = 0  # private blocks held (counts, no ids: see the module docstring)
        self._hash_of: list[BlockHash | None] = [None] * num_blocks
        # The prefix cache, hash -> block, stored per content id: index[key][i] is the block holding
        # block i of that content, or -1. Lookups then slice a list instead of hashing one tuple per
        # block. Lists never end in -1 and are dropped when empty, so unique prompts leave nothing behind.
        self._p_index: dict[int, list[int]] = {}
        self._q_index: dict[int, list[int]] = {}
        self._n_cached = 0
        # The LRU of evictable blocks (cached, refcount 0), as runs: each release that leaves cached blocks
        # unreferenced appends one run (its blocks, the first released last, so eviction pops from the
        # end). A block belongs to the run _run_of names (the list itself; None: not evictable); an entry
        # for a block revived or re-released since is stale and skipped when reached. Per block this costs
        # two list writes where a hashed LRU (an OrderedDict) cost an insert and a delete, and a popular
        # system prompt's blocks go in and out of the LRU whenever its last user leaves. The eviction
        # order is the same: least recently released first, tail before head within a release.
        self._lru: deque[list[int]] = deque()
        self._run_of: list[list[int] | None] = [None] * num_blocks
        self._n_evictable = 0
        # entries in all runs, stale ones included; compacted past 8 * num_blocks (a popular prefix's blocks
        # re-enter the LRU at every release, and at 4x the compactions cost ~3 % of a fleet run)
        self._lru_slots = 0
        self._seqs: dict[int, _Seq] = {}
        # Monotone counters, in tokens (vllm:prefix_cache_queries / _hits) and blocks.
        self.prefix_queries_tokens = 0
        self.prefix_hits_tokens = 0
        self.evictions = 0

    # ---- gauges ------------------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        """Free blocks (never cached, or dropped from the cache): the free ids less the private blocks."""
        return len(self._free) - self._n_private

    @property
    def num_evictable(self) -> int:
        """Cached blocks no sequence holds: reusable by a prefix hit until evicted."""
        return self._n_evictable

    @property
    def num_in_use(self) -> int:
        """Blocks held by at least one sequence."""
        return self.num_blocks - len(self._free) + self._n_private - self._n_evictable

    @property
    def usage(self) -> float:
        """Fraction of blocks in use, 0..1; evictable blocks count as free, as in vllm:kv_cache_usage_perc."""
        return self.num_in_use / self.num_blocks

    @property
    def num_cached(self) -> int:
        """Blocks registered in the prefix cache, in use or evictable."""
        return self._n_cached

    @property
    def num_seqs(self) -> int:
        return len(self._seqs)

    def __contains__(self, seq_id: object) -> bool:
        return seq_id in self._seqs

    def block_table(self, seq_id: int) -> list[int]:
        """Copy of the sequence's block ids, in token order: every block of a forked sequence, else the blocks
        below its reg_bound (those that may be cached or shared); the rest are `private_blocks`, held as a
        count. Unknown seq raises KeyError."""
        return list(self._seqs[seq_id].table)

    def private_blocks(self, seq_id: int) -> int:
        """Blocks the sequence holds past its block table, as a count (no ids). Unknown seq raises KeyError."""
        return self._seqs[seq_id].private

    def num_blocks_held(self, seq_id: int) -> int:
        """Every block the sequence holds: its table's and its private ones. Unknown seq raises KeyError."""
        seq = self._seqs[seq_id]
        return len(seq.table) + seq.private

    def num_tokens(self, seq_id: int) -> int:
        """Tokens the sequence's blocks hold. Unknown seq raises KeyError."""
        return self._seqs[seq_id].num_tokens

    def can_allocate(self, n_blocks: int) -> bool:
        """True when n_blocks new blocks could be had now (free list plus evictable cached blocks)."""
        return n_blocks <= len(self._free) - self._n_private + self._n_evictable

    def _shared_partial_last(self, seq: _Seq) -> bool:
        # only a fork shares a partial block, and a forked sequence's table holds all its blocks
        return (seq.shared and bool(seq.table) and seq.num_tokens % self.block_size != 0
                and self._ref[seq.table[-1]] > 1)

    def blocks_needed(self, seq_id: int, num_tokens: int) -> int:
        """Blocks `grow(seq_id, num_tokens)` would allocate, including a copy-on-write copy of a shared
        partial last block; 0 when the sequence already holds num_tokens tokens."""
        seq = self._seqs[seq_id]
        if num_tokens <= seq.num_tokens:
            return 0
        return -(-num_tokens // self.block_size) - len(seq.table) - seq.private + self._shared_partial_last(seq)

    # ---- prefix cache ------------------------------------------------------------------------------

    def _hit_count(self, prompt_tokens: int, prefix_key: int, prefix_tokens: int, prompt_hash: int) -> int:
        """Blocks of this prompt already cached: consecutive hits from block 0 (prefix blocks, then prompt
        blocks), at most (prompt_tokens - 1) // block_size. Counted in place: every admission asks this
        twice (lookup_prefix, then admit) for prompts of ~150 blocks, where slicing the index and scanning
        the slice with `in` (a generic comparison per entry) cost several times more."""
        if not self.enable_prefix_caching:
            return 0
        bs = self.block_size
        p_full = min(prefix_tokens, prompt_tokens) // bs if prefix_key else 0
        q_full = prompt_tokens // bs if prompt_hash else 0
        # At least one prompt token is always computed so the step produces logits (vLLM does the same).
        limit = min(max(p_full, q_full), (prompt_tokens - 1) // bs)
        if limit <= 0:
            return 0
        n_p = min(p_full, limit)
        n = 0
        if n_p:
            entries = self._p_index.get(prefix_key)
            if entries is None:
                return 0
            stop = min(n_p, len(entries))
            while n < stop and entries[n] >= 0:
                n += 1
            if n < n_p:
                return n
        if limit > n_p:
            entries = self._q_index.get(prompt_hash)
            if entries is not None:
                stop = min(limit, len(entries))
                while n < stop and entries[n] >= 0:
                    n += 1
        return n

    def _hits(self, prompt_tokens: int, prefix_key: int, prefix_tokens: int, prompt_hash: int,
              n: int = -1) -> list[int]:
        """The cached blocks `_hit_count` counts (or `n`, that count when the caller knows it), in block
        order (a new list)."""
        if n < 0:
            n = self._hit_count(prompt_tokens, prefix_key, prefix_tokens, prompt_hash)
        if n == 0:
            return []
        bs = self.block_size
        n_p = min(min(prefix_tokens, prompt_tokens) // bs if prefix_key else 0, n)
        if n_p == n:
            return self._p_index[prefix_key][:n]
        q = self._q_index[prompt_hash]
        return self._p_index[prefix_key][:n_p] + q[n_p:n] if n_p else q[:n]

    def lookup_prefix(self, prompt_tokens: int, prefix_key: int, prefix_tokens: int, prompt_hash: int) -> int:
        """Tokens of this prompt already cached: consecutive hits from block 0, a multiple of block_size,
        at most prompt_tokens - 1. Changes no state (not even LRU order or counters)."""
        return self._hit_count(prompt_tokens, prefix_key, prefix_tokens, prompt_hash) * self.block_size

    def _register(self, seq: _Seq, first: int, stop: int) -> None:
        """Put the sequence's full prompt blocks first..stop-1 (block indices) into the prefix cache.

        A block that already has a hash (a prefix hit) is skipped, and so is one whose content is
        already cached in another block: one block per hash.
        """
        p_full = seq.p_full
        stop = min(stop, seq.reg_bound)
        if first >= stop:
            return
        if first < p_full:
            self._register_run(seq.table, first, min(stop, p_full), "p", seq.prefix_key, self._p_index)
        if stop > p_full:
            self._register_run(seq.table, max(first, p_full), stop, "q", seq.prompt_hash, self._q_index)

    def _register_run(
        self, table: list[int], first: int, stop: int, kind: str, key: int, index: dict[int, list[int]]
    ) -> None:
        entries = index.get(key)
        if entries is None:
            entries = index[key] = []
        if len(entries) < stop:
            entries.extend([-1] * (stop - len(entries)))
        hash_of = self._hash_of
        # block ids move between lists as the int objects they are (see _release)
        blocks, into = _as_objects(table), _as_objects(entries)
        added = 0
        for i in range(first, stop):
            obj = blocks[i]
            b: int = obj  # type: ignore[assignment]  # an id; see _release
            if hash_of[b] is None and entries[i] < 0:
                into[i] = obj
                hash_of[b] = (kind, key, i)
                added += 1
        self._n_cached += added
        while entries and entries[-1] < 0:
            entries.pop()
        if not entries:
            del index[key]

    def _uncache(self, b: int) -> None:
        """Drop block b's hash from the prefix cache (b must have one)."""
        kind, key, i = self._hash_of[b]  # type: ignore[misc]
        self._hash_of[b] = None
        self._n_cached -= 1
        index = self._p_index if kind == "p" else self._q_index
        entries = index[key]
        entries[i] = -1
        while entries and entries[-1] < 0:
            entries.pop()
        if not entries:
            del index[key]

    def reset_prefix_cache(self) -> None:
        """Cold restart of the cache: every evictable block loses its hash and returns to the free list.

        Blocks still held by a sequence keep their registration: their content stays resident and valid.
        """
        ref, run_of = self._ref, self._run_of
        order = self.evictable_blocks()
        for b in order:
            self._uncache(b)
            ref[b] = 1  # the free-list convention
            run_of[b] = None
        self._free.extend(order)
        self._lru.clear()
        self._n_evictable = self._lru_slots = 0

    def evictable_blocks(self) -> list[int]:
        """The evictable blocks in eviction order: least recently released first."""
        run_of = self._run_of
        return [b for run in self._lru for b in reversed(run) if run_of[b] is run]

    def _compact_lru(self) -> None:
        """Drop stale LRU entries and emptied runs (order kept); afterwards slots == evictable blocks."""
        run_of = self._run_of
        kept: deque[list[int]] = deque()
        for run in self._lru:
            # in place, so _run_of keeps naming it; ids kept as the objects they are (see _release)
            objs = _as_objects(run)
            live: list[object] = []
            for obj in objs:
                b: int = obj  # type: ignore[assignment]
                if run_of[b] is run:
                    live.append(obj)
            objs[:] = live
            if run:
                kept.append(run)
        self._lru = kept
        self._lru_slots = self._n_evictable

    # ---- allocation --------------------------------------------------------------------------------

    def _allocate_into(self, table: list[int], n: int) -> None:
        """Append n fresh blocks (refcount 1) to table; the caller has checked that n are available."""
        free = self._free
        take = min(n, len(free) - self._n_private)
        if take:  # free-list blocks already read refcount 1
            _take_free(table, free, take)
        if n > take:
            self._evict_into(table, n - take)

    def _allocate_private(self, seq: _Seq, n: int) -> None:
        """Give `seq` n fresh private blocks (a count); the caller has checked that n are available. Blocks
        missing from the free list are evicted as for `_allocate_into`, their ids joining the free list."""
        short = n - (len(self._free) - self._n_private)
        if short > 0:
            self._evict_into(self._free, short)
        self._n_private += n
        seq.private += n

    def _evict_into(self, into: list[int], n: int) -> None:
        """Evict the n least recently released evictable blocks (the caller has checked there are n),
        appending their ids, uncached and with refcount slot 1, to `into`."""
        if n <= 0:
            return
        ref, run_of, lru = self._ref, self._run_of, self._lru
        # _uncache inlined: eviction is the costliest per-block step when prompts rarely recur.
        hash_of, p_index, q_index = self._hash_of, self._p_index, self._q_index
        popped = 0
        for _ in range(n):
            while True:  # the oldest live entry of the LRU (stale ones are skipped)
                run = lru[0]
                b = run.pop()
                popped += 1
                if not run:
                    lru.popleft()
                if run_of[b] is run:
                    break
            run_of[b] = None
            kind, key, i = hash_of[b]  # type: ignore[misc]
            hash_of[b] = None
            index = p_index if kind == "p" else q_index
            entries = index[key]
            entries[i] = -1
            while entries and entries[-1] < 0:
                entries.pop()
            if not entries:
                del index[key]
            ref[b] = 1
            into.append(b)
        self._lru_slots -= popped
        self._n_evictable -= n
        self._n_cached -= n
        self.evictions += n

    def admit(
        self,
        seq_id: int,
        prompt_tokens: int,
        prefix_key: int,
        prefix_tokens: int,
        prompt_hash: int,
        num_tokens: int,
        looked_up: int = -1,
    ) -> int | None:
        """First allocation of a sequence; returns the cached tokens reused, or None if blocks run out.

        Attaches the cached prefix blocks (the ones `lookup_prefix` counts), then allocates new blocks so
        the sequence holds num_tokens tokens (num_tokens >= cached tokens; with chunked prefill, cached
        tokens plus the first chunk). Full prompt blocks it now holds enter the prefix cache. On None
        nothing changed, counters included. A seq_id already live, or num_tokens below the cached
        tokens, raises ValueError.

        `looked_up`: what `lookup_prefix` answered for this prompt just before, with no call on this cache
        in between (the scheduler's admission asks both; counting the hits again cost ~1 % of a fleet run);
        -1, the default: count them here.
        """
        if seq_id in self._seqs:
            raise ValueError(f"sequence {seq_id} already holds blocks")
        hits = self._hits(prompt_tokens, prefix_key, prefix_tokens, prompt_hash,
                          looked_up // self.block_size if looked_up >= 0 else -1)
        bs = self.block_size
        cached_tokens = len(hits) * bs
        if num_tokens < cached_tokens:
            raise ValueError(f"num_tokens {num_tokens} is below the {cached_tokens} cached tokens")
        n_blocks = -(-num_tokens // bs)
        n_new = n_blocks - len(hits)
        ref, run_of = self._ref, self._run_of
        # Hits that sit in the LRU are taken out of it, so they cannot also serve as fresh blocks. Counting
        # them takes a pass over the hits, needed only when the room left would not cover every hit revived.
        avail = len(self._free) - self._n_private + self._n_evictable
        if n_new > avail - len(hits):
            revived = 0
            for b in hits:
                if ref[b] == 0:
                    revived += 1
            if n_new > avail - revived:
                return None
        revived = 0
        for b in hits:
            r = ref[b]
            if r == 0:
                run_of[b] = None  # its LRU entry is stale now
                revived += 1
            ref[b] = r + 1
        self._n_evictable -= revived
        if self.enable_prefix_caching:
            p_full = min(prefix_tokens, prompt_tokens) // bs if prefix_key else 0
            reg_bound = max(p_full, prompt_tokens // bs if prompt_hash else 0)
        else:
            p_full = reg_bound = 0
        # the blocks below reg_bound get ids (the hits are among them), the rest are private; ids first, so
        # the free list and then the LRU serve the fresh blocks in the order one allocation of all served them
        table = hits
        seq = _Seq(table, num_tokens, prompt_tokens, prefix_key, prefix_tokens, prompt_hash, p_full, reg_bound)
        named = min(n_blocks, reg_bound) - len(hits)  # >= 0: the hits lie below both
        if named:
            self._allocate_into(table, named)
        if n_new > named:
            self._allocate_private(seq, n_new - named)
        self._seqs[seq_id] = seq
        if self.enable_prefix_caching:
            self._register(seq, cached_tokens // bs, num_tokens // bs)
            self.prefix_queries_tokens += prompt_tokens
            self.prefix_hits_tokens += cached_tokens
        return cached_tokens

    def grow(self, seq_id: int, num_tokens: int) -> bool:
        """Make the sequence hold num_tokens tokens (a prompt chunk or generated tokens); never shrinks.

        Returns False, changing nothing, when the blocks needed are not available. Prompt blocks that
        become full enter the prefix cache at once, so a later request can hit them while this one runs.
        A partial last block shared through `fork` is copied first (as `ensure_writable_last` does), so
        new tokens never land in a sibling's block. Unknown seq raises KeyError.
        """
        seq = self._seqs[seq_id]
        old = seq.num_tokens
        if num_tokens <= old:
            return True
        bs = self.block_size
        table = seq.table
        n_new = -(-num_tokens // bs) - len(table) - seq.private
        # only a fork shares a partial block (partial blocks carry no hash, so no prefix hit shares one)
        if seq.shared and self._shared_partial_last(seq):
            if n_new + 1 > len(self._free) - self._n_private + self._n_evictable:
                return False
            self._copy_last(seq)
            self._allocate_into(table, n_new)
        elif n_new > 0:
            if n_new > len(self._free) - self._n_private + self._n_evictable:
                return False
            # ids up to reg_bound (all of a forked sequence's blocks), then private blocks
            named = n_new if seq.shared else min(n_new, max(0, seq.reg_bound - len(table) - seq.private))
            if named:
                self._allocate_into(table, named)
            if n_new > named:
                self._allocate_private(seq, n_new - named)
        seq.num_tokens = num_tokens
        first = old // bs
        if first < seq.reg_bound:
            self._register(seq, first, num_tokens // bs)
        return True

    def grow_held(self, seq_id: int, num_tokens: int) -> int:
        """`grow(seq_id, num_tokens)`, returning the tokens the sequence then holds; -1, changing nothing,
        when the blocks are not there.

        The decode-run planner calls this for every sequence the run outgrows (about one block per run),
        so the common case (an unforked sequence past its prompt blocks, blocks on the free list) costs a
        few list operations and one lookup, with the same blocks handed out in the same order as grow()."""
        seq = self._seqs[seq_id]
        old = seq.num_tokens
        if num_tokens <= old:
            return old
        bs = self.block_size
        n_new = -(-num_tokens // bs) - len(seq.table) - seq.private
        # past reg_bound an unforked sequence's new blocks are private: a count, when the free list has them
        if seq.shared or n_new > len(self._free) - self._n_private or old // bs < seq.reg_bound:
            return num_tokens if self.grow(seq_id, num_tokens) else -1
        if n_new > 0:
            self._n_private += n_new
            seq.private += n_new
        seq.num_tokens = num_tokens
        return num_tokens

    def free(self, seq_id: int) -> None:
        """Release the sequence. A block whose refcount reaches 0 becomes evictable if cached (most
        recently used end of the LRU), else returns to the free list; a partial last block is never
        cached, so it always returns to the free list. Blocks are released tail first, as vLLM does, so
        a sequence's tail is evicted before its head. Unknown (or already freed) seq raises KeyError."""
        seq = self._seqs.pop(seq_id)
        # The private tail (past reg_bound: no hash, no other holder) goes back to the free blocks as a
        # count; then the table, reversed in place (it goes with the sequence) into release order, tail
        # first: the prompt blocks, then the prefix blocks (which other sequences often hold).
        self._n_private -= seq.private
        table = seq.table
        if table:
            table.reverse()
            self._release(table)

    def _release(self, blocks: list[int]) -> None:
        """Drop one reference to each block of `blocks`, in that order: a block whose refcount reaches 0
        goes to the free list, or to the most recently used end of the LRU if cached."""
        # one pass, no temporaries: compiled (mypyc) this beats the list(map(...)) shortcuts it replaced.
        # Compiled, an int read from a list[int] is unboxed, and appending it to another list boxes it
        # again: a fresh allocation for every id above 256, one per released block (~16 M in the standard
        # fleet's hour). So the ids move as the objects they are, and only the index arithmetic unboxes:
        # `b: int = obj` (type-ignored) compiles to the same checked unbox as cast(int, obj), and costs
        # nothing when the module runs as plain Python, where a cast is a function call per block.
        ref, hash_of, run_of = self._ref, self._hash_of, self._run_of
        objs, free = _as_objects(blocks), _as_objects(self._free)
        run: list[int] = []
        run_objs = _as_objects(run)
        for obj in objs:
            b: int = obj  # type: ignore[assignment]  # an id; see _release
            r = ref[b] - 1
            if r:
                ref[b] = r
            elif hash_of[b] is None:
                free.append(obj)
            else:
                ref[b] = 0
                run_of[b] = run
                run_objs.append(obj)
        if run:
            run.reverse()  # eviction pops from the end: the first released goes first
            self._lru.append(run)
            self._n_evictable += len(run)
            self._lru_slots += len(run)
            if self._lru_slots > 8 * self.num_blocks:
                self._compact_lru()

    def fork(self, parent_id: int, child_id: int) -> None:
        """Parallel sampling (n > 1): the child shares every parent block (refcount +1 each), no allocation.

        Unknown parent raises KeyError; a child id already live raises ValueError.
        """
        parent = self._seqs[parent_id]
        if child_id in self._seqs:
            raise ValueError(f"sequence {child_id} already holds blocks")
        if parent.private:
            # a forked sequence holds every block by id: its private blocks take ids off the free list (as
            # many as the count stood for, so no count changes) before they are shared
            _take_free(parent.table, self._free, parent.private)
            self._n_private -= parent.private
            parent.private = 0
        ref = self._ref
        for b in parent.table:
            ref[b] += 1
        parent.shared = True
        self._seqs[child_id] = _Seq(
            list(parent.table),
            parent.num_tokens,
            parent.prompt_tokens,
            parent.prefix_key,
            parent.prefix_tokens,
            parent.prompt_hash,
            parent.p_full,
            parent.reg_bound,
            shared=True,
        )

    def ensure_writable_last(self, seq_id: int) -> bool:
        """Copy-on-write before appending tokens: give the sequence a private copy of its last block when
        that block is partial and shared (refcount > 1). Returns False, changing nothing, when no block
        is available for the copy; True otherwise (including when no copy was needed)."""
        seq = self._seqs[seq_id]
        if not self._shared_partial_last(seq):
            return True
        if len(self._free) <= self._n_private and not self._n_evictable:
            return False
        self._copy_last(seq)
        return True

    def _copy_last(self, seq: _Seq) -> None:
        """Replace the shared last block by a fresh private one; the caller has checked one is available."""
        copy: list[int] = []
        self._allocate_into(copy, 1)
        self._ref[seq.table[-1]] -= 1
        seq.table[-1] = copy[0]

    # ---- checking ----------------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Full O(num_blocks) consistency check; raises AssertionError naming the broken invariant."""
        n, bs = self.num_blocks, self.block_size
        holders = [0] * n
        for sid, seq in self._seqs.items():
            expected = -(-seq.num_tokens // bs)
            held = len(seq.table) + seq.private
            assert held == expected, f"seq {sid}: {held} blocks, {seq.num_tokens} tokens"
            named = expected if seq.shared else min(expected, seq.reg_bound)
            assert len(seq.table) == named, f"seq {sid}: {len(seq.table)} blocks by id, expected {named}"
            for b in seq.table:
                assert 0 <= b < n, f"seq {sid}: block id {b} out of range"
                holders[b] += 1
        free_set = set(self._free)
        assert len(free_set) == len(self._free), "a block is on the free list twice (double free)"
        private = sum(seq.private for seq in self._seqs.values())
        assert private == self._n_private, f"{private} private blocks held, {self._n_private} counted"
        assert 0 <= self._n_private <= len(self._free), f"{self._n_private} private blocks, {len(free_set)} free ids"
        for b in range(n):
            if b in free_set:
                assert holders[b] == 0, f"free block {b} is in use ({holders[b]} holders)"
                assert self._ref[b] == 1, f"free block {b}: refcount slot {self._ref[b]}, expected 1"
                continue
            assert self._ref[b] >= 0, f"block {b}: negative refcount {self._ref[b]}"
            assert self._ref[b] == holders[b], f"block {b}: refcount {self._ref[b]} but {holders[b]} holders"
        evict_list = self.evictable_blocks()
        evict_set = set(evict_list)
        assert len(evict_set) == len(evict_list) == self._n_evictable, "evictable blocks counted wrong"
        assert self._lru_slots == sum(len(run) for run in self._lru), "LRU slot count is off"
        for b in range(n):
            assert (self._run_of[b] is not None) == (b in evict_set), f"block {b}: its LRU run is wrong"
        assert not free_set & evict_set, f"blocks both free and evictable: {sorted(free_set & evict_set)}"
        for b in free_set:
            assert self._hash_of[b] is None, f"free block {b} still has a hash"
        for b in evict_set:
            assert self._ref[b] == 0, f"evictable block {b} is in use (refcount {self._ref[b]})"
            assert self._hash_of[b] is not None, f"evictable block {b} has no hash"
        # what free()'s shortcut relies on: no hash past reg_bound; unforked sequences own unhashed blocks
        for sid, seq in self._seqs.items():
            for i, b in enumerate(seq.table):
                if i >= seq.reg_bound:
                    assert self._hash_of[b] is None, f"seq {sid}: block {b} at {i} >= reg_bound is hashed"
                if not seq.shared and self._hash_of[b] is None:
                    assert holders[b] == 1, f"seq {sid}: unhashed block {b} shared without a fork"
        in_use = sum(1 for h in holders if h > 0)
        total = len(free_set) + len(evict_set) + in_use
        assert total == n, f"free ids {len(free_set)} + evictable {len(evict_set)} + in use {in_use} != {n}"
        assert self.num_free + self.num_evictable + self.num_in_use == n, "the gauges do not add up"
        n_entries = 0
        for kind, index in (("p", self._p_index), ("q", self._q_index)):
            for key, entries in index.items():
                assert entries and entries[-1] >= 0, f"cache list {kind}{key} is empty or ends in a hole"
                for i, b in enumerate(entries):
                    if b >= 0:
                        n_entries += 1
                        h = (kind, key, i)
                        assert self._hash_of[b] == h, f"cache maps {h} to block {b} hashed {self._hash_of[b]}"
        n_hashed = sum(1 for h in self._hash_of if h is not None)
        assert n_hashed == n_entries == self._n_cached, (
            f"{n_hashed} blocks have a hash, {n_entries} cache entries, num_cached {self._n_cached}"
        )
        if not self.enable_prefix_caching:
            assert not n_entries, "prefix caching is off but blocks are cached"
        assert 0 <= self.prefix_hits_tokens <= self.prefix_queries_tokens, "prefix hit counters inconsistent"
        assert self.evictions >= 0, "negative eviction count"

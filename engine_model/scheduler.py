"""Iteration-level continuous batching in the manner of vLLM V1 (`vllm/v1/core/sched/scheduler.py`).

Each engine step has a token budget (`max_num_batched_tokens`) and a sequence cap
(`max_num_seqs`). Running decodes are scheduled first, then unfinished chunked prefills,
then waiting requests in queue order while blocks and budget last. With chunked prefill
off a prompt is prefilled whole in a step of its own and running decodes stall (the
pre-V1 behaviour). When a decode cannot get a block the newest running sequence is
preempted by recompute: its blocks are freed and it goes back to the head of the queue.

Decode progress is tracked with one shared counter: every decoding sequence gains the
same number of tokens per step, so a sequence's output length is `clock - base`. That
keeps per-step work independent of the batch size and lets runs of pure decode steps
be advanced in closed form.

Checked against V1's `Scheduler.schedule` (issue 14). Changed to match it:
- A step that preempted admits nothing from the waiting queue (V1: `if not preempted_reqs`).
  Before, the sequence just preempted sat at the head of the queue and was re-admitted in
  the same step (1,139 of 1,172 preemptions in research-requests-crawl), then preempted again.
- Priority policy: the victim is the running sequence with the largest (priority, arrival),
  and a preempted sequence rejoins the queue in (priority, arrival) order, as V1's priority
  queue does; FCFS keeps "newest admitted" and the head of the queue.
- A decode costs 1 + num_speculative_tokens of the budget (V1 schedules the draft tokens too).
- Chunked prefill off: a waiting prompt that does not fit the free blocks no longer idles
  the engine; the running decodes step on (and free blocks) instead.
Already matched: running before waiting; budget and max_num_seqs (running + prefilling +
new); long_prefill_token_threshold caps every prefill chunk, first and later; prefix-cache
hits count as computed tokens on admission and only the uncached rest is charged to the
budget, with at least one prompt token computed; FCFS preempts the most recently admitted
(the tail of V1's running list; a re-admitted sequence goes to the tail again) and puts it at
the head of the queue; a request's cached-token count is taken at its first admission.
Deliberately different: V1 walks the running list in admission order, so a partial prefill
older than some decodes is charged first; here decodes always go first (the same whenever
the budget covers the running set, which max_num_seqs <= max_num_batched_tokens makes
usual). Chunked prefill off is kept as V0's prefill-only steps (V1 cannot turn it off for
generative models). A resumed sequence hits only its prompt blocks in the prefix cache (the
KV model never caches blocks of generated tokens; V1 would hit those too).

Why one module of ~550 lines: it is one class, the V1 scheduling step (budgets, running before waiting,
chunked prefill, preemption, prefix hits, LoRA slots); its rules interact and are checked together by the
stateful tests.
"""

from __future__ import annotations

import heapq
import math
from typing import Final

from mypy_extensions import mypyc_attr

from engine_model.config import EngineConfig
from engine_model.kv_cache import KVCache
from engine_model.request import Request

# Final: the compiled build inlines them (a plain module global is a dict lookup at every use)
EPS: Final = 1e-9
RESERVE_BLOCKS: Final = 4  # blocks a decoding sequence reserves per top-up while the pool is roomy


# Sequence and StepPlan are made once per request and once per step: plain classes with their own
# __init__, which mypyc compiles (a dataclass's generated __init__ would run as interpreted Python).
@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Sequence:
    """Scheduler state of one request on one replica. Token counts are tokens."""

    def __init__(self, req: Request, seq_id: int, prefill_len: int) -> None:
        self.req = req
        self.seq_id = seq_id
        # tokens to compute before decoding: prompt, plus earlier output after a preemption
        self.prefill_len = prefill_len
        self.computed = 0  # of prefill_len, including cached tokens
        self.generated = 0  # output tokens produced before the current decode stint
        self.base = 0.0  # decode clock value at which this stint's output count was zero
        self.target = 0.0  # decode clock value at which the request is done
        self.cached_tokens = 0
        self.preemptions = 0
        self.admit_order = 0
        self.epoch = 0  # bumps on preemption so stale heap entries are skipped
        self.kv_reserved = 0  # tokens of KV the sequence holds blocks for
        # while decoding, a lower bound (to float rounding) of (KV tokens held - prompt) + base: the clock
        # value up to which its blocks hold the output; lets a decode run skip sequences that need nothing
        self.grow_key = 0.0
        self.engine_arrival_s = -1.0  # when the API server handed it to the engine core (-1: not yet)
        self.first_scheduled_s = -1.0
        self.first_token_s = -1.0
        self.batch_at_first_token = 0
        # frontend (in the API server's intake) | waiting | prefilling | decoding, then one of: done,
        # aborted (the client gave up), failed (crash)
        self.state = "waiting"

    def __repr__(self) -> str:
        return f"Sequence(seq_id={self.seq_id}, state={self.state!r}, request_id={self.req.request_id})"


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class StepPlan:
    """What one step (or a run of identical-shape decode steps) holds."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "mixed" | "prefill_only" | "decode_run"
        self.chunks: list[tuple[Sequence, int]] = []  # (sequence, new tokens)
        self.prefill_tokens = 0
        self.prefill_attn = 0.0  # sum of chunk * (prior context + chunk / 2), token^2
        self.decode_seqs = 0
        self.decode_ctx = 0
        self.n_steps = 1
        self.preempted: list[Sequence] = []

    def __repr__(self) -> str:
        return (f"StepPlan({self.kind!r}, chunks={len(self.chunks)}, prefill_tokens={self.prefill_tokens}, "
                f"decode_seqs={self.decode_seqs}, n_steps={self.n_steps})")

    @property
    def num_tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs

    @property
    def num_seqs(self) -> int:
        return len(self.chunks) + self.decode_seqs


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Scheduler:
    """Queues and batches for one replica. Owns no clock: the replica times the steps."""

    def __init__(self, config: EngineConfig, kv: KVCache, tokens_per_step: float = 1.0) -> None:
        self.config = config
        self.kv = kv
        self.tokens_per_step = tokens_per_step
        # the queue, a heap of (priority, arrival or front key, seq_id, sequence); public for cheap reads
        self.waiting: list[tuple[int, float, int, Sequence]] = []
        self._front = 0  # decreasing key that puts preempted sequences at the head of the queue
        self.prefilling: list[Sequence] = []
        self.decoding: dict[int, Sequence] = {}
        self.clock = 0.0
        self._offset_sum = 0.0  # sum over decoding sequences of (context at clock 0) = prompt - base
        # Two heaps of (clock value, seq_id, epoch, sequence): decoding sequences by the clock value at which
        # they are done (_finish) and at which their reserved blocks run out (_resv). An entry is live while
        # its sequence still decodes in that epoch. The sequence rides along so that a pop needs no
        # lookup in `decoding`; (clock value, seq_id, epoch) is unique in each heap (one entry per stint,
        # replaced when popped), so the heap never compares two sequences.
        self._finish: list[tuple[float, int, int, Sequence]] = []
        self._resv: list[tuple[float, int, int, Sequence]] = []
        self._admits = 0
        self.preemptions_total = 0

    # ----- queue -----------------------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        prio = seq.req.priority if self.config.scheduling_policy == "priority" else 0
        heapq.heappush(self.waiting, (prio, seq.req.arrival_s, seq.seq_id, seq))

    def _requeue_front(self, seq: Sequence) -> None:
        """A preempted sequence rejoins the queue: at its head under FCFS (V1 prepends it), in
        (priority, arrival) order under the priority policy (V1's priority queue is a heap on those)."""
        if self.config.scheduling_policy == "priority":
            heapq.heappush(self.waiting, (seq.req.priority, seq.req.arrival_s, seq.seq_id, seq))
            return
        self._front -= 1
        heapq.heappush(self.waiting, (0, float(self._front), seq.seq_id, seq))

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.prefilling) + len(self.decoding)

    def num_outstanding(self) -> int:
        """num_running + num_waiting (the router asks this of every replica per request)."""
        return len(self.prefilling) + len(self.decoding) + len(self.waiting)

    def running_sequences(self) -> list[Sequence]:
        return self.prefilling + list(self.decoding.values())

    def waiting_sequences(self) -> list[Sequence]:
        return [s for *_, s in self.waiting]

    def all_sequences(self) -> list[Sequence]:
        return [s for *_, s in self.waiting] + self.prefilling + list(self.decoding.values())

    def decode_ctx(self) -> int:
        return int(len(self.decoding) * self.clock + self._offset_sum)

    def output_so_far(self, seq: Sequence) -> int:
        return int(self.clock - seq.base + EPS)

    # ----- decode bookkeeping ---------------------------------------------------------------
    def _start_decoding(self, seq: Sequence) -> None:
        # The step that finished the prefill also produced one token.
        seq.generated += 1
        seq.base = self.clock - seq.generated
        seq.target = seq.base + seq.req.output_tokens
        seq.state = "decoding"
        self.decoding[seq.seq_id] = seq
        self._offset_sum += seq.req.prompt_tokens - seq.base
        heapq.heappush(self._finish, (seq.target, seq.seq_id, seq.epoch, seq))
        seq.kv_reserved = seq.prefill_len
        heapq.heappush(self._resv, (seq.kv_reserved - seq.req.prompt_tokens + seq.base, seq.seq_id, seq.epoch, seq))
        seq.grow_key = self.kv.num_tokens(seq.seq_id) - seq.req.prompt_tokens + seq.base

    def _stop_decoding(self, seq: Sequence) -> None:
        del self.decoding[seq.seq_id]
        self._offset_sum -= seq.req.prompt_tokens - seq.base
        if not self.decoding:
            self._offset_sum = 0.0

    def _reserve_decode(self, clock_target: float, plan: StepPlan) -> bool:
        """Give every decoding sequence blocks up to decode clock `clock_target`, preempting the
        newest sequences when blocks run out. Touches only sequences whose reservation ends
        before the target, so a step costs O(sequences crossing a block boundary).
        Returns False if some sequence was preempted."""
        resv = self._resv
        limit = clock_target - EPS
        if not resv or resv[0][0] >= limit:  # the common case: no reservation runs out this step
            return True
        kv = self.kv
        bs = kv.block_size
        roomy = kv.num_blocks // 4
        # An entry is read at the top of the heap and then dropped (heappop) or replaced by the sequence's
        # next one (heapreplace: one sift instead of a pop's and a push's). Nothing below pushes to or pops
        # from _resv meanwhile, and entries are unique (see _resv), so the heap yields what pop-then-push did.
        heappop, heapreplace = heapq.heappop, heapq.heapreplace
        clean = True
        while resv and resv[0][0] < limit:
            _, sid, epoch, seq = resv[0]
            if seq.epoch != epoch or seq.state != "decoding":  # stale: preempted, aborted or done since
                heappop(resv)
                continue
            prompt = seq.req.prompt_tokens
            exact = -(-(prompt + math.ceil(clock_target - seq.base - EPS)) // bs) * bs  # whole blocks
            # several blocks at a time while the pool stays roomy after it, so top-ups are rare; one
            # at a time under pressure
            ahead = RESERVE_BLOCKS if kv.num_free - RESERVE_BLOCKS > roomy else 1
            need = exact + (ahead - 1) * bs
            key = need - prompt + seq.base
            # Usually a decode run already gave it the blocks: key <= grow_key means need <= tokens
            # held (both keys are an integer plus the same base, far below 2**52, so the float order
            # is the integer order) and grow would change nothing. Else try the plain grow; if the
            # blocks ahead are not there, only the step's own (V1 allocates just those, so a
            # reservation never causes a preemption), and preempt only for those.
            if not (key <= seq.grow_key or kv.grow(sid, need)):
                need = exact
                key = need - prompt + seq.base
                if not (kv.grow(sid, need) or self._grow_or_preempt(seq, need, plan)):
                    clean = False
                    heappop(resv)
                    continue
            seq.kv_reserved = need
            heapreplace(resv, (key, sid, seq.epoch, seq))
            if key > seq.grow_key:  # it now holds at least `need` tokens
                seq.grow_key = key
        return clean

    def steps_to_next_finish(self) -> int:
        """Decode steps until the earliest decoding sequence is done (>= 1), or a large number."""
        while self._finish:
            target, _, epoch, seq = self._finish[0]
            if seq.epoch != epoch or seq.state != "decoding":  # stale (see _finish)
                heapq.heappop(self._finish)
                continue
            return max(1, math.ceil((target - self.clock - EPS) / self.tokens_per_step))
        return 1 << 30

    # ----- preemption -----------------------------------------------------------------------
    def _newest_running(self) -> Sequence | None:
        """The preemption victim: under FCFS the most recently admitted running sequence (the tail of
        V1's running list); under the priority policy the largest (priority, arrival), i.e. the least
        important and, among equals, the latest to arrive (ties: the most recently admitted)."""
        best: Sequence | None = None
        if self.config.scheduling_policy == "priority":
            key = (-(1 << 62), -math.inf, 0)
            for seq in self.prefilling + list(self.decoding.values()):
                k = (seq.req.priority, seq.req.arrival_s, seq.admit_order)
                if k > key:
                    best, key = seq, k
            return best
        for seq in self.prefilling:
            if best is None or seq.admit_order > best.admit_order:
                best = seq
        for seq in self.decoding.values():
            if best is None or seq.admit_order > best.admit_order:
                best = seq
        return best

    def _preempt(self, seq: Sequence) -> None:
        if seq.state == "decoding":
            seq.generated = self.output_so_far(seq)
            self._stop_decoding(seq)
        else:
            self.prefilling.remove(seq)
        self.kv.free(seq.seq_id)
        seq.epoch += 1
        seq.preemptions += 1
        self.preemptions_total += 1
        # recompute: the prompt and everything generated so far are prefilled again
        seq.prefill_len = seq.req.prompt_tokens + seq.generated
        seq.computed = 0
        seq.state = "waiting"
        self._requeue_front(seq)

    def _grow_or_preempt(self, seq: Sequence, tokens: int, plan: StepPlan) -> bool:
        """Make room for `tokens` KV slots of `seq`, preempting newer sequences. False if seq itself went."""
        while not self.kv.grow(seq.seq_id, tokens):
            victim = self._newest_running()
            if victim is None:
                return False
            self._preempt(victim)
            plan.preempted.append(victim)
            if victim is seq:
                return False
        return True

    # ----- planning -------------------------------------------------------------------------
    def plan(self, max_run_steps: int = 1 << 30) -> StepPlan | None:
        """Choose the next step. Allocates KV blocks for it. None when there is nothing to run."""
        cfg = self.config
        budget = cfg.max_num_batched_tokens
        if not cfg.enable_chunked_prefill and self.waiting and self._admissible_whole():
            whole = self._plan_prefill_only()
            if whole is not None:
                return whole
            # the head prompt does not fit the free blocks: let the decodes run (and free blocks)
        plan = StepPlan("mixed")
        # running decodes first; preemption takes the newest
        self._reserve_decode(self.clock + math.ceil(self.tokens_per_step), plan)
        # V1 schedules each decode's draft tokens too: 1 + k tokens of the budget
        per_decode = 1 + cfg.num_speculative_tokens
        n_decode = len(self.decoding)
        budget -= n_decode * per_decode
        slots = cfg.max_num_seqs - n_decode
        if cfg.enable_chunked_prefill:
            if self.prefilling:
                for seq in list(self.prefilling):
                    if budget <= 0:
                        break
                    chunk = self._chunk(seq, budget)
                    if seq.state != "prefilling" or not self._grow_or_preempt(seq, seq.computed + chunk, plan):
                        continue
                    self._add_chunk(plan, seq, chunk)
                    budget -= chunk
                slots -= len(self.prefilling)
            # V1 admits nothing from the waiting queue in a step that preempted: the sequence just
            # preempted heads the queue, and re-admitting it into the blocks it freed would only have
            # it preempted again (thrash). It waits for a step in which the running set fits.
            waiting = self.waiting
            if not plan.preempted:
                if cfg.max_loras > 0:
                    self._admit_waiting_lora(plan, budget, slots)
                else:
                    while waiting and budget > 0 and slots > 0:
                        seq = waiting[0][3]
                        got = self._admit(seq, budget)
                        if got is None:
                            break
                        heapq.heappop(waiting)
                        self._add_chunk(plan, seq, got)
                        budget -= got
                        slots -= 1
        # a prefill chunk may have preempted a decoding sequence newer than it: count what still decodes
        n_decode = len(self.decoding)
        plan.decode_seqs = n_decode
        plan.decode_ctx = int(n_decode * self.clock + self._offset_sum)  # decode_ctx()
        if not plan.chunks:
            if plan.decode_seqs == 0:
                return None
            plan.kind = "decode_run"
            plan.n_steps = self._decode_run_length(max_run_steps)
        return plan

    def _admit_waiting_lora(self, plan: StepPlan, budget: int, slots: int) -> None:
        """Admit waiting sequences as plan() does, but a batch holds at most max_loras distinct adapters: a
        request whose adapter would be one too many is skipped for this step and keeps its place in the
        queue (vLLM V1's scheduler does the same)."""
        cap = self.config.max_loras
        active = {s.req.lora for s in self.prefilling if s.req.lora}
        active.update(s.req.lora for s in self.decoding.values() if s.req.lora)
        waiting = self.waiting
        skipped: list[tuple[int, float, int, Sequence]] = []
        while waiting and budget > 0 and slots > 0:
            entry = waiting[0]
            seq = entry[3]
            adapter = seq.req.lora
            if adapter and adapter not in active and len(active) >= cap:
                heapq.heappop(waiting)
                skipped.append(entry)
                continue
            got = self._admit(seq, budget)
            if got is None:
                break
            heapq.heappop(waiting)
            if adapter:
                active.add(adapter)
            self._add_chunk(plan, seq, got)
            budget -= got
            slots -= 1
        for entry in skipped:
            heapq.heappush(waiting, entry)

    def _chunk(self, seq: Sequence, budget: int) -> int:
        chunk = min(seq.prefill_len - seq.computed, budget)
        cap = self.config.long_prefill_token_threshold
        return min(chunk, cap) if cap > 0 else chunk

    def _admit(self, seq: Sequence, budget: int) -> int | None:
        """Allocate the first chunk of a waiting sequence; None (nothing changed) if blocks are short."""
        req = seq.req
        ph = req.prompt_hash if req.cache_prompt else 0
        cached = self.kv.lookup_prefix(seq.prefill_len, req.prefix_key, req.prefix_tokens, ph)
        chunk = self._chunk_from(seq.prefill_len - cached, budget)
        # nothing touched the cache since the lookup: admit takes its answer instead of counting again
        hit = self.kv.admit(seq.seq_id, seq.prefill_len, req.prefix_key, req.prefix_tokens, ph, cached + chunk, cached)
        if hit is None:
            return None
        seq.computed = hit  # == cached (admit attached the blocks the lookup counted)
        if seq.cached_tokens == 0 and seq.preemptions == 0:
            seq.cached_tokens = hit
        self._admits += 1
        seq.admit_order = self._admits
        seq.state = "prefilling"
        self.prefilling.append(seq)
        return chunk

    def _chunk_from(self, remaining: int, budget: int) -> int:
        chunk = min(remaining, budget)
        cap = self.config.long_prefill_token_threshold
        return min(chunk, cap) if cap > 0 else chunk

    @staticmethod
    def _add_chunk(plan: StepPlan, seq: Sequence, chunk: int) -> None:
        plan.chunks.append((seq, chunk))
        plan.prefill_tokens += chunk
        plan.prefill_attn += chunk * (seq.computed + chunk / 2.0)

    def _admissible_whole(self) -> bool:
        return len(self.decoding) < self.config.max_num_seqs

    def _plan_prefill_only(self) -> StepPlan | None:
        """Chunked prefill off: whole prompts in a step of their own; decodes wait."""
        plan = StepPlan("prefill_only")
        budget = max(self.config.max_num_batched_tokens, 1)
        slots = self.config.max_num_seqs - len(self.decoding)
        while self.waiting and slots > 0:
            seq = self.waiting[0][3]
            need = seq.prefill_len
            if plan.chunks and need > budget:
                break
            req = seq.req
            ph = req.prompt_hash if req.cache_prompt else 0
            hit = self.kv.admit(seq.seq_id, seq.prefill_len, req.prefix_key, req.prefix_tokens, ph, seq.prefill_len)
            if hit is None:
                break
            heapq.heappop(self.waiting)
            seq.computed = hit
            if seq.cached_tokens == 0 and seq.preemptions == 0:
                seq.cached_tokens = hit
            self._admits += 1
            seq.admit_order = self._admits
            seq.state = "prefilling"
            self.prefilling.append(seq)
            self._add_chunk(plan, seq, seq.prefill_len - hit)
            budget -= seq.prefill_len - hit
            slots -= 1
        return plan if plan.chunks else None

    def _decode_run_length(self, max_run_steps: int) -> int:
        """Steps of pure decode we can run before a completion, bounded by the blocks free now.

        Blocks for the whole run are reserved up front; the bound ignores the room left in
        each sequence's last block, so it is conservative and the run never overcommits.
        """
        n = min(self.steps_to_next_finish(), max_run_steps)
        b = len(self.decoding)
        avail = self.kv.num_free + self.kv.num_evictable
        tps = self.tokens_per_step
        n_kv = int(((avail // b) * self.kv.block_size) / tps) if b else n
        n = min(n, n_kv) if n_kv >= 2 else 1
        if n > 1:
            adv = math.ceil(n * tps)
            clock = self.clock
            # Every decoding sequence must hold prompt + output_so_far(seq) + adv tokens. Most already
            # do: one that does not has int(clock - base + EPS) + adv > held - prompt, hence
            # grow_key < clock + adv (to float rounding; the margin of one token covers it). Only those
            # go to kv.grow_held, in the order of `decoding`, which tests each exactly; after a failure
            # (which the bound rules out) the rest are left as they are, and the run falls back to one step.
            limit = clock + adv + 1.0
            kv = self.kv
            ok = True
            for seq in self.decoding.values():
                if seq.grow_key < limit:
                    prompt = seq.req.prompt_tokens
                    held = kv.grow_held(seq.seq_id, prompt + int(clock - seq.base + EPS) + adv) if ok else -1
                    if held < 0:
                        ok = False
                        held = kv.num_tokens(seq.seq_id)
                    seq.grow_key = held - prompt + seq.base
            if not ok:  # cannot happen given the bound; fall back to single steps
                return 1
        return n

    # ----- commit ---------------------------------------------------------------------------
    def commit(self, plan: StepPlan, n_done: int, now: float) -> tuple[list[Sequence], list[Sequence]]:
        """Apply a finished step (or `n_done` steps of a decode run) at time `now`.

        Returns (sequences that produced their first token, sequences that finished).
        """
        firsts: list[Sequence] = []
        finished: list[Sequence] = []
        if plan.kind != "prefill_only" and self.decoding and n_done > 0:
            self.clock += n_done * self.tokens_per_step
        batch = len(plan.chunks) + plan.decode_seqs  # plan.num_seqs
        for seq, chunk in plan.chunks:
            if seq.state != "prefilling":
                continue
            seq.computed += chunk
            if seq.computed >= seq.prefill_len:
                self.prefilling.remove(seq)
                if seq.first_token_s < 0:
                    seq.first_token_s = now
                    seq.batch_at_first_token = batch
                    firsts.append(seq)
                self._start_decoding(seq)
        fin = self._finish
        done_at = self.clock + EPS
        while fin:
            target, _, epoch, seq = fin[0]
            if seq.epoch != epoch or seq.state != "decoding":  # stale (see _finish)
                heapq.heappop(fin)
                continue
            if target > done_at:
                break
            heapq.heappop(fin)
            self._stop_decoding(seq)
            seq.generated = seq.req.output_tokens
            seq.state = "done"
            self.kv.free(seq.seq_id)
            finished.append(seq)
        return firsts, finished

    def abort(self, seq: Sequence) -> None:
        """Drop a live sequence whose client disconnected, freeing its blocks (vLLM aborts a request
        when its client goes away). Its output so far stays counted in `generated`."""
        if seq.state == "waiting":  # never admitted, or preempted: it holds no blocks
            waiting = self.waiting
            i = next(k for k, entry in enumerate(waiting) if entry[3] is seq)
            waiting[i] = waiting[-1]
            waiting.pop()
            heapq.heapify(waiting)  # the order is total (seq_id breaks ties): pops stay deterministic
        elif seq.state == "prefilling":
            self.prefilling.remove(seq)
            self.kv.free(seq.seq_id)
        elif seq.state == "decoding":
            seq.generated = self.output_so_far(seq)
            self._stop_decoding(seq)
            self.kv.free(seq.seq_id)
        else:
            raise ValueError(f"sequence {seq.seq_id} is {seq.state}, not live")
        seq.epoch += 1  # its finish and reservation heap entries go stale
        seq.state = "aborted"

    def drop_all(self) -> list[Sequence]:
        """Remove every sequence (engine death). Returns them; KV state is discarded by the caller."""
        seqs = self.all_sequences()
        for seq in seqs:
            seq.state = "failed"
        self.waiting.clear()
        self.prefilling.clear()
        self.decoding.clear()
        self._finish.clear()
        self._resv.clear()
        self._offset_sum = 0.0
        return seqs

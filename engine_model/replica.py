"""One engine replica: API server + scheduler + KV cache + step timing + memory + lifecycle.

A request enters through the replica's API server (`frontend.Frontend`), which takes it into the
engine's queue once parsed and tokenised, and streams every token the engine produces back out:
a request's first token and its finish are the times the API server sent them.

Lifecycle: up -> (draining ->) down -> up. A replica goes down when it crashes (OOM,
injected crash) or to apply a redeploy; it comes back after a restart delay with a cold
prefix cache. Faults change `hw` (hardware condition) or the config.

Why one module a little over 500 lines: `Replica` is one stateful class (its scheduler, API-server intake,
hardware factors and the step it is running), and every method changes that state under the same invariants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Final

from mypy_extensions import mypyc_attr

from engine_model.config import EngineConfig
from engine_model.determinism import first_token_logprob, output_hash
from engine_model.frontend import Frontend, FrontendConfig
from engine_model.kv_cache import KVCache
from engine_model.lora import AdapterCache, adapter_bytes
from engine_model.memory import (
    MemoryPlan,
    failing_allocation_bytes,
    largest_step_activation_bytes,
    plan_memory,
    step_activation_bytes,
)
from engine_model.profiles import GPUProfile, ModelProfile
from engine_model.records import frozen_reduce
from engine_model.request import Request
from engine_model.results import EngineEvent
from engine_model.scheduler import Scheduler, Sequence, StepPlan
from engine_model.step_cost import HardwareState, StepCostModel

GIB: Final = 1024**3
# vLLM's inter-token latency histogram buckets, seconds (vllm/v1/metrics/loggers.py)
ITL_BUCKETS: Final[tuple[float, ...]] = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
                                  7.5, 10.0, 20.0, 40.0, 80.0)


NAN: Final = math.nan
"""NaN as a constant: compiled, `float("nan")` parses the string at every call (once per request here)."""


def itl_bucket(gap_s: float) -> int:
    """bisect.bisect_left(ITL_BUCKETS, gap_s): the index of the first bucket bound >= gap_s (seconds).
    A scan from the smallest bound: inter-token gaps sit in the first few buckets, and compiled, the scan
    over the Final tuple beats the call into bisect (a module attribute lookup and a boxed float)."""
    i = 0
    n = len(ITL_BUCKETS)
    while i < n and ITL_BUCKETS[i] < gap_s:
        i += 1
    return i


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Outcome:
    """A request that left a replica (or never reached one), with its final status.

    One per request: a plain class, whose __init__ mypyc compiles (a dataclass's would be interpreted)."""

    def __init__(self, seq: Sequence, finish_s: float, status: str, finish_reason: str, output_hash: str,
                 replica: str, model: str, model_version: str, route: str,
                 first_logprob: float = NAN) -> None:
        self.seq = seq
        self.finish_s = finish_s
        self.status = status  # ok | error | timeout
        self.finish_reason = finish_reason  # stop | length | abort (timeout) | error
        self.output_hash = output_hash
        self.replica = replica
        self.model = model
        self.model_version = model_version
        self.route = route  # primary | fallback
        self.first_logprob = first_logprob  # nats; NaN unless the request asked for logprobs


@dataclass(frozen=True)
class Deploy:
    """What a replica restarts into."""

    config: EngineConfig
    model_version: str
    model: ModelProfile
    output_scale: float = 1.0

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Replica:
    """An engine instance. All times are simulated seconds."""

    def __init__(
        self,
        name: str,
        index: int,
        model: ModelProfile,
        gpu: GPUProfile,
        config: EngineConfig,
        *,
        model_version: str,
        pool: str = "primary",
        frontend: FrontendConfig | None = None,
    ) -> None:
        self.name = name
        self.index = index
        self.model = model
        self.gpu = gpu
        self.pool = pool
        self.hw = HardwareState()
        self.expert_skew = 0.0
        self.leak_bytes_per_s = 0.0
        self.leak_bytes_per_request = 0.0
        self.leak_since = 0.0
        self.leak_requests = 0  # prefills completed since leak_since (a per-request leak grows with traffic)
        self.state = "up"
        self.noticed_down = False  # the router's health check has seen the crash
        self.events: list[EngineEvent] = []
        self.pending: Deploy | None = None
        self.output_scale = 1.0  # a model version's output length relative to the workload's
        self.base_acceptance = config.spec_acceptance_rate
        self.drain_token = 0
        self.frontend = Frontend(frontend if frontend is not None else FrontendConfig())
        self._build(config, model_version, model)
        # cumulative counters (never reset: they are what Prometheus would scrape, restart-aware later)
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.requests_finished_total = 0
        self.spec_drafts_total = 0
        self.spec_draft_tokens_total = 0.0
        self.spec_accepted_tokens_total = 0.0
        self.busy_s_total = 0.0
        self.compute_s_total = 0.0
        self.memory_s_total = 0.0
        self.steps_total = 0
        self.itl_counts = [0] * (len(ITL_BUCKETS) + 1)  # per bucket (not cumulative); last is +Inf
        self.itl_sum = 0.0
        self._stall = 0.0  # time decodes waited in prefill-only steps, added to their next token's gap
        self.preemptions_before = 0
        self.prefix_queries_before = 0
        self.prefix_hits_before = 0
        self._next_seq = 0

    # ----- construction ---------------------------------------------------------------------
    def _build(self, config: EngineConfig, model_version: str, model: ModelProfile) -> None:
        config.validate()
        mem = plan_memory(model, self.gpu, config)  # raises before any state changes
        self.mem: MemoryPlan = mem
        self.config = config
        self.model = model
        self.model_version = model_version
        self.cost = StepCostModel(model, self.gpu, config, expert_skew=self.expert_skew)
        self.kv = KVCache(self.mem.num_blocks, config.block_size, config.enable_prefix_caching)
        self.sched = Scheduler(config, self.kv, self.cost.tokens_per_decode_step)
        # LoRA adapter slots, cold after every (re)start; None when LoRA is off
        self.adapters: AdapterCache | None = (
            AdapterCache(config.max_loras, config.max_cpu_loras, adapter_bytes(model, config.max_lora_rank))
            if config.max_loras > 0 else None
        )
        self._act_worst = largest_step_activation_bytes(model, config)
        # _check_memory's first test with nothing leaked
        self._always_fits = self._act_worst <= mem.activation_peak_bytes + mem.headroom_bytes
        self._frac = (0.0, 0.0, 0.0)  # (busy, compute, memory) shares of the step in progress
        self.plan: StepPlan | None = None
        self.plan_start = 0.0
        self.plan_end = 0.0

    def _rebuild_cost(self) -> None:
        self.cost = StepCostModel(self.model, self.gpu, self.config, expert_skew=self.expert_skew)
        self.sched.tokens_per_step = self.cost.tokens_per_decode_step

    def log(self, t: float, kind: str, **detail: Any) -> None:
        self.events.append(EngineEvent(t, self.name, kind, detail))

    # ----- queries --------------------------------------------------------------------------
    @property
    def outstanding(self) -> int:
        """Requests on the replica: in the API server's intake, waiting, or running in the engine."""
        return self.sched.num_outstanding() + len(self.frontend.pending)

    @property
    def busy(self) -> bool:
        return self.plan is not None

    def leaked_bytes(self, now: float) -> int:
        """GPU bytes leaked since the engine (re)started: a steady rate (bytes/s) plus a per-request
        part (bytes per completed prefill), so a per-request leak runs faster when traffic peaks."""
        timed = max(0.0, now - self.leak_since) * self.leak_bytes_per_s
        return int(timed + self.leak_requests * self.leak_bytes_per_request)

    # ----- requests -------------------------------------------------------------------------
    def enqueue(self, req: Request, now: float) -> Sequence:
        """A request reaches the replica's API server at `now`; returns its sequence (the handle `abort`
        takes). It joins the engine's queue when the API server has taken it in (`handover_at`); a
        decode run in progress is cut to end at the step boundary after that, so the engine plans
        with it then."""
        self._next_seq += 1
        seq = Sequence(req=req, seq_id=self._next_seq, prefill_len=req.prompt_tokens)
        ready = self.frontend.intake(seq, now)
        if self.plan is not None:
            self.interrupt(ready if ready > now else now)
        return seq

    def handover_at(self) -> float:
        """When the next request in the API server's intake reaches the engine; -1.0 if none is."""
        return self.frontend.next_handover()

    def take_ready(self, now: float) -> int:
        """Move every request whose intake is done by `now` into the engine's queue, all at once (the
        engine core drains its whole input queue before it schedules). Returns how many moved."""
        ready = self.frontend.pop_ready(now)
        sched = self.sched
        for seq in ready:
            seq.state = "waiting"
            sched.add(seq)
        return len(ready)

    def abort(self, seq: Sequence, now: float) -> Outcome:
        """The client of a live request gave up at `now`: drop it and report a timeout. A decode run
        in progress is left as timed; the caller cuts it short so the next step replans without it.
        A request still in the API server's intake is dropped when its intake ends (its CPU time is
        spent either way: vLLM finishes tokenising it)."""
        if seq.state == "frontend":
            seq.epoch += 1
            seq.state = "aborted"
        else:
            self.sched.abort(seq)
        return self._outcome(seq, now, "timeout")

    def start_step(self, now: float) -> float | list[Outcome] | None:
        """Plan and time the next step. Returns its end time, None if idle, or the failed
        requests when the step's memory does not fit (the replica crashed with an OOM)."""
        if self.state == "down" or self.plan is not None:
            return None
        if self.frontend.pending:
            self.take_ready(now)
        plan = self.sched.plan()
        if plan is None:
            return None
        chunks = plan.chunks
        for seq, _ in chunks:
            if seq.first_scheduled_s < 0:
                seq.first_scheduled_s = now
        # no leak and even the largest step fits: skip the per-step memory check (it would pass)
        if self.leak_bytes_per_s or self.leak_bytes_per_request or not self._always_fits:
            oom = self._check_memory(plan, now)
            if oom is not None:
                return oom
        if self.adapters is not None:
            # adapters the step needs that are not in a GPU slot are copied in first; the step starts after
            # that, and decoding sequences wait for it (their next token's gap includes it)
            used = {s.req.lora for s, _ in chunks if s.req.lora}
            used.update(s.req.lora for s in self.sched.decoding.values() if s.req.lora)
            for s, _ in chunks:
                rank = s.req.lora_rank
                if rank and s.req.lora and rank != self.config.max_lora_rank:
                    self.adapters.sizes[s.req.lora] = adapter_bytes(self.model, rank)
            load_s = self.adapters.activate(used) if used else 0.0
            if load_s > 0.0:
                if self.sched.decoding:
                    self._stall += load_s
                now += load_s
        hw, cost = self.hw, self.cost
        decode_seqs, decode_ctx = plan.decode_seqs, plan.decode_ctx
        parts = cost.step_parts(plan.prefill_tokens, plan.prefill_attn, decode_seqs, decode_ctx, hw, len(chunks))
        total, compute, memory = parts[0], parts[1], parts[2]  # (a starred unpack builds a list per step)
        # share of the step the GPU is busy at all (kernels and collectives, not host overhead or exposed
        # launch time, while which it idles), and spends on compute / on memory traffic (DCGM-like gauges)
        if total > 0:
            self._frac = ((parts[6] + parts[3]) / total, compute / total, memory / total)
        else:
            self._frac = (0.0, 0.0, 0.0)
        if plan.n_steps > 1 and plan.kind == "decode_run":
            dur = cost.decode_run_time(plan.n_steps, decode_seqs, decode_ctx, hw,
                                       growth_per_seq=self.sched.tokens_per_step)
        else:
            dur = total
        self.plan = plan
        self.plan_start = now
        self.plan_end = now + dur
        if plan.n_steps > 1:
            # the API server streams the run's tokens step by step while it runs
            self.frontend.begin_run(now, self.plan_end, plan.n_steps, decode_seqs * self.sched.tokens_per_step)
            if self.frontend.pending:
                # a request reaches the engine's queue mid-run: end the run at the step boundary after that
                nxt = self.frontend.pending[0][0]
                if nxt < self.plan_end:
                    self.interrupt(nxt if nxt > now else now)
        return self.plan_end

    def _check_memory(self, plan: StepPlan, now: float) -> list[Outcome] | None:
        leaked = self.leaked_bytes(now)
        limit = self.mem.activation_peak_bytes + self.mem.headroom_bytes
        if self._act_worst + leaked <= limit:
            return None  # even the largest step this config allows fits
        rows = plan.decode_seqs * (self.config.num_speculative_tokens + 1) + len(plan.chunks)
        act = step_activation_bytes(self.model, self.config, plan.num_tokens, plan.num_seqs, rows)
        if act + leaked <= limit:
            return None
        # what PyTorch would report: the step's largest tensor could not be allocated from what was left after
        # weights, KV pool, graphs, non-torch memory, the leak and the step's smaller tensors allocated before
        # it; so free < tried, and free + in use = the GPU's capacity
        tried = failing_allocation_bytes(self.model, self.config, plan.num_tokens, rows)
        free = max(0, limit - leaked - (act - tried))
        in_use = self.mem.total_bytes - free
        return self.crash(
            now,
            reason="oom",
            tried_bytes=int(tried),
            free_bytes=int(free),
            total_bytes=int(self.mem.total_bytes),
            in_use_bytes=int(in_use),
            leaked_bytes=int(leaked),
            batch_tokens=plan.num_tokens,
            batch_seqs=plan.num_seqs,
        )

    def interrupt(self, now: float) -> float | None:
        """Cut a multi-step decode run at the step in progress at `now` (an arrival or a fault
        needs the scheduler). Returns the new end time if it changed."""
        plan = self.plan
        if plan is None or plan.kind != "decode_run" or plan.n_steps <= 1 or now >= self.plan_end:
            return None
        growth = self.sched.tokens_per_step
        done = self.cost.decode_steps_within(now - self.plan_start, plan.decode_seqs, plan.decode_ctx, self.hw,
                                             growth_per_seq=growth)
        keep = min(plan.n_steps, done + 1)
        if keep >= plan.n_steps:
            return None
        plan.n_steps = keep
        self.plan_end = self.plan_start + self.cost.decode_run_time(keep, plan.decode_seqs, plan.decode_ctx, self.hw,
                                                                    growth_per_seq=growth)
        self.frontend.cut_run(self.plan_end, keep)
        return self.plan_end

    def finish_step(self, now: float) -> list[Outcome]:
        """Apply the step that ended at `now`; returns requests that completed."""
        plan = self.plan
        assert plan is not None
        self.plan = None
        n = plan.n_steps
        dur = now - self.plan_start
        frac_b, frac_c, frac_m = self._frac
        self.busy_s_total += dur * frac_b
        self.compute_s_total += dur * frac_c
        self.memory_s_total += dur * frac_m
        self.steps_total += n
        sched = self.sched
        tps = sched.tokens_per_step
        decode_seqs = plan.decode_seqs
        out_tokens = 0.0  # tokens the step (or run) produced, for the API server to stream
        if plan.kind == "prefill_only":
            if sched.decoding:
                self._stall += dur
        elif decode_seqs:
            per_step = dur / n
            first_gap = per_step + self._stall
            self._stall = 0.0
            counts = self.itl_counts
            counts[itl_bucket(first_gap)] += decode_seqs
            if n > 1:
                counts[itl_bucket(per_step)] += (n - 1) * decode_seqs
            self.itl_sum += (dur + first_gap - per_step) * decode_seqs
            out_tokens = n * decode_seqs * tps
            self.generation_tokens_total += round(out_tokens)
            k = self.config.num_speculative_tokens
            if k > 0:
                self.spec_drafts_total += n * decode_seqs
                self.spec_draft_tokens_total += n * decode_seqs * k
                self.spec_accepted_tokens_total += n * decode_seqs * (tps - 1.0)
        firsts, finished = sched.commit(plan, n, now)
        if not firsts and not finished and out_tokens <= 0.0:
            return []
        # the API server detokenises and streams the step's tokens; clients see them when it is done
        sent = self.frontend.output(out_tokens + len(firsts), n, self.plan_start, now)
        if firsts:
            for seq in firsts:
                self.prompt_tokens_total += seq.req.prompt_tokens
                self.generation_tokens_total += 1
                seq.first_token_s = sent
            self.leak_requests += len(firsts)
        if not finished:
            return []
        out = [self._outcome(seq, sent, "ok") for seq in finished]
        self.requests_finished_total += len(out)
        return out

    def _outcome(self, seq: Sequence, now: float, status: str) -> Outcome:
        req = seq.req
        ok = status == "ok"
        if ok:
            reason = "length" if req.output_tokens >= req.max_tokens else "stop"
        else:
            reason = "abort" if status == "timeout" else "error"
        h = (
            output_hash(
                req.prompt_hash,
                self.model_version,
                temperature=req.temperature,
                seed=req.seed,
                batch_invariant=self.config.batch_invariant,
                seed_pinned=self.config.seed_pinned,
                batch_size=seq.batch_at_first_token,
                request_id=req.request_id,
                output_tokens=req.output_tokens,
            )
            if ok
            else ""
        )
        lp = (
            first_token_logprob(req.prompt_hash, self.model_version, batch_invariant=self.config.batch_invariant,
                                batch_size=seq.batch_at_first_token)
            if ok and req.logprobs
            else NAN
        )
        return Outcome(seq, now, status, reason, h, self.name, self.model.name, self.model_version, self.pool, lp)

    # ----- lifecycle ------------------------------------------------------------------------
    def crash(self, now: float, reason: str, **detail: Any) -> list[Outcome]:
        """The engine process dies, and the API server with it: every request on the replica fails."""
        seqs = self.sched.drop_all()
        for seq in self.frontend.clear():
            seq.state = "failed"
            seqs.append(seq)
        self._retire_counters()
        self.plan = None
        self.state = "down"
        self.noticed_down = False
        self.log(now, "crash", reason=reason, in_flight=len(seqs), **detail)
        return [self._outcome(s, now, "error") for s in seqs]

    def _retire_counters(self) -> None:
        self.preemptions_before += self.sched.preemptions_total
        self.prefix_queries_before += self.kv.prefix_queries_tokens
        self.prefix_hits_before += self.kv.prefix_hits_tokens

    def begin_drain(self, now: float, deploy: Deploy) -> bool:
        """Stop taking traffic; once empty, restart into `deploy` (a rolling redeploy).
        Returns False when the replica is down (the deploy applies at its next restart)."""
        self.pending = deploy
        if self.state != "up":
            return False
        self.state = "draining"
        self.drain_token += 1
        self.log(now, "drain_start", reason="redeploy", model_version=deploy.model_version)
        return True

    def drained(self) -> bool:
        return self.state == "draining" and self.outstanding == 0 and self.plan is None

    def go_down(self, now: float, kind: str = "shutdown") -> None:
        self.frontend.clear()  # empty: a replica shuts down once drained
        self._retire_counters()
        self.state = "down"
        self.noticed_down = True
        self.log(now, kind)

    def restart(self, now: float) -> None:
        """Come back with weights reloaded and an empty prefix cache."""
        old = self.config
        deploy = self.pending or Deploy(self.config, self.model_version, self.model, self.output_scale)
        self.pending = None
        config, version, model = deploy.config, deploy.model_version, deploy.model
        self.output_scale = deploy.output_scale
        changes = {
            k: (getattr(old, k), getattr(config, k))
            for k in old.__dataclass_fields__
            if getattr(old, k) != getattr(config, k)
        }
        old_version = self.model_version
        self._build(config, version, model)
        self.state = "up"
        self.noticed_down = False
        self.leak_since = now
        self.leak_requests = 0
        self.log(
            now,
            "engine_ready",
            model=model.name,
            model_version=version,
            old_model_version=old_version,
            changes={k: [a, b] for k, (a, b) in changes.items()},
            weights_gib=round(self.mem.weight_bytes / GIB, 2),
            activation_gib=round(self.mem.activation_peak_bytes / GIB, 2),
            kv_gib=round(self.mem.kv_bytes / GIB, 2),
            graph_gib=round(self.mem.cuda_graph_bytes / GIB, 2),
            num_blocks=self.mem.num_blocks,
            kv_tokens=self.mem.kv_tokens,
            max_model_len=config.max_model_len,
        )

    def set_hardware(self, now: float, **factors: float) -> None:
        self.hw = replace(self.hw, **factors)
        self.frontend.factor = self.hw.host_overhead_factor  # the API server runs on the same host
        self.log(now, "hardware", **factors)

    def set_expert_skew(self, skew: float) -> None:
        self.expert_skew = skew
        self._rebuild_cost()

    def set_spec_acceptance(self, rate: float) -> None:
        self.config = self.config.with_changes(spec_acceptance_rate=rate)
        self.cost = StepCostModel(self.model, self.gpu, self.config, expert_skew=self.expert_skew)
        self.sched.tokens_per_step = self.cost.tokens_per_decode_step

    # ----- observation ----------------------------------------------------------------------
    def sample(self, now: float) -> dict[str, Any]:
        """State as a scrape at `now` would see it (counters cumulative over the replica's life)."""
        up = self.state != "down"
        lora = up and self.adapters is not None
        leak = self.leaked_bytes(now) if up else 0
        mem_used = (
            self.mem.weight_bytes + self.mem.kv_bytes + self.mem.activation_peak_bytes
            + self.mem.cuda_graph_bytes + self.mem.non_torch_bytes + leak
            if up
            else 0
        )
        return {
            "t": now,
            "replica": self.name,
            "up": up,
            "running": self.sched.num_running if up else 0,
            "waiting": self.sched.num_waiting if up else 0,
            "kv_usage": self.kv.usage if up else 0.0,
            "kv_blocks_total": self.kv.num_blocks,
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "preemptions_total": self.preemptions_before + (self.sched.preemptions_total if up else 0),
            "prefix_queries_total": self.prefix_queries_before + (self.kv.prefix_queries_tokens if up else 0),
            "prefix_hits_total": self.prefix_hits_before + (self.kv.prefix_hits_tokens if up else 0),
            "spec_draft_tokens_total": int(self.spec_draft_tokens_total),
            "spec_accepted_tokens_total": int(self.spec_accepted_tokens_total),
            "spec_drafts_total": self.spec_drafts_total,
            "requests_finished_total": self.requests_finished_total,
            "busy_s_total": self.busy_s_total,
            "compute_s_total": self.compute_s_total,
            "memory_s_total": self.memory_s_total,
            "steps_total": self.steps_total,
            "itl_counts": tuple(self.itl_counts),
            "itl_sum": self.itl_sum,
            "clock_factor": self.hw.clock_factor,
            "hbm_bw_factor": self.hw.hbm_bw_factor,
            "link_factor": self.hw.link_factor,
            "memory_used_bytes": min(mem_used, self.mem.total_bytes),
            "memory_total_bytes": self.mem.total_bytes,
            # LoRA (vllm:lora_requests_info): GPU slots, and the adapters of running and of waiting requests
            "max_lora": self.config.max_loras if lora else 0,
            "lora_running": self._adapters_of(self.sched.running_sequences()) if lora else (),
            "lora_waiting": self._adapters_of(self.sched.waiting_sequences()) if lora else (),
        }

    @staticmethod
    def _adapters_of(seqs: list[Sequence]) -> tuple[int, ...]:
        return tuple(sorted({s.req.lora for s in seqs if s.req.lora}))

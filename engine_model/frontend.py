"""The API server in front of one engine: vLLM's OpenAI-compatible server process.

Every request passes through it twice. On the way in: HTTP and JSON parsing, request validation, the
chat template, tokenisation, and the hop into the engine core (msgpack over ZMQ). On the way out, for
every token the engine produces: incremental detokenisation and one server-sent-events chunk. vLLM V1
runs all of this in one process beside the engine core, so it uses its own CPU core and never slows
a step, but it is a single resource: a burst of requests queues in front of the engine while the API
server tokenises them one after another (vLLM tokenises on one worker thread), and heavy streaming
delays the next request's intake.

Model: one FIFO server per replica, busy until `free_at` (seconds). Work is charged in the order the
simulation hands it over, with no event per job:
- intake of a request: FIXED_S + PER_PROMPT_TOKEN_S * prompt tokens; it reaches the engine's queue
  LATENCY_S after that job is done (`pending`, in that order; the latency holds no resource, so
  requests overlap in it, and host contention does not stretch it, having no CPU cost to slow). The
  latency is one wait per hand-off, not per request: a request whose intake ends while a hand-off is
  still on its way joins it and reaches the engine with it (`handoff_at`). So requests sent together
  reach the engine together and share its next step, as in vLLM: ten simultaneous requests to an idle
  server all got their first token at 62 +- 0.5 ms, where a per-request latency split them over three
  prefill steps (34/56/75 ms; issue 33's measurement). At light load, with requests far apart, nothing changes.
- output of an engine step: PER_OUTPUT_TOKEN_S per token, handed over when the step ends. A token
  reaches the client when the server is done with its step's batch (V1's OutputProcessor handles a
  step's outputs in one pass before the per-request streams send them).
- a run of n identical decode steps (one simulation event) hands over w of work at each of its step
  ends t0 + k * d. m such steps are charged at once: the Lindley recursion f_k = max(f_{k-1}, e_k) + w
  over equally spaced ends e_1..e_m solves to max(max(free_at, e_1) + m * w, e_m + w) (its maximum
  sits at k = 1 or k = m). Before each intake the steps that ended by then are charged (`catch_up`),
  the rest when the run ends, so intake and streaming interleave as in a FIFO to within one step.
  The steps of a run are taken as equally long (their real durations grow slowly with the context).
Host CPU contention (HardwareState.host_overhead_factor) slows the API server as it slows the
engine's own host work: the same machine.

Costs, per request on one API server core (estimates; none measured on this project's hardware):
- PER_PROMPT_TOKEN_S, 2 us/token: a Hugging Face fast tokenizer encodes about 1 us per token on one
  thread (1.1 s for a ~1M-token document, charlesxu.io "3.3x Faster HuggingFace Tokenizers";
  vllm-project/vllm#10635: "a few hundred milliseconds" for 256K-token prompts), plus about as much
  again for the chat template render, which also grows with the conversation (NVIDIA/TensorRT-LLM
  #16231: hundreds of ms per request at ~100k-token chats). The split is our estimate.
- FIXED_S, 1.5 ms: HTTP handling, pydantic validation, SamplingParams, input processing and the ZMQ
  hop into the engine core and back. Estimated, so that a burst of a thousand short requests takes a
  few seconds to get into one server (vllm-project/vllm#25301 and #10635 describe the serialised
  intake; #17546 (`--api-server-count`) shows one API server limiting TTFT at ~120 req/s of ShareGPT,
  where intake plus streaming ~200 tokens per request come to several ms each).
- LATENCY_S, 20 ms (fitted; the mechanism is not identified): vLLM's light-load TTFT sits a constant
  amount above what its engine steps and the CPU costs here explain. The nightly serving rows (Llama-3-70B
  TP4, ShareGPT at 1 request/s, telemetry_gen/data/fidelity_points.yaml) are 19 ms (H100) and 28 ms (H200)
  above the engine model at mean, median and p99 alike, i.e. the whole distribution shifts; GPUStack's
  Qwen3-8B run at 4 clients has 36 ms more mean TTFT on vLLM v0.11 than on SGLang with the same client and
  GPU. A shift that leaves bursts alone (vLLM v0.9.2 took 1000 ShareGPT requests at once with a 5.2 s mean
  TTFT, which bounds a serial per-request cost to a few ms) is a wait that holds no shared resource, not a
  queue: the asyncio and ZMQ hand-offs between the API server and the engine core are the likeliest place.
  TensorRT-LLM's Triton serving rows fit without it (fidelity.SERVER_FRONTENDS["triton"]).
- PER_OUTPUT_TOKEN_S, 20 us/token: incremental detokenisation plus one SSE chunk (JSON serialisation,
  an asyncio queue hop, the socket write). vllm-project/vllm#121 measured ~30 us per token for
  incremental detokenisation alone in 2023 (0.03 s for 8 x 128 tokens); V1's DecodeStream is faster,
  the chunk costs come on top. Estimated.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from mypy_extensions import mypyc_attr

from engine_model.records import frozen_reduce
from engine_model.scheduler import Sequence

FIXED_S = 1.5e-3
PER_PROMPT_TOKEN_S = 2.0e-6
PER_OUTPUT_TOKEN_S = 20e-6
LATENCY_S = 20e-3


@dataclass(frozen=True)
class FrontendConfig:
    """Costs of one replica's API server: seconds of its CPU, and `latency_s`, seconds a request spends on
    its way to the engine that hold no CPU. All zero: requests reach the engine at once."""

    fixed_s: float = FIXED_S
    per_prompt_token_s: float = PER_PROMPT_TOKEN_S
    per_output_token_s: float = PER_OUTPUT_TOKEN_S
    latency_s: float = LATENCY_S

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)

    def intake_s(self, prompt_tokens: int) -> float:
        """CPU seconds of one request's intake (before host contention stretches it)."""
        return self.fixed_s + self.per_prompt_token_s * prompt_tokens


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Frontend:
    """One replica's API server: a single CPU worked in FIFO order. Times are simulated seconds.

    A plain class (mypyc compiles its methods; one per replica)."""

    def __init__(self, config: FrontendConfig) -> None:
        self.config = config
        self.factor = 1.0  # host_overhead_factor: CPU contention on the host slows every job
        self.free_at = 0.0  # when the server has done all the work handed to it so far
        # requests being taken in, in FIFO order: (time it reaches the engine, sequence)
        self.pending: deque[tuple[float, Sequence]] = deque()
        self.handoff_at = 0.0  # when the latest hand-off reaches the engine (a later intake may join it)
        self.busy_s_total = 0.0  # CPU seconds of work done (intake and output)
        # the engine's decode run in progress: start, planned end, steps, tokens per step, steps charged
        self.run_start = 0.0
        self.run_end = 0.0
        self.run_steps = 0
        self.run_tokens = 0.0
        self.run_charged = 0

    def _charge(self, steps: int, work: float, first_end: float, last_end: float) -> None:
        """`steps` engine steps ending evenly from `first_end` to `last_end` hand over `work` each."""
        total = steps * work
        self.busy_s_total += total
        f = (self.free_at if self.free_at > first_end else first_end) + total
        last = last_end + work
        self.free_at = f if f > last else last

    def intake(self, seq: Sequence, now: float) -> float:
        """Queue a request that reached the server at `now`; returns when it reaches the engine."""
        if self.run_steps > 1:
            self.catch_up(now)
        cfg = self.config
        cost = cfg.intake_s(seq.req.prompt_tokens) * self.factor
        start = self.free_at if self.free_at > now else now
        done = start + cost
        self.free_at = done
        self.busy_s_total += cost
        seq.state = "frontend"
        ready = done + cfg.latency_s
        if self.handoff_at > done:
            ready = self.handoff_at  # the hand-off in flight takes it along: one wait per hand-off
        self.handoff_at = ready  # never earlier than the last: `pending` stays in order of hand-over
        self.pending.append((ready, seq))
        return ready

    def next_handover(self) -> float:
        """When the first request in intake reaches the engine; -1.0 when none is in intake."""
        pending = self.pending
        return pending[0][0] if pending else -1.0

    def pop_ready(self, now: float) -> list[Sequence]:
        """Requests whose intake is done by `now`, in order, each stamped with when it reached the engine
        (`engine_arrival_s`: its queue time counts from there); drops those whose client has gone."""
        pending = self.pending
        out: list[Sequence] = []
        while pending and pending[0][0] <= now:
            ready, seq = pending.popleft()
            if seq.state == "frontend":  # else aborted (the client gave up) while in intake
                seq.engine_arrival_s = ready
                out.append(seq)
        return out

    def begin_run(self, start: float, end: float, steps: int, tokens_per_step: float) -> None:
        """The engine started a run of `steps` decode steps, planned to end at `end`."""
        self.run_start = start
        self.run_end = end
        self.run_steps = steps
        self.run_tokens = tokens_per_step
        self.run_charged = 0

    def cut_run(self, end: float, steps: int) -> None:
        """The run in progress was cut short to `steps` steps ending at `end`."""
        self.run_end = end
        self.run_steps = steps

    def catch_up(self, now: float) -> None:
        """Charge the output of the run's steps that ended by `now` and are not charged yet."""
        per_token = self.config.per_output_token_s
        n = self.run_steps
        d = (self.run_end - self.run_start) / n
        if per_token <= 0.0 or d <= 0.0:
            return
        k = int((now - self.run_start) / d + 1e-9)
        if k > n - 1:
            k = n - 1  # the last step is charged when the run ends, with its exact end time
        j = self.run_charged
        if k <= j:
            return
        work = self.run_tokens * per_token * self.factor
        self._charge(k - j, work, self.run_start + (j + 1) * d, self.run_start + k * d)
        self.run_charged = k

    def output(self, tokens: float, n_steps: int, start: float, end: float) -> float:
        """Charge the output of the step (or the `n_steps` decode steps) that ran from `start` to `end`
        and produced `tokens` tokens in all, evenly per step, less what `catch_up` charged already.
        Returns when the last step's tokens have reached the clients."""
        per_token = self.config.per_output_token_s
        n = n_steps if n_steps > 1 else 1
        j = self.run_charged if self.run_steps > 1 else 0
        self.run_steps = 0
        self.run_charged = 0
        if per_token <= 0.0 or tokens <= 0.0 or j >= n:
            return self.free_at if self.free_at > end else end
        # _charge(n - j, work, start + (j + 1) * d, end), inlined: this runs at every step end
        work = tokens / n * per_token * self.factor
        d = (end - start) / n
        first_end = start + (j + 1) * d
        total = (n - j) * work
        self.busy_s_total += total
        f = (self.free_at if self.free_at > first_end else first_end) + total
        last = end + work
        self.free_at = f if f > last else last
        return self.free_at

    def clear(self) -> list[Sequence]:
        """The server process went away (crash or shutdown): the requests still in intake, for failing."""
        out = [seq for _, seq in self.pending if seq.state == "frontend"]
        self.pending.clear()
        self.free_at = 0.0
        self.handoff_at = 0.0
        self.run_steps = 0
        self.run_charged = 0
        return out

"""The time of one engine step: a calibrated roofline over the kernels one forward pass runs.

Shape of the model (per GPU, one TP rank; all layers, because pipeline stages of one step run one after
another):

* Linear layers (QKV, O, gate/up, down; experts for MoE), kernel by kernel: FLOPs = 2 * weights * tokens;
  bytes = weights (by weight dtype; for MoE only the experts the step's tokens touch,
  E * (1 - (1 - k/E)**tokens)) plus activations in and out. Each kernel's compute time and memory time are
  combined with a smoothed roofline (c**p + m**p)**(1/p) (p -> infinity is the textbook max(); the
  measured kernels bend earlier) and the kernel adds KERNEL_OVERHEAD_S.
* MoE expert skew: experts are placed expert-parallel across the TP ranks; a hot expert makes its rank do
  more expert FLOPs than the mean rank (moe_imbalance_factor), and every rank waits for it. The factor
  scales the MoE compute time, so it shows in compute-bound (prefill-heavy, large-batch) steps; a
  memory-bound step still reads the same expert weights per rank, and with one GPU (TP 1) the total work
  is unchanged, so skew has no effect there.
* Elementwise kernels (norms, residual add, rotary, SiLU-and-mul) only move activations: memory-bound.
* Every kernel adds KERNEL_OVERHEAD_S of GPU time (launch tail, ramp-up): added, not a lower bound (max),
  because Vidur's per-operator medians fit that way (see Calibration).
* Attention: prefill FLOPs 4 * heads * head_dim * prefill_attn (token**2 units, causal) at the GPU's
  attention efficiency (FlashAttention-3 on Hopper, FlashAttention-2 elsewhere); decode reads the whole KV
  of every sequence once per step at ATTN_BW_EFFICIENCY of peak bandwidth. KV is charged at the cache's
  element size: 1 byte for fp8 (FlashAttention-3 and vLLM's paged kernels read fp8 KV and convert in
  registers; GPUStack measured vLLM 0.9.2's mean TPOT on Qwen3-8B / H100 / ShareGPT drop from 126.55 to
  103.21 ms with an fp8 KV cache, docs/performance-lab/references/the-impact-of-quantization-on-vllm-
  inference-performance.md in github.com/gpustack/gpustack). The two attention kernels' fixed costs
  are added per layer: the KV write's KERNEL_OVERHEAD_S and the attention kernel's measured floor
  ATTN_KERNEL_FIXED_S; a decode step stays affine in its context, which the closed forms of
  decode_run_time rely on.
* LM head on the sampled rows only, then the sampler over the vocabulary.
* Tensor parallel: weights, heads and KV heads split over TP ranks; two all-reduces per layer of
  tokens * hidden * 2 bytes over `gpu.link` (tp_allreduce_s): vLLM's one-shot kernels (custom all-reduce /
  symmetric memory) for messages up to FAST_ALLREDUCE_MAX_BYTES on NVLink-class links at 2/4/6/8 ranks,
  else NCCL (ring_allreduce_s: a fixed per-call cost plus 2(n-1)/n * bytes at the achieved bandwidth).
* Pipeline parallel: one step crosses every stage in turn, so its latency is the sum over stages (the
  bubble: with a single step in flight every stage idles (pp-1)/pp of the time) plus one activation
  send/recv per stage boundary. PP buys memory, not step latency.
* Host: a per-step scheduling cost plus a per-sequence cost, never overlapped (v0.11 has no async
  scheduling), and a kernel-launch cost that runs ahead of the GPU and is only exposed when it is longer
  than the GPU's work. CUDA graphs (enforce_eager False) cut launch cost to a replay for decode-only steps
  up to the largest capture size, min(2 * max_num_seqs, 512); mixed steps replay piecewise graphs with
  attention launched eagerly; larger steps run compiled code without graphs.
* Speculative decoding (k draft tokens, acceptance a): every decode sequence verifies k + 1 tokens, so
  linear FLOPs and attention FLOPs grow k + 1 times while weight and KV reads do not; drafting costs k
  passes of a one-layer EAGLE-style head that shares the LM head. Expected tokens per step is
  (1 - a**(k+1)) / (1 - a). It wins while the step is memory-bound and loses once it is compute-bound.
* Weight dtype: fp8 runs at the GPU's fp8 TFLOPS when it has fp8 tensor cores (else W8A16 at the bf16 rate
  with a dequant overhead); int4 (W4A16) runs at the bf16 rate slowed by DEQUANT_OVERHEAD.
* HardwareState: clock_factor divides compute (FLOP) time only, hbm_bw_factor divides memory time only,
  link_factor divides collective bandwidth time, host_overhead_factor multiplies host and launch time.
  The per-kernel overhead and the all-reduce call costs are not scaled.

Calibration (tests/test_calibration.py and tests/test_step_cost_vidur.py; data in engine_model/data/vidur/,
microsoft/vidur@7d47513, MIT). The linear-layer part (everything above except attention, LM head, sampler,
comm and host) is compared with Vidur's measured per-operator medians, summed over the non-attention ops
of one layer (input norm, QKV, rotary, O, post-attention norm, gate/up, SiLU, down, add) times the layer
count, at num_tokens 1..4096 and TP 1, 2, 4, 8:

    profile (model here)                   median |rel err|   max |rel err|   median signed
    H100 Llama-2-7b-hf (Llama-2-7B)        3.8 %              22.4 %          +1.7 %
    A100 Meta-Llama-3-8B (Llama-3.1-8B)    4.6 %              20.2 %          -2.4 %
    (1036 token-count x TP points each; per TP degree the median stays within 2.3..6.6 %)

GEMM_COMPUTE_EFFICIENCY, GEMM_BW_EFFICIENCY and ROOFLINE_P come from a fit of the four GEMM operators
alone (QKV, O, gate/up, down; 4144 rows over both profiles, minimising median + max/8 of |rel err|):
0.78 / 0.82 / 1.25 with a 4 us per-kernel cost, median 6.4 %, max 48 %. That fit rejects two intuitive
alternatives: a sharper transition (p = 2: median 6.7 %; p = 3: 8.3 %) and kernel floors as a lower bound
max(floor, roofline) instead of an added cost (best median 7.8 %, max 65 %; a smooth max with p 2..3:
7.7-7.9 %): the measured small GEMMs stream weights 3-5 us slower than their bytes alone allow at every
size, not only when tiny. ELEMENTWISE_BW_EFFICIENCY and KERNEL_OVERHEAD_S (3.5 us) were then chosen on the
layer sums above from the near-optimal set of a grid search (median + max/4). The largest errors sit at
tile-quantisation steps of the measured GEMMs (64..1024 tokens), which a smooth model does not reproduce.
Held-out check: median / max errors of 4.6 % / 48 % on Vidur's H100 Llama-2-70b profile (copied and
guarded by tests/test_calibration.py since 2026-12-06), 5.0 % / 27 % on A100 Meta-Llama-3-70B and
4.5 % / 22 % on A100 Llama-2-7b (not copied). The 48 % is the transition: the 70B GEMMs stay
weight-bound up to ~256 tokens and then turn compute-bound sharply, where the smooth roofline runs
+25..+48 % slow at 128-512 tokens. A refit over all five profiles (ROOFLINE_P 1.5, compute 0.72, bandwidth
0.84) lowers the pooled median 4.5 -> 3.5 % and that max to 39 %, but made the fidelity points' TPOT median
worse (9.2 -> 10.2 %), so it was not taken.

The NCCL all-reduce (profiles.LINKS nvlink3/nvlink4 allreduce_call_s and efficiency) was fitted to Vidur's
{a100,h100}_dgx all_reduce.csv: median error over all sizes 10 / 11 / 3 % (H100, 2 / 4 / 8 ranks) and
5 / 9 / 17 % (A100); the 64 KiB..1 MiB band medians within 18 %. vLLM's own one-shot all-reduce
(FAST_ALLREDUCE_*) is fitted to vLLM's H100 device-communicator benchmark (see the constants).
Attention: Vidur's attention.csv files are too large to copy; the ATTN_* factors are fitted to the
published kernel figures named at the constants.

Why one module of ~760 lines: every fitted efficiency sits beside the roofline formula it calibrates, with its
source; the constants mean nothing apart from their formula, and the hardware and model figures themselves are
in profiles.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from mypy_extensions import mypyc_attr

from engine_model.config import EngineConfig
from engine_model.profiles import GPUProfile, Link, ModelProfile, kv_element_bytes, weight_element_bytes
from engine_model.records import frozen_reduce

# ---- calibrated against Vidur (see module docstring) -----------------------------------------------
# The constants are Final so that the compiled build inlines them: a plain module global is a dict lookup
# at every use in the step-cost functions. (_MAX_SHAPES and _MAX_HW_STATES stay plain: tests shrink them.)
GEMM_COMPUTE_EFFICIENCY: Final = 0.78  # achieved / dense peak FLOP/s of large bf16 GEMMs (MFU-like)
GEMM_BW_EFFICIENCY: Final = 0.82  # achieved / peak HBM bandwidth when a GEMM streams its weights (x gpu.hbm_reach)
ELEMENTWISE_BW_EFFICIENCY: Final = 0.60  # norms, rotary, activation, residual add
KERNEL_OVERHEAD_S: Final = 3.5e-6  # fixed GPU time every kernel adds to its roofline time (launch tail, ramp)
ROOFLINE_P: Final = 1.25  # smoothing exponent of (c**p + m**p)**(1/p), per kernel

# ---- attention (fitted to published kernel measurements; see module docstring) --------------------
# Prefill (FLOP-bound) attention: FlashAttention-2 reaches 50-73 % of A100 peak (Dao 2023, arXiv
# 2307.08691, abstract) and FlashAttention-3 up to 75 % of H100 peak in bf16/fp16 (Shah et al. 2024, arXiv
# 2407.08608, abstract: 740 TFLOPs/s); serving kernels run causal, paged and chunked, below the best
# case. vLLM runs FA3 on Hopper and FA2 elsewhere.
ATTN_COMPUTE_EFFICIENCY: Final = 0.60  # FA2-class kernels (A100, L40S, and GPUs without a public figure)
ATTN_COMPUTE_EFFICIENCY_BY_GPU: dict[str, float] = {"H100-SXM": 0.65, "H200": 0.65}  # FA3 on Hopper
# Decode attention streaming KV: the paged batch-decode rows for Llama-3-70B heads (64 q / 8 kv heads,
# 64 sequences, page 16) on H100 SXM in microsoft/onnxruntime#21414 add 3.0 TB/s of bandwidth per extra
# byte between 256 and 512 tokens of context (39.5 -> 61.9 us for 67 -> 131 MiB): 0.89 of 3.35 TB/s.
ATTN_BW_EFFICIENCY: Final = 0.88
# The attention kernel's fixed GPU time per call (one call per layer per step: V1 runs prefill and decode
# tokens of a step through one varlen attention call), in place of the generic KERNEL_OVERHEAD_S. The same
# table of microsoft/onnxruntime#21414 (H100 SXM, paged batch decode, Llama-3-70B heads, page 16) gives
# 15.06 us of GPU time for 11 MiB of KV (64 sequences x 32 tokens) and 17.90 us for 19 MiB: after the bytes
# at ATTN_BW_EFFICIENCY (3.9 and 6.8 us) the kernel takes 11.1 us at any size (the 256- and 512-token rows
# leave 15-16 us). Was KERNEL_OVERHEAD_S (3.5 us, fitted to GEMM and elementwise operators, not attention),
# which left light-load decode steps 1-15 % faster than vLLM's nightly latency tests. Assumed alike on
# other GPUs (no public figure found).
ATTN_KERNEL_FIXED_S: Final = 11e-6

# ---- all-reduce inside vLLM (fitted; see tp_allreduce_s) ------------------------------------------
# vLLM runs TP all-reduces up to a few MiB with its own one-shot kernels, not NCCL. Fitted to vLLM's
# device-communicator benchmark on H100 (vllm-project/vllm#24111 and #24532: best of custom all-reduce
# and symmetric memory, 0.5-4 MiB at 2, 4 and 6 ranks, e.g. 10 us for 0.5 MiB at TP 4): median error 7 %,
# max 28 % over 13 rows. The same latency and efficiency are assumed for NVLink3/5 and xGMI (no
# public figure found).
FAST_ALLREDUCE_LATENCY_S: Final = 7e-6
FAST_ALLREDUCE_EFFICIENCY: Final = 0.60  # of the link's per-direction bandwidth
FAST_ALLREDUCE_MAX_BYTES: Final = 8 << 20  # vLLM CustomAllreduce's default max_size (8 MiB); NCCL above

# ---- assumptions (not calibrated; stated) ---------------------------------------------------------
DEQUANT_OVERHEAD: Final = 0.20  # W4A16 / W8A16 kernels: dequantisation slows the math by 1 / (1 + x)
SAMPLER_BYTES_PER_LOGIT: Final = 16.0  # fp32 logits read/written by softmax, top-k/top-p sort and sampling
SAMPLER_KERNELS: Final = 6

# The engine core's host work once per step (scheduling, input preparation, the sampled tokens' copy back
# and their hand-off to the API server), which vLLM V1 without async scheduling runs while the GPU waits.
# Fitted to vLLM's nightly latency tests (8 sequences, 32 in / 128 out; Llama-3.1-8B TP1, Llama-3-70B TP4,
# Mixtral-8x7B TP2 on H100, H200 and A100, telemetry_gen/data/fidelity_points.yaml): at 1.0 ms their
# median signed error is -0.7 % (+0.4 % at 1.2 ms) and median |error| 3.4 %; at the earlier assumed 0.3 ms
# every one of the nine ran fast (median -7 %). Vidur's CPU-overhead profile of V0-era vLLM
# (microsoft/vidur data/profiling/a100/cpu_overheads.csv, Llama-2-7B, batch 8) sums to ~2 ms a step, of
# which V1 moved output processing (~0.6 ms) out of the engine core and the sampler's GPU time is charged
# here as kernels. HOST_PER_SEQ_S stays an assumption: 10-20 us per sequence made the large offline
# batches (2048 sequences) 5-10 % slower than NVIDIA's throughput tables.
HOST_STEP_S: Final = 1.0e-3
HOST_PER_SEQ_S: Final = 3.0e-6  # the same work per sequence in the step
EAGER_LAYER_CPU_S: Final = 0.25e-3  # Python + dispatch to launch one decoder layer's kernels without graphs
COMPILED_LAYER_CPU_S: Final = 0.08e-3  # torch.compile'd layer above the largest captured size
PIECEWISE_LAYER_CPU_S: Final = 0.03e-3  # piecewise graphs: attention launched eagerly each layer
GRAPH_REPLAY_CPU_S: Final = 0.05e-3  # replaying one full CUDA graph
MAX_CAPTURE_SIZE: Final = 512  # vLLM: max_cudagraph_capture_size = min(2 * max_num_seqs, 512)

_DENSE_GEMM_KERNELS: Final = 4  # QKV, O, gate_up, down
_ELEMENTWISE_KERNELS: Final = 5  # input norm, post-attention norm, rotary, SiLU-and-mul, residual add
_MOE_EXTRA_KERNELS: Final = 4  # router GEMM, top-k, token alignment, expert-output reduction
_ATTN_KERNELS: Final = 2  # KV-cache write, attention
_ATTN_FIXED_S: Final = KERNEL_OVERHEAD_S + ATTN_KERNEL_FIXED_S  # their fixed GPU time per layer and step

# Memo bounds: a fleet run sees a few thousand step shapes per replica and a handful of hardware states;
# a table that outgrows its bound is cleared (entries are pure functions of their key, so only speed
# changes).
_MAX_SHAPES = 1 << 16
_MAX_HW_STATES = 64
_MAX_MODELS = 16


@dataclass(frozen=True)
class HardwareState:
    """Live hardware condition of one replica; faults change it. Every factor is actual / nominal."""

    clock_factor: float = 1.0  # SM clock / nominal: scales compute throughput
    hbm_bw_factor: float = 1.0  # HBM bandwidth / nominal
    link_factor: float = 1.0  # interconnect bandwidth / nominal
    host_overhead_factor: float = 1.0

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)


NOMINAL = HardwareState()


class StepBreakdown(NamedTuple):
    """Where one step's time goes, in seconds. Immutable; a NamedTuple because the simulator builds one
    per engine step and a frozen dataclass costs several times more to construct.

    compute_s: time of all the step's FLOPs at calibrated efficiency; memory_s: time of all its bytes at
    calibrated bandwidth. device_s is the GPU's actual busy time, combined kernel by kernel (plus kernel
    floors), so max(compute_s, memory_s) <= device_s and device_s <= compute_s + memory_s + floors.
    total_s = device_s + comm_s + overhead_s, where overhead_s is host time plus any exposed launch time.
    bound: which roof limits the step's matmul and attention kernels: "compute" when their FLOP time
    exceeds their byte time, else "memory". Elementwise and sampler kernels stream bytes at every batch
    size, so they count in memory_s but not in this comparison (otherwise the answer to "when does decode
    turn compute-bound" would depend on how many norms the model has rather than on the matmuls).
    """

    total_s: float
    compute_s: float
    memory_s: float
    comm_s: float
    overhead_s: float
    bound: str
    device_s: float = 0.0


_Fixed = tuple[float, float, float, float, float, float, float, float, float]
"""The parts of a step that do not depend on decode context, plus the per-context slopes (seconds, seconds per
token), in this order:
    device_s  GPU time excluding decode attention over context
    compute_s
    memory_s  roofline kernels' byte time plus stream_s
    stream_s  byte time of purely streaming kernels (elementwise, sampler, KV writes)
    comm_s
    launch_s
    host_s
    slope_c   decode-attention compute seconds per token of decode context
    slope_m   decode-attention memory seconds per token of decode context
A plain tuple, so the hot path unpacks it in one go; not a NamedTuple, whose constructor runs as interpreted
Python even when this module is compiled (~1 us for each of the standard fleet's ~50,000 step shapes)."""

_SHAPE_BITS: Final = 21
"""The memo of step shapes packs (prefill tokens, prefill sequences, decode sequences) into one int key,
each count in this many bits: an int hashes and compares faster than a tuple, and needs no tuple built per
step. Counts that do not fit (never, with max_num_seqs in the thousands and chunks of thousands of tokens)
are not memoised. Prefill tokens, the count that varies most, take the low bits: a dict's first probe is
the hash's low bits (an int's hash is the int), and with the batch size there, every shape of one batch
size began probing at the same slot (long probe chains, ~0.5 us a lookup)."""
_SHAPE_LIMIT: Final = 1 << _SHAPE_BITS
_DECODE_SLOTS: Final = 1 << 12
"""Decode-only step shapes (batch sizes below this) are memoised in a list indexed by the batch size: two
in three steps the engine plans are decode-only, and in the shape dict, which mixed steps fill with
tens of thousands of one-off shapes, their lookups missed the CPU cache."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
@dataclass(slots=True)
class _HwMemo:
    """What one StepCostModel has worked out for one HardwareState: attention rates (FLOP/s, bytes/s)
    and memo tables of pure functions of the step shape. Keys are as the caller passed them; values
    are computed from int() of them, as the uncached code did."""

    hw: HardwareState
    attn_flops: float  # achieved FLOP/s of attention kernels
    attn_bw: float  # achieved bytes/s of attention kernels
    fixed: dict[int, _Fixed] = field(default_factory=dict)  # key packs (prefill_tok, prefill_seqs, decode): _SHAPE_BITS
    decode: list[_Fixed | None] = field(default_factory=list)  # decode-only shapes by batch size: _DECODE_SLOTS
    affine: dict[int, tuple[float, float, float, float]] = field(default_factory=dict)  # decode_seqs
    linear: dict[float, tuple[float, float, float, float]] = field(default_factory=dict)  # tokens
    head: dict[float, tuple[float, float, float, float]] = field(default_factory=dict)  # rows


# Replicas built alike (the usual fleet) share one set of memo tables: (model, gpu, config, expert_skew,
# pp_link) -> {HardwareState: _HwMemo}.
_SHARED_MEMOS: dict[tuple[object, ...], dict[HardwareState, _HwMemo]] = {}


def clear_memos() -> None:
    """Forget the process-wide memo of step shapes. Answers do not change; they are recomputed."""
    _SHARED_MEMOS.clear()


def _shared_memos(key: tuple[object, ...]) -> dict[HardwareState, _HwMemo]:
    try:
        memos = _SHARED_MEMOS.get(key)
    except TypeError:  # an unhashable custom profile: memoise for this model alone
        return {}
    if memos is None:
        if len(_SHARED_MEMOS) >= _MAX_MODELS:
            _SHARED_MEMOS.clear()
        memos = _SHARED_MEMOS[key] = {}
    return memos


def _step_cost_model(model: ModelProfile, gpu: GPUProfile, config: EngineConfig, expert_skew: float,
                     pp_link: Link) -> StepCostModel:
    return StepCostModel(model, gpu, config, expert_skew=expert_skew, pp_link=pp_link)


def _run_seconds(n: int, start: float, inc: float, launch: float, host: float) -> float:
    """Seconds of n decode steps whose GPU time is start + inc * j (j = 0..n-1, seconds), each taking
    max(gpu, launch) + host: at most two arithmetic series, split where the GPU overtakes the launch."""
    if n <= 0:
        return 0.0
    if inc <= 0.0:
        return n * ((launch if launch > start else start) + host)
    j_star = _launch_bound_steps(start, inc, launch, n)
    rest = n - j_star
    total = j_star * (launch + host)
    if rest > 0:
        total += rest * (start + host) + inc * (j_star + n - 1) * rest / 2.0
    return total


def _launch_bound_steps(start: float, inc: float, launch: float, cap: int) -> int:
    """Number of leading steps j (0-based, at most cap) whose GPU time start + inc*j is below launch."""
    if start >= launch:
        return 0
    x = (launch - start) / inc
    return int(min(cap, math.ceil(x)))


def _combine(c: float, m: float) -> float:
    """Smoothed roofline of a compute time and a memory time (seconds)."""
    if c <= 0.0 or m <= 0.0:
        return c + m
    hi = max(c, m)
    lo = min(c, m)
    return hi * (1.0 + (lo / hi) ** ROOFLINE_P) ** (1.0 / ROOFLINE_P)


def _gemm(tokens: float, k_in: float, n_out: float, w_el: float, peak: float, bw: float) -> tuple[float, float]:
    """(compute_s, memory_s) of one GEMM of `tokens` rows through a k_in x n_out weight of `w_el` bytes
    per element: 2 * tokens * k * n FLOPs at `peak` FLOP/s; weights plus bf16 activations in and out at
    `bw` bytes/s."""
    c = 2.0 * tokens * k_in * n_out / peak
    m = (k_in * n_out * w_el + tokens * 2.0 * (k_in + n_out)) / bw
    return c, m


def _kernel_s(c: float, m: float) -> float:
    """One kernel's GPU time: its smoothed roofline plus the fixed per-kernel cost (seconds)."""
    return _combine(c, m) + KERNEL_OVERHEAD_S


def ring_allreduce_s(nbytes: float, n: int, link: Link, link_factor: float = 1.0) -> float:
    """Seconds for an NCCL ring all-reduce of `nbytes` over `n` ranks: the link's fixed per-call cost
    (`allreduce_call_s`, not scaled by link degradation) plus 2(n-1)/n * nbytes at the link's achieved
    per-direction bandwidth. Zero for n <= 1."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    bw = link.bw_gbs * 1e9 * link.efficiency * link_factor
    return link.allreduce_call_s + 2 * (n - 1) / n * nbytes / bw


def fast_allreduce_s(nbytes: float, n: int, link: Link, link_factor: float = 1.0) -> float:
    """Seconds for vLLM's one-shot all-reduce kernels (custom all-reduce / symmetric memory) of `nbytes`
    over `n` ranks: FAST_ALLREDUCE_LATENCY_S plus 2(n-1)/n * nbytes at FAST_ALLREDUCE_EFFICIENCY of the
    link. Only meaningful where `fast_allreduce_applies`."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    bw = link.bw_gbs * 1e9 * FAST_ALLREDUCE_EFFICIENCY * link_factor
    return FAST_ALLREDUCE_LATENCY_S + 2 * (n - 1) / n * nbytes / bw


def fast_allreduce_applies(nbytes: float, n: int, link: Link) -> bool:
    """Whether vLLM would run an all-reduce of `nbytes` over `n` ranks with its own kernels rather than
    NCCL: a link that supports them, 2/4/6/8 ranks, and at most FAST_ALLREDUCE_MAX_BYTES."""
    return link.fast_allreduce and n in (2, 4, 6, 8) and nbytes <= FAST_ALLREDUCE_MAX_BYTES


def tp_allreduce_s(nbytes: float, n: int, link: Link, link_factor: float = 1.0) -> float:
    """Seconds of one tensor-parallel all-reduce as the engine runs it: the faster of vLLM's one-shot
    kernels and NCCL where the one-shot kernels apply (vLLM picks by size), else NCCL."""
    nccl = ring_allreduce_s(nbytes, n, link, link_factor)
    if fast_allreduce_applies(nbytes, n, link):
        fast = fast_allreduce_s(nbytes, n, link, link_factor)
        return fast if fast < nccl else nccl
    return nccl


def _gather_s(nbytes_total: float, n: int, link: Link, link_factor: float) -> float:
    """Seconds for an all-gather whose result is `nbytes_total` (ring: n-1 hops)."""
    if n <= 1 or nbytes_total <= 0:
        return 0.0
    bw = link.bw_gbs * 1e9 * link.efficiency * link_factor
    return (n - 1) * link.latency_s + (n - 1) / n * nbytes_total / bw


def _send_recv_s(nbytes: float, link: Link, link_factor: float) -> float:
    bw = link.bw_gbs * 1e9 * link.efficiency * link_factor
    return link.latency_s + nbytes / bw


def spec_tokens_per_step(k: int, acceptance: float) -> float:
    """Expected tokens one sequence gains per verify step with k draft tokens accepted i.i.d. with
    probability `acceptance`: (1 - a**(k+1)) / (1 - a); k + 1 when a == 1; 1 when k == 0."""
    if k <= 0:
        return 1.0
    a = min(max(acceptance, 0.0), 1.0)
    if a >= 1.0:
        return float(k + 1)
    return (1.0 - a ** (k + 1)) / (1.0 - a)


def moe_imbalance_factor(num_experts: int, ranks: int, skew: float) -> float:
    """Hottest rank's expert load / mean rank load when experts are spread evenly over `ranks` GPUs
    (expert parallel) and one expert carries (1 + skew) x the mean expert load, the rest sharing the
    remainder equally. 1 with no skew or one rank (a single GPU does the same total work); 1 + skew with
    one expert per rank."""
    if num_experts <= 1 or ranks <= 1 or skew <= 0.0:
        return 1.0
    e = num_experts / ranks
    s = min(skew, num_experts - 1.0)
    hot_rank = (1.0 + s) + (e - 1.0) * (num_experts - 1.0 - s) / (num_experts - 1.0)
    return max(1.0, hot_rank / e)


class StepCostModel:
    """Time of engine steps of one replica (model on gpu with config). Calls never change later answers
    (context-independent parts are memoised per step shape and HardwareState, shared by models built
    from equal arguments).

    `expert_skew` (>= 0) is the hot-expert excess load (hot / mean - 1) of an MoE router; `pp_link` is the
    link between pipeline stages (defaults to the GPU's scale-up link).
    """

    def __init__(
        self,
        model: ModelProfile,
        gpu: GPUProfile,
        config: EngineConfig,
        *,
        expert_skew: float = 0.0,
        pp_link: Link | None = None,
    ) -> None:
        self.model = model
        self.gpu = gpu
        self.config = config
        self.expert_skew = max(0.0, expert_skew)
        self.tp = max(1, config.tensor_parallel_size)
        self.pp = max(1, config.pipeline_parallel_size)
        self.pp_link = pp_link or gpu.link
        self.spec_k = max(0, config.num_speculative_tokens)
        self.tokens_per_decode_step: float = spec_tokens_per_step(self.spec_k, config.spec_acceptance_rate)

        dtype = config.weight_dtype
        self._w_el = weight_element_bytes(dtype)
        bf16 = gpu.bf16_tflops * 1e12
        if dtype == "fp8" and gpu.fp8_tflops:
            self._gemm_peak = gpu.fp8_tflops * 1e12
        elif dtype in ("fp8", "int4"):
            self._gemm_peak = bf16 / (1.0 + DEQUANT_OVERHEAD)
        else:
            self._gemm_peak = bf16
        self._bf16_peak = bf16
        self._bw = gpu.hbm_bw_gbs * gpu.hbm_reach * 1e9

        m = model
        tp = self.tp
        self._q_heads = math.ceil(m.num_heads / tp)
        # vLLM replicates KV heads when there are fewer of them than TP ranks
        self._kv_heads = math.ceil(m.num_kv_heads / tp)
        # K and V of one token in one layer on this rank, at the cache's element size (fp8: 1 byte; the
        # attention kernels read fp8 KV and convert in registers)
        self._kv_layer_bytes = 2 * self._kv_heads * m.head_dim * kv_element_bytes(config.kv_cache_dtype)
        self._attn_eff = ATTN_COMPUTE_EFFICIENCY_BY_GPU.get(gpu.name, ATTN_COMPUTE_EFFICIENCY)
        self._moe_factor = moe_imbalance_factor(m.num_experts, tp, self.expert_skew)
        self._capture_max = min(2 * config.max_num_seqs, MAX_CAPTURE_SIZE)
        # prefill attention FLOPs per token**2 of prefill_attn, all layers
        self._prefill_attn_flop = 4.0 * self._q_heads * m.head_dim * m.num_layers
        # every input of the memoised parts is a function of this key (and of the HardwareState)
        self._memos = _shared_memos((model, gpu, config, self.expert_skew, self.pp_link))
        # the memo of the HardwareState object of the last call, checked by identity: a replica passes
        # its own (equal to NOMINAL, not the same object), so comparing with memo.hw would miss every time
        self._memo_hw = NOMINAL
        self._memo = self._memo_for(NOMINAL)

    def __reduce__(self) -> tuple[Any, ...]:
        # a copy is built from the arguments and finds the memos of this process (they are only caches)
        return (_step_cost_model, (self.model, self.gpu, self.config, self.expert_skew, self.pp_link))

    def _memo_for(self, hw: HardwareState) -> _HwMemo:
        """The memo of `hw` (made on first use), which becomes the current one."""
        memo = self._memos.get(hw)
        if memo is None:
            if len(self._memos) >= _MAX_HW_STATES:
                self._memos.clear()
            memo = _HwMemo(
                hw,
                self._bf16_peak * self._attn_eff * hw.clock_factor,
                self._bw * ATTN_BW_EFFICIENCY * hw.hbm_bw_factor,
            )
            self._memos[hw] = memo
        self._memo = memo
        self._memo_hw = hw
        return memo

    # ---- linear layers (the calibrated part) ------------------------------------------------------
    def _layer_linear(self, tokens: float, hw: HardwareState) -> tuple[float, float, float, float]:
        """(time_s, compute_s, matmul memory_s, elementwise memory_s) of one layer's linear and
        elementwise kernels on one rank. Each kernel takes the larger of KERNEL_OVERHEAD_S and its own
        roofline time."""
        if tokens <= 0:
            return 0.0, 0.0, 0.0, 0.0
        m = self.model
        tp = self.tp
        h, q, kv, i = m.hidden, m.q_dim, m.kv_dim, m.intermediate
        peak = self._gemm_peak * GEMM_COMPUTE_EFFICIENCY * hw.clock_factor
        bw_g = self._bw * GEMM_BW_EFFICIENCY * hw.hbm_bw_factor
        bw_e = self._bw * ELEMENTWISE_BW_EFFICIENCY * hw.hbm_bw_factor
        w_el = self._w_el

        # attention projections: QKV (h -> q + 2kv) and O (q -> h), weights split over TP ranks
        c_qkv, m_qkv = _gemm(tokens, h, (q + 2 * kv) / tp, w_el, peak, bw_g)
        c_o, m_o = _gemm(tokens, q / tp, h, w_el, peak, bw_g)
        time = _kernel_s(c_qkv, m_qkv) + _kernel_s(c_o, m_o)
        comp = c_qkv + c_o
        mem = m_qkv + m_o
        # elementwise: input and post-attention RMSNorm (read + write h), residual add (two reads, one
        # write), rotary on q and k (read + write), SiLU-and-mul (read 2i, write i); bf16 activations
        elem = tokens * (14.0 * h + 4.0 * (q + kv) / tp + 6.0 * m.experts_per_token * i / tp) / bw_e
        time += elem + _ELEMENTWISE_KERNELS * KERNEL_OVERHEAD_S

        if not m.is_moe:
            c_gu, m_gu = _gemm(tokens, h, 2 * i / tp, w_el, peak, bw_g)
            c_dn, m_dn = _gemm(tokens, i / tp, h, w_el, peak, bw_g)
            time += _kernel_s(c_gu, m_gu) + _kernel_s(c_dn, m_dn)
            return time, comp + c_gu + c_dn, mem + m_gu + m_dn, elem

        # MoE: grouped gate/up and down GEMMs over the experts the step's tokens touch (weights read once
        # per touched expert), the hot rank's excess compute (moe_imbalance_factor), a router GEMM and the
        # top-k, token-alignment and reduction kernels
        e_count, k = m.num_experts, m.experts_per_token
        touched = e_count * (1.0 - (1.0 - k / e_count) ** tokens)
        expert_w = m.expert_params / tp
        c_moe = 2.0 * tokens * k * expert_w / peak * self._moe_factor
        io = tokens * k * 2.0 * ((h + 2 * i / tp) + (i / tp + h))
        m_moe = (touched * expert_w * w_el + io) / bw_g
        router_m = (m.router_params * 2.0 + tokens * (h + e_count) * 2.0) / bw_g
        time += _kernel_s(c_moe * 2.0 / 3.0, m_moe * 2.0 / 3.0) + _kernel_s(c_moe / 3.0, m_moe / 3.0)
        time += router_m + _MOE_EXTRA_KERNELS * KERNEL_OVERHEAD_S
        return time, comp + c_moe, mem + m_moe + router_m, elem

    def linear_time(self, num_tokens: int, hw: HardwareState = NOMINAL) -> float:
        """Seconds of the non-attention per-layer kernels over all layers for `num_tokens` tokens on one
        TP rank: the quantity calibrated against Vidur's mlp.csv. Excludes attention, LM head, sampler,
        collectives and host time."""
        return self._layer_linear(float(num_tokens), hw)[0] * self.model.num_layers

    def _lm_head(self, rows: float, hw: HardwareState) -> tuple[float, float, float, float]:
        """(time_s, compute_s, matmul memory_s, sampler memory_s) of the LM head and sampler over `rows`
        sampled rows."""
        if rows <= 0:
            return 0.0, 0.0, 0.0, 0.0
        m = self.model
        vocab_rank = m.vocab / self.tp
        peak = self._bf16_peak * GEMM_COMPUTE_EFFICIENCY * hw.clock_factor
        bw_g = self._bw * GEMM_BW_EFFICIENCY * hw.hbm_bw_factor
        bw_e = self._bw * ELEMENTWISE_BW_EFFICIENCY * hw.hbm_bw_factor
        c = 2.0 * rows * m.hidden * vocab_rank / peak
        # the LM head stays bf16 in fp8/int4 checkpoints; fp32 logits are written out
        mem = (m.hidden * vocab_rank * 2.0 + rows * vocab_rank * 4.0) / bw_g
        sampler = rows * m.vocab * SAMPLER_BYTES_PER_LOGIT / bw_e
        time = _kernel_s(c, mem) + sampler + SAMPLER_KERNELS * KERNEL_OVERHEAD_S
        return time, c, mem, sampler

    def _linear_memo(self, tokens: float, memo: _HwMemo) -> tuple[float, float, float, float]:
        got = memo.linear.get(tokens)
        if got is None:
            if len(memo.linear) >= _MAX_SHAPES:
                memo.linear.clear()
            got = memo.linear[tokens] = self._layer_linear(tokens, memo.hw)
        return got

    def _head_memo(self, rows: float, memo: _HwMemo) -> tuple[float, float, float, float]:
        got = memo.head.get(rows)
        if got is None:
            if len(memo.head) >= _MAX_SHAPES:
                memo.head.clear()
            got = memo.head[rows] = self._lm_head(rows, memo.hw)
        return got

    # ---- everything that does not grow with decode context ----------------------------------------
    def _fixed_memo(self, prefill_tokens: int, decode_seqs: int, prefill_seqs: int, memo: _HwMemo) -> _Fixed:
        """_fixed through the memo of the step shape (see _SHAPE_BITS and _DECODE_SLOTS)."""
        if prefill_tokens == 0 and prefill_seqs == 0 and 0 <= decode_seqs < _DECODE_SLOTS:
            row = memo.decode
            if decode_seqs < len(row):
                hit = row[decode_seqs]
                if hit is not None:
                    return hit
            else:
                row.extend([None] * (decode_seqs + 1 - len(row)))
            fixed = self._fixed(0, int(decode_seqs), 0, memo)
            row[decode_seqs] = fixed
            return fixed
        if not (0 <= prefill_tokens < _SHAPE_LIMIT and 0 <= decode_seqs < _SHAPE_LIMIT
                and 0 <= prefill_seqs < _SHAPE_LIMIT):
            return self._fixed(int(prefill_tokens), int(decode_seqs), int(prefill_seqs), memo)
        key = (decode_seqs << (2 * _SHAPE_BITS)) | (prefill_seqs << _SHAPE_BITS) | prefill_tokens
        got = memo.fixed.get(key)
        if got is None:
            if len(memo.fixed) >= _MAX_SHAPES:
                memo.fixed.clear()
            got = memo.fixed[key] = self._fixed(int(prefill_tokens), int(decode_seqs), int(prefill_seqs), memo)
        return got

    def _fixed(self, prefill_tokens: int, decode_seqs: int, prefill_seqs: int, memo: _HwMemo) -> _Fixed:
        hw = memo.hw
        m = self.model
        k = self.spec_k if decode_seqs > 0 else 0
        tokens = prefill_tokens + decode_seqs * (k + 1)
        seqs = decode_seqs + prefill_seqs
        host_f = hw.host_overhead_factor
        host = (HOST_STEP_S + HOST_PER_SEQ_S * seqs) * host_f
        if tokens <= 0:
            return (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, host, 0.0, 0.0)

        layers = m.num_layers
        lin_t, lin_c, lin_m, lin_s = self._linear_memo(float(tokens), memo)
        rows = decode_seqs * (k + 1) + prefill_seqs
        head_t, head_c, head_m, head_s = self._head_memo(float(rows), memo)
        bw_e = self._bw * ELEMENTWISE_BW_EFFICIENCY * hw.hbm_bw_factor
        # embedding gather and KV-cache writes of the new tokens
        small_m = tokens * (m.hidden * 2.0 + layers * self._kv_layer_bytes) / bw_e
        device = layers * (lin_t + _ATTN_FIXED_S) + head_t + small_m
        compute = layers * lin_c + head_c
        stream = layers * lin_s + head_s + small_m
        memory = layers * lin_m + head_m + stream

        # collectives: two all-reduces per layer, a logits gather, pipeline hand-offs
        link, lf = self.gpu.link, hw.link_factor
        comm = layers * 2 * tp_allreduce_s(tokens * m.hidden * 2.0, self.tp, link, lf)
        comm += _gather_s(rows * m.vocab * 2.0, self.tp, link, lf)
        if self.pp > 1:
            # hidden states and residual cross each stage boundary
            comm += (self.pp - 1) * _send_recv_s(2 * tokens * m.hidden * 2.0, self.pp_link, lf)

        if self.config.enforce_eager:
            launch = layers * EAGER_LAYER_CPU_S
        elif prefill_tokens == 0 and tokens <= self._capture_max:
            launch = GRAPH_REPLAY_CPU_S
        elif tokens <= self._capture_max:
            launch = layers * PIECEWISE_LAYER_CPU_S
        else:
            launch = layers * COMPILED_LAYER_CPU_S

        if k > 0:
            # k sequential passes of a one-layer draft head over the decode sequences, sharing the LM head
            d_t, d_c, d_m, d_s = self._linear_memo(float(decode_seqs), memo)
            h_t, h_c, h_m, h_s = self._head_memo(float(decode_seqs), memo)
            device += k * (d_t + h_t + _ATTN_FIXED_S)
            compute += k * (d_c + h_c)
            stream += k * (d_s + h_s)
            memory += k * (d_m + h_m + d_s + h_s)
            comm += k * 2 * tp_allreduce_s(decode_seqs * m.hidden * 2.0, self.tp, link, lf)
            launch += k * (EAGER_LAYER_CPU_S if self.config.enforce_eager else GRAPH_REPLAY_CPU_S)

        # decode attention over context: per token of context, k + 1 queries per sequence for the target
        # model and one query per draft pass over one layer
        flop_per_ctx = 4.0 * self._q_heads * m.head_dim * (layers * (k + 1) + k)
        bytes_per_ctx = self._kv_layer_bytes * (layers + k)
        slope_c = flop_per_ctx / memo.attn_flops
        slope_m = bytes_per_ctx / memo.attn_bw
        return (device, compute, memory, stream, comm, launch * host_f, host, slope_c, slope_m)

    # ---- public API --------------------------------------------------------------------------------
    def breakdown(
        self,
        prefill_tokens: int,
        prefill_attn: float,
        decode_seqs: int,
        decode_ctx: float,
        hw: HardwareState = NOMINAL,
        *,
        prefill_seqs: int | None = None,
    ) -> StepBreakdown:
        """Time of one step holding prefill chunks and decode sequences (see StepBreakdown; seconds).

        prefill_tokens: new prompt tokens computed this step; prefill_attn: sum over chunks of
        chunk_len * (prior_context + chunk_len / 2) [token**2]; decode_seqs: decode sequences;
        decode_ctx: sum of their context lengths [tokens]; prefill_seqs: sequences the prefill tokens
        belong to (default 1 when prefill_tokens > 0), each sampling one logits row.
        """
        if prefill_seqs is None:
            prefill_seqs = 1 if prefill_tokens > 0 else 0
        return StepBreakdown._make(self.step_parts(prefill_tokens, prefill_attn, decode_seqs, decode_ctx, hw,
                                                   prefill_seqs))

    def step_parts(
        self,
        prefill_tokens: int,
        prefill_attn: float,
        decode_seqs: int,
        decode_ctx: float,
        hw: HardwareState,
        prefill_seqs: int,
    ) -> tuple[float, float, float, float, float, str, float]:
        """`breakdown` as a plain tuple in StepBreakdown's field order, for the simulator's per-step call
        (building the NamedTuple costs more than the arithmetic). prefill_seqs is required here."""
        memo = self._memo if self._memo_hw is hw else self._memo_for(hw)
        f = self._fixed_memo(prefill_tokens, decode_seqs, prefill_seqs, memo)
        f_device, f_compute, f_memory, f_stream, f_comm, f_launch, f_host, slope_c, slope_m = f
        # Prefill attention: the step charges the larger of its FLOP time and its KV-read time. One chunk
        # of c tokens after p cached ones reads p + c tokens of KV; prefill_attn / c = p + c / 2.
        if prefill_tokens <= 0 or prefill_attn <= 0:
            pc = pm = 0.0
        else:
            pc = self._prefill_attn_flop * prefill_attn / memo.attn_flops
            kv_tokens = prefill_attn / prefill_tokens + prefill_tokens / 2.0
            pm = kv_tokens * self._kv_layer_bytes * self.model.num_layers / memo.attn_bw
        ctx = float(decode_ctx) if decode_seqs > 0 else 0.0
        dc, dm = slope_c * ctx, slope_m * ctx
        # conditional expressions instead of max(): same result (first argument on ties), less overhead
        device = f_device + (pm if pm > pc else pc) + (dm if dm > dc else dc)
        gpu_busy = device + f_comm
        exposed_launch = f_launch - gpu_busy
        if not exposed_launch > 0.0:
            exposed_launch = 0.0
        compute = f_compute + pc + dc
        memory = f_memory + pm + dm
        overhead = f_host + exposed_launch
        return (
            gpu_busy + overhead,
            compute,
            memory,
            f_comm,
            overhead,
            "compute" if compute > memory - f_stream else "memory",
            device,
        )

    def step_time(
        self,
        prefill_tokens: int,
        prefill_attn: float,
        decode_seqs: int,
        decode_ctx: float,
        hw: HardwareState = NOMINAL,
        *,
        prefill_seqs: int | None = None,
    ) -> float:
        """Seconds of one step (arguments as in `breakdown`). Non-decreasing in every token argument."""
        return self.breakdown(
            prefill_tokens, prefill_attn, decode_seqs, decode_ctx, hw, prefill_seqs=prefill_seqs
        ).total_s

    def _decode_affine(self, decode_seqs: int, hw: HardwareState) -> tuple[float, float, float, float]:
        """(gpu_s at zero context, gpu seconds per context token, launch_s, host_s) of a decode-only step."""
        memo = self._memo if self._memo_hw is hw else self._memo_for(hw)
        got = memo.affine.get(decode_seqs)
        if got is None:
            device, _, _, _, comm, launch, host, slope_c, slope_m = self._fixed_memo(0, decode_seqs, 0, memo)
            slope = max(slope_c, slope_m) if decode_seqs > 0 else 0.0
            if len(memo.affine) >= _MAX_SHAPES:
                memo.affine.clear()
            got = memo.affine[decode_seqs] = (device + comm, slope, launch, host)
        return got

    def decode_run_time(
        self,
        n_steps: int,
        decode_seqs: int,
        decode_ctx: float,
        hw: HardwareState = NOMINAL,
        *,
        growth_per_seq: float = 1.0,
    ) -> float:
        """Seconds of `n_steps` consecutive decode-only steps in which every sequence grows by
        `growth_per_seq` tokens per step (decode_ctx rises by decode_seqs * growth_per_seq per step).

        Exact, not an approximation: a decode step's GPU time is affine in decode_ctx (every context-
        dependent kernel is proportional to it) and its total is max(gpu, launch) + host, so the run
        splits into at most two arithmetic series. It equals the sum of n step_time calls up to float
        rounding (~1e-12 relative) even when the run crosses from launch-bound to GPU-bound.
        """
        n = int(n_steps)
        if n <= 0:
            return 0.0
        g0, beta, launch, host = self._decode_affine(decode_seqs, hw)
        return _run_seconds(n, g0 + beta * decode_ctx, beta * (decode_seqs * growth_per_seq), launch, host)

    def decode_steps_within(
        self,
        budget_s: float,
        decode_seqs: int,
        decode_ctx: float,
        hw: HardwareState = NOMINAL,
        *,
        growth_per_seq: float = 1.0,
    ) -> int:
        """Largest n >= 0 with decode_run_time(n, ...) <= budget_s, in O(1) (closed form plus at most a
        couple of rounding corrections)."""
        if budget_s <= 0.0:
            return 0
        g0, beta, launch, host = self._decode_affine(decode_seqs, hw)
        growth = decode_seqs * growth_per_seq
        start = g0 + beta * decode_ctx
        inc = beta * growth
        if inc <= 0.0:
            per = max(start, launch) + host
            n = int(budget_s // per)
        else:
            flat = launch + host
            big = 1 << 62
            j_star = _launch_bound_steps(start, inc, launch, big)
            if j_star > 0 and budget_s <= j_star * flat:
                n = int(budget_s // flat)
            else:
                rem = budget_s - j_star * flat
                # m steps from index j_star cost m*a0 + inc*(m*j_star + m(m-1)/2) <= rem
                a0 = start + host + inc * j_star
                qa = inc / 2.0
                qb = a0 - inc / 2.0
                disc = qb * qb + 4.0 * qa * rem
                m_steps = 2.0 * rem / (qb + math.sqrt(disc)) if qb + math.sqrt(disc) > 0 else 0.0
                n = j_star + math.floor(m_steps)
        n = max(0, n)
        # guard against rounding at the boundary (decode_run_time(n) is _run_seconds(n, start, inc, ...))
        while n > 0 and _run_seconds(n, start, inc, launch, host) > budget_s:
            n -= 1
        while _run_seconds(n + 1, start, inc, launch, host) <= budget_s:
            n += 1
        return n

    # ---- convenience -------------------------------------------------------------------------------
    def prefill_time(
        self, prompt_tokens: int, hw: HardwareState = NOMINAL, *, chunk: int | None = None
    ) -> float:
        """Seconds to prefill one prompt alone, in chunks of `chunk` tokens (default
        max_num_batched_tokens), each chunk a step attending to everything before it."""
        chunk = chunk or self.config.max_num_batched_tokens
        total = 0.0
        done = 0
        while done < prompt_tokens:
            c = min(chunk, prompt_tokens - done)
            total += self.step_time(c, c * (done + c / 2.0), 0, 0, hw)
            done += c
        return total

"""Physics of one engine step: tests that a wrong roofline, parallelism or run-sum model would fail."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_model import step_cost
from engine_model.config import EngineConfig
from engine_model.profiles import GPUS, LINKS, MODELS
from engine_model.step_cost import (
    HardwareState,
    StepCostModel,
    fast_allreduce_s,
    moe_imbalance_factor,
    ring_allreduce_s,
    spec_tokens_per_step,
    tp_allreduce_s,
)

H100 = GPUS["H100-SXM"]
L8 = MODELS["Llama-3.1-8B"]
L70 = MODELS["Llama-3.1-70B"]
MIXTRAL = MODELS["Mixtral-8x7B"]


def cost(model=L8, gpu=H100, **knobs) -> StepCostModel:
    return StepCostModel(model, gpu, EngineConfig(**knobs))


def prefill(c: StepCostModel, tokens: int, hw: HardwareState | None = None) -> float:
    return c.step_time(tokens, tokens * tokens / 2.0, 0, 0, hw or HardwareState())


# ---- roofline -------------------------------------------------------------------------------------
def test_batch_one_decode_is_memory_bound_and_streams_the_weights() -> None:
    c = cost()
    b = c.breakdown(0, 0, 1, 1000)
    assert b.bound == "memory"
    assert b.memory_s > 50 * b.compute_s
    # reading 16 GB of weights at 3.35 TB/s takes 4.8 ms: the step cannot be faster than that
    floor = L8.weight_bytes("bf16") / (H100.hbm_bw_gbs * 1e9)
    assert floor < b.total_s < 2 * floor
    assert cost(L70, tensor_parallel_size=4).breakdown(0, 0, 1, 1000).bound == "memory"


def test_hbm_reach_slows_memory_time_only() -> None:
    h200 = GPUS["H200"]
    assert h200.hbm_reach < 1.0 == H100.hbm_reach  # measured (profiles.py); H100 is the fitted reference
    full = replace(h200, hbm_reach=1.0)
    decode_reach = cost(L8, h200).breakdown(0, 0, 1, 1000)
    decode_full = cost(L8, full).breakdown(0, 0, 1, 1000)
    assert decode_reach.memory_s == pytest.approx(decode_full.memory_s / h200.hbm_reach)
    assert decode_reach.compute_s == pytest.approx(decode_full.compute_s)
    # a long prefill is compute-bound: lower memory reach barely moves it
    prefill_reach = cost(L8, h200).step_time(4096, 4096 * 2048, 0, 0)
    assert prefill_reach == pytest.approx(cost(L8, full).step_time(4096, 4096 * 2048, 0, 0), rel=0.01)


def test_long_prefill_is_compute_bound() -> None:
    b = cost().breakdown(4096, 4096 * 2048, 0, 0)
    assert b.bound == "compute"
    flops = L8.flops_per_token() * 4096
    assert b.total_s > flops / (H100.bf16_tflops * 1e12)  # never faster than peak


def test_breakdown_adds_up() -> None:
    for args in [(0, 0, 1, 10), (512, 512 * 900, 32, 32 * 2000), (8192, 8192 * 4096, 0, 0)]:
        b = cost(L70, tensor_parallel_size=4).breakdown(*args)
        assert b.total_s == pytest.approx(b.device_s + b.comm_s + b.overhead_s)
        assert max(b.compute_s, b.memory_s) <= b.device_s * (1 + 1e-9)
        assert b.comm_s > 0


def test_half_clock_doubles_compute_bound_step_but_barely_moves_decode() -> None:
    c = cost()
    slow = HardwareState(clock_factor=0.5)
    assert 1.6 < prefill(c, 4096, slow) / prefill(c, 4096) <= 2.0
    assert c.step_time(0, 0, 1, 1000, slow) / c.step_time(0, 0, 1, 1000) < 1.05


def test_half_bandwidth_slows_decode_not_prefill() -> None:
    c = cost()
    slow = HardwareState(hbm_bw_factor=0.5)
    assert c.step_time(0, 0, 1, 1000, slow) / c.step_time(0, 0, 1, 1000) > 1.6
    assert prefill(c, 4096, slow) / prefill(c, 4096) < 1.3


def test_step_time_grows_with_context_and_batch() -> None:
    c = cost()
    times = [c.step_time(0, 0, 32, 32 * ctx) for ctx in (0, 1000, 4000, 16000, 64000)]
    assert all(a < b for a, b in itertools.pairwise(times))
    # KV reads: 32 sequences x 64k tokens x 128 KiB = 275 GB would dominate a 16 GB weight read
    assert times[-1] > 8 * times[0]
    batches = [c.step_time(0, 0, b, b * 500) for b in (1, 8, 64, 256)]
    assert all(a < b for a, b in itertools.pairwise(batches))


def test_decode_turns_compute_bound_at_a_plausible_batch() -> None:
    c = cost()
    bounds = {b: c.breakdown(0, 0, b, b).bound for b in range(16, 1025, 16)}
    first = min(b for b, kind in bounds.items() if kind == "compute")
    # H100 bf16 ridge: ~990 TFLOPS / 3.35 TB/s ~ 300 FLOP per byte, i.e. ~300 tokens of 2-byte weights
    assert 150 <= first <= 400
    assert all(kind == "compute" for b, kind in bounds.items() if b >= first)
    # at long context KV reads grow as fast as FLOPs: decode stays memory-bound
    assert c.breakdown(0, 0, 1024, 1024 * 8192).bound == "memory"


# ---- parallelism ----------------------------------------------------------------------------------
def test_tensor_parallel_over_pcie_is_much_slower_than_nvlink() -> None:
    knobs = {"tensor_parallel_size": 4}
    nvlink = cost(L70, H100, **knobs)
    pcie = cost(L70, replace(H100, link=LINKS["pcie4"]), **knobs)
    assert pcie.step_time(2048, 2048**2 / 2, 0, 0) > 2 * nvlink.step_time(2048, 2048**2 / 2, 0, 0)
    assert pcie.step_time(0, 0, 64, 64 * 1000) > 1.3 * nvlink.step_time(0, 0, 64, 64 * 1000)
    degraded = HardwareState(link_factor=0.5)
    b, d = nvlink.breakdown(4096, 4096**2 / 2, 0, 0), nvlink.breakdown(4096, 4096**2 / 2, 0, 0, degraded)
    assert 1.5 < d.comm_s / b.comm_s < 2.0  # bandwidth halves, hop latency does not


def test_tensor_parallel_splits_weight_reads() -> None:
    one, four = cost(L8), cost(L8, tensor_parallel_size=4)
    assert four.breakdown(0, 0, 1, 100).memory_s < 0.3 * one.breakdown(0, 0, 1, 100).memory_s
    assert four.step_time(0, 0, 1, 100) < one.step_time(0, 0, 1, 100)


def test_ring_allreduce_shape() -> None:
    link = LINKS["nvlink4"]
    assert ring_allreduce_s(1e6, 1, link) == 0.0
    small, big = ring_allreduce_s(1e3, 8, link), ring_allreduce_s(1e9, 8, link)
    # a tiny all-reduce costs the fixed per-call latency, whatever the rank count
    assert small == pytest.approx(link.allreduce_call_s, rel=0.01)
    assert ring_allreduce_s(1e3, 2, link) == pytest.approx(small, rel=0.01)
    bw_s = 2 * 7 / 8 * 1e9 / (link.bw_gbs * 1e9 * link.efficiency)
    assert big == pytest.approx(link.allreduce_call_s + bw_s, rel=0.01)
    # link degradation slows the bytes, not the call latency
    assert ring_allreduce_s(1e3, 8, link, 0.1) == pytest.approx(small, rel=0.01)


def test_engine_allreduce_uses_vllms_one_shot_kernels_for_decode_sizes() -> None:
    nvlink, pcie = LINKS["nvlink4"], LINKS["pcie4"]
    decode = 64 * 8192 * 2.0  # 64 tokens of a 70B model's hidden state, bf16: 1 MiB
    assert tp_allreduce_s(decode, 4, nvlink) == fast_allreduce_s(decode, 4, nvlink)
    assert tp_allreduce_s(decode, 4, nvlink) < 0.5 * ring_allreduce_s(decode, 4, nvlink)
    # no one-shot kernels over PCIe, for odd rank counts, or past their size limit
    assert tp_allreduce_s(decode, 4, pcie) == ring_allreduce_s(decode, 4, pcie)
    assert tp_allreduce_s(decode, 3, nvlink) == ring_allreduce_s(decode, 3, nvlink)
    prefill = 8192 * 8192 * 2.0  # a full 8192-token chunk: 128 MiB, NCCL's bandwidth regime
    assert tp_allreduce_s(prefill, 8, nvlink) == ring_allreduce_s(prefill, 8, nvlink)


def test_pipeline_parallel_adds_latency_not_speed() -> None:
    flat = cost(L70, tensor_parallel_size=4)
    staged = cost(L70, tensor_parallel_size=2, pipeline_parallel_size=2)
    # a single step crosses both stages: no faster than TP alone, and the stage hand-off costs comm
    assert staged.step_time(0, 0, 8, 8000) > flat.step_time(0, 0, 8, 8000)
    ethernet = StepCostModel(
        L70,
        H100,
        EngineConfig(tensor_parallel_size=2, pipeline_parallel_size=2),
        pp_link=LINKS["ethernet_100g"],
    )
    assert (
        ethernet.breakdown(4096, 4096**2 / 2, 0, 0).comm_s > staged.breakdown(4096, 4096**2 / 2, 0, 0).comm_s
    )


# ---- dtypes ---------------------------------------------------------------------------------------
def test_fp8_kv_halves_kv_reads() -> None:
    bf16, fp8 = cost(), cost(kv_cache_dtype="fp8")
    # long-context decode is dominated by KV reads: 1 byte per element instead of 2
    long_ctx = 64 * 16000
    kv_bf16 = bf16.breakdown(0, 0, 64, long_ctx).memory_s - bf16.breakdown(0, 0, 64, 0).memory_s
    kv_fp8 = fp8.breakdown(0, 0, 64, long_ctx).memory_s - fp8.breakdown(0, 0, 64, 0).memory_s
    assert kv_fp8 == pytest.approx(kv_bf16 / 2, rel=1e-9)
    assert fp8.step_time(0, 0, 64, long_ctx) < 0.75 * bf16.step_time(0, 0, 64, long_ctx)
    # short-context decode streams the weights and barely changes
    assert fp8.step_time(0, 0, 8, 8 * 100) == pytest.approx(bf16.step_time(0, 0, 8, 8 * 100), rel=0.02)


def test_weight_dtypes() -> None:
    bf16, fp8, int4 = cost(), cost(weight_dtype="fp8"), cost(weight_dtype="int4")
    # decode streams fewer bytes
    assert int4.step_time(0, 0, 1, 100) < fp8.step_time(0, 0, 1, 100) < 0.8 * bf16.step_time(0, 0, 1, 100)
    # prefill: fp8 tensor cores on H100 are faster; W4A16 computes at bf16 rate with dequant overhead
    assert prefill(fp8, 4096) < 0.8 * prefill(bf16, 4096)
    assert prefill(int4, 4096) > prefill(bf16, 4096)
    a100 = GPUS["A100-80GB"]
    # A100 has no fp8 tensor cores: fp8 weights run as W8A16
    assert prefill(cost(L8, a100, weight_dtype="fp8"), 4096) > prefill(cost(L8, a100), 4096)


# ---- host overhead --------------------------------------------------------------------------------
def test_cuda_graphs_cut_launch_overhead_where_gpu_steps_are_short() -> None:
    graphs = cost(L8, GPUS["B200"], tensor_parallel_size=8)
    eager = cost(L8, GPUS["B200"], tensor_parallel_size=8, enforce_eager=True)
    assert eager.step_time(0, 0, 4, 400) > 1.3 * graphs.step_time(0, 0, 4, 400)
    assert cost(enforce_eager=True).step_time(0, 0, 1, 100) > 1.05 * cost().step_time(0, 0, 1, 100)
    # a long prefill keeps the GPU busier than the CPU launching it: eager costs (almost) nothing
    assert eager.step_time(8192, 8192**2 / 2, 0, 0) == pytest.approx(
        graphs.step_time(8192, 8192**2 / 2, 0, 0), rel=0.02
    )


def test_host_contention_scales_overhead() -> None:
    c = cost()
    base, slow = (
        c.breakdown(0, 0, 64, 64000),
        c.breakdown(0, 0, 64, 64000, HardwareState(host_overhead_factor=3)),
    )
    assert slow.overhead_s == pytest.approx(3 * base.overhead_s)
    assert slow.device_s == base.device_s


# ---- speculative decoding -------------------------------------------------------------------------
def test_spec_tokens_per_step() -> None:
    assert spec_tokens_per_step(0, 0.9) == 1.0
    assert spec_tokens_per_step(4, 0.0) == 1.0
    assert spec_tokens_per_step(4, 1.0) == 5.0
    assert spec_tokens_per_step(4, 0.8) == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)
    c = cost(num_speculative_tokens=4, spec_acceptance_rate=0.8)
    assert c.tokens_per_decode_step == pytest.approx(3.3616)


def test_speculation_helps_small_batches_and_hurts_large_ones() -> None:
    base = cost()
    spec = cost(num_speculative_tokens=4, spec_acceptance_rate=0.8)

    def ratio(batch: int) -> float:
        per_token = spec.step_time(0, 0, batch, batch * 128) / spec.tokens_per_decode_step
        return per_token / base.step_time(0, 0, batch, batch * 128)

    ratios = [ratio(b) for b in (1, 32, 128, 256, 512, 1024)]
    assert ratios[0] < 0.6
    assert ratios[-1] > 1.0 and ratios[-2] > 1.0
    assert all(a < b for a, b in itertools.pairwise(ratios))
    # verification multiplies compute, not weight reads
    b0, b1 = base.breakdown(0, 0, 1, 128), spec.breakdown(0, 0, 1, 128)
    assert b1.compute_s > 4 * b0.compute_s


# ---- MoE ------------------------------------------------------------------------------------------
def test_moe_decode_reads_only_touched_experts() -> None:
    c = cost(MIXTRAL, GPUS["H200"])
    all_weights_s = MIXTRAL.weight_bytes("bf16") / (GPUS["H200"].hbm_bw_gbs * 1e9)
    assert c.step_time(0, 0, 1, 100) < 0.5 * all_weights_s
    # a batch of 64 touches every expert: the step grows far more than a dense model's does
    dense = cost(L8, GPUS["H200"])
    moe_growth = c.step_time(0, 0, 64, 6400) / c.step_time(0, 0, 1, 100)
    assert moe_growth > 2.0 > 1.5 > dense.step_time(0, 0, 64, 6400) / dense.step_time(0, 0, 1, 100)


def test_expert_skew_slows_expert_parallel_moe() -> None:
    even = cost(MIXTRAL, tensor_parallel_size=4)
    skewed = StepCostModel(MIXTRAL, H100, EngineConfig(tensor_parallel_size=4), expert_skew=2.0)
    assert prefill(skewed, 4096) > 1.2 * prefill(even, 4096)
    one_gpu = StepCostModel(MIXTRAL, GPUS["H200"], EngineConfig(), expert_skew=2.0)
    assert prefill(one_gpu, 4096) == prefill(cost(MIXTRAL, GPUS["H200"]), 4096)
    assert moe_imbalance_factor(8, 8, 1.5) == pytest.approx(2.5)
    assert moe_imbalance_factor(8, 1, 1.5) == 1.0
    assert 1.0 < moe_imbalance_factor(8, 2, 1.5) < moe_imbalance_factor(8, 4, 1.5) < 2.5


# ---- decode runs ----------------------------------------------------------------------------------
RUN_CASES = [
    ("8b", cost(), 16, 16 * 700, 1.0),
    ("70b-tp4", cost(L70, tensor_parallel_size=4), 40, 40 * 3000, 1.0),
    ("spec", cost(num_speculative_tokens=3, spec_acceptance_rate=0.7), 8, 8 * 100, 2.533),
    ("moe", cost(MIXTRAL, GPUS["H200"]), 24, 24 * 500, 1.0),
]


@pytest.mark.parametrize(("name", "c", "seqs", "ctx", "growth"), RUN_CASES)
def test_decode_run_time_equals_sum_of_steps(
    name: str, c: StepCostModel, seqs: int, ctx: int, growth: float
) -> None:
    n = 60
    hw = HardwareState(clock_factor=0.8, hbm_bw_factor=0.9)
    summed = sum(c.step_time(0, 0, seqs, ctx + seqs * growth * j, hw) for j in range(n))
    assert c.decode_run_time(n, seqs, ctx, hw, growth_per_seq=growth) == pytest.approx(summed, rel=1e-9)
    assert c.decode_run_time(0, seqs, ctx, hw) == 0.0


def test_decode_run_time_is_exact_across_launch_to_gpu_bound_crossing() -> None:
    c = cost(L8, GPUS["B200"], tensor_parallel_size=8, enforce_eager=True)
    seqs = 32
    # find the context where the GPU work overtakes the eager launch cost
    lo, hi = 0, 1 << 24
    while hi - lo > 1:
        mid = (lo + hi) // 2
        exposed = (
            c.breakdown(0, 0, seqs, mid).overhead_s > c.breakdown(0, 0, seqs, 1 << 24).overhead_s + 1e-12
        )
        lo, hi = (mid, hi) if exposed else (lo, mid)
    start = hi - 30 * seqs
    n = 80
    first, last = c.breakdown(0, 0, seqs, start), c.breakdown(0, 0, seqs, start + (n - 1) * seqs)
    assert first.overhead_s > last.overhead_s  # the run really crosses regimes
    summed = sum(c.step_time(0, 0, seqs, start + seqs * j) for j in range(n))
    assert c.decode_run_time(n, seqs, start) == pytest.approx(summed, rel=1e-9)
    budget = 0.5 * summed
    k = c.decode_steps_within(budget, seqs, start)
    assert c.decode_run_time(k, seqs, start) <= budget < c.decode_run_time(k + 1, seqs, start)


@settings(max_examples=60, deadline=None)
@given(
    budget=st.floats(min_value=0.0, max_value=30.0),
    seqs=st.integers(min_value=1, max_value=256),
    ctx_per_seq=st.integers(min_value=1, max_value=20000),
    case=st.sampled_from(RUN_CASES),
)
def test_decode_steps_within_is_the_largest_fitting_run(budget, seqs, ctx_per_seq, case) -> None:
    c = case[1]
    ctx = seqs * ctx_per_seq
    n = c.decode_steps_within(budget, seqs, ctx)
    assert n >= 0
    assert c.decode_run_time(n, seqs, ctx) <= budget
    assert c.decode_run_time(n + 1, seqs, ctx) > budget


def test_decode_steps_within_is_zero_below_one_step() -> None:
    c = cost()
    one = c.step_time(0, 0, 4, 4000)
    assert c.decode_steps_within(0.99 * one, 4, 4000) == 0
    assert c.decode_steps_within(1.01 * one, 4, 4000) == 1


# ---- memoisation ----------------------------------------------------------------------------------
def test_memoised_answers_do_not_depend_on_call_history(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tiny memo bounds force clears between calls. One long-lived model, called in a random order with
    # repeated, equal-but-distinct and alternating hardware states, must answer exactly (==, not approx)
    # what a fresh model answers: a memo keyed on too little (no hw, no prefill_seqs) would not.
    monkeypatch.setattr(step_cost, "_MAX_SHAPES", 3)
    monkeypatch.setattr(step_cost, "_MAX_HW_STATES", 2)

    def make() -> StepCostModel:  # MoE, TP collectives and speculation: every branch of the fixed part
        return cost(MIXTRAL, GPUS["H200"], tensor_parallel_size=2, num_speculative_tokens=2,
                    spec_acceptance_rate=0.6)

    hws = [HardwareState(), HardwareState(clock_factor=0.5), HardwareState(0.9, 0.7, 0.5, 2.0)]
    shapes = [  # prefill_tokens, prefill_attn, decode_seqs, decode_ctx, prefill_seqs
        (0, 0.0, 1, 500, None),
        (0, 0.0, 8, 7200, 0),
        (512, 512 * 700.0, 8, 7200, 3),
        (512, 512 * 700.0, 8, 7200, 1),
        (512, 512 * 700.0, 0, 0, None),
        (4096, 4096 * 2048.0, 0, 0, 1),
    ]
    shared = make()
    rng = random.Random(7)
    for _ in range(80):
        pt, pa, ds, ctx, ps = rng.choice(shapes)
        hw = rng.choice(hws)
        if rng.random() < 0.5:
            hw = replace(hw)  # equal value, new object
        step_cost.clear_memos()  # so `fresh` does not share the memo of `shared`
        fresh = make()
        assert shared.breakdown(pt, pa, ds, ctx, hw, prefill_seqs=ps) == fresh.breakdown(
            pt, pa, ds, ctx, hw, prefill_seqs=ps
        )
        if pt == 0 and ds > 0:
            run = shared.decode_run_time(40, ds, ctx, hw, growth_per_seq=2.2)
            assert run == fresh.decode_run_time(40, ds, ctx, hw, growth_per_seq=2.2)
            n = shared.decode_steps_within(0.5 * run, ds, ctx, hw, growth_per_seq=2.2)
            step_cost.clear_memos()
            assert n == make().decode_steps_within(0.5 * run, ds, ctx, hw, growth_per_seq=2.2)
    assert len(shared._memos) <= 2
    assert all(len(m.fixed) <= 3 and len(m.linear) <= 3 for m in shared._memos.values())


def test_step_breakdown_is_immutable() -> None:
    b = cost().breakdown(0, 0, 4, 4000)
    with pytest.raises(AttributeError):
        b.total_s = 0.0  # type: ignore[misc]
    assert b == cost().breakdown(0, 0, 4, 4000)

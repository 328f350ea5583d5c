"""vLLM V1's GPU-aware scheduler defaults (issue 33): 1024 sequences / 8192 batched tokens on a GPU reporting
at least 70 GiB whose name does not contain "a100", else 256 / 2048 (vllm-engine-knobs.md section 1,
vllm/engine/arg_utils.py). The fleet, `calc` and the fidelity bench's vLLM points all start from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_model.config import EngineConfig, v1_batch_defaults
from engine_model.estimates import calc
from engine_model.profiles import GPUS
from telemetry_gen.fidelity.points import load_points

POINTS = Path(__file__).resolve().parents[1] / "telemetry_gen" / "data" / "fidelity_points.yaml"

# what vLLM's rule gives each profiled GPU, worked out by hand from the datasheets (memory as torch reports it)
EXPECTED = {
    "H100-SXM": (1024, 8192),  # 79.2 GiB, not an A100
    "H200": (1024, 8192),
    "B200": (1024, 8192),
    "MI300X": (1024, 8192),
    "A100-80GB": (256, 2048),  # 79.2 GiB, but A100 is excluded by name (PR #17885)
    "L40S": (256, 2048),  # 44.4 GiB: below 70
}


def test_every_profiled_gpu_gets_vllms_limits() -> None:
    assert set(EXPECTED) == set(GPUS), "a new GPU profile needs its expected defaults here"
    for name, want in EXPECTED.items():
        gpu = GPUS[name]
        assert v1_batch_defaults(gpu.name, gpu.hbm_gib) == want, name
        cfg = EngineConfig.for_gpu(gpu.name, gpu.hbm_gib)
        assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == want, name
        cfg.validate()


@pytest.mark.parametrize(("name", "gib", "want"), [
    ("NVIDIA A100-SXM4-80GB", 79.15, (256, 2048)),  # vLLM reads the device name: any spelling of A100
    ("nvidia a100 80gb pcie", 79.15, (256, 2048)),
    ("Some-Card", 70.0, (1024, 8192)),  # the bound is inclusive
    ("Some-Card", 69.99, (256, 2048)),
])
def test_the_rule_reads_the_name_and_the_memory(name: str, gib: float, want: tuple[int, int]) -> None:
    assert v1_batch_defaults(name, gib) == want


def test_a_default_max_num_seqs_is_clamped_to_the_token_budget_an_explicit_one_is_not() -> None:
    """vLLM clamps its default max_num_seqs to max_num_batched_tokens; a value the user set is refused."""
    h100 = GPUS["H100-SXM"]
    small = EngineConfig.for_gpu(h100.name, h100.hbm_gib, max_num_batched_tokens=256)
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (256, 256)
    small.validate()
    explicit = EngineConfig.for_gpu(h100.name, h100.hbm_gib, max_num_batched_tokens=256, max_num_seqs=512)
    assert explicit.max_num_seqs == 512
    with pytest.raises(ValueError, match="max_num_seqs"):
        explicit.validate()
    # other knobs pass through, and knobs set explicitly win over the GPU's defaults
    cfg = EngineConfig.for_gpu(h100.name, h100.hbm_gib, max_num_seqs=64, tensor_parallel_size=2)
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.tensor_parallel_size) == (64, 8192, 2)


@pytest.mark.parametrize("gpu", ["H100-SXM", "A100-80GB", "L40S"])
def test_calc_uses_the_gpus_defaults_unless_told(gpu: str) -> None:
    got = calc("Llama-3.1-8B", gpu, context=4096)
    assert (got["max_num_seqs"], got["max_num_batched_tokens"]) == EXPECTED[gpu]
    told = calc("Llama-3.1-8B", gpu, context=4096, max_num_seqs=100, max_num_batched_tokens=4096)
    assert (told["max_num_seqs"], told["max_num_batched_tokens"]) == (100, 4096)


def test_calc_reserves_activations_for_the_gpus_budget() -> None:
    """A100's 2048-token budget reserves a smaller profile-run peak than the 8192 tokens it was given
    before: more of the same memory is left for KV."""
    a100 = calc("Llama-3.1-8B", "A100-80GB", context=4096)
    old = calc("Llama-3.1-8B", "A100-80GB", context=4096, max_num_seqs=256, max_num_batched_tokens=8192)
    assert a100["activation_peak_bytes"] < old["activation_peak_bytes"]
    assert a100["kv_cache_bytes_per_gpu"] > old["kv_cache_bytes_per_gpu"]


def test_the_fidelity_benchs_vllm_points_run_with_their_gpus_knobs() -> None:
    """Every vLLM point that does not set the two knobs gets its GPU's defaults (A100 runs: 256 / 2048);
    other engines' points keep the GPU-independent defaults they were fitted with."""
    points = load_points(POINTS)
    a100_vllm = [p for p in points if p.gpu == "A100-80GB" and p.vllm_defaults]
    assert len(a100_vllm) >= 5
    for p in points:
        cfg = p.engine_config()
        if p.vllm_defaults:
            want = v1_batch_defaults(p.gpu, GPUS[p.gpu].hbm_gib)
            seqs = p.config.get("max_num_seqs", want[0])
            tokens = p.config.get("max_num_batched_tokens", want[1])
        else:
            seqs = p.config.get("max_num_seqs", EngineConfig().max_num_seqs)
            tokens = p.config.get("max_num_batched_tokens", EngineConfig().max_num_batched_tokens)
        assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (seqs, tokens), p.name
    served_a100 = [p for p in a100_vllm if p.name.startswith("gpustack-")]
    assert served_a100 and all((p.engine_config().max_num_seqs, p.engine_config().max_num_batched_tokens)
                               == (256, 2048) for p in served_a100)


def test_a_restart_that_only_cuts_the_token_budget_starts_with_fewer_sequences() -> None:
    """A config_change to max_num_batched_tokens 256 on an H100 (default 1024 sequences) is what vLLM starts
    with `--max-num-batched-tokens 256` alone: its default max_num_seqs clamped to 256, not a refused config.
    A change that names max_num_seqs keeps it."""
    from engine_model.fault_kinds import REGISTRY
    from engine_model.faults import Fault
    from engine_model.profiles import get_model
    from engine_model.replica import Deploy

    h100 = GPUS["H100-SXM"]
    base = Deploy(EngineConfig.for_gpu(h100.name, h100.hbm_gib), "v1", get_model("Llama-3.1-8B"))
    kind = REGISTRY["config_change"]
    cut = kind.deploy(base, Fault("config_change", 0.0, None, None, 1.0, {"max_num_batched_tokens": 256}))
    assert (cut.config.max_num_seqs, cut.config.max_num_batched_tokens) == (256, 256)
    cut.config.validate()
    both = kind.deploy(base, Fault("config_change", 0.0, None, None, 1.0,
                                   {"max_num_batched_tokens": 4096, "max_num_seqs": 64}))
    assert (both.config.max_num_seqs, both.config.max_num_batched_tokens) == (64, 4096)
    raised = kind.deploy(base, Fault("config_change", 0.0, None, None, 1.0, {"max_num_batched_tokens": 16384}))
    assert raised.config.max_num_seqs == 1024  # a larger budget leaves the sequences alone


def test_a_scheduling_policy_vllm_lacks_is_refused() -> None:
    """vLLM's --scheduling-policy takes fcfs or priority; any other word must never run as the default."""
    EngineConfig(scheduling_policy="priority").validate()
    with pytest.raises(ValueError, match="scheduling_policy must be one of"):
        EngineConfig(scheduling_policy="lifo").validate()

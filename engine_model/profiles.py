"""Hardware and model figures: the one place every datasheet or config.json number enters the code.

Units: bandwidths in GB/s (1e9 bytes per second), compute in TFLOPS (1e12 FLOP/s), memory capacity in
GiB (2**30 bytes), latencies in seconds, power in watts, clocks in MHz. Every figure names its source.

Sources are the ones gathered in the shared reference `serving-facts.md` section 5 (vendor datasheets and
public analyser configs) and the Hugging Face `config.json` files copied under
`reference/model_configs/inference-sim/` (from `inference-sim/inference-sim`). Compute figures are DENSE:
vendor sheets quote 2:4-sparse numbers twice as large, a known pitfall (serving-facts section 7).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine_model.records import frozen_reduce

GIB = 1 << 30

# Bytes per stored weight element. int4 (W4A16, AWQ/GPTQ style) also stores one fp16 scale per group of
# INT4_GROUP_SIZE weights, which is the "small scale overhead" (2 bytes / 128 weights = 1.6 %).
INT4_GROUP_SIZE = 128
_WEIGHT_ELEMENT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int4": 0.5 + 2.0 / INT4_GROUP_SIZE}
# KV-cache element bytes; vLLM's "auto" means the model dtype (bf16 for every model here).
_KV_ELEMENT_BYTES = {"auto": 2, "bf16": 2, "fp16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


def weight_element_bytes(dtype: str) -> float:
    """Bytes per quantised linear-layer weight for `dtype` (bf16 2, fp8 1, int4 0.5 plus group scales)."""
    try:
        return _WEIGHT_ELEMENT_BYTES[dtype]
    except KeyError:
        raise KeyError(f"unknown weight dtype {dtype!r}; known: {', '.join(_WEIGHT_ELEMENT_BYTES)}") from None


def kv_element_bytes(kv_dtype: str) -> int:
    """Bytes per KV-cache element for a vLLM `kv_cache_dtype` value ("auto" = bf16 = 2 bytes)."""
    try:
        return _KV_ELEMENT_BYTES[kv_dtype]
    except KeyError:
        raise KeyError(
            f"unknown kv cache dtype {kv_dtype!r}; known: {', '.join(_KV_ELEMENT_BYTES)}"
        ) from None


@dataclass(frozen=True)
class Link:
    """An interconnect. `bw_gbs` is per direction in GB/s; `latency_s` is the cost of one hop of a
    point-to-point transfer or an all-gather ring.

    `efficiency` is the fraction of `bw_gbs` a ring collective actually moves (NCCL "bus bandwidth" over
    the link figure) and `allreduce_call_s` the fixed cost of one NCCL all-reduce call (launch, protocol
    handshakes; what a 64 KiB all-reduce costs); both are calibrated figures, not datasheet ones.
    `fast_allreduce` says whether vLLM's own one-shot all-reduce kernels (custom all-reduce, symmetric
    memory) run over the link, which they do between NVLink/xGMI-connected GPUs of one node.
    """

    name: str
    bw_gbs: float
    latency_s: float
    efficiency: float = 0.75
    allreduce_call_s: float = 40e-6
    fast_allreduce: bool = False

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)


@dataclass(frozen=True)
class GPUProfile:
    """One accelerator. Compute figures are dense (no 2:4 sparsity); `hbm_gib` is what the device reports
    to PyTorch (`torch.cuda.mem_get_info` total), which is a little below the marketing capacity.

    `hbm_bw_gbs` is the datasheet peak. `hbm_reach` is the share of that peak the GPU's memory reaches in
    practice, relative to the GPUs step_cost's bandwidth efficiencies were fitted on (H100 and A100, Vidur's
    operator profiles): 1.0 there and wherever no measurement says otherwise."""

    name: str
    bf16_tflops: float
    fp8_tflops: float | None
    hbm_bw_gbs: float
    hbm_gib: float
    link: Link
    tdp_w: float
    idle_w: float
    sm_clock_mhz: float
    hbm_reach: float = 1.0

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)

    @property
    def hbm_bytes(self) -> int:
        """Device memory in bytes as reported by the device."""
        return int(self.hbm_gib * GIB)


@dataclass(frozen=True)
class ModelProfile:
    """A decoder-only transformer as its HF config.json describes it.

    Invariants: num_heads * head_dim is the query width; num_kv_heads divides num_heads; for MoE models
    `intermediate` is the width of ONE expert and every layer is an MoE layer.
    """

    name: str
    num_layers: int
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_position: int
    num_experts: int = 1
    experts_per_token: int = 1
    qkv_bias: bool = False
    tie_embeddings: bool = False

    # ---- parameter counts (elements) -------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)
    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def attn_linear_params(self) -> int:
        """Q, K, V and O projection weights of one layer (biases excluded)."""
        return self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden

    @property
    def expert_params(self) -> int:
        """Gate, up and down weights of one gated-MLP expert (or the dense MLP)."""
        return 3 * self.hidden * self.intermediate

    @property
    def router_params(self) -> int:
        return self.hidden * self.num_experts if self.is_moe else 0

    @property
    def layer_small_params(self) -> int:
        """Parameters of one layer kept at 16 bits in every checkpoint: norms, biases, the router."""
        bias = (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        return 2 * self.hidden + bias + self.router_params

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def lm_head_params(self) -> int:
        """Output projection; with tied embeddings it is the embedding matrix, counted once in totals."""
        return self.vocab * self.hidden

    @property
    def params_total(self) -> int:
        """Every parameter, as the model card counts it (tied embeddings once)."""
        per_layer = self.attn_linear_params + self.num_experts * self.expert_params + self.layer_small_params
        head = 0 if self.tie_embeddings else self.lm_head_params
        return self.num_layers * per_layer + self.embedding_params + head + self.hidden

    @property
    def params_active(self) -> int:
        """Parameters one token touches: for MoE only `experts_per_token` experts per layer."""
        per_layer = (
            self.attn_linear_params + self.experts_per_token * self.expert_params + self.layer_small_params
        )
        head = 0 if self.tie_embeddings else self.lm_head_params
        return self.num_layers * per_layer + self.embedding_params + head + self.hidden

    @property
    def quantizable_params(self) -> int:
        """Decoder linear weights (attention projections and all experts): what fp8/int4 checkpoints shrink.

        Embedding, LM head, norms, biases and the router stay 16-bit in the usual fp8 (llm-compressor) and
        int4 (AWQ/GPTQ) checkpoints, which is why an fp8 Llama-3.1-8B is ~9.1 GB and not 8.0 GB.
        """
        return self.num_layers * (self.attn_linear_params + self.num_experts * self.expert_params)

    def weight_bytes(self, dtype: str) -> int:
        """Bytes of all weights with decoder linear layers stored as `dtype` (bf16|fp16|fp8|int4).

        Invariant: weight_bytes("bf16") == 2 * params_total; fp8 < bf16; int4 < fp8.
        """
        unquantized = self.params_total - self.quantizable_params
        return round(self.quantizable_params * weight_element_bytes(dtype) + 2 * unquantized)

    def kv_bytes_per_token(self, kv_dtype: str = "auto") -> int:
        """KV-cache bytes one token occupies over all layers: 2 (K and V) * layers * kv_heads * head_dim *
        element bytes ("auto" = 2). Llama-3.1-8B: 131072 bytes (128 KiB)."""
        return 2 * self.num_layers * self.kv_dim * kv_element_bytes(kv_dtype)

    def flops_per_token(self) -> float:
        """Linear-layer FLOPs per token: 2 * matmul weights touched (active experts and the LM head; the
        embedding lookup is a gather, not a matmul). Excludes attention over the context."""
        matmul_per_layer = self.attn_linear_params + self.experts_per_token * self.expert_params
        return 2.0 * (self.num_layers * (matmul_per_layer + self.router_params) + self.lm_head_params)


# ---- interconnects -------------------------------------------------------------------------------
# allreduce_call_s / efficiency for NVLink3/4 are fitted to Vidur's measured NCCL all-reduce medians
# (microsoft/vidur data/profiling/network/{a100_dgx,h100_dgx}/all_reduce.csv, MIT; copies under
# engine_model/data/vidur/), see tests/test_calibration.py and tests/test_step_cost_vidur.py: a fixed
# per-call cost plus 2(n-1)/n * bytes at the achieved bandwidth, chosen to minimise the worst of the
# 64 KiB..1 MiB band medians at 2/4/8 ranks (H100 34 us: -11/-14/+15 %; A100 42 us: -18/+1/+17 %; the
# measured small-message cost does not grow with ranks) and the >= 4 MiB medians (<= 10 % H100, <= 17 %
# A100). The old hop-latency ring (2(n-1) x 2-3.75 us) was 3-10x too fast for small messages. vLLM sends
# decode-sized all-reduces through its own kernels instead (step_cost.tp_allreduce_s).
# The others are stated approximations.
LINKS: dict[str, Link] = {
    # A100 NVLink3: 600 GB/s bidirectional -> 300 per direction (NVIDIA datasheet; llm-analysis a100 config).
    "nvlink3": Link("nvlink3", 300.0, 3.75e-6, efficiency=0.60, allreduce_call_s=42e-6, fast_allreduce=True),
    # H100/H200 NVLink4: 900 GB/s bidirectional -> 450 per direction (llm-analysis h100 config).
    "nvlink4": Link("nvlink4", 450.0, 2.0e-6, efficiency=0.80, allreduce_call_s=34e-6, fast_allreduce=True),
    # B200 NVLink5: 1.8 TB/s bidirectional -> 900 per direction (glennklockwood.com B200 page). Latency,
    # call cost and efficiency assumed equal to NVLink4 (no public profile in the reference set).
    "nvlink5": Link("nvlink5", 900.0, 2.0e-6, efficiency=0.80, allreduce_call_s=34e-6, fast_allreduce=True),
    # PCIe Gen4 x16: 64 GB/s bidirectional -> 32 per direction (L40S datasheet, serving-facts 5.1). Hop
    # latency approximates NCCL over the host bridge without NVLink (several microseconds); the per-call
    # all-reduce cost is assumed no lower than NCCL's over NVLink4 (fitted 34 us; 40 us taken).
    "pcie4": Link("pcie4", 32.0, 8e-6, efficiency=0.75, allreduce_call_s=40e-6),
    # PCIe Gen5 x16: 128 GB/s bidirectional -> 64 per direction (same source family).
    "pcie5": Link("pcie5", 64.0, 6e-6, efficiency=0.75, allreduce_call_s=40e-6),
    # MI300X Infinity Fabric: 7 links x 128 GB/s = 896 GB/s aggregate bidirectional -> 448 per direction
    # (gpu.blog spec page via serving-facts 5.1); efficiency and call cost assumed like NVLink; vLLM's ROCm
    # build has its own one-shot all-reduce over xGMI.
    "infinity_fabric": Link("infinity_fabric", 448.0, 3e-6, efficiency=0.6, allreduce_call_s=40e-6,
                            fast_allreduce=True),
    # Scale-out links for pipeline stages across nodes: 100 Gb/s = 12.5 GB/s, 400 Gb/s = 50 GB/s each way.
    "ethernet_100g": Link("ethernet_100g", 12.5, 25e-6, efficiency=0.8, allreduce_call_s=100e-6),
    "infiniband_400g": Link("infiniband_400g", 50.0, 5e-6, efficiency=0.85, allreduce_call_s=60e-6),
}


# ---- GPUs ----------------------------------------------------------------------------------------
# hbm_gib: the total PyTorch reports in its OOM message ("GPU 0 has a total capacity of X GiB") in public
# logs: A100-80GB 79.15, H100 80GB HBM3 79.19, H200 139.80, B200 178.35, L40S 44.39, MI300X 191.98.
# idle_w: an idle-but-loaded (persistence on, P0) draw; H100 SXM shows ~99 W in an nvidia-smi capture in
# vllm-project/vllm#55169; the others are scaled guesses for a plausible DCGM power series only.
# sm_clock_mhz: nominal max boost clock from vendor product pages.
GPUS: dict[str, GPUProfile] = {
    # 312 dense BF16, no FP8 tensor cores (INT8 624), 2039 GB/s (cli99/llm-analysis a100-sxm-80gb.json);
    # 400 W TDP and 1410 MHz boost (NVIDIA A100 datasheet).
    "A100-80GB": GPUProfile("A100-80GB", 312.0, None, 2039.0, 79.15, LINKS["nvlink3"], 400.0, 60.0, 1410.0),
    # 989.4 dense BF16, 1979 FP8, 3350 GB/s (llm-analysis h100-sxm-80gb.json, inference-sim hardware_config);
    # 700 W TDP, 1980 MHz max boost (NVIDIA H100 SXM datasheet).
    "H100-SXM": GPUProfile("H100-SXM", 989.4, 1978.9, 3350.0, 79.19, LINKS["nvlink4"], 700.0, 95.0, 1980.0),
    # 989.4 / 1978.9, 4.8 TB/s, 141 GB (alpharomercoma/MI300X-vs-H200 METHODOLOGY.md); 700 W SXM.
    # hbm_reach 0.965: Azure's AI-benchmarking-guide runs one STREAM-style HBM test on every VM type
    # (Azure_Results/ND_H200_v5_results.md against the ND H100 v5 results): Copy 4.01 TB/s of 4.8 (0.835)
    # on H200 against 2.90 of 3.35 (0.866) on H100, Triad 4.15-4.18 (0.865-0.871) against 2.97 (0.887);
    # the Copy ratio 0.835 / 0.866 is used. The same guide's A100 figures (Copy 1.61 of 2.039) would say
    # 0.91 for A100, but Vidur's A100 operator profiles, which the efficiencies were fitted on, do not
    # show it, so A100 stays at 1.0.
    "H200": GPUProfile("H200", 989.4, 1978.9, 4800.0, 139.80, LINKS["nvlink4"], 700.0, 100.0, 1980.0,
                       hbm_reach=0.965),
    # HGX B200 at 1000 W: 2250 dense BF16, 4500 dense FP8, 8 TB/s, 180 GB usable (glennklockwood.com B200).
    "B200": GPUProfile("B200", 2250.0, 4500.0, 8000.0, 178.35, LINKS["nvlink5"], 1000.0, 140.0, 1965.0),
    # 362.05 dense FP16/BF16, 733 dense FP8 (1466 is the sparse figure), 864 GB/s, 48 GB GDDR6, PCIe Gen4,
    # no NVLink (L40S datasheet table at mullet.se); 350 W TDP, 2520 MHz boost.
    "L40S": GPUProfile("L40S", 362.05, 733.0, 864.0, 44.39, LINKS["pcie4"], 350.0, 35.0, 2520.0),
    # 1307.4 dense BF16, 2614.9 dense FP8, 5.3 TB/s, 192 GB HBM3 (alpharomercoma/MI300X-vs-H200);
    # 750 W TBP, 2100 MHz peak engine clock (AMD product page).
    "MI300X": GPUProfile(
        "MI300X", 1307.4, 2614.9, 5300.0, 191.98, LINKS["infinity_fabric"], 750.0, 140.0, 2100.0
    ),
}

# What each GPU's step times were checked against: measured kernels or published serving runs. A GPU not
# named here has only datasheet figures and assumptions (its link's call cost, its memory reach): `calc`
# and the authoring guide call its figures estimated. tests/test_gpu_references.py holds this table to
# the fidelity points file and the Vidur profiles shipped in engine_model/data/vidur.
GPU_REFERENCES: dict[str, str] = {
    "A100-80GB": "Vidur's operator and NCCL profiles; published vLLM and TensorRT-LLM runs (bench fidelity)",
    "H100-SXM": "Vidur's operator and NCCL profiles; published vLLM and TensorRT-LLM runs (bench fidelity)",
    "H200": "published vLLM and TensorRT-LLM runs (bench fidelity); Azure's HBM bandwidth test",
    "L40S": "published vLLM runs (bench fidelity)",
}

# ---- models --------------------------------------------------------------------------------------
# Fields copied from HF config.json (inference-sim/inference-sim model_configs/*/config.json, copies in the
# shared reference); head_dim = hidden / heads where the config has no head_dim. Parameter totals the
# properties above reproduce: 8.03B, 70.6B, 7.62B, 46.7B (12.9B active), 6.74B, 8.19B.
MODELS: dict[str, ModelProfile] = {
    # llama-3.1-8b-instruct/config.json
    "Llama-3.1-8B": ModelProfile("Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, 131072),
    # llama-3.1-70b-instruct/config.json
    "Llama-3.1-70B": ModelProfile("Llama-3.1-70B", 80, 8192, 64, 8, 128, 28672, 128256, 131072),
    # qwen2.5-7b-instruct/config.json (Qwen2 attention has q/k/v biases; embeddings untied for 7B)
    "Qwen2.5-7B": ModelProfile("Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, 32768, qkv_bias=True),
    # mixtral-8x7b-v0.1/config.json: 8 local experts, top-2, intermediate 14336 per expert
    "Mixtral-8x7B": ModelProfile(
        "Mixtral-8x7B", 32, 4096, 32, 8, 128, 14336, 32000, 32768, num_experts=8, experts_per_token=2
    ),
    # llama-2-7b-hf/config.json: the model Vidur profiled on H100 (used for calibration)
    "Llama-2-7B": ModelProfile("Llama-2-7B", 32, 4096, 32, 32, 128, 11008, 32000, 4096),
    # meta-llama/Llama-2-70b-hf config.json on Hugging Face (not in the shared reference; Vidur's H100
    # Llama-2-70b-hf profile has the same heads, hidden and intermediate sizes): 80 layers, hidden 8192,
    # 64 query / 8 KV heads of 128, intermediate 28672, vocab 32000, 4096 positions; 69.0B parameters.
    # The model of NVIDIA's early TensorRT-LLM performance tables ("LLaMA 70B").
    "Llama-2-70B": ModelProfile("Llama-2-70B", 80, 8192, 64, 8, 128, 28672, 32000, 4096),
    # Qwen3-8B config.json (serving-facts 5.2: verl test_flops_counter.py and an embedded config)
    "Qwen3-8B": ModelProfile("Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, 40960),
    # qwen3-14b/config.json (inference-sim/inference-sim model_configs, copy in the shared reference):
    # 40 layers, hidden 5120, 40 query / 8 KV heads of 128, intermediate 17408, vocab 151936, untied
    "Qwen3-14B": ModelProfile("Qwen3-14B", 40, 5120, 40, 8, 128, 17408, 151936, 40960),
    # meta-llama/Llama-3.1-405B config.json on Hugging Face (not in the shared reference): 126 layers,
    # hidden 16384, 128 query / 8 KV heads of 128, intermediate 53248, vocab 128256, untied; 405.9B
    # parameters (Meta's model card rounds to 405B). Needs TP 8 of 80 GB GPUs even in FP8.
    "Llama-3.1-405B": ModelProfile("Llama-3.1-405B", 126, 16384, 128, 8, 128, 53248, 128256, 131072),
}



# ---- names people type -----------------------------------------------------------------------------
# Lookups accept the canonical names above in any case, Hugging Face repository ids and common short
# names. A short name that denotes a different checkpoint of the same architecture (Llama-3-8B for
# Llama-3.1-8B: same shapes, shorter max_position) resolves to the profile with those shapes, and the
# lookup says which profile it used. Keys are compared after _normalise.
MODEL_ALIASES: dict[str, tuple[str, ...]] = {
    # Hugging Face ids: meta-llama/Llama-3.1-8B(-Instruct) and the older Meta-Llama-3.1-8B spelling;
    # Llama 3 8B has the same layer shapes (vLLM's nightly benchmarks name it "llama8B")
    "Llama-3.1-8B": (
        "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B",
        "meta-llama/Meta-Llama-3.1-8B-Instruct", "Llama-3-8B", "Llama-3-8B-Instruct", "Llama3-8B",
        "Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-8B-Instruct",
    ),
    # Llama 3 70B and Llama 3.3 70B share Llama 3.1 70B's shapes
    "Llama-3.1-70B": (
        "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B",
        "meta-llama/Meta-Llama-3.1-70B-Instruct", "Llama-3-70B", "Llama-3-70B-Instruct", "Llama3-70B",
        "Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3-70B", "meta-llama/Meta-Llama-3-70B-Instruct",
        "Llama-3.3-70B", "Llama-3.3-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
    ),
    "Llama-3.1-405B": (
        "meta-llama/Llama-3.1-405B", "meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Meta-Llama-3.1-405B",
        "meta-llama/Meta-Llama-3.1-405B-Instruct", "Llama-3.1-405B-Instruct", "Llama3.1-405B",
    ),
    "Qwen2.5-7B": ("Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct"),
    "Mixtral-8x7B": (
        "mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B-Instruct",
        "Mixtral-8x7B-v0.1",
    ),
    "Llama-2-7B": ("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-chat-hf", "Llama-2-7b-hf", "Llama2-7B"),
    "Llama-2-70B": ("meta-llama/Llama-2-70b-hf", "meta-llama/Llama-2-70b-chat-hf", "Llama-2-70b-hf", "Llama2-70B"),
    "Qwen3-8B": ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-Base"),
    "Qwen3-14B": ("Qwen/Qwen3-14B", "Qwen/Qwen3-14B-Base"),
}
GPU_ALIASES: dict[str, tuple[str, ...]] = {
    # nvidia-smi / torch.cuda.get_device_name spellings and the short names people use
    "A100-80GB": ("A100", "A100-SXM", "A100-SXM4", "A100-SXM4-80GB", "A100-80GB-SXM", "NVIDIA A100-SXM4-80GB"),
    "H100-SXM": ("H100", "H100-80GB", "H100-SXM5", "H100-SXM-80GB", "H100-80GB-SXM", "NVIDIA H100 80GB HBM3"),
    "H200": ("H200-SXM", "H200-141GB", "NVIDIA H200"),
    "B200": ("NVIDIA B200", "B200-180GB"),
    "L40S": ("NVIDIA L40S", "L40S-48GB"),
    "MI300X": ("AMD Instinct MI300X", "MI300X-192GB"),
}


def _normalise(name: str) -> str:
    """Lower case, '_' and spaces as '-', runs of '-' collapsed: 'NVIDIA H100 80GB' -> 'nvidia-h100-80gb'."""
    return "-".join(name.strip().lower().replace("_", " ").replace("-", " ").split())


def _index(names: Iterable[str], aliases: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """normalised name or alias -> canonical name; a repository id also answers without its org/ part."""
    out: dict[str, str] = {}
    for name, alts in aliases.items():
        for alt in alts:
            out.setdefault(_normalise(alt), name)
            if "/" in alt:
                out.setdefault(_normalise(alt.split("/", 1)[1]), name)
    for name in names:  # canonical names win over any alias
        out[_normalise(name)] = name
    return out


_MODEL_INDEX = _index(MODELS, MODEL_ALIASES)
_GPU_INDEX = _index(GPUS, GPU_ALIASES)


@dataclass(frozen=True)
class Match:
    """What a name lookup found: the profile's canonical name, the name asked for, and how they matched
    ("exact", "case-insensitive" or "alias")."""

    name: str
    query: str
    how: str

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)

    def describe(self) -> str:
        """One phrase for people: 'Llama-3.1-8B (alias of "Llama-3-8B")'."""
        if self.how == "exact":
            return self.name
        return f"{self.name} ({self.how} match for {self.query!r})"


def _resolve(query: str, names: Collection[str], index: Mapping[str, str], kind: str) -> Match:
    if query in names:
        return Match(query, query, "exact")
    key = _normalise(query)
    found = index.get(key)
    if found is None and "/" in key:
        found = index.get(key.split("/", 1)[1])
    if found is None:
        import difflib

        close = difflib.get_close_matches(key, list(index), n=3, cutoff=0.6)
        hint = ""
        if close:
            hint = f"; did you mean {' or '.join(sorted({index[c] for c in close}))}?"
        raise KeyError(f"unknown {kind} {query!r}; known: {', '.join(names)}{hint}")
    how = "case-insensitive" if _normalise(found) == key else "alias"
    return Match(found, query, how)


def resolve_gpu(name: str) -> Match:
    """Which GPU profile `name` denotes: canonical names in any case, nvidia-smi spellings and short names
    (h100, A100-SXM4-80GB, "NVIDIA H200"). KeyError lists the known names and close matches."""
    return _resolve(name, GPUS, _GPU_INDEX, "GPU")


def resolve_model(name: str) -> Match:
    """Which model profile `name` denotes: canonical names in any case, Hugging Face ids
    (meta-llama/Llama-3.1-8B-Instruct) and short names (Llama-3-8B). KeyError lists the known names."""
    return _resolve(name, MODELS, _MODEL_INDEX, "model")


def get_gpu(name: str) -> GPUProfile:
    """The GPU profile `name` denotes (see resolve_gpu); KeyError lists the known names."""
    return GPUS[resolve_gpu(name).name]


def get_model(name: str) -> ModelProfile:
    """The model profile `name` denotes (see resolve_model); KeyError lists the known names."""
    return MODELS[resolve_model(name).name]

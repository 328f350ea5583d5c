"""Hardware and model figures: the one place every datasheet or config.json number enters the code.

Units: bandwidths in GB/s (1e9 bytes per second), compute in TFLOPS (1e12 FLOP/s), memory capacity in
GiB (2**30 bytes), latencies in seconds, power in watts, clocks in MHz. Every figure names its source.

Sources are the ones gathered in the shared reference `serving-facts.md` section 5 (vendor datasheets and
public analyser configs) and the Hugging Face `config.json` files copied under
`reference/model_configs/inference-sim/` (from `inference-sim/inference-sim`). Compute figures are DENSE:
vendor sheets quote 2:4-sparse numbers twice as large, a known pitfall (serving-facts section 7).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """An interconnect. `bw_gbs` is per direction in GB/s; `latency_s` is the cost of one ring hop.

    `efficiency` is the fraction of `bw_gbs` a ring collective actually moves (NCCL "bus bandwidth" over
    the link figure); it is a calibrated figure, not a datasheet one.
    """

    name: str
    bw_gbs: float
    latency_s: float
    efficiency: float = 0.75


@dataclass(frozen=True)
class GPUProfile:
    """One accelerator. Compute figures are dense (no 2:4 sparsity); `hbm_gib` is what the device reports
    to PyTorch (`torch.cuda.mem_get_info` total), which is a little below the marketing capacity."""

    name: str
    bf16_tflops: float
    fp8_tflops: float | None
    hbm_bw_gbs: float
    hbm_gib: float
    link: Link
    tdp_w: float
    idle_w: float
    sm_clock_mhz: float

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
# latency_s / efficiency for NVLink3/4 are fitted to Vidur's measured ring all-reduce medians
# (microsoft/vidur data/profiling/network/{a100_dgx,h100_dgx}/all_reduce.csv, MIT; copies under
# engine_model/data/vidur/), see tests/test_calibration.py. The others are stated approximations.
LINKS: dict[str, Link] = {
    # A100 NVLink3: 600 GB/s bidirectional -> 300 per direction (NVIDIA datasheet; llm-analysis a100 config).
    "nvlink3": Link("nvlink3", 300.0, 3.75e-6, efficiency=0.52),
    # H100/H200 NVLink4: 900 GB/s bidirectional -> 450 per direction (llm-analysis h100 config).
    "nvlink4": Link("nvlink4", 450.0, 2.0e-6, efficiency=0.66),
    # B200 NVLink5: 1.8 TB/s bidirectional -> 900 per direction (glennklockwood.com B200 page). Latency and
    # efficiency assumed equal to NVLink4 (no public profile in the reference set).
    "nvlink5": Link("nvlink5", 900.0, 2.0e-6, efficiency=0.66),
    # PCIe Gen4 x16: 64 GB/s bidirectional -> 32 per direction (L40S datasheet, serving-facts 5.1). Hop
    # latency approximates NCCL over the host bridge without NVLink (several microseconds).
    "pcie4": Link("pcie4", 32.0, 8e-6, efficiency=0.75),
    # PCIe Gen5 x16: 128 GB/s bidirectional -> 64 per direction (same source family).
    "pcie5": Link("pcie5", 64.0, 6e-6, efficiency=0.75),
    # MI300X Infinity Fabric: 7 links x 128 GB/s = 896 GB/s aggregate bidirectional -> 448 per direction
    # (gpu.blog spec page via serving-facts 5.1); efficiency assumed like NVLink4.
    "infinity_fabric": Link("infinity_fabric", 448.0, 3e-6, efficiency=0.6),
    # Scale-out links for pipeline stages across nodes: 100 Gb/s = 12.5 GB/s, 400 Gb/s = 50 GB/s each way.
    "ethernet_100g": Link("ethernet_100g", 12.5, 25e-6, efficiency=0.8),
    "infiniband_400g": Link("infiniband_400g", 50.0, 5e-6, efficiency=0.85),
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
    "H200": GPUProfile("H200", 989.4, 1978.9, 4800.0, 139.80, LINKS["nvlink4"], 700.0, 100.0, 1980.0),
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
    # Qwen3-8B config.json (serving-facts 5.2: verl test_flops_counter.py and an embedded config)
    "Qwen3-8B": ModelProfile("Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, 40960),
}


def get_gpu(name: str) -> GPUProfile:
    """The GPU profile called `name`; KeyError lists the known names."""
    try:
        return GPUS[name]
    except KeyError:
        raise KeyError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}") from None


def get_model(name: str) -> ModelProfile:
    """The model profile called `name`; KeyError lists the known names."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None

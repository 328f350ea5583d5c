"""The step-cost model against Vidur's measured operator profiles (engine_model/data/vidur, MIT).

Compute: sum of the non-attention per-layer operator medians of mlp.csv times the layer count, against
StepCostModel.linear_time, at num_tokens 1..4096 and TP 1/2/4/8. Network: all_reduce.csv medians against
the ring all-reduce model over the profiled link. Thresholds are the errors documented in step_cost.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine_model.config import EngineConfig
from engine_model.profiles import GPUS, LINKS, MODELS
from engine_model.step_cost import StepCostModel, ring_allreduce_s

DATA = Path(__file__).resolve().parents[1] / "engine_model" / "data" / "vidur" / "data" / "profiling"
OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
PROFILES = {
    "h100-llama2-7b": ("compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv", "H100-SXM", "Llama-2-7B"),
    # Meta-Llama-3-8B has the same shapes as Llama-3.1-8B
    "a100-llama3-8b": ("compute/a100/meta-llama/Meta-Llama-3-8B/mlp.csv", "A100-80GB", "Llama-3.1-8B"),
    # held out of the fit (step_cost.py docstring): the largest GEMMs, whose measured transition from
    # weight-bound to compute-bound is sharper than the smooth roofline (up to +48 % at 256 tokens)
    "h100-llama2-70b": ("compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv", "H100-SXM", "Llama-2-70B"),
}
MAX_ERROR = {"h100-llama2-70b": 0.50}  # default 0.25


def _measured(path: str) -> pd.DataFrame:
    df = pd.read_csv(DATA / path).drop_duplicates()
    df["layer_ms"] = sum(df[f"time_stats.{op}.median"] for op in OPS)
    g = df.groupby(["num_tensor_parallel_workers", "num_tokens"], as_index=False)["layer_ms"].median()
    return g[g["num_tokens"] <= 4096]


def linear_errors(profile: str) -> dict[int, np.ndarray]:
    """Relative error (model / measured - 1) per TP degree over every profiled token count."""
    path, gpu, model = PROFILES[profile]
    m = MODELS[model]
    out: dict[int, np.ndarray] = {}
    for tp, sub in _measured(path).groupby("num_tensor_parallel_workers"):
        cost = StepCostModel(m, GPUS[gpu], EngineConfig(tensor_parallel_size=int(tp)))
        predicted = np.array([cost.linear_time(int(t)) for t in sub["num_tokens"]])
        measured = sub["layer_ms"].to_numpy() * 1e-3 * m.num_layers
        out[int(tp)] = predicted / measured - 1.0
    return out


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_linear_layers_match_vidur(profile: str) -> None:
    errors = linear_errors(profile)
    assert set(errors) == {1, 2, 4, 8}
    everything = np.abs(np.concatenate(list(errors.values())))
    assert len(everything) > 1000
    # documented in step_cost.py: median ~4 %, max ~21 % (48 % for the held-out 70B profile)
    assert np.median(everything) < 0.06
    assert everything.max() < MAX_ERROR.get(profile, 0.25)
    for tp, e in errors.items():
        assert np.median(np.abs(e)) < 0.08, tp
        # no systematic bias at any TP degree
        assert abs(np.median(e)) < 0.07, tp


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_small_batch_decode_and_large_prefill_ends(profile: str) -> None:
    # the two ends of the roofline: weight streaming at 1 token, compute at 4096 tokens
    path, gpu, model = PROFILES[profile]
    g = _measured(path)
    tp1 = g[g["num_tensor_parallel_workers"] == 1].set_index("num_tokens")["layer_ms"]
    cost = StepCostModel(MODELS[model], GPUS[gpu], EngineConfig())
    layers = MODELS[model].num_layers
    for tokens in (1, 4096):
        assert cost.linear_time(tokens) == pytest.approx(tp1[tokens] * 1e-3 * layers, rel=0.1)


def _allreduce_errors(profile: str, link_name: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    df = pd.read_csv(DATA / "network" / profile / "all_reduce.csv")
    df = df[df["devices_per_node"] == df["num_workers"]]  # inside one node, over NVLink
    g = df.groupby(["num_workers", "size"], as_index=False)["time_stats.all_reduce.median"].median()
    out = {}
    for n, sub in g.groupby("num_workers"):
        sizes = sub["size"].to_numpy()
        predicted = np.array([ring_allreduce_s(float(s), int(n), LINKS[link_name]) for s in sizes])
        out[int(n)] = (sizes, predicted / (sub["time_stats.all_reduce.median"].to_numpy() * 1e-3) - 1.0)
    return out


@pytest.mark.parametrize(("profile", "link"), [("h100_dgx", "nvlink4"), ("a100_dgx", "nvlink3")])
def test_ring_allreduce_matches_vidur(profile: str, link: str) -> None:
    errors = _allreduce_errors(profile, link)
    assert {2, 4, 8} <= set(errors)
    for n, (sizes, e) in errors.items():
        big = sizes >= 4 << 20  # bandwidth regime, where prefill all-reduces live
        assert np.median(np.abs(e[big])) < 0.2, n
        assert np.abs(e[big]).max() < 0.7, n
    for n in (4, 8):
        # over all sizes (latency regime included) for the TP degrees large models use
        assert np.median(np.abs(errors[n][1])) < 0.2, n


def test_calibration_data_is_where_the_readme_says() -> None:
    readme = (Path(__file__).resolve().parents[1] / "engine_model" / "data" / "README.md").read_text()
    assert "MIT" in readme and "7d47513363ec447a741ac5e47241580b47724fbf" in readme
    for path, _, _ in PROFILES.values():
        assert (DATA / path).is_file()

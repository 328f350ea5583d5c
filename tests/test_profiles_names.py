"""Model and GPU names as people type them: any case, Hugging Face ids, short names; and calc says
which profile it used."""

from __future__ import annotations

import pytest

from engine_model import profiles as P
from engine_model.estimates import calc, format_calc


@pytest.mark.parametrize(("query", "name", "how"), [
    ("Llama-3.1-8B", "Llama-3.1-8B", "exact"),
    ("llama-3.1-8b", "Llama-3.1-8B", "case-insensitive"),
    ("LLAMA_3.1_8B", "Llama-3.1-8B", "case-insensitive"),
    ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B", "alias"),
    ("Llama-3-8B", "Llama-3.1-8B", "alias"),
    ("meta-llama/Meta-Llama-3-70B-Instruct", "Llama-3.1-70B", "alias"),
    ("Qwen/Qwen3-8B", "Qwen3-8B", "alias"),
    ("qwen/qwen2.5-7b-instruct", "Qwen2.5-7B", "alias"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B", "alias"),
])
def test_model_names(query: str, name: str, how: str) -> None:
    m = P.resolve_model(query)
    assert (m.name, m.how, m.query) == (name, how, query)
    assert P.get_model(query) is P.MODELS[name]


@pytest.mark.parametrize(("query", "name", "how"), [
    ("H100-SXM", "H100-SXM", "exact"),
    ("h100-sxm", "H100-SXM", "case-insensitive"),
    ("H100", "H100-SXM", "alias"),
    ("h200", "H200", "case-insensitive"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM", "alias"),
    ("A100-SXM4-80GB", "A100-80GB", "alias"),
    ("a100", "A100-80GB", "alias"),
    ("mi300x", "MI300X", "case-insensitive"),
])
def test_gpu_names(query: str, name: str, how: str) -> None:
    g = P.resolve_gpu(query)
    assert (g.name, g.how) == (name, how)
    assert P.get_gpu(query) is P.GPUS[name]


def test_unknown_names_list_the_known_ones_and_the_closest() -> None:
    with pytest.raises(KeyError) as err:
        P.resolve_model("Llama-3.1-9B")
    text = str(err.value)
    assert "known: Llama-3.1-8B" in text and "did you mean" in text and "Llama-3.1-8B" in text.split("mean")[1]
    with pytest.raises(KeyError, match="unknown GPU 'TPU-v5'"):
        P.get_gpu("TPU-v5")


def test_every_alias_names_an_existing_profile_and_none_is_ambiguous() -> None:
    for table, canonical in ((P.MODEL_ALIASES, P.MODELS), (P.GPU_ALIASES, P.GPUS)):
        seen: dict[str, str] = {}
        for name, alts in table.items():
            assert name in canonical
            for alt in alts:
                key = P._normalise(alt)
                assert seen.setdefault(key, name) == name, f"{alt!r} would name two profiles"
                assert key not in {P._normalise(c) for c in canonical if c != name}, alt


def test_calc_says_which_profile_and_which_prompt_length_it_used() -> None:
    r = calc("meta-llama/Llama-3.1-8B-Instruct", "h100", prompt=2000, output=100)
    assert (r["model"], r["model_query"], r["model_match"]) == (
        "Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct", "alias")
    assert (r["gpu"], r["gpu_match"]) == ("H100-SXM", "alias")
    assert r["ttft_prompt_tokens"] == 2000 and r["request_output_tokens"] == 100
    # the TTFT figure is the --prompt length's, not the --context's
    assert r["ttft_s"] == calc("Llama-3.1-8B", "H100-SXM", prompt=2000, context=512)["ttft_s"]
    assert r["ttft_s"] < r["prefill_time_s"] or r["context_tokens"] < 2000
    # a client of the API server waits for its intake and hand-off too: tens of ms on top, growing with the prompt
    served = r["ttft_served_s"] - r["ttft_s"]
    assert 0.01 < served < 0.1
    assert calc("Llama-3.1-8B", "H100-SXM", prompt=20000)["ttft_served_s"] - calc(
        "Llama-3.1-8B", "H100-SXM", prompt=20000)["ttft_s"] > served
    text = format_calc(r)
    assert "matched profile Llama-3.1-8B (alias)" in text
    assert "matched profile H100-SXM (alias)" in text
    assert "2,000-token prompt" in text and "--prompt, not --context" in text
    assert "matched profile" not in format_calc(calc("Llama-3.1-8B", "H100-SXM"))

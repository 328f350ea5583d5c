"""Offline evaluation scores of the served models, the baseline that eval runs sample around.

Approximate instruct-model scores from the models' published cards (MMLU 5-shot, GSM8K
CoT, HumanEval pass@1); the long-context and chat figures are illustrative placeholders on
the same 0..1 scale. Quality is not simulated token by token: a model version's scores are
an input, and a rollout declares how its scores differ (`eval_deltas`).
"""

from __future__ import annotations

BASE_SCORES: dict[str, dict[str, float]] = {
    "Llama-3.1-8B": {"mmlu": 0.69, "gsm8k": 0.845, "humaneval": 0.726, "long_context_qa": 0.62, "chat_judge": 0.71},
    "Llama-3.1-70B": {"mmlu": 0.83, "gsm8k": 0.951, "humaneval": 0.805, "long_context_qa": 0.74, "chat_judge": 0.82},
    "Qwen2.5-7B": {"mmlu": 0.74, "gsm8k": 0.916, "humaneval": 0.848, "long_context_qa": 0.60, "chat_judge": 0.72},
    "Mixtral-8x7B": {"mmlu": 0.706, "gsm8k": 0.61, "humaneval": 0.40, "long_context_qa": 0.58, "chat_judge": 0.70},
}
DEFAULT_SCORES: dict[str, float] = {"mmlu": 0.70, "gsm8k": 0.80, "humaneval": 0.60, "long_context_qa": 0.60,
                                    "chat_judge": 0.70}


def base_scores(model: str) -> dict[str, float]:
    """Task -> expected accuracy (0..1) of the unquantized model."""
    return dict(BASE_SCORES.get(model, DEFAULT_SCORES))

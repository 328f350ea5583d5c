"""Which GPUs the engine model's figures were checked against (engine_model.profiles.GPU_REFERENCES) is held
to the data that checked them, and `calc` marks the others estimated."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from engine_model.profiles import GPU_REFERENCES, GPUS
from game.cli.commands import main
from telemetry_gen.fidelity.points import POINTS_PATH, load_points

VIDUR = Path(__file__).resolve().parents[1] / "engine_model" / "data" / "vidur" / "data" / "profiling" / "compute"
VIDUR_GPUS = {"a100": "A100-80GB", "h100": "H100-SXM"}


def test_a_gpu_is_called_measured_exactly_when_some_measurement_of_it_is_shipped() -> None:
    replayed = {p.gpu for p in load_points(POINTS_PATH)}
    profiled = {VIDUR_GPUS[d.name] for d in VIDUR.iterdir() if d.is_dir()}
    assert set(GPU_REFERENCES) == replayed | profiled
    assert set(GPU_REFERENCES) < set(GPUS)  # some GPUs rest on datasheets alone, and say so


def test_calc_says_estimated_for_a_gpu_nothing_measured_and_not_for_one_that_was() -> None:
    runner = CliRunner()
    estimated = [g for g in GPUS if g not in GPU_REFERENCES]
    for gpu in (*estimated, *GPU_REFERENCES):
        out = json.loads(runner.invoke(main, ["calc", "--model", "Llama-3.1-8B", "--gpu", gpu, "--json"]).output)
        assert out["gpu_estimated"] is (gpu in estimated)
        assert (out["gpu_reference"] is None) is (gpu in estimated)
        text = runner.invoke(main, ["calc", "--model", "Llama-3.1-8B", "--gpu", gpu]).output
        assert (f"estimated: no measurement of {gpu} was replayed" in text) is (gpu in estimated)

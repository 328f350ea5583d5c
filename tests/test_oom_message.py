"""An out-of-memory crash says what PyTorch's caching allocator would (issue 33): the one tensor it tried to
allocate is larger than what was free, free and in use add up to the GPU's capacity, and sizes print in
PyTorch's units (a few hundred MiB as MiB), so a player reading the crash log is never told that an
allocation failed with enough memory free."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from engine_model.config import EngineConfig
from engine_model.memory import failing_allocation_bytes, step_activation_bytes
from engine_model.profiles import get_model
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database
from telemetry_gen.tables import torch_size

pytestmark = pytest.mark.slow  # builds the library incident's telemetry

OOM = Path(__file__).parent.parent / "incidents" / "oom-at-peak.yaml"
UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
SIZE = r"([\d.]+) (bytes|KiB|MiB|GiB)"
MESSAGE = re.compile(rf"Tried to allocate {SIZE}\. GPU 0 has a total capacity of {SIZE} of which {SIZE} is free\. "
                     rf"Including non-PyTorch memory, this process has {SIZE} memory in use\.")


def _bytes(number: str, unit: str) -> float:
    return float(number) * UNITS[unit]


def test_torch_size_prints_as_pytorch_does() -> None:
    assert [torch_size(n) for n in (512, 1024, 1025, 448 << 20, (1 << 30) + 1, 85 * (1 << 30) // 1)] == [
        "512 bytes", "1024 bytes", "1.00 KiB", "448.00 MiB", "1.00 GiB", "85.00 GiB"]


def test_the_failing_allocation_is_one_tensor_of_the_step_never_more_than_its_workspace() -> None:
    model, config = get_model("Llama-3.1-8B"), EngineConfig()
    for tokens, rows in ((8192, 0), (8192, 256), (64, 64), (1, 1)):
        tried = failing_allocation_bytes(model, config, tokens, rows)
        assert 0 < tried <= step_activation_bytes(model, config, tokens, 0, rows)
    # a prefill-sized step fails on the MLP's gate_up output: tokens x 2 x intermediate, bf16
    assert failing_allocation_bytes(model, config, 8192) == 8192 * 2 * model.intermediate * 2


@pytest.mark.parametrize("seed", [0, 5])
def test_every_oom_line_of_the_library_incident_adds_up(seed: int, library_cache: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    info = ensure_database(load_incident(OOM, seed), seed)
    with duckdb.connect(info.path, read_only=True) as con:
        lines = [m for (m,) in con.execute(
            "SELECT message FROM logs WHERE message LIKE 'torch.OutOfMemoryError%' ORDER BY ts").fetchall()]
    assert lines, "the incident's engines run out of memory"
    for line in lines:
        match = MESSAGE.search(line)
        assert match, line
        tried, total, free, in_use = (_bytes(match.group(i), match.group(i + 1)) for i in (1, 3, 5, 7))
        assert free < tried, line  # otherwise the allocation would have succeeded
        assert abs(free + in_use - total) <= 0.01 * (1 << 30), line  # GiB printed to two decimals
        assert tried < total / 10, line  # one tensor of a step, not the GPU's memory

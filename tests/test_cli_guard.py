"""The CLI boundary: hostile paths and absurd numbers get one line and exit code 1, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tui.cli import main

MINI = Path(__file__).parent / "data" / "incidents" / "tui-mini.yaml"


@pytest.fixture()
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return CliRunner()


@pytest.mark.parametrize("args", [
    ["generate", str(MINI), "--out", "/proc/no/such.duckdb"],
    ["export", str(MINI), "--parquet", "/etc/passwd"],
    ["calc", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--context", "100000000000000000000"],
    ["score", "/dev/zero"],
    ["report", "/etc/passwd"],
    ["send", "/etc/passwd", "message", "hi"],
])
def test_one_line_never_a_traceback(runner: CliRunner, args: list[str]) -> None:
    result = runner.invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("servedrill: ")


def test_json_failures_are_one_object(runner: CliRunner) -> None:
    result = runner.invoke(main, ["export", str(MINI), "--parquet", "/etc/passwd", "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["ok"] is False and "/etc/passwd" in doc["error"]

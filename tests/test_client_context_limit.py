"""Clients size requests to the context the fleet serves: with max_model_len lowered in an incident's
engine config, no request the clients send (normal traffic, surges, shifted prompts) exceeds it."""

from __future__ import annotations

from pathlib import Path

import yaml

from incidents.loader import load_incident
from telemetry_gen.runner import client_requests

LIBRARY = Path(__file__).resolve().parent.parent / "incidents"


def test_requests_fit_the_fleets_max_model_len(tmp_path: Path) -> None:
    data = yaml.safe_load((LIBRARY / "streams-freeze-mid-sentence.yaml").read_text(encoding="utf-8"))
    limit = data["fleet"]["engine"]["max_model_len"]
    assert limit < 32768  # the point: below the engine default the generator used to assume
    inc = load_incident(LIBRARY / "streams-freeze-mid-sentence.yaml")
    reqs = client_requests(inc, 0)
    assert max(r.prompt_tokens + r.output_tokens for r in reqs) <= limit
    # and the cap binds: with a quarter of the context, long prompts are cut to it
    data["fleet"]["engine"]["max_model_len"] = limit // 4
    data["fleet"]["engine"].pop("max_num_batched_tokens", None)
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    short = client_requests(load_incident(path), 0)
    assert max(r.prompt_tokens + r.output_tokens for r in short) <= limit // 4
    assert max(r.prompt_tokens for r in short) >= limit // 8

"""LoRA adapters from the incident YAML to the telemetry: the workload's adapters, the engine knobs, the
requests.adapter column and vllm:lora_requests_info, and what the format refuses."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from engine_model.config import EngineConfig
from engine_model.lora import AdapterCache, adapter_bytes
from engine_model.profiles import get_model
from engine_model.request import Request
from engine_model.simulation import FleetSpec, PoolSpec, Simulation
from incidents import telemetry_schema as schema
from incidents.spec import Incident, cross_check
from telemetry_gen.runner import build_telemetry
from telemetry_gen.workload import AdapterMix, AppSpec, LengthDist, RateCurve, WorkloadSpec, generate_columns

SEED = 3
DURATION = 900.0
AT = 300.0
ASSIST = {"kind": "zipf", "skew": 0.8}

BASE: dict[str, Any] = {
    "id": "lora-fixture",
    "title": "Fixture for LoRA adapters",
    "difficulty": 1,
    "briefing": {"reported_by": "tests", "since": "never", "summary": "A small fleet serving adapters."},
    "window": {"start": "2026-01-05T10:00:00Z", "duration_s": DURATION, "scrape_interval_s": 10},
    "fleet": {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "replicas": 2, "model_version": "v1",
              "engine": {"max_loras": 16, "max_cpu_loras": 32},
              "router": {"policy": "least_outstanding"}},
    "workload": {
        "base_rps": 16.0,
        "apps": [
            {"name": "chat", "weight": 1, "prompt": {"kind": "lognormal", "median": 600, "sigma": 0.5, "max": 6000},
             "output": {"kind": "lognormal", "median": 200, "sigma": 0.5, "max": 800}, "rate_shape": "flat"},
            {"name": "assist", "weight": 1,
             "prompt": {"kind": "lognormal", "median": 800, "sigma": 0.4, "max": 6000},
             "output": {"kind": "lognormal", "median": 300, "sigma": 0.4, "max": 1200}, "rate_shape": "flat",
             "adapters": {"count": 12, "rank": 16, "popularity": ASSIST}},
        ],
    },
    "faults": [],
    "hypotheses": [
        {"id": "nothing", "title": "Nothing", "explanation": "Nothing is wrong.", "true": True},
        {"id": "gw", "title": "Gateway", "explanation": "The gateway adds latency.",
         "world": [{"kind": "gateway_latency", "at_s": AT, "params": {"delay_s": 0.5}}]},
    ],
    "signals": [
        {"id": f"s{i}", "shows": "rows exist", "reveals": [{"table": "requests", "columns": ["ttft_s"]}],
         "query": "SELECT count(*) AS n FROM requests", "expect": {"column": "n", "op": ">", "value": 0}}
        for i in range(3)
    ],
    "debrief": {"summary": "Nothing happened.", "causal_chain": ["nothing"], "mitigation": "none"},
}
SLOTS_CUT = {"kind": "config_change", "at_s": AT, "params": {"max_loras": 3, "stagger_s": 5, "restart_s": 5}}


def data(**changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    d.update(changes)
    return d


def incident(*faults: dict[str, Any], **changes: Any) -> Incident:
    return Incident.model_validate(data(faults=list(faults), **changes), context={"skip_cross_checks": True})


def after(df: pd.DataFrame, at: float = AT + 60) -> pd.DataFrame:
    return df[(df.ts - pd.Timestamp("2026-01-05 10:00:00")).dt.total_seconds() >= at]


# ---------------------------------------------------------------- workload


def spec(adapters: AdapterMix | None) -> WorkloadSpec:
    common = {"prompt": LengthDist("lognormal", median=500, sigma=0.5), "rate_shape": "flat",
              "output": LengthDist("lognormal", median=100, sigma=0.5), "tenants": ("t0", "t1", "t2")}
    apps = (AppSpec("chat", 1.0, **common), AppSpec("assist", 1.0, adapters=adapters, **common))
    return WorkloadSpec(duration_s=600.0, rate=RateCurve(base_rps=20.0, daily_amplitude=0.0), apps=apps)


def test_adapters_are_drawn_per_seed_on_a_stream_of_their_own() -> None:
    mix = AdapterMix(count=8, rank=32, popularity="zipf", skew=1.0)
    a, b = generate_columns(spec(mix), 7), generate_columns(spec(mix), 7)
    plain = generate_columns(spec(None), 7)
    assert a.lora is not None and b.lora is not None and a.lora_rank is not None
    assert np.array_equal(a.lora, b.lora)
    assert plain.lora is None  # no app serves adapters: the columns are as they always were
    for name in ("arrival_s", "prompt_tokens", "output_tokens", "tenant", "prompt_hash", "session_key"):
        assert np.array_equal(getattr(a, name), getattr(plain, name)), name
    assist = a.app == a.app_names.index("assist")
    assert set(np.unique(a.lora[assist])) == set(range(1, 9)) and not a.lora[~assist].any()
    assert set(a.lora_rank[assist]) == {32}
    reqs = a.to_requests()
    assert {(r.lora, r.lora_rank) for r in reqs if r.app == "chat"} == {(0, 0)}
    assert not np.array_equal(generate_columns(spec(mix), 8).lora, a.lora)


def test_popularity_zipf_concentrates_and_uniform_spreads_and_share_leaves_some_on_the_base_model() -> None:
    def counts(mix: AdapterMix) -> np.ndarray:
        cols = generate_columns(spec(mix), 11)
        assert cols.lora is not None
        lora = cols.lora[cols.app == cols.app_names.index("assist")]
        return np.bincount(lora, minlength=mix.count + 1)

    zipf = counts(AdapterMix(count=10, popularity="zipf", skew=1.5))
    uniform = counts(AdapterMix(count=10, popularity="uniform"))
    assert zipf[1] > 10 * zipf[10] and zipf[0] == 0
    assert uniform[1:].max() < 1.5 * uniform[1:].min()
    half = counts(AdapterMix(count=10, popularity="uniform", share=0.5))
    assert 0.4 < half[0] / half.sum() < 0.6


@pytest.mark.slow  # simulates
def test_a_higher_rank_adapter_takes_longer_to_load() -> None:
    model = get_model("Llama-3.1-8B")
    cache = AdapterCache(slots=1, host_slots=2, bytes_per_adapter=adapter_bytes(model, 16))
    cache.sizes[2] = adapter_bytes(model, 64)
    small, big = cache.activate({1}), cache.activate({2})
    assert big == pytest.approx(4 * small)

    def loads(rank: int) -> float:
        reqs = [Request(i, 0.05 * i, 500, 50, prompt_hash=1 + i, lora=1 + i % 6, lora_rank=rank) for i in range(400)]
        cfg = EngineConfig().with_changes(max_loras=2, max_lora_rank=64)
        sim = Simulation(FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 1, cfg)), reqs, [], 60.0)
        sim.run()
        a = sim.replicas[0].adapters
        assert a is not None
        return a.load_s_total / a.loads_total

    assert loads(64) == pytest.approx(4 * loads(16))


# ---------------------------------------------------------------- the format refuses nonsense


@pytest.mark.parametrize("adapters, words", [
    ({"count": 0}, "greater than or equal to 1"),
    ({"count": 4, "popularity": {"kind": "pareto"}}, "pareto"),
    ({"count": 4, "popularity": {"kind": "uniform", "skew": 1.0}}, "skew"),
    ({"count": 4, "share": 0}, "greater than 0"),
    ({"count": 4, "rank": 0}, "greater than or equal to 1"),
    ({"count": 4, "adapter_count": 3}, "adapter_count"),
])
def test_bad_adapters_are_refused(adapters: dict[str, Any], words: str) -> None:
    d = data()
    d["workload"]["apps"][1]["adapters"] = adapters
    with pytest.raises(ValidationError, match=words):
        Incident.model_validate(d, context={"skip_cross_checks": True})


def messages(d: dict[str, Any]) -> list[str]:
    return [str(i) for i in cross_check(d) if "hypotheses" not in str(i)]


def test_adapters_need_an_engine_that_serves_them_and_lora_knobs_need_adapters() -> None:
    assert messages(data()) == []
    d = data()
    d["fleet"]["engine"] = {}
    assert any("the engine serves none" in m for m in messages(d))
    d = data()
    d["workload"]["apps"][1]["adapters"]["rank"] = 64
    assert any("exceeds the engine's max_lora_rank 16" in m for m in messages(d))
    d = data(faults=[{**SLOTS_CUT, "params": {"max_lora_rank": 8}}])
    assert any("max_lora_rank 8 is below the rank of the workload's adapters (16)" in m for m in messages(d))
    d = data(faults=[SLOTS_CUT])
    del d["workload"]["apps"][1]["adapters"]
    found = messages(d)
    assert any("fleet.engine.max_loras" in m and "no effect" in m for m in found)
    assert any("faults[0].params.max_loras" in m and "no effect" in m for m in found)


# ---------------------------------------------------------------- telemetry


@pytest.fixture(scope="module")
def clean():
    return build_telemetry(incident(), SEED)


@pytest.fixture(scope="module")
def thrash():
    return build_telemetry(incident(SLOTS_CUT), SEED)


@pytest.mark.slow  # simulates
def test_requests_name_their_adapter_and_the_engines_export_lora_requests_info(clean) -> None:
    req = clean.tables["requests"]
    assert list(req.columns)[-1] == "adapter" and "attempt" not in req.columns  # no retries in this fixture
    assert set(req.loc[req.app == "chat", "adapter"]) == {""}
    assert set(req.loc[req.app == "assist", "adapter"]) == {f"assist-lora-{k}" for k in range(1, 13)}
    m = clean.tables["metrics"]
    info = m[m.name.str.startswith("vllm:lora_requests_info{")]
    assert len(info) > 0 and info.name.str.startswith('vllm:lora_requests_info{max_lora="16",').all()
    assert info.name.str.contains(r'running_lora_adapters="assist-lora-\d', regex=True).any()
    # the value is the scrape's Unix time
    unix = (info.ts - pd.Timestamp("1970-01-01")).dt.total_seconds()
    assert np.allclose(info.value.to_numpy(), unix.to_numpy())


@pytest.mark.slow  # simulates
def test_an_incident_without_adapters_has_no_adapter_column_and_no_lora_series() -> None:
    d = data()
    del d["workload"]["apps"][1]["adapters"]
    d["fleet"]["engine"] = {}
    tel = build_telemetry(Incident.model_validate(d, context={"skip_cross_checks": True}), SEED)
    assert "adapter" not in tel.tables["requests"].columns
    assert tuple(tel.tables["requests"].columns) == tuple(
        c for c in schema.TABLE_COLUMNS["requests"] if c not in schema.OPTIONAL_COLUMNS["requests"])
    assert not tel.tables["metrics"].name.str.startswith("vllm:lora").any()


@pytest.mark.slow  # simulates
def test_fewer_slots_than_adapters_makes_adapter_requests_wait_and_leaves_the_base_model_alone(clean, thrash) -> None:
    def p90(tel: Any, app: str, col: str = "queue_s") -> float:
        r = after(tel.tables["requests"])
        return float(r.loc[(r.app == app) & (r.status == "ok"), col].quantile(0.9))

    assert p90(thrash, "assist") > 10 * p90(clean, "assist")
    assert p90(thrash, "assist", "ttft_s") > 3 * p90(clean, "assist", "ttft_s")
    assert p90(thrash, "chat") < 1.5 * p90(clean, "chat") + 0.01
    m = after(thrash.tables["metrics"])
    info = m[m.name.str.startswith("vllm:lora_requests_info{")]
    assert info.name.str.startswith('vllm:lora_requests_info{max_lora="3",').all()
    waiting = ~info.name.str.contains('waiting_lora_adapters=""', regex=False)
    assert waiting.mean() > 0.5  # requests of adapters beyond the slots wait at most scrapes
    m0 = after(clean.tables["metrics"])
    info0 = m0[m0.name.str.startswith("vllm:lora_requests_info{")]
    assert (~info0.name.str.contains('waiting_lora_adapters=""', regex=False)).mean() < 0.1
    ev = thrash.tables["events"]
    assert set(ev.loc[ev.detail == "max_loras", "new_value"]) == {"3"}


@pytest.mark.slow  # simulates
def test_intensity_zero_is_no_change_of_the_slots(clean) -> None:
    assert build_telemetry(incident({**SLOTS_CUT, "intensity": 0}), SEED).digest == clean.digest


@pytest.mark.slow  # simulates
def test_the_host_cache_knob_shows_in_the_engines_disk_reads() -> None:
    """max_cpu_loras: with a host cache below the working set, adapters are read from disk again and again;
    the step waits longer for them, which the adapter requests' prefill shows."""
    small = copy.deepcopy(BASE["fleet"])
    small["engine"] = {"max_loras": 3, "max_cpu_loras": 3}
    big = copy.deepcopy(BASE["fleet"])
    big["engine"] = {"max_loras": 3, "max_cpu_loras": 32}
    runs = [build_telemetry(incident(fleet=f), SEED).run for f in (small, big)]
    # the build keeps the simulation's per-request records; compare the adapter requests' prefill
    prefill = []
    for run in runs:
        r = run.requests
        lora = np.asarray(r["lora"]) > 0
        ok = np.asarray(r["status"]) == "ok"
        pre = np.asarray(r["first_token_s"], dtype=float) - np.asarray(r["first_scheduled_s"], dtype=float)
        prefill.append(float(np.mean(pre[lora & ok])))
    assert prefill[0] > 1.1 * prefill[1]

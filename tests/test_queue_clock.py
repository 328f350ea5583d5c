"""The queue clock starts when the engine core has the request (issue 33): the API server's intake is its own
column (`requests.api_server_s`) and series (`vllm:request_api_server_time_seconds`), and
`requests.queue_s` / `vllm:request_queue_time_seconds` count from the hand-off, as vLLM's queue interval
(QUEUED -> SCHEDULED) does. And a burst sent at once reaches the engine in one hand-off and shares one
prefill step, as vLLM serves it."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import pytest

from engine_model.config import EngineConfig
from engine_model.frontend import FIXED_S, LATENCY_S, PER_PROMPT_TOKEN_S, FrontendConfig
from engine_model.profiles import get_gpu
from engine_model.request import Request
from engine_model.results import SimResult
from engine_model.simulation import FleetSpec, PoolSpec, simulate
from telemetry_gen import tables as T

H100 = get_gpu("H100-SXM")


def fleet(frontend: FrontendConfig | None = None) -> FleetSpec:
    cfg = EngineConfig.for_gpu(H100.name, H100.hbm_gib)
    return FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 1, cfg, frontend=frontend or FrontendConfig()))


def burst(n: int, at: float, prompt: int, output: int, first_id: int = 0) -> list[Request]:
    return [Request(request_id=first_id + i, arrival_s=at, prompt_tokens=prompt, output_tokens=output,
                    prompt_hash=70_000 + first_id + i) for i in range(n)]


def requests(run: SimResult) -> pd.DataFrame:
    return T.requests_table(run, T.TelemetryContext(t0=datetime(2026, 1, 1), gpu=H100))


def intake_s(prompt: int) -> float:
    return FIXED_S + PER_PROMPT_TOKEN_S * prompt


def test_an_idle_engine_shows_no_queue_the_api_server_carries_the_intake() -> None:
    """Requests far apart on an idle replica: each waits ~0 in the engine's queue; its intake and hand-off
    (~21.5 ms for 1000 tokens) are the API server's, and the parts still add up to the TTFT."""
    reqs = [Request(request_id=i, arrival_s=1.0 + 2.0 * i, prompt_tokens=1000, output_tokens=20, prompt_hash=i + 1)
            for i in range(5)]
    df = requests(simulate(fleet(), reqs, [], 20.0))
    assert len(df) == 5 and set(df["status"]) == {"ok"}
    assert np.allclose(df["queue_s"], 0.0, atol=1e-9)
    assert np.allclose(df["api_server_s"], intake_s(1000) + LATENCY_S, rtol=1e-9)
    parts = df["gateway_s"] + df["api_server_s"] + df["queue_s"] + df["prefill_s"]
    assert np.allclose(parts, df["ttft_s"], rtol=1e-9, atol=1e-12)


def test_a_saturated_api_server_shows_in_its_column_not_in_the_queue() -> None:
    """100 long prompts at once through a slow tokenizer (40 us a token: 120 ms an intake, about twice the
    prompt's prefill): the API server takes them in one after another (12 s in all) while the engine, fed
    faster than it prefills, takes each at its next step. The wait is the API server's."""
    slow = FrontendConfig(per_prompt_token_s=40e-6)
    df = requests(simulate(fleet(slow), burst(100, 1.0, 3000, 2), [], 30.0))
    assert set(df["status"]) == {"ok"}
    api, queue = df["api_server_s"].to_numpy(), df["queue_s"].to_numpy()
    each = slow.intake_s(3000)
    assert api.max() >= 100 * each - 1e-9  # the last waited behind every other intake
    assert np.median(api) > 5.0
    assert queue.max() < each  # never more than the step in progress when it was handed over
    assert np.median(api) > 50 * np.median(queue)


def test_the_queue_and_api_server_histograms_follow_the_columns() -> None:
    """The scraped _sum/_count of vllm:request_queue_time_seconds and vllm:request_api_server_time_seconds,
    once every request finished, equal the requests table's sums."""
    reqs = burst(50, 1.0, 2000, 5) + [Request(request_id=100 + i, arrival_s=5.0 + i, prompt_tokens=500,
                                              output_tokens=10, prompt_hash=900 + i) for i in range(5)]
    run = simulate(fleet(), reqs, [], 30.0)
    df = requests(run)
    r = run.requests
    assert set(df["status"]) == {"ok"}
    t = np.array([30.0])
    rep = np.array([r["replica"][0]])
    for (start, end), column in ((("engine_arrival_s", "first_scheduled_s"), "queue_s"),
                                 (("arrival_s", "engine_arrival_s"), "api_server_s")):
        assert T.LATENCY_HISTOGRAMS[{"queue_s": "vllm:request_queue_time_seconds",
                                     "api_server_s": "vllm:request_api_server_time_seconds"}[column]] == (start, end)
        sums, counts = T._histogram_sums(run, start, end, t, rep)
        assert counts[0] == len(df)
        assert sums[0] == pytest.approx(df[column].sum(), rel=1e-9)


def test_a_burst_of_ten_is_admitted_in_one_step_with_near_equal_ttft() -> None:
    """Ten requests sent together to an idle replica go to the engine in one hand-off and share one prefill
    step: vLLM gave all ten 62 +- 0.5 ms, where a hand-off latency per request split them over three steps
    (34/56/75 ms)."""
    run = simulate(fleet(), burst(10, 1.0, 200, 20), [], 10.0)
    df = requests(run)
    assert len(df) == 10 and set(df["status"]) == {"ok"}
    assert df["replica"].nunique() == 1
    sched = np.asarray(run.requests["first_scheduled_s"], dtype=float)
    assert len(set(sched)) == 1  # one step scheduled all ten
    assert set(run.requests["batch_at_first_token"]) == {10}
    ttft = df["ttft_s"].to_numpy()
    assert ttft.max() - ttft.min() < 0.5e-3
    # they waited for the last one's intake, not for ten hand-offs one after another
    assert ttft.min() > 10 * intake_s(200)
    assert ttft.max() < intake_s(200) + LATENCY_S + 0.1


def test_requests_apart_each_pay_the_hand_off() -> None:
    """The shared hand-off is a burst's: two requests 50 ms apart (more than the latency) are handed over
    separately, each one latency after its own intake."""
    reqs = [Request(request_id=i, arrival_s=1.0 + 0.05 * i, prompt_tokens=200, output_tokens=3, prompt_hash=i + 1)
            for i in range(2)]
    run = simulate(fleet(), reqs, [], 5.0)
    reach = np.asarray(run.requests["engine_arrival_s"], dtype=float) - np.asarray(run.requests["arrival_s"])
    assert np.allclose(reach, intake_s(200) + LATENCY_S, rtol=1e-9)


def test_a_request_that_never_reached_the_engine_has_no_api_server_or_queue_time() -> None:
    """Clients that give up while the API server is still taking a long burst in: both parts are NULL."""
    hasty = [Request(request_id=1000 + i, arrival_s=1.0, prompt_tokens=100, output_tokens=5, prompt_hash=5000 + i,
                     timeout_s=0.1) for i in range(20)]
    df = requests(simulate(fleet(), burst(300, 1.0, 2000, 5) + hasty, [], 10.0))
    gone = df[df["request_id"] >= 1000]
    assert set(gone["status"]) == {"timeout"}
    assert gone["api_server_s"].isna().all() and gone["queue_s"].isna().all()

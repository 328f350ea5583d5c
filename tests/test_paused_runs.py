"""A run paused, copied and amended (issue 35: acting re-simulates only what follows the decision): advancing in
parts is one run, a copy goes on as the original would and apart from it, an amendment is the run that had
the changed faults from the start, and the mitigation built from a paused run is the one simulated whole."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine_model.config import EngineConfig
from engine_model.faults import Fault
from engine_model.request import Request
from engine_model.results import SimResult
from engine_model.simulation import FleetSpec, PoolSpec, Simulation

FLEET = FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 2, EngineConfig()))
END_S = 300.0
THROTTLE = Fault("gpu_throttle", 40.0, None, (1,), 1.0, {"clock_factor": 0.5})


def requests(rate: float = 6.0) -> list[Request]:
    """Open-loop requests of two tenants over END_S seconds (a fixed pseudo-random pattern)."""
    out, t, i = [], 0.0, 0
    while True:
        t += (1.0 + ((i * 7919) % 13) / 6.5) / rate  # gaps of 1-3 times 1/rate, never two at one instant
        if t >= END_S:
            return out
        out.append(Request(request_id=i, arrival_s=t, prompt_tokens=300 + (i * 37) % 900,
                           output_tokens=40 + (i * 53) % 200, prompt_hash=1000 + i,
                           tenant="acme" if i % 3 else "globex"))
        i += 1


def simulation(faults: list[Fault], reqs: list[Request] | None = None) -> Simulation:
    return Simulation(FLEET, requests() if reqs is None else reqs, faults, END_S)


def _same(values: list[Any]) -> list[Any]:
    # NaN is not equal to itself: compare it as a word
    return ["nan" if isinstance(v, float) and math.isnan(v) else v for v in values]


def rows(run: SimResult) -> dict[str, Any]:
    """Everything a run recorded, comparable with ==."""
    return {"requests": {k: _same(v) for k, v in run.requests.items()},
            "samples": {k: _same(v) for k, v in run.samples.items()},
            "events": [(e.t, e.replica, e.kind, e.detail) for e in run.events]}


def copy_of(sim: Simulation) -> Simulation:
    """A copy as the game makes it (telemetry_gen.mitigation.PausedRun), `sim` given its rows back."""
    from telemetry_gen.mitigation import PausedRun

    paused = PausedRun.of(sim)
    sim.attach_rows(paused.requests, paused.samples)
    return paused.resume()


def test_advancing_in_parts_is_the_run_in_one_go() -> None:
    whole = rows(simulation([THROTTLE]).run())
    sim = simulation([THROTTLE])
    for t in (0.0, 17.25, 40.0, 40.0, 160.5):
        sim.advance(t)
        assert sim.now < t or t == 0.0  # paused before its first event at or after t
    with pytest.raises(RuntimeError, match="has not ended"):
        sim.result()
    sim.advance(math.inf)
    assert rows(sim.result()) == whole
    assert len(whole["requests"]["request_id"]) > 800


def test_a_copy_goes_on_as_the_original_would_and_apart_from_it() -> None:
    plain = rows(simulation([THROTTLE]).run())
    sim = simulation([THROTTLE])
    sim.advance(150.0)
    copy = copy_of(sim)
    copy.amend_faults([THROTTLE, Fault("router_drain", 150.0, None, (1,), 1.0, {})])
    copy.advance(math.inf)
    drained = rows(copy.result())
    sim.advance(math.inf)
    assert rows(sim.result()) == plain  # the copy's amendment did not reach the original
    assert drained != plain
    finished = [r for r, t in zip(drained["requests"]["replica"], drained["requests"]["arrival_s"], strict=True)
                if t > 151.0]
    assert finished and set(finished) == {"vllm-0"}  # vllm-1 left the pool at the decision


@pytest.mark.parametrize("amend", ["new", "ended", "both"])
def test_an_amendment_is_the_run_given_those_faults_from_the_start(amend: str) -> None:
    at = 150.0
    redeploy = Fault("config_change", at, None, None, 1.0, {"max_num_seqs": 8})
    faults = {"new": [THROTTLE, redeploy], "ended": [replace(THROTTLE, end_s=at)],
              "both": [replace(THROTTLE, end_s=at), redeploy]}[amend]
    whole = rows(simulation(faults).run())
    sim = simulation([THROTTLE])
    sim.advance(at)
    sim.amend_faults(faults)
    sim.advance(math.inf)
    assert rows(sim.result()) == whole
    unstarted = simulation([THROTTLE])
    unstarted.amend_faults(faults)  # before its start: as if built with them
    assert rows(unstarted.run()) == whole
    assert whole != rows(simulation([THROTTLE]).run())  # the amendment changed the run


def test_an_amendment_cannot_rewrite_what_happened() -> None:
    sim = simulation([THROTTLE, Fault("gpu_throttle", 10.0, 20.0, (0,), 1.0, {"clock_factor": 0.8})])
    sim.advance(100.0)
    ended_before = sim.faults[1]
    refused = {
        "dropped a fault": [THROTTLE],
        "changed a fault": [replace(THROTTLE, params={"clock_factor": 0.2}), ended_before],
        "ended it in the past": [replace(THROTTLE, end_s=90.0), ended_before],
        "ended a fault over": [THROTTLE, replace(ended_before, end_s=150.0)],
        "started before now": [THROTTLE, ended_before, Fault("router_drain", 99.0, None, (0,), 1.0, {})],
    }
    for why, faults in refused.items():
        with pytest.raises(ValueError, match="fault"):
            sim.amend_faults(faults)
        assert sim.faults[0] == THROTTLE, why


def test_shedding_drops_the_tenants_requests_still_to_come() -> None:
    reqs = requests()
    later = [r for r in reqs if r.tenant == "globex" and r.arrival_s >= 150.0]
    whole = rows(simulation([], [r for r in requests() if not (r.tenant == "globex" and r.arrival_s >= 150.0)]).run())
    sim = simulation([], reqs)
    sim.advance(150.0)
    assert sim.shed(frozenset()) == 0
    assert sim.shed(frozenset({"globex"})) == len(later) > 50
    sim.advance(math.inf)
    assert rows(sim.result()) == whole


# ---------------------------------------------------------------- the mitigation run


MINI = Path(__file__).parent / "data" / "incidents" / "tui-mini.yaml"


@pytest.mark.parametrize("texts", [["drain vllm-1", "restart vllm-0"], ["router round_robin"],
                                   ["set max_num_seqs=16"]])
def test_a_mitigation_continued_from_the_pause_is_the_run_simulated_whole(texts: list[str]) -> None:
    from incidents.loader import load_incident
    from incidents.mitigation import parse_actions
    from telemetry_gen.clients import client_model
    from telemetry_gen.mitigation import build_mitigated, compile_actions, continued_requests, extended
    from telemetry_gen.runner import fleet_spec, workload_spec

    inc = load_incident(MINI, 0)
    decision, end = 200.0, 500.0
    actions = parse_actions(texts)
    timeouts = {a.name: a.timeout_s for a in workload_spec(inc).apps}
    whole = Simulation(fleet_spec(inc), continued_requests(inc, 0, end), compile_actions(inc, actions, decision), end,
                       sample_interval_s=inc.window.scrape_interval_s,
                       clients=client_model(extended(inc, end), 0, timeouts)).run()
    paused = build_mitigated(inc, 0, actions, decision_s=decision, horizon_s=end - inc.window.duration_s)
    assert rows(paused.telemetry.run) == rows(whole)
    again = build_mitigated(inc, 0, actions, decision_s=decision, horizon_s=end - inc.window.duration_s)
    assert again.digest == paused.digest  # the second continues a fresh copy of the same pause


def test_the_game_prepares_the_mitigation_while_the_player_reads(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from game import api
    from game.session import Session
    from incidents.loader import load_incident
    from telemetry_gen import mitigation

    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(mitigation, "_paused", type(mitigation._paused)())
    inc = load_incident(Path(__file__).parent.parent / "incidents" / "one-70b-replica-slow.yaml", 0)
    session = Session.in_memory(inc, 0, "ada")
    session.start("x")
    assert api.prepare_mitigation(session) is None  # nothing to prepare before the diagnosis is in
    board = session.board
    session.rank({board[0].id: 60.0, board[1].id: 40.0})
    session.submit()
    thread = api.prepare_mitigation(session)
    assert thread is not None
    thread.join(timeout=600)
    assert not thread.is_alive()
    assert len(mitigation._paused) == 1  # the run paused at the window's end
    assert list((tmp_path / "cache").glob(f"{inc.id}-mitigated-*.duckdb"))  # and the run without actions
    acted = api.act(session, ["drain vllm-2"])
    acted.telemetry.close()
    assert acted.score.recovered and len(mitigation._paused) == 1  # acting continued the same pause
    assert api.prepare_mitigation(session) is None  # acted: nothing more to prepare

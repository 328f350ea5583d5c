"""Mitigation (issue 35): actions parsed with columns and hints, the run continued past the window with the
window's telemetry unchanged byte for byte, deterministic per seed and action list, recovery told apart from
a symptom treated, and the phase played through the game API and line mode."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from game import api
from game.frontends.line_mode import PlainGame
from game.rules.debrief import debrief_markdown
from game.rules.mitigation import score_mitigation
from game.rules.scoring import ScoreReport
from game.session import Session, SessionError
from incidents.loader import load_incident
from incidents.mitigation import Action, ActionError, parse_action, parse_actions
from incidents.spec import Incident
from telemetry_gen.mitigation import TAIL_ID_BASE, build_mitigated, compile_actions, recovery
from telemetry_gen.runner import build_telemetry

LIBRARY = Path(__file__).parent.parent / "incidents"
TTFT = LIBRARY / "ttft-tripled-after-deploy.yaml"


@pytest.fixture(scope="module")
def ttft() -> Incident:
    return load_incident(TTFT, 0)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    yield tmp_path


# ---------------------------------------------------------------- the written form


@pytest.mark.parametrize("text", ["rollback", "set max_num_seqs=128", "set enable_prefix_caching=true "
                                  "gpu_memory_utilization=0.85", "restart all", "restart vllm-2", "drain vllm-0",
                                  "router round_robin", "shed acme"])
def test_an_action_reads_back_as_written(text: str) -> None:
    action = parse_action(text)
    assert action.text() == text
    assert parse_action(action.text()) == action


def test_set_parses_each_knob_to_its_type() -> None:
    action = parse_action("set enable_chunked_prefill=off max_num_batched_tokens=4096 gpu_memory_utilization=0.8")
    assert action.knobs == (("enable_chunked_prefill", False), ("max_num_batched_tokens", 4096),
                            ("gpu_memory_utilization", 0.8))


@pytest.mark.parametrize(("text", "column", "message", "hint"), [
    ("set max_num_seq=512", 5, "unknown engine knob 'max_num_seq'", "max_num_seqs"),
    ("set max_num_seqs=lots", 18, "whole number", "set max_num_seqs=256"),
    ("set max_num_seqs", 5, "KNOB=VALUE", "set KNOB=VALUE"),
    ("set gpu_memory_utilization=1.5", 5, "gpu_memory_utilization must be within", None),
    ("rollbak", 1, "unknown action 'rollbak'", "'rollback'"),
    ("drain 3", 7, "replica name like vllm-2", "drain vllm-N"),
    ("drain all", 7, "replica name like vllm-2", "drain vllm-N"),
    ("router fastest", 8, "unknown router policy", "least_outstanding"),
    ("restart", 9, "restart needs an argument", "restart vllm-N"),
    ("", 1, "no action given", "rollback"),
    ("set spec_acceptance_rate=0.75", 5, "not a setting an on-call engineer can change", "num_speculative_tokens"),
    ("set max_num_seqs=64 tensor_parallel_size=2", 21, "not a setting", "drain or restart"),
])
def test_a_bad_action_says_where_and_what_to_write(text: str, column: int, message: str, hint: str | None) -> None:
    with pytest.raises(ActionError) as caught:
        parse_action(text)
    assert caught.value.column == column
    assert message in caught.value.message
    if hint is not None:
        assert caught.value.hint is not None and hint in caught.value.hint


# ---------------------------------------------------------------- the continued run


def _complete_before(tables: dict[str, pd.DataFrame], t0: pd.Timestamp, decision_s: float) -> dict[str, pd.DataFrame]:
    """Every table's rows that were complete before the decision (a request: finished before it), sorted."""
    cut = t0 + pd.Timedelta(seconds=decision_s)
    out = {}
    for name, df in tables.items():
        if "ts" not in df.columns:
            continue
        if name == "requests":
            end = df["ts"] + pd.to_timedelta(df["e2e_s"].fillna(1e9), unit="s")
            part = df[end < cut]
        else:
            part = df[df["ts"] < cut]
        out[name] = part.sort_values(list(part.columns)).reset_index(drop=True)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("decision_s", [1800.0, 1200.0])
def test_the_window_before_the_decision_is_the_unmitigated_run_byte_for_byte(ttft: Incident,
                                                                              decision_s: float) -> None:
    inc = ttft
    base = build_telemetry(inc, 0)
    run = build_mitigated(inc, 0, [parse_action("rollback"), parse_action("router round_robin")],
                          decision_s=decision_s, horizon_s=600)
    t0 = pd.Timestamp(inc.window.start)
    before = _complete_before(base.tables, t0, decision_s)
    after = _complete_before(run.telemetry.tables, t0, decision_s)
    assert set(before) == set(after) and len(before["metrics"]) > 1000
    for name in before:
        pd.testing.assert_frame_equal(before[name], after[name], check_exact=True, obj=name)
    # the continuation is there: requests past the window, with ids of their own, and the action in the change log
    req = run.telemetry.tables["requests"]
    late = req[req["ts"] >= t0 + pd.Timedelta(seconds=inc.window.duration_s)]
    assert len(late) > 1000 and (late["request_id"] >= TAIL_ID_BASE).all()
    events = run.telemetry.tables["events"]
    assert "rollback" in set(events[events["kind"] == "mitigation"]["detail"])


@pytest.mark.slow
def test_a_mitigation_run_is_deterministic_per_seed_and_action_list(ttft: Incident) -> None:
    inc = ttft
    one = build_mitigated(inc, 0, [parse_action("restart vllm-1")], horizon_s=300)
    two = build_mitigated(inc, 0, [parse_action("restart vllm-1")], horizon_s=300)
    other = build_mitigated(inc, 0, [parse_action("restart vllm-2")], horizon_s=300)
    assert one.digest == two.digest
    assert one.digest != other.digest


def test_actions_compile_to_the_engines_own_changes_at_the_decision(ttft: Incident) -> None:
    inc = ttft
    faults = compile_actions(inc, [parse_action("rollback"), parse_action("drain vllm-2"),
                                   parse_action("set max_num_seqs=64")], 1800.0)
    deploys = [f for f in faults if f.kind == "config_change" and f.start_s < 1800.0]
    assert deploys and all(f.end_s == 1800.0 for f in deploys)  # the rollout and its max_num_seqs noise end
    assert any(f.kind == "router_drain" and f.replicas == (2,) and f.start_s == 1800.0 for f in faults)
    assert any(f.kind == "config_change" and f.start_s == 1800.0 and f.params == {"max_num_seqs": 64}
               for f in faults)
    plain = load_incident(LIBRARY / "one-slow-replica.yaml", 0)
    with pytest.raises(ActionError, match="no release to roll back"):
        compile_actions(plain, [Action("rollback")], plain.window.duration_s)


@pytest.mark.slow
def test_the_right_action_recovers_and_a_restart_does_not(ttft: Incident) -> None:
    inc = ttft
    fixed = recovery(inc, build_mitigated(inc, 0, [parse_action("rollback")]))
    restarted = recovery(inc, build_mitigated(inc, 0, [parse_action("restart all")]))
    assert fixed.recovered
    assert not restarted.recovered


# ---------------------------------------------------------------- the game


def _submitted(inc: Incident) -> Session:
    session = Session.in_memory(inc, 0, "ada")
    session.start("x")
    with pytest.raises(SessionError, match="submit first"):
        api.act(session, ["rollback"])
    board = session.board
    session.rank({board[0].id: 60.0, board[1].id: 40.0})
    session.submit()
    return session


@pytest.mark.slow
def test_act_through_the_api_is_journalled_once_and_scored(cache: Path, ttft: Incident) -> None:
    session = _submitted(ttft)
    before = len(session.events)
    with pytest.raises(SessionError) as caught:
        api.act(session, ["drain vllm-7"])
    assert "there is no vllm-7" in str(caught.value) and "column 7" in str(caught.value)
    with pytest.raises(SessionError, match="did you mean 'max_num_seqs'"):
        api.act(session, ["set max_num_seq=512"])
    assert len(session.events) == before  # a refused action writes nothing
    acted = api.act(session, ["rollback"])
    try:
        assert acted.event.kind == "act" and acted.event.data == {"actions": ["rollback"], "decision_s": 1800.0}
        assert acted.score.recovered and acted.score.verdict == "cause"
        assert acted.score.time_to_recovery_s is not None and 0 < acted.score.time_to_recovery_s < 1200
        rows = api.glance(acted.telemetry, "SELECT count(*) FROM requests WHERE ts >= TIMESTAMP "
                          "'2026-11-19 09:45:00'").rows
        assert rows[0][0] > 1000  # the player reads what came after the decision
    finally:
        acted.telemetry.close()
    with pytest.raises(SessionError, match="already applied"):
        api.act(session, ["restart all"])
    score = api.mitigation_score(session)
    assert score is not None and score.digest == acted.score.digest


@pytest.mark.slow
def test_a_wrong_mitigation_is_scored_as_a_symptom_in_its_own_debrief_section(cache: Path, ttft: Incident) -> None:
    inc = ttft
    score = score_mitigation(inc, 0, ["set max_num_seqs=512"], 1800.0)
    assert not score.recovered and score.verdict == "symptom" and score.points == 0
    assert score.time_to_recovery_s is None
    text = debrief_markdown(inc, [], _report(), score)
    section = text.split("## Mitigation", 1)[1]
    assert "Recovered: **no**" in section and "treated a symptom" in section and "prefix caching off" in section


def _report() -> ScoreReport:
    from game.rules.scoring import score

    return score(load_incident(TTFT, 0), [], {})


@pytest.mark.slow
def test_line_mode_acts_with_errors_then_queries_after(cache: Path, ttft: Incident) -> None:
    session = _submitted(ttft)
    script = "\n".join([
        "act set max_num_seq=512",
        "act drain vllm-9; rollback",
        "frobnicate",
        "act rollback",
        "SELECT count(*) AS late FROM requests WHERE ts >= TIMESTAMP '2026-11-19 09:45:00'",
        "done",
    ]) + "\n"
    out = io.StringIO()
    gateway = api.open_telemetry(api.load_variant(TTFT, 0)).gateway
    try:
        PlainGame(session, gateway, io.StringIO(script), out)._mitigate()
    finally:
        gateway.close()
    text = out.getvalue()
    assert "act set KNOB=VALUE" in text  # the offered actions, as they are written
    assert "error: action 1 `set max_num_seq=512`, column 5: unknown engine knob 'max_num_seq' (hint: did you mean " \
           "'max_num_seqs'?)" in text
    assert "error: action 1 `drain vllm-9`, column 7: there is no vllm-9" in text
    assert "error: 'frobnicate': in the mitigation phase" in text
    assert "Applied at t=1800 s: rollback" in text and "recovered yes" in text
    assert "late" in text and "Traceback" not in text
    assert [e.kind for e in session.events].count("act") == 1


def test_shedding_a_tenant_drops_its_requests_from_the_decision_on() -> None:
    inc = load_incident(Path(__file__).parent / "data" / "incidents" / "tui-mini.yaml", 0)
    run = build_mitigated(inc, 0, [parse_action("shed chat-t0")], decision_s=200.0, horizon_s=300)
    req = run.telemetry.tables["requests"]
    t0 = pd.Timestamp(inc.window.start)
    chat = req[req["tenant"] == "chat-t0"]
    assert run.shed_requests > 100
    assert len(chat) > 100 and (chat["ts"] < t0 + pd.Timedelta(seconds=200.5)).all()  # none after the decision
    probes = run.telemetry.tables["probes"]
    assert (probes["ts"] > t0 + pd.Timedelta(seconds=200)).any()  # the probes still run after it
    with pytest.raises(ActionError, match="no tenant 'acme'"):
        build_mitigated(inc, 0, [parse_action("shed acme")], horizon_s=300)


def test_a_router_policy_ends_session_affinity_and_draining_every_replica_is_refused() -> None:
    hot = load_incident(LIBRARY / "one-replica-runs-hot.yaml", 0)
    end = hot.window.duration_s
    before = [f for f in compile_actions(hot, [], end) if f.kind == "sticky_sessions"]
    assert before and all(f.end_s is None or f.end_s > end for f in before)
    after = compile_actions(hot, [parse_action("router least_outstanding")], end)
    assert [f.end_s for f in after if f.kind == "sticky_sessions"] == [end] * len(before)
    assert any(f.kind == "router_policy" and f.start_s == end for f in after)
    mini = load_incident(Path(__file__).parent / "data" / "incidents" / "tui-mini.yaml", 0)
    compile_actions(mini, [parse_action("drain vllm-0")], 200.0)  # one of two: the other serves
    with pytest.raises(ActionError, match="draining all 2 replicas leaves nothing"):
        compile_actions(mini, [parse_action("drain vllm-0"), parse_action("drain vllm-1")], 200.0)


def test_a_drain_is_in_the_change_log_and_counted_with_the_restarts() -> None:
    import duckdb

    from game.rules.mitigation import _restarts

    inc = load_incident(Path(__file__).parent / "data" / "incidents" / "tui-mini.yaml", 0)
    counts = {}
    for texts in (["drain vllm-1"], ["restart vllm-1"], ["drain vllm-1", "restart vllm-0"]):
        run = build_mitigated(inc, 0, parse_actions(texts), decision_s=200.0, horizon_s=300)
        con = duckdb.connect()
        for name in ("logs", "events"):
            con.register(name, run.telemetry.tables[name])
        counts[tuple(texts)] = _restarts(con, inc, 200.0)
        events = run.telemetry.tables["events"]
        drained = events[(events["detail"] == "drained") & (events["new_value"] == "true")]
        assert list(drained["replica"]) == (["vllm-1"] if "drain vllm-1" in texts else [])
    assert counts == {("drain vllm-1",): 1, ("restart vllm-1",): 1, ("drain vllm-1", "restart vllm-0"): 2}


def test_the_validator_points_at_a_bad_action_and_a_recovery_window_inside_the_window() -> None:
    from incidents.diagnostics import Diagnostic
    from incidents.loader import check_incident_text

    text = (LIBRARY / "one-slow-replica.yaml").read_text()
    bad = text.replace('- ["restart {{slow|replica}}"]', '- ["restart vllm-9"]\n    - [rollbak]')
    bad = bad.replace("a: {window: [2100, 2700]}", "a: {window: [1000, 2700]}")
    found = check_incident_text(bad, "x.yaml", seed=0)
    lines = bad.splitlines()

    def one(text: str) -> Diagnostic:
        [d] = [d for d in found if text in d.message]
        return d

    window = one("mitigation.recovery[0].a.window: a recovery claim reads the fleet after the decision")
    assert "a: {window: [1000, 2700]}" in lines[window.line - 1] and window.hint == "window: [2100, 2700]"
    replica = one("mitigation.wrong[0][0]: there is no vllm-9: the fleet has vllm-0 .. vllm-3")
    assert lines[replica.line - 1][replica.column - 1:].startswith('"restart vllm-9"')
    verb = one("mitigation.wrong[1][0]: unknown action 'rollbak'")
    assert verb.hint == "did you mean 'rollback'?" and "[rollbak]" in lines[verb.line - 1]
    assert len(found) == 3
    assert not check_incident_text(text, "x.yaml", seed=0)

"""`hypotheses[].keeps`: a rival world keeps the truth's rolling restart without its change (a planned
restart, not the new knob): declared and checked by the crosscheck at the entry's line, built into every
world of the rival's family, and in the simulated change log as restarts without a config change."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd

from incidents.kept_events import keepable_kinds
from incidents.loader import check_incident_text, load_incident_text
from incidents.spec import Incident
from telemetry_gen.proving.worlds import family_names, world_of
from telemetry_gen.runner import build_telemetry

GOOD_TEXT = (Path(__file__).parent / "data" / "incidents" / "good.yaml").read_text(encoding="utf-8")
# good.yaml's faults: [0] gpu_throttle, [1] config_change of long_prefill_token_threshold at 1300 on vllm-0, vllm-1
RESTART_RIVAL = """  - id: restart-only
    title: The restart itself
    explanation: Restarting emptied the prefix caches.
    aliases: [cold-restart]
    keeps: [1]
    members:
      - - kind: gateway_latency
          at_s: 900
          params: {delay_s: 0.1}
"""


def _with_rival(rival: str) -> str:
    anchor = "signals:\n"
    assert GOOD_TEXT.count(anchor) == 1
    return GOOD_TEXT.replace(anchor, rival + anchor)


def _messages(text: str) -> list[tuple[int, str]]:
    return [(d.line, d.message) for d in check_incident_text(text, "g.yaml")]


def _line_of(text: str, needle: str) -> int:
    assert text.count(needle) == 1, needle
    return text[: text.index(needle)].count("\n") + 1


def test_a_rival_that_keeps_the_truths_restart_needs_no_world_and_gets_it_without_the_knob() -> None:
    text = _with_rival(RESTART_RIVAL)
    assert _messages(text) == []
    inc = load_incident_text(text, "g.yaml")
    truth_change = inc.faults[1]
    worlds = [world_of(inc, name) for name in family_names(inc, "restart-only")]
    assert len(worlds) == 3  # world on two draws, one member
    for w in worlds:
        [restart] = [f for f in w.faults if f.kind == "config_change"]
        assert (restart.at_s, restart.until_s, restart.scope) == (truth_change.at_s, None, truth_change.scope)
        assert restart.params == {}  # the knob stays where it was
        assert not any(f.kind == "gpu_throttle" for f in w.faults)
    assert [f.kind for f in worlds[2].faults] == ["gateway_latency", "config_change"]  # the member keeps it too
    # the rollout's timing is kept, its change is not
    timed = text.replace("params: {long_prefill_token_threshold: 2048}\n",
                         "params: {long_prefill_token_threshold: 2048, stagger_s: 30, restart_s: 90}\n", 1)
    [restart] = world_of(load_incident_text(timed, "g.yaml"), "restart-only").faults
    assert restart.params == {"stagger_s": 30, "restart_s": 90}


def test_keeps_is_checked_at_its_entry() -> None:
    bad = RESTART_RIVAL.replace("keeps: [1]", "keeps: [0, 1, 1, 7]")
    text = _with_rival(bad)
    line = _line_of(text, "keeps: [0, 1, 1, 7]")
    found = [(ln, m) for ln, m in _messages(text) if "keeps" in m]
    assert found == [
        (line, "hypotheses[4].keeps[0]: faults[0] is a gpu_throttle, which has no rolling restart to keep"),
        (line, "hypotheses[4].keeps[2]: faults[1] is kept twice"),
        (line, "hypotheses[4].keeps[3]: no faults[7]: faults has 2 entries"),
    ]
    hints = [d.hint or "" for d in check_incident_text(text, "g.yaml") if "rolling restart" in d.message]
    assert "config_change" in hints[0] and "model_rollout" in hints[0]
    # on the truth, keeps means nothing: its world is the whole story
    truth = GOOD_TEXT.replace("    true: true\n", "    true: true\n    keeps: [1]\n", 1)
    [(ln, message)] = _messages(truth)
    assert message.startswith("hypotheses[0].keeps: a true hypothesis keeps the whole story")
    assert ln == _line_of(truth, "    keeps: [1]")
    # without keeps, an absent world is still refused
    no_world = _with_rival(RESTART_RIVAL.replace("    keeps: [1]\n", ""))
    assert any("has no world" in m for _, m in _messages(no_world))


# ---------------------------------------------------------------- in the simulated change log

SMALL: dict[str, Any] = {
    "id": "kept-restart-fixture",
    "title": "Fixture for kept restarts",
    "difficulty": 1,
    "briefing": {"reported_by": "tests", "since": "never", "summary": "A small fleet."},
    "window": {"start": "2026-01-05T10:00:00Z", "duration_s": 600, "scrape_interval_s": 10},
    "fleet": {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "replicas": 2, "model_version": "v1"},
    "workload": {"base_rps": 1.0, "daily_amplitude": 0.0},
    "faults": [{"kind": "config_change", "at_s": 120, "params": {"max_num_seqs": 8, "stagger_s": 60}}],
    "hypotheses": [
        {"id": "cap", "title": "Cap", "explanation": "The cap.", "true": True},
        {"id": "restart", "title": "Restart", "explanation": "The restart.", "keeps": [0]},
        {"id": "gw", "title": "Gateway", "explanation": "Gateway.",
         "world": [{"kind": "gateway_latency", "at_s": 120, "params": {"delay_s": 0.2}}]},
    ],
    "signals": [],
    "debrief": {"summary": "The cap.", "causal_chain": ["cap"], "mitigation": "none"},
}


def _change_log(inc: Incident) -> pd.DataFrame:
    events = build_telemetry(inc, 3).tables["events"]
    t = (events.ts - pd.Timestamp("2026-01-05 10:00:00")).dt.total_seconds()
    return events.assign(t=t)[["t", "replica", "kind", "detail"]]


def test_the_kept_restart_is_in_the_rivals_change_log_without_the_config_change() -> None:
    inc = Incident.model_validate(copy.deepcopy(SMALL), context={"skip_cross_checks": True})
    truth, rival = _change_log(inc), _change_log(world_of(inc, "restart"))
    restarts = {(r.replica, r.kind) for r in rival.itertuples() if r.kind in ("deploy", "restart")}
    assert restarts == {(f"vllm-{i}", k) for i in (0, 1) for k in ("deploy", "restart")}
    assert "config_change" not in set(rival.kind)
    assert set(truth[truth.kind == "config_change"].detail) == {"max_num_seqs"}
    # the same replicas restart at the same moments (stagger included) in both worlds
    def when(log: pd.DataFrame) -> list[tuple[str, float]]:
        rows = log[log.kind == "restart"]
        return sorted(zip(rows.replica, rows.t.round(1), strict=True))
    assert when(rival) == when(truth) and len(when(truth)) == 2
    assert when(truth)[1][1] - when(truth)[0][1] >= 55  # 60 s stagger, kept
    assert "restart" not in set(_change_log(world_of(inc, "gw")).kind)


def test_the_guide_names_every_kind_whose_restart_can_be_kept() -> None:
    guide = (Path(__file__).parent.parent / "docs" / "authoring.md").read_text(encoding="utf-8")
    section = guide[guide.index("### A rival that keeps part of the truth's story"):]
    section = section[: section.index("\n### ", 5)]
    assert keepable_kinds() == ["batch_invariance_off", "config_change", "model_rollout", "seeds_unpinned"]
    assert all(f"`{kind}`" in section for kind in keepable_kinds())

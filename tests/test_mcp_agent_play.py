"""AgentPlay's choices before any telemetry is built: which incident and seed an agent may open, what the
library shows it, and the refusals before a game (fast: nothing is simulated)."""

from __future__ import annotations

import pytest

from game import api
from game.frontends.agent_play import AgentError, AgentPlay
from incidents.coverage import visible_tags


def test_a_fixed_server_opens_only_its_incident_and_seed() -> None:
    play = AgentPlay(incident="one-slow-replica", seed=3)
    path, seed = play._choose(None, None)
    assert path == api.find_incident("one-slow-replica") and seed == 3
    with pytest.raises(AgentError, match="plays seed 3 only"):
        play._choose(None, 4)
    with pytest.raises(AgentError, match="plays incident one-slow-replica only"):
        play._choose("oom-at-peak", None)
    assert [e["id"] for e in play.incidents()["incidents"]] == ["one-slow-replica"]


def test_an_agent_opens_library_incidents_by_id_only() -> None:
    play = AgentPlay()
    with pytest.raises(AgentError, match="name an incident"):
        play._choose(None, None)
    for ref in ("no-such-incident", "/etc/passwd", "incidents/library/one-slow-replica.yaml"):
        with pytest.raises(AgentError, match="unknown incident"):
            play._choose(ref, 0)
    with pytest.raises(AgentError, match="seed 3 only"):
        AgentPlay(seed=3)._choose("one-slow-replica", 1)
    assert AgentPlay(seed=3)._choose("one-slow-replica", None)[1] == 3


def test_the_library_shows_symptom_tags_only_and_no_hypotheses() -> None:
    entries = AgentPlay().incidents()["incidents"]
    assert {e["id"] for e in entries} == {e.id for e in api.library() if e.problem is None}
    for entry in entries:
        assert entry["tags"] == visible_tags(entry["tags"])
        assert "hypotheses" not in entry


def test_every_action_before_a_game_says_to_start_one() -> None:
    play = AgentPlay()
    for action in (play.briefing, play.schema, play.status, play.updates, play.hint, play.debrief):
        with pytest.raises(AgentError, match="call start_session first"):
            action()
    with pytest.raises(AgentError, match="call start_session first"):
        play.query("SELECT 1")
    play.close()  # nothing to close: no error

"""The game as an RL environment: an episode of a library incident played by JSON text actions through
`IncidentEnv`, rewarded only at the submit with the score, which is the session's own score."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from game import api
from game.frontends.agent_play import AgentError
from game.frontends.autoplay import plan
from game.frontends.rl_env import IncidentEnv, parse_action

pytestmark = pytest.mark.slow  # builds (or reuses) a library incident's telemetry and worlds

INCIDENT = "one-slow-replica"


@pytest.fixture()
def env(library_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[IncidentEnv]:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path))
    with IncidentEnv(INCIDENT, root=tmp_path) as environment:
        yield environment


def test_an_expert_episode_is_rewarded_with_its_score_at_the_submit(env: IncidentEnv, tmp_path: Path) -> None:
    observation, info = env.reset(seed=0)
    briefing = json.loads(observation)
    assert briefing["seed"] == 0 and info["seed"] == 0 and info["query_budget"] == briefing["query_budget"]
    labels = {h["title"]: h["label"] for h in briefing["hypotheses"]}
    incident = api.load_variant(api.find_incident(INCIDENT), 0).incident
    label = {h.id: labels[h.title] for h in incident.hypotheses}
    the_plan = plan(incident, "expert", np.random.default_rng(0))
    ranking = {label[h]: share for h, share in the_plan.ranking}

    rewards: list[float] = []
    for planned in the_plan.queries:
        observation, reward, terminated, truncated, _ = env.step(json.dumps({"action": "query", "sql": planned.sql}))
        assert "error" not in json.loads(observation) and not terminated and not truncated
        rewards.append(reward)
    # a refusal is an observation, not an exception, and costs nothing
    observation, reward, terminated, truncated, info = env.step({"action": "query", "sql": "SELEC 1"})
    assert "not counted" in json.loads(observation)["error"] and (reward, terminated, truncated) == (0.0, False, False)
    observation, *_ = env.step("not json")
    assert "JSON object" in json.loads(observation)["error"]
    env.step({"action": "rank", "ranking": ranking})
    for index, hypothesis, stance in the_plan.pins:
        env.step({"action": "pin", "query": f"Q{index}", "hypothesis": label[hypothesis], "stance": stance})
    assert env.state()["status"]["queries_used"] == len(the_plan.queries)
    observation, reward, terminated, truncated, info = env.step({"action": "submit"})
    assert terminated and not truncated and set(rewards) == {0.0}
    assert reward == json.loads(observation)["total"] >= 80
    assert set(info["reward_parts"]) >= {"conclusion", "evidence", "pins"}
    # the session's own score: the transcript scores the same
    from game.rules.assess import score_session
    from game.session import load_transcript

    transcript = load_transcript(Path(info["transcript"]))
    assert score_session(transcript.incident, 0, transcript.events).total == pytest.approx(reward)
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"action": "status"})


def test_the_step_limit_truncates_an_unsubmitted_episode(library_cache: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    with IncidentEnv(INCIDENT, root=tmp_path, max_steps=2) as env:
        env.reset(seed=0)
        assert env.step({"action": "schema"})[3] is False
        _, reward, terminated, truncated, info = env.step({"action": "status"})
        assert (reward, terminated, truncated) == (0.0, False, True) and "step limit" in info["reason"]
        assert env.state()["status"]["state"] == "investigating"  # left unsubmitted: nothing scored


def test_actions_are_json_objects_naming_a_known_action() -> None:
    assert parse_action('{"action": "query", "sql": "SELECT 1"}') == ("query", {"sql": "SELECT 1"})
    for bad in ("[1]", '{"action": "drop"}', "{"):
        with pytest.raises(AgentError):
            parse_action(bad)

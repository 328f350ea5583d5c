"""`servedrill mcp` as an agent meets it: an MCP client from the official SDK starts the server as a subprocess
and plays a library incident end to end through its tools; the session is journalled and scored like a
human's, refusals are tool errors with the human's message, and nothing of the answer shows before submit."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from game import api
from game.cli.commands import main as cli

pytestmark = pytest.mark.slow  # builds (or reuses) a library incident's telemetry and worlds

INCIDENT = "one-slow-replica"
TOOLS = {"list_incidents", "start_session", "briefing", "schema", "query", "rank", "pin", "unpin", "note", "hint",
         "updates", "status", "submit", "debrief"}


@pytest.fixture(scope="module")
def data(library_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("mcp-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        mp.setenv("SERVEDRILL_DATA", str(folder))
        yield folder


def server_env() -> dict[str, str]:
    """What the server needs of the test's environment (the SDK starts it with a reduced one)."""
    return {k: v for k, v in os.environ.items() if k.startswith("SERVEDRILL_")}


class Player:
    """A thin MCP client: tool results as (is_error, structured result or error text)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def __call__(self, name: str, **arguments: Any) -> tuple[bool, Any]:
        result = await self.session.call_tool(name, arguments)
        text = "".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            return True, text
        return False, result.structured_content if result.structured_content is not None else json.loads(text)


async def play(data: Path) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "game.cli.commands", "mcp", "--player",
                                                                 "test-agent", "--data", str(data)],
                                   env=server_env())
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        seen["tools"] = {t.name: t for t in (await session.list_tools()).tools}
        call = Player(session)
        seen["no_game"] = await call("status")
        seen["library"] = await call("list_incidents")
        seen["unknown"] = await call("start_session", incident="no-such-incident")
        seen["start"] = await call("start_session", incident=INCIDENT, seed=0)
        seen["again"] = await call("start_session", incident=INCIDENT, seed=1)
        seen["schema"] = await call("schema")
        seen["early_debrief"] = await call("debrief")
        seen["bad_sql"] = await call("query", sql="SELEC 1")
        seen["refused"] = await call("query", sql="CREATE TABLE t (x INT)")
        seen["q1"] = await call("query", sql="SELECT replica, count(*) AS n FROM requests GROUP BY 1 ORDER BY 1")
        seen["q2"] = await call("query", sql="SELECT count(*) AS n FROM requests")
        board = [h["label"] for h in seen["start"][1]["hypotheses"]]
        seen["bad_rank"] = await call("rank", ranking={board[0]: 70, board[1]: 20})
        seen["rank"] = await call("rank", ranking={board[0]: 70, board[1]: 30})
        seen["pin"] = await call("pin", query=1, hypothesis=board[0], stance="supports")
        seen["bad_pin"] = await call("pin", query=9, hypothesis=board[0], stance="supports")
        seen["note"] = await call("note", hypothesis=board[1], text="looks even across replicas")
        seen["status"] = await call("status")
        seen["submit"] = await call("submit")
        seen["late_query"] = await call("query", sql="SELECT 1")
        seen["debrief"] = await call("debrief")
    return seen


@pytest.fixture(scope="module")
def seen(data: Path) -> dict[str, Any]:
    return anyio.run(play, data)


def test_the_tools_are_what_a_player_has(seen: dict[str, Any]) -> None:
    tools = seen["tools"]
    assert set(tools) == TOOLS
    assert set(tools["pin"].input_schema["properties"]) == {"query", "hypothesis", "stance"}
    assert tools["pin"].input_schema["properties"]["stance"]["enum"] == ["supports", "refutes"]
    assert tools["query"].input_schema["required"] == ["sql"]


def test_the_library_is_the_pickers(seen: dict[str, Any]) -> None:
    error, library = seen["library"]
    assert not error
    entry = next(e for e in library["incidents"] if e["id"] == INCIDENT)
    assert set(entry) == {"id", "title", "difficulty", "tags", "time_limit_s", "query_budget", "summary"}
    picker = next(e for e in api.library() if e.id == INCIDENT)
    assert entry["title"] == picker.title and entry["tags"] == picker.shown_tags


def test_refusals_are_tool_errors_with_the_players_message(seen: dict[str, Any]) -> None:
    assert seen["no_game"][0] and "call start_session first" in seen["no_game"][1]
    assert seen["unknown"][0] and "unknown incident 'no-such-incident'" in seen["unknown"][1]
    assert seen["again"][0] and "one session per connection" in seen["again"][1]
    assert seen["bad_rank"][0] and "confidences must sum to 100 percent" in seen["bad_rank"][1]
    assert seen["bad_pin"][0] and "no query Q9" in seen["bad_pin"][1]
    assert seen["late_query"][0] and "cannot run a query" in seen["late_query"][1]


def test_a_failed_statement_is_free(seen: dict[str, Any]) -> None:
    for key in ("bad_sql", "refused"):
        error, message = seen[key]
        assert error and "not counted" in message, message
    assert seen["q1"][1]["query"] == 1 and seen["q2"][1]["query"] == 2
    status = seen["status"][1]
    assert status["queries_used"] == 2 and [q["query"] for q in status["queries"]] == [1, 2]


def test_a_query_comes_back_as_a_human_sees_it(seen: dict[str, Any]) -> None:
    error, q1 = seen["q1"]
    assert not error
    assert q1["columns"] == ["replica", "n"] and q1["row_count"] == len(q1["rows"]) > 1
    assert q1["table"].splitlines()[0].split() == ["replica", "n"]
    assert q1["query_budget"] == seen["start"][1]["query_budget"]
    tables = {t["table"] for t in seen["schema"][1]["tables"]}
    assert "requests" in tables


def test_nothing_of_the_answer_before_submit(seen: dict[str, Any]) -> None:
    error, message = seen["early_debrief"]
    assert error and "the debrief opens once you submit" in message
    incident = api.load_variant(api.find_incident(INCIDENT), 0).incident
    before = json.dumps([seen[k][1] for k in ("library", "start", "schema", "q1", "rank", "pin", "status")])
    for h in incident.hypotheses:
        assert f'"{h.id}"' not in before  # labels and titles only; ids may name the cause
    assert '"true"' not in before and "mitigation" not in before
    board = seen["start"][1]["hypotheses"]
    assert [(h["label"], h["title"]) for h in board] == [(s.label, s.title) for s in api.load_variant(
        api.find_incident(INCIDENT), 0).board]


def test_the_session_is_journalled_and_scored_like_a_humans(seen: dict[str, Any], data: Path) -> None:
    error, debrief = seen["debrief"]
    assert not error, debrief
    assert debrief["submitted"] and {c["key"] for c in debrief["components"]} >= {"conclusion", "evidence", "pins"}
    assert "Q1" in debrief["debrief"]
    transcript = Path(debrief["transcript"])
    assert transcript.parent == data / "transcripts" and transcript.is_file()
    journal = data / "sessions" / f"{debrief['session_id']}.jsonl"
    assert journal.is_file()
    result = CliRunner().invoke(cli, ["score", str(transcript), "--json"])
    assert result.exit_code == 0, result.output
    scored = json.loads(result.output)
    assert scored["player"] == "test-agent" and scored["total"] == pytest.approx(debrief["total"])
    session = api.resume_session(journal)
    try:
        kinds = [e.kind for e in session.events]
        assert kinds.count("query") == 2 and "pin" in kinds and "note" in kinds and "submit" in kinds
        assert session.state == "debriefed"
    finally:
        session.close()

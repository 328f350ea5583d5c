"""`servedrill mcp`: the game as a Model Context Protocol server over stdio, for agents as players.

One process serves one connection and plays one session (`game.frontends.agent_play.AgentPlay`), built
on the official MCP Python SDK (`mcp.server.mcpserver.MCPServer`). The tools are exactly what a human player
has: list the incidents, start a session, read the briefing, list tables and columns, run a query, rank,
pin, unpin, note, take a hint, see updates and status, submit, and read the debrief once submitted. A
refusal is an MCP tool error (`isError`) carrying the message a human reads; a statement that fails is one
too, and costs nothing. The session is journalled like any other, so `servedrill watch`, `score` and
`replay` read it unchanged. docs/agents.md lists the tools with their schemas.

Each tool runs its game call in a worker thread: a query or the debrief's scoring may take seconds, and the
server keeps answering pings meanwhile.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from game.frontends.agent_play import AgentError, AgentPlay

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

SERVER_NAME = "servedrill"

INSTRUCTIONS = """\
You are the on-call engineer for a fleet of LLM inference servers. An incident is reported; its telemetry is
in a DuckDB database you read with SQL (read-only statements; a row cap, a time and a memory limit). Call
list_incidents, then start_session with an incident id and a seed. Read the briefing and the hypotheses
(labelled A, B, ...), list the tables with schema, and run queries to tell the hypotheses apart: each query
that runs is numbered Q1, Q2, ... and counts against the query budget; one that fails costs nothing. Rank
the hypotheses (percent, summing to 100), pin the queries that support or refute each, then submit. The score
(0..100) rewards a confident ranking that your evidence justifies, the rivals your queries ruled out and
pins that read their results right; it penalises idle queries, going over the budget and hints. After
submit, debrief shows the score and what happened."""

Hypothesis = Annotated[str, Field(description="A hypothesis: its board label (A, B, ...) or its title, or the "
                                               "start of exactly one title.")]
QueryIndex = Annotated[int, Field(description="A query's number: 3 for Q3.", ge=1)]
Stance = Annotated[Literal["supports", "refutes"], Field(description="How the query's result bears on the "
                                                                     "hypothesis.")]
Ranking = Annotated[dict[str, float], Field(description="Hypothesis (label or title) -> confidence in percent; "
                                                        "the confidences sum to 100. Unnamed hypotheses get 0.")]


def build_server(play: AgentPlay) -> MCPServer:
    """An MCP server whose tools play `play`'s one game."""
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=_version(), log_level="WARNING")

    async def call(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args))
        except AgentError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # an internal fault: say what, never a traceback to the agent
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise ToolError(f"internal error: {type(exc).__name__}: {first}") from exc

    @server.tool()
    async def list_incidents() -> dict[str, Any]:
        """The incident library as the picker shows it: id, title, difficulty (1-5), symptom tags, time
        limit, query budget and the report's summary."""
        return await call(play.incidents)

    @server.tool()
    async def start_session(
        incident: Annotated[str, Field(description="An incident id from list_incidents (may be left empty when "
                                                   "the server was started for one incident).")] = "",
        seed: Annotated[int | None, Field(description="The seed: picks the variant and its telemetry "
                                                      "(default 0, or the server's).", ge=0)] = None,
    ) -> dict[str, Any]:
        """Open the incident at the seed and start the investigation (one session per connection). Returns the
        briefing, the hypotheses (label, title), the query budget, the time limit and the row cap."""
        return await call(play.start, incident or None, seed)

    @server.tool()
    async def briefing() -> dict[str, Any]:
        """The briefing again, with the hypotheses and the limits."""
        return await call(play.briefing)

    @server.tool()
    async def schema() -> dict[str, Any]:
        """The telemetry's tables and their columns, with types and descriptions. Free: not a query."""
        return await call(play.schema)

    @server.tool()
    async def query(sql: Annotated[str, Field(description="One read-only SQL statement (DuckDB dialect): SELECT, "
                                                          "WITH, FROM, DESCRIBE, SUMMARIZE, EXPLAIN, ...")]
                    ) -> dict[str, Any]:
        """Run a statement on the telemetry. One that runs becomes the next Qn and counts against the budget
        (result: columns, rows up to the row cap, a text table); one that fails is an error and costs
        nothing."""
        return await call(play.query, sql)

    @server.tool()
    async def rank(ranking: Ranking) -> dict[str, Any]:
        """Set your ranking of the hypotheses (it may change until you submit)."""
        return await call(play.rank, ranking)

    @server.tool()
    async def pin(query: QueryIndex, hypothesis: Hypothesis, stance: Stance) -> dict[str, Any]:
        """Pin a query as evidence that supports or refutes a hypothesis (scored: a pin that reads the
        result right earns points, a wrong one costs them)."""
        return await call(play.pin, query, hypothesis, stance)

    @server.tool()
    async def unpin(query: QueryIndex, hypothesis: Hypothesis, stance: Stance) -> dict[str, Any]:
        """Take a pin off again: it no longer counts."""
        return await call(play.unpin, query, hypothesis, stance)

    @server.tool()
    async def note(hypothesis: Hypothesis,
                   text: Annotated[str, Field(description="The note's text.")]) -> dict[str, Any]:
        """Write a note on a hypothesis (kept in the transcript; not scored)."""
        return await call(play.note, hypothesis, text)

    @server.tool()
    async def hint() -> dict[str, Any]:
        """Take the next hint. It costs the points it names."""
        return await call(play.hint)

    @server.tool()
    async def updates() -> dict[str, Any]:
        """Every update received so far: the incident's timed updates, an interviewer's messages, hints."""
        return await call(play.updates)

    @server.tool()
    async def status() -> dict[str, Any]:
        """Where the game stands: state, queries used of the budget, the game clock, the hypotheses, your
        ranking, pins, notes and queries so far."""
        return await call(play.status)

    @server.tool()
    async def submit(ranking: Annotated[dict[str, float] | None,
                                        Field(description="The final ranking (as for rank); default: the "
                                                          "current one.")] = None) -> dict[str, Any]:
        """Submit your ranking: the investigation ends and nothing can change after it. Then call debrief."""
        return await call(play.submit, ranking)

    @server.tool()
    async def debrief() -> dict[str, Any]:
        """The score (total and its parts) and the debrief: what happened, what each query ruled out. Only
        after submit."""
        return await call(play.debrief)

    return server


def serve_stdio(play: AgentPlay) -> None:
    """Serve one connection on stdin and stdout until the client closes it, then close the game (an
    unfinished session stays resumable)."""
    import anyio

    server = build_server(play)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        play.close()


def server_command(python: str, *, player: str, incident: str | Path | None = None, seed: int | None = None,
                   data: Path | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """The argv that starts `servedrill mcp` with these options under the interpreter `python` (the
    game's command group as a module: no terminal app is imported). `env` is set by the argv itself
    (through env(1)): MCP clients start a stdio server with a reduced environment of their own choosing
    (the SDK's keeps only HOME, PATH and a few more), so settings such as $SERVEDRILL_CACHE must travel
    in the command."""
    prefix = [shutil.which("env") or "/usr/bin/env", *(f"{k}={v}" for k, v in sorted((env or {}).items()))]
    argv = [*(prefix if env else []), python, "-m", "game.cli.commands", "mcp", "--player", player]
    if incident is not None:
        argv += ["--incident", str(incident)]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if data is not None:
        argv += ["--data", str(data)]
    return argv


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("servedrill")
    except PackageNotFoundError:
        return "0"

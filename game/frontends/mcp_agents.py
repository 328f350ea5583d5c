"""Scripted agents that play over MCP: the autoplay strategies (`game.frontends.autoplay`) as MCP clients.

`python -m game.frontends.mcp_agents STRATEGY` is what `servedrill eval --agent builtin:STRATEGY` runs. Like
any agent under `servedrill eval`, it reads the server's command from $SERVEDRILL_MCP_SERVER (a JSON list),
spawns it with the SDK's stdio client, and plays one session through its tools. These are the baselines
and the test agents of an evaluation.

They SPOIL the incident: a plan is built from the incident's own file, answer key included (that is what
makes the expert an expert). The file is read here, in the agent, from $SERVEDRILL_EVAL_INCIDENT; nothing
of it comes over MCP, whose tools show what a human sees. Hypothesis ids in the plan become board labels
by their titles, as the server's board lists them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import ClientSession

    from game.frontends.autoplay import Plan

SERVER_ENV = "SERVEDRILL_MCP_SERVER"
"""A JSON list: the argv of the MCP server an agent under `servedrill eval` connects to."""
INCIDENT_ENV = "SERVEDRILL_EVAL_INCIDENT"
"""The incident (library id or file) of the episode; the server plays only this one."""
SEED_ENV = "SERVEDRILL_EVAL_SEED"
"""The seed of the episode; the server plays only this one."""
STRATEGIES = ("expert", "shotgun", "random", "lucky")


class ToolFailed(Exception):
    """An MCP tool call came back as an error; the message is the server's."""


async def call(session: ClientSession, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool; its structured result, or ToolFailed with the server's message."""
    result = await session.call_tool(name, dict(arguments or {}))
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.is_error:
        raise ToolFailed(text)
    if isinstance(result.structured_content, dict):
        return result.structured_content
    return dict(json.loads(text)) if text else {}


async def play_plan(session: ClientSession, the_plan: Plan, titles: Mapping[str, str]) -> dict[str, Any]:
    """Carry out an autoplay plan through the tools (as `autoplay.play` does on a session) and return the
    debrief. `titles` maps the plan's hypothesis ids to their titles."""
    started = await call(session, "start_session", {})
    label_of_title = {h["title"]: h["label"] for h in started["hypotheses"]}

    def label(hypothesis_id: str) -> str:
        return label_of_title[titles[hypothesis_id]]

    ranking = {label(h): share for h, share in the_plan.ranking}
    numbers: list[int | None] = []
    for i, planned in enumerate(the_plan.queries):
        if i == the_plan.rank_after:
            await call(session, "rank", {"ranking": ranking})
        try:
            ran = await call(session, "query", {"sql": planned.sql})
            numbers.append(int(ran["query"]))
        except ToolFailed:
            numbers.append(None)  # a failed statement costs nothing and cannot be pinned
    if the_plan.rank_after >= len(the_plan.queries):
        await call(session, "rank", {"ranking": ranking})
    for index, hypothesis, stance in the_plan.pins:
        number = numbers[index - 1] if 0 < index <= len(numbers) else None
        if number is not None:
            await call(session, "pin", {"query": number, "hypothesis": label(hypothesis), "stance": stance})
    await call(session, "submit", {"ranking": ranking})
    return await call(session, "debrief")


async def run_builtin(strategy: str, server: Sequence[str], incident: str, seed: int) -> dict[str, Any]:
    """Spawn the server `server` (argv), play `strategy` on `incident` at `seed`, return the debrief."""
    import numpy as np
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from game import api
    from game.frontends.autoplay import plan

    variant = api.load_variant(api.find_incident(incident), seed)
    the_plan = plan(variant.incident, strategy, np.random.default_rng(seed))
    titles = {h.id: h.title for h in variant.incident.hypotheses}
    params = StdioServerParameters(command=server[0], args=list(server[1:]))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await play_plan(session, the_plan, titles)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m game.frontends.mcp_agents STRATEGY`: play one episode under `servedrill eval`."""
    import anyio

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in STRATEGIES:
        print(f"usage: python -m game.frontends.mcp_agents {{{','.join(STRATEGIES)}}}", file=sys.stderr)
        return 2
    try:
        server = json.loads(os.environ[SERVER_ENV])
        incident, seed = os.environ[INCIDENT_ENV], int(os.environ[SEED_ENV])
    except (KeyError, ValueError) as exc:
        print(f"mcp_agents: run me under servedrill eval ({SERVER_ENV}, {INCIDENT_ENV}, {SEED_ENV}): {exc}",
              file=sys.stderr)
        return 2
    from game import api

    api.end_with_parent()  # an episode's task stopped by its fan-out (killed) takes its builtin agent with it
    result = anyio.run(run_builtin, args[0], server, incident, seed)
    print(json.dumps({"strategy": args[0], "total": result.get("total")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

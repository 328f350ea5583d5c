"""Agents as players: `servedrill mcp` (the game as an MCP server over stdio) and `servedrill eval` (agents
play episodes over MCP and are scored). docs/agents.md says how to connect an agent and read the results."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from game.cli.core import CommandError, GuardedCommand, emit
from game.cli.fanout_options import ray_option, require_ray

if TYPE_CHECKING:
    from game.frontends.eval_runner import EpisodeResult


@click.command("mcp", cls=GuardedCommand)
@click.option("--player", default="agent", show_default=True, help="The agent's name in the session and transcript.")
@click.option("--incident", default=None,
              help="Play only this incident (a library id or a file): start_session may then omit it.")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Play only this seed (default: the agent's choice, 0 if it names none).")
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Data folder for the session and transcript (default: $SERVEDRILL_DATA or the user's).")
def mcp_cmd(player: str, incident: str | None, seed: int | None, data_dir: Path | None) -> None:
    """Serve the game to an agent: a Model Context Protocol server on stdin/stdout, one session per
    connection, with the tools a human player has (docs/agents.md)."""
    from game import api
    from game.frontends.agent_play import AgentPlay
    from game.frontends.mcp_server import serve_stdio

    if incident is not None:
        api.load_variant(api.find_incident(incident), seed or 0)  # a bad incident fails here, not mid-session
    api.end_with_parent()  # a server whose client died has no one to answer
    serve_stdio(AgentPlay(player=player, root=data_dir, incident=incident, seed=seed))


@click.command("eval", cls=GuardedCommand)
@click.option("--agent", "agents", multiple=True, required=True,
              help="An agent: a shell command (an MCP client that starts the server named in "
                   "$SERVEDRILL_MCP_SERVER) or builtin:expert, builtin:shotgun, builtin:random, builtin:lucky. "
                   "Repeat to compare agents.")
@click.option("--incidents", default=None,
              help="Comma-separated incident ids or files (default: the whole library).")
@click.option("--seeds", default="0,1,2", show_default=True, help="Comma-separated seeds, or a range A-B.")
@click.option("--parallel", type=click.IntRange(min=1), default=None,
              help="Episodes run at once: local processes (default 1), or with --ray Ray tasks (default: one per "
                   "CPU of the cluster).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Wall-clock limit of one episode's agent, in seconds.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for the results, transcripts and each episode's logs and session.")
@ray_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def eval_cmd(agents: tuple[str, ...], incidents: str | None, seeds: str, parallel: int | None, timeout_s: float,
             out: Path, ray: str | None, as_json: bool) -> None:
    """Run agents on incidents and seeds over MCP, each episode on its own server session; score each
    session as `servedrill score` does and write a results table (docs/agents.md)."""
    from game import api
    from game.frontends.eval_runner import (
        Executor,
        LocalExecutor,
        RayExecutor,
        agent_argv,
        markdown_table,
        run_eval,
        summarize,
    )

    require_ray(ray)

    try:
        for agent in agents:
            agent_argv(agent)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    chosen = _incidents(incidents)
    for ref in chosen:
        api.find_incident(ref)
    seed_list = parse_seeds(seeds)

    def progress(r: EpisodeResult, done: int, total: int) -> None:
        if not as_json:
            click.echo(f"[{done}/{total}] {r.agent} {r.incident} seed {r.seed}: {r.status} {r.total:.1f} "
                       f"in {r.wall_s:.1f} s" + (" (timed out)" if r.timed_out else ""), err=True)

    executor: Executor = LocalExecutor(parallel or 1) if ray is None else RayExecutor(ray, parallel or 0)
    results = run_eval(list(agents), chosen, seed_list, out, timeout_s=timeout_s, executor=executor,
                       progress=progress)
    summary = summarize(results)
    if as_json:
        emit({"ok": True, "out": str(out), "summary": summary, "episodes": [r.row() for r in results]})
        return
    click.echo(markdown_table(summary))
    click.echo(f"Results: {out / 'results.md'}; transcripts in {out / 'transcripts'}")


def _incidents(spec: str | None) -> list[str]:
    if spec is None:
        from game import api

        return [e.id for e in api.library() if e.problem is None]
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    if not chosen:
        raise CommandError("--incidents names no incident")
    return chosen


def parse_seeds(spec: str) -> list[int]:
    """"0,1,2" or "0-4" (inclusive) into seeds."""
    seeds: list[int] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            if dash:
                seeds += range(int(low), int(high) + 1)
            else:
                seeds.append(int(part))
        except ValueError:
            raise CommandError(f"cannot read seeds {spec!r}: write 0,1,2 or 0-4") from None
    if not seeds or min(seeds) < 0:
        raise CommandError(f"cannot read seeds {spec!r}: write whole numbers of 0 or more, e.g. 0,1,2 or 0-4")
    return list(dict.fromkeys(seeds))


COMMANDS: tuple[click.Command, ...] = (mcp_cmd, eval_cmd)
"""The commands of this module, in the order `servedrill --help` lists them."""

__all__ = ["COMMANDS", "eval_cmd", "mcp_cmd", "parse_seeds"]

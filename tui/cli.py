"""The `servedrill` console script: every command of `game.cli.commands`, with `play` and `resume` opening
the Textual app (line mode with --plain) and `bench` also knowing the `tui` target.

The game's own play/resume/bench stay the line-mode and engine versions; this module wraps them, so the
dependency points tui -> game only. Its commands are module-level objects; `main` is a group of its own
(game.cli.commands.build_group), so importing this module changes no other group. Run as
`python -m tui.cli ...` or through the console script."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from game.cli.commands import GAME_COMMANDS, build_group
from game.cli.core import emit, fail
from game.cli.tool_commands import format_bench
from tui import cli_room, cli_watch

# The game's versions, which these wrap.
_GAME_PLAY = GAME_COMMANDS["play"]
_GAME_RESUME = GAME_COMMANDS["resume"]
_GAME_BENCH = GAME_COMMANDS["bench"]


@click.command("play")
@click.argument("incident", required=False)
@click.option("--seed", type=int, default=None,
              help="Seed of the variant and the telemetry (default 0; dealt with --random).")
@click.option("--random", "random_deal", is_flag=True,
              help="Deal a random library incident and seed (whichever of the two you did not give).")
@click.option("--player", default=None, help="Your name in sessions and transcripts (default $USER).")
@click.option("--plain", is_flag=True, help="Line mode on stdin/stdout instead of the terminal UI.")
@click.option("--library", multiple=True, hidden=True, type=click.Path(path_type=Path),
              help="The incident files listed in the picker instead of the library (what `serve --incidents` "
                   "passes on).")
@click.option("--ask-player", is_flag=True, hidden=True,
              help="Ask the player's name first (what `serve` passes on when it was given no --player).")
@click.pass_context
def play(ctx: click.Context, incident: str | None, seed: int | None, random_deal: bool, player: str | None,
         plain: bool, library: tuple[Path, ...], ask_player: bool) -> None:
    """Play an incident (a library id or a file). The terminal UI opens on the incident list with
    INCIDENT highlighted (default: one-slow-replica)."""
    from tui.serve_limits import served_app_setup

    served_app_setup()  # started by `serve`: end with the server
    if library and not plain:
        from tui.app import run

        run(incident, seed=0 if seed is None else seed, player=player, incidents=list(library),
            ask_player=ask_player)
        return
    if plain:
        ctx.invoke(_GAME_PLAY, incident=incident, seed=seed, random_deal=random_deal, player=player, plain=True)
        return
    from game.cli.game_commands import deal, incident_path

    def pick() -> tuple[str | None, int]:
        if random_deal:
            path, dealt = deal(incident, seed)
            click.echo(f"Dealt incident {path.stem} seed {dealt} "
                       f"(play it again: servedrill play {path.stem} --seed {dealt})", err=True)
            return str(path), dealt
        chosen = 0 if seed is None else seed
        return (str(incident_path(incident, chosen)) if incident else None), chosen

    ref, chosen = pick()  # an unknown or broken incident fails here, as one line (the group guards it)
    from tui.app import run

    run(ref, seed=chosen, player=player, ask_player=ask_player)


@click.command("resume")
@click.argument("session_id", required=False)
@click.option("--plain", is_flag=True, help="Line mode on stdin/stdout instead of the terminal UI.")
@click.option("--json", "as_json", is_flag=True, help="With no SESSION_ID: list as one JSON object.")
@click.pass_context
def resume(ctx: click.Context, session_id: str | None, plain: bool, as_json: bool) -> None:
    """Continue an unfinished session in the terminal UI; without an id, list them."""
    if session_id is None or plain:
        ctx.invoke(_GAME_RESUME, session_id=session_id, plain=plain, as_json=as_json)
        return
    from game import api

    path = api.find_session(session_id)  # an unknown id fails as one line (the group guards it)
    from tui.app import resume as resume_tui

    resume_tui(path)


@click.command("bench")
@click.argument("targets", nargs=-1)
@click.option("--runs", default=20, show_default=True, help="tui: queries timed through the interface.")
@click.option("--incident", default="one-slow-replica", show_default=True, help="tui: the incident to open.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def bench(ctx: click.Context, targets: tuple[str, ...], runs: int, incident: str, as_json: bool) -> None:
    """Measure speed and memory, or the engine model against published benchmarks (targets: engine,
    generate, tui, worlds, fidelity; default engine, generate and tui)."""
    from game.cli.bench import DEFAULT_TARGETS, TARGETS, run_target
    from tui.bench import format_tui, run_tui_bench

    known = (*TARGETS, "tui")
    chosen = targets or (*DEFAULT_TARGETS, "tui")
    unknown = [t for t in chosen if t not in known]
    if unknown:
        fail(f"unknown bench target {unknown[0]!r}; known: {', '.join(known)}", as_json=as_json)
    if "tui" not in chosen:
        ctx.invoke(_GAME_BENCH, targets=chosen, as_json=as_json)
        return
    results: dict[str, Any] = {}
    for target in chosen:
        results[target] = run_tui_bench(incident, runs=runs) if target == "tui" else run_target(target)
    if as_json:
        emit({"ok": all(r.get("ok") for r in results.values()), "results": results})
        return
    for target, result in results.items():
        click.echo(format_tui(result) if target == "tui" else format_bench(target, result))
    if not all(r.get("ok") for r in results.values()):
        sys.exit(1)


@click.command("serve")
@click.argument("incident", required=False)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback needs --public.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="TCP port.")
@click.option("--public", is_flag=True,
              help="Allow a non-loopback --host. Every tab gets the SQL console, without authentication.")
@click.option("--public-url", default=None,
              help="The URL browsers reach the server by, when it differs from what they typed (a proxy).")
@click.option("--incidents", "library", multiple=True, type=click.Path(path_type=Path),
              help="Incident file or folder for the picker instead of the library (repeatable).")
@click.option("--seed", type=int, default=None, help="Seed of every tab's variant and telemetry (default 0).")
@click.option("--random", "random_deal", is_flag=True,
              help="Deal each tab a random library incident and seed (whichever of the two you did not give).")
@click.option("--player", default=None,
              help="Name recorded in every tab's sessions; without it each tab asks its player's name.")
@click.option("--max-sessions", default=32, show_default=True, type=click.IntRange(1, 1000),
              help="Browser tabs (app processes) open at once; more are refused.")
@click.option("--gameday", "gameday_file", type=click.Path(path_type=Path), default=None,
              help="Serve a game day's rounds: players join by their roster links (servedrill gameday roster).")
@click.option("--round", "round_no", type=int, default=None,
              help="With --gameday: serve this round (default: the one the facilitator's console is running).")
@click.option("--warm", default=4, show_default=True, type=click.IntRange(0, 64),
              help="Spare app processes kept ready, forked from one that has imported the game, so a tab "
                   "starts without a fresh interpreter; 0: every tab starts its own (docs/serve.md).")
@click.option("--limit", "limits", multiple=True, metavar="NAME=VALUE",
              help="Change one of a tab's bounds (repeatable), e.g. idle_s=600 or app_rss_mb=1500; "
                   "docs/cli.md lists them.")
def serve(incident: str | None, host: str, port: int, public: bool, public_url: str | None,
          library: tuple[Path, ...], seed: int | None, random_deal: bool, player: str | None,
          max_sessions: int, gameday_file: Path | None, round_no: int | None, warm: int,
          limits: tuple[str, ...]) -> None:
    """Serve the terminal UI in a browser: each tab runs its own `servedrill play` (the picker,
    INCIDENT highlighted) and so its own session. Sessions go to $SERVEDRILL_DATA as usual."""
    from tui.serve import ServeError, app_command, check_host, library_files
    from tui.serve import serve as run_server
    from tui.serve_limits import DEFAULT_LIMITS, parse_limit

    try:
        warning = check_host(host, public)
        files = library_files(library)
        bounds = DEFAULT_LIMITS.replace(**dict(parse_limit(text) for text in limits))
    except (ServeError, ValueError) as exc:
        fail(str(exc))
        return
    gate = None
    if gameday_file is not None:
        from tui.serve_gameday import gate_for

        try:
            gate = gate_for(gameday_file, round_no, incident=incident, seed=seed, player=player,
                            random_deal=random_deal, library=files)
        except ValueError as exc:
            fail(str(exc))
    elif round_no is not None:
        fail("--round needs --gameday PLAN")
    if random_deal and files:
        fail("--random deals from the library; it does not combine with --incidents")
    if incident and not files:
        from game.cli.game_commands import incident_path

        incident_path(incident, 0 if seed is None else seed)  # fail now, not per tab
    elif incident and not Path(incident).is_file() and incident not in {p.stem for p in files}:
        from game import api

        if incident not in {e.id for e in api.library(files)}:
            fail(f"incident {incident!r} is not among the --incidents files")
    if warning:
        click.echo(warning, err=True)
    if gate is not None:
        from tui.serve_gameday import room_link

        room = room_link(gate, public_url or f"http://{'[' + host + ']' if ':' in host else host}:{port}")
        click.echo(f"servedrill: the live room, for the facilitator only (keep it private): {room}" if room else
                   "servedrill: no live room link: the roster has no facilitator token (hint: servedrill gameday "
                   "roster PLAN adds one, keeping every player's link)", err=True)
    command = app_command(incident=incident, seed=seed, player=player, random_deal=random_deal, library=files,
                          ask_player=player is None)
    try:
        run_server(command, host=host, port=port, public_url=public_url, max_sessions=max_sessions,
                   loopback_only=warning is None, limits=bounds, gate=gate, warm=warm)
    except OSError as exc:  # the port is taken, the address is not this machine's...
        fail(f"cannot serve on {host}:{port}: {exc.strerror or exc}")


@click.command("join")
@click.argument("link")
def join(link: str) -> None:
    """Play a served game-day round in this terminal: LINK is your personal link from the facilitator
    (http://HOST:PORT/?token=...). The game runs on the server, as in a browser tab."""
    import asyncio

    from tui.serve_join import JoinError, run

    if not sys.stdin.isatty():
        fail("servedrill join needs a terminal (hint: run it in a terminal, or open the link in a browser)")
    try:
        asyncio.run(run(link))
    except JoinError as exc:
        fail(str(exc))


main = build_group(play, resume, bench, serve, join, *cli_watch.COMMANDS,  # watch, send, report: the interviewer's side
                   cli_room.gameday_group())  # the game's gameday commands and the live room

__all__ = ["main"]

if __name__ == "__main__":
    main()

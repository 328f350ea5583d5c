"""Game-day commands for the `servedrill` CLI: `gameday check|roster|run|collect|submit|broadcast|review` and
`leaderboard`.

COMMANDS lists them; game.cli.commands assembles the group. With --json a command prints exactly one JSON
object (keys in docs/cli.md). Bad input gets one line per problem on stderr, in the form
`file:line:column: what is wrong (hint: ...)`, or {"ok": false, "error", "diagnostics"}, and exit
code 1, never a traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from game import api
from game.cli.core import CommandError, GuardedCommand, GuardedGroup, emit, fail


def _load(path: Path, as_json: bool) -> Any:
    """The game day at `path`; its problems (file:line:column, one a line) as a CommandError."""
    try:
        return api.load_gameday(path)
    except api.GameDayError as exc:
        lines = [str(d) for d in exc.diagnostics] or ["invalid game day"]
        raise CommandError(lines[0], diagnostics=lines, as_json=as_json) from None


@contextlib.contextmanager
def _results_folder() -> Iterator[None]:
    """Collecting and writing results: a file the system refuses is named, with what to check."""
    try:
        yield
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise CommandError(f"{where}{exc.strerror or exc} (hint: check the folder exists and you may write "
                           "to it)") from exc


@click.group("gameday", cls=GuardedGroup)
def gameday_group() -> None:
    """Run a game day: several teams, the same incidents, one leaderboard."""

@gameday_group.command("check")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check_cmd(file: Path, as_json: bool) -> None:
    """Check a gameday.yaml and that each round's incident loads with its seed."""
    gd = _load(file, as_json)
    if as_json:
        emit({"ok": True, **gd.to_dict(), "players": len(gd.players), "diagnostics": []})
        return
    click.echo(f"{file}: ok - {gd.event}: {len(gd.rounds)} rounds, {len(gd.teams)} teams, "
               f"{len(gd.players)} players")
    for r in gd.rounds:
        click.echo(f"  round {r.number}: {r.incident_id} seed {r.seed}, {r.time_limit_s / 60:g} min")
    click.echo(f"  results: {gd.results}")

@gameday_group.command("roster")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--url", default="http://127.0.0.1:8000", show_default=True,
              help="The address players reach `servedrill serve --gameday FILE` at.")
@click.option("--reissue", multiple=True, metavar="PLAYER",
              help="Give this player a new token (their old link stops working; repeatable).")
@click.option("--reissue-all", is_flag=True, help="New tokens for everyone.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def roster_cmd(file: Path, url: str, reissue: tuple[str, ...], reissue_all: bool, as_json: bool) -> None:
    """Give every roster player a secret token: write them (mode 0600) beside the plan, with the server's
    journal key, and print each player's browser link and terminal join command."""
    gd = _load(file, as_json)
    if not url.startswith(("http://", "https://")):
        fail(f"--url {url!r}: not an http:// or https:// address (hint: --url http://HOST:PORT)", as_json=as_json)
    try:
        roster = api.issue_roster(gd, reissue, reissue_all)
    except api.RosterError as exc:
        fail(str(exc), as_json=as_json)
        return
    players = [{"player": p, "team": gd.players[p], "link": roster.link(url, p),
                "join": roster.join_command(url, p)} for p in gd.players]
    if as_json:
        emit({"ok": True, "file": str(gd.path), "roster_file": str(roster.path), "key_file": str(roster.key_file),
              "server_dir": str(roster.server_dir), "url": url, "players": players, "room": roster.room_link(url)})
        return
    click.echo(f"roster: {roster.path} (mode 0600; keep it private)")
    click.echo(f"journal key: {roster.key_file} (mode 0600; only the server uses it)")
    click.echo(f"serve the game day with: servedrill serve --gameday {gd.path}")
    for entry in players:
        click.echo(f"  {entry['player']} ({entry['team']})")
        click.echo(f"    browser:  {entry['link']}")
        click.echo(f"    terminal: {entry['join']}")
    click.echo("Each link is that player's identity for the whole game day: hand it to them alone.")
    click.echo(f"live room (the facilitator's alone; a projector's browser): {roster.room_link(url)}")

@gameday_group.command("run")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--sessions", "sessions", multiple=True, type=click.Path(path_type=Path),
              help="Another SERVEDRILL_DATA folder to collect from (repeatable).")
def run_cmd(file: Path, sessions: tuple[Path, ...]) -> None:
    """The facilitator's console: start rounds, show join commands, call the time, collect."""
    from game.frontends.gameday_console import Console

    gd = _load(file, False)
    with _results_folder():
        Console(gd, api.data_folders(gd, sessions)).run()

@gameday_group.command("collect")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--round", "round_no", type=int, default=None, help="Only this round (default: all).")
@click.option("--sessions", "sessions", multiple=True, type=click.Path(path_type=Path),
              help="Another SERVEDRILL_DATA folder to collect from (repeatable).")
@click.option("--trust-players", is_flag=True,
              help="With a journal key: also collect unsigned journals (played outside the server), marked "
                   "unverified.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def collect_cmd(file: Path, round_no: int | None, sessions: tuple[Path, ...], trust_players: bool,
                as_json: bool) -> None:
    """Collect finished sessions into the results folder without the console. With the game day's journal
    key (servedrill gameday roster), only journals the server signed and that verify are collected."""
    gd = _load(file, as_json)
    rounds = _rounds(gd, round_no, as_json)
    folders = api.data_folders(gd, sessions)
    key = _key(gd, as_json)
    with _results_folder():
        done = api.hand_in(gd, rounds, folders, key=key, trust_players=trust_players)
    _report(gd, done, as_json, None, key)

@gameday_group.command("submit")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--player", required=True, help="Your player name, as in the game-day file.")
@click.option("--round", "round_no", type=int, default=None, help="Only this round (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def submit_cmd(file: Path, player: str, round_no: int | None, as_json: bool) -> None:
    """Hand in: copy your submitted sessions' transcripts into the game day's results folder."""
    gd = _load(file, as_json)
    if player not in gd.players:
        import difflib

        close = difflib.get_close_matches(player, list(gd.players), n=1)
        hint = f" (hint: did you mean {close[0]}?)" if close else ""
        fail(f"{file}: player '{player}' is on no team{hint}", as_json=as_json)
    rounds = _rounds(gd, round_no, as_json)
    folders = api.data_folders(gd, mine=True)
    key = _key(gd, as_json)
    with _results_folder():
        done = api.hand_in(gd, rounds, folders, player=player, key=key)
    _report(gd, done, as_json, player, key)

@gameday_group.command("broadcast")
@click.argument("file", type=click.Path(path_type=Path))
@click.argument("text")
@click.option("--round", "round_no", type=int, default=None, help="This round (default: the running one).")
@click.option("--from", "sender", default=None, help="Who it is from (default: Facilitator, and the plan's name).")
@click.option("--sessions", "sessions", multiple=True, type=click.Path(path_type=Path),
              help="Another SERVEDRILL_DATA folder the players play in (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def broadcast_cmd(file: Path, text: str, round_no: int | None, sender: str | None, sessions: tuple[Path, ...],
                  as_json: bool) -> None:
    """A message to every player in a round: it shows on each player's screen as an update. Only the account
    whose interviewer key the players' games take (in a served game day, the facilitator's) can send."""
    from game import api

    gd = _load(file, as_json)
    times = api.round_times(gd)
    if round_no is None:
        running = api.running_round(gd, times)
        if running is None:
            fail(f"{file}: no round is running (hint: start one in the console, or pass --round N)", as_json=as_json)
        rnd = running
    else:
        rnd = _rounds(gd, round_no, as_json)[0]
    try:
        done = api.broadcast(gd, rnd, api.data_folders(gd, sessions), text, sender=sender,
                             started=times[rnd.number][0])
    except api.GMError as exc:
        fail(f"not sent: {exc}", as_json=as_json)
        return
    if as_json:
        emit({"ok": True, **done.to_dict()})
        return
    for line in done.lines():
        click.echo(line)
    if done.refused and not done.delivered:
        raise SystemExit(1)

@gameday_group.command("review")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--html", "html", type=click.Path(path_type=Path), default=None,
              help="Write the review as one self-contained HTML page here.")
@click.option("--csv", "csv", type=click.Path(path_type=Path), default=None,
              help="Write the results (one row per player per round) as CSV here.")
@click.option("--parquet", "parquet", type=click.Path(path_type=Path), default=None,
              help="Write the results (one row per player per round) as Parquet here.")
@click.option("--trust-players", is_flag=True,
              help="With a journal key: review unsigned transcripts too, marked unverified.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def review_cmd(file: Path, html: Path | None, csv: Path | None, parquet: Path | None, trust_players: bool,
               as_json: bool) -> None:
    """The review after the game: each player's path per round side by side, what each query ruled out,
    their belief over time, the team's evidence map and the truth. Only the transcripts the leaderboard
    counts are reviewed (with the journal key: verified ones). FILE may also be one transcript (`.json`, an
    interview's): the same review of one candidate."""
    if file.suffix == ".json":
        try:
            review = api.transcript_review(file)
        except api.TranscriptError as exc:
            fail(str(exc), as_json=as_json)
            return
    else:
        gd = _load(file, as_json)
        if not gd.results.is_dir():
            fail(f"{file}: no results folder {gd.results} yet (hint: servedrill gameday collect {file})",
                 as_json=as_json)
        key = _key(gd, as_json)
        with _results_folder():
            review = api.game_day_review(gd, key=key, trust_players=trust_players)
    with _results_folder():
        written = api.write_review(review, html=html, csv=csv, parquet=parquet)
    for s in review.skipped:
        click.echo(f"notice: not reviewed {s['file']}: {s['reason']}", err=True)
    for n in review.notices:
        click.echo(f"notice: {n}", err=True)
    if as_json:
        emit({"ok": True, **review.to_dict(), "written": [str(p) for p in written]})
        return
    click.echo(api.review_text(review))
    for p in written:
        click.echo(f"wrote {p}")


@click.command("leaderboard", cls=GuardedCommand)
@click.argument("results_dir", type=click.Path(path_type=Path))
@click.option("--gameday", "gameday_file", type=click.Path(path_type=Path), default=None,
              help="Game-day file for the teams and round order (default: RESULTS_DIR/gameday.json).")
@click.option("--markdown", "markdown", type=click.Path(path_type=Path), default=None,
              help="Write a Markdown report here (and one SVG plot per incident next to it).")
@click.option("--html", "html", type=click.Path(path_type=Path), default=None,
              help="Write a self-contained HTML report here (inline SVG plots).")
@click.option("--trust-players", is_flag=True,
              help="With a journal key: count unsigned transcripts too, marked unverified.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def leaderboard_cmd(results_dir: Path, gameday_file: Path | None, markdown: Path | None, html: Path | None,
                    trust_players: bool, as_json: bool) -> None:
    """Rank every transcript in RESULTS_DIR: players and teams, per incident and overall."""
    if not results_dir.is_dir():
        fail(f"{results_dir}: no such folder (hint: give the game day's results folder)", as_json=as_json)
    gd = _load(gameday_file, as_json) if gameday_file is not None else None
    key = _key(gd, as_json) if gd is not None else None

    with _results_folder():
        board = api.leaderboard(results_dir, gd, key=key, trust_players=trust_players)
        written = api.write_leaderboard(board, markdown=markdown, html=html)
    for s in board.skipped:
        click.echo(f"notice: skipped {s['file']}: {s['reason']}", err=True)
    for n in board.notices:
        click.echo(f"notice: {n}", err=True)
    if as_json:
        emit({"ok": True, **board.to_dict(), "written": [str(p) for p in written]})
        return
    click.echo(api.board_text(board))
    for p in written:
        click.echo(f"wrote {p}")

COMMANDS: tuple[click.Command, ...] = (gameday_group, leaderboard_cmd,)
"""The commands of this module, in the order `servedrill --help` lists them."""



def _rounds(gd: Any, round_no: int | None, as_json: bool) -> list[Any]:
    if round_no is None:
        return list(gd.rounds)
    if not 1 <= round_no <= len(gd.rounds):
        fail(f"{gd.path}: no round {round_no} (hint: rounds are 1..{len(gd.rounds)})", as_json=as_json)
    return [gd.rounds[round_no - 1]]


def _key(gd: Any, as_json: bool) -> bytes | None:
    """The game day's journal key, None without one; a key file that cannot be used fails the command."""
    try:
        return api.journal_key(gd)
    except api.JournalKeyError as exc:
        fail(str(exc), as_json=as_json)
        return None


def _report(gd: Any, done: list[Any], as_json: bool, player: str | None, key: bytes | None) -> None:
    journals, notice = api.hand_in_terms(gd, done, key)
    if as_json:
        emit({"ok": True, "results": str(gd.results), "player": player,
              "team": gd.players.get(player) if player else None, "journals": journals, "notice": notice,
              "rounds": [c.to_dict() for c in done]})
        return
    # a notice when anything was taken on trust; a plain statement when every journal verified
    click.echo(("NOTE: " if journals != "signed" else "journals: ") + notice)
    for c in done:
        rnd = gd.rounds[c.round - 1]
        got = ", ".join(sorted(c.files)) or "nobody yet"
        new = f" (new: {', '.join(c.new)})" if c.new else ""
        click.echo(f"round {c.round} ({rnd.incident_id}): handed in: {got}{new}")
        for problem in c.problems:
            click.echo(f"  note: {problem}")
        for refused in c.refused:
            click.echo(f"  refused: {refused['file']} ({refused['player']}): {refused['reason']}")
    click.echo(f"results: {gd.results}")

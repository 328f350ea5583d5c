"""Game commands for the `servedrill` CLI: play, resume, score, replay, autoplay.

COMMANDS lists them; game.cli.commands assembles the group. With --json a command prints exactly one JSON
object (keys in docs/cli.md). Bad input gets one line on stderr (or {"ok": false, "error"}) and
exit code 1, never a traceback.
"""

from __future__ import annotations

import math
import os
import random
import sys
from pathlib import Path
from typing import Any, TypeVar

import click

from game import api
from game.cli.core import CommandError, GuardedCommand, emit
from game.cli.fanout_options import ray_option, require_ray

T = TypeVar("T")

STRATEGY_CHOICES = ("expert", "lucky", "random", "shotgun")
DEAL_SEEDS = 10_000
"""`play --random` deals a seed below this: short enough to read out as "incident X seed N"."""


def _incident(ref: str, seed: int) -> tuple[Any, Path]:
    """The incident `ref` (library id or file) as the variant of `seed`, and its resolved path."""
    variant = api.load_variant(api.find_incident(ref), seed)
    return variant.incident, variant.path


def incident_path(ref: str, seed: int) -> Path:
    """The resolved file of incident `ref` (library id or file), checked to load as the variant of `seed`.
    Raises IncidentError (with file:line diagnostics) when it does not."""
    return _incident(ref, seed)[1]


def deal(incident: str | None, seed: int | None, rng: random.Random | None = None) -> tuple[Path, int]:
    """(incident file, seed) for `play --random`: what the player fixed stays, the rest is dealt.

    The incident is drawn from the library incidents that load (as the variant of that seed), the
    seed from 0..DEAL_SEEDS-1.
    Raises CommandError when there is nothing to deal from.
    """
    rng = rng or random.SystemRandom()
    if seed is None:
        seed = rng.randrange(DEAL_SEEDS)
    if incident is not None:
        return _incident(incident, seed)[1], seed
    candidates = api.library_files()
    while candidates:
        path = rng.choice(candidates)
        try:
            api.load_variant(path, seed)
        except api.IncidentError:
            candidates.remove(path)  # broken files are `servedrill validate`'s business, not the player's
            continue
        return path.resolve(), seed
    raise CommandError("no library incident loads; nothing to deal (servedrill validate says why)")


def _player(name: str | None) -> str:
    return name or os.environ.get("USER") or "player"


def _play_plain(path: Path | None, seed: int, player: str, session_path: Path | None = None) -> None:
    from game.frontends.line_mode import PlainGame

    if session_path is not None:
        session = api.resume_session(session_path)
        for warning in session.warnings:
            click.echo(f"warning: {warning}", err=True)
        variant = api.variant_of(session)
    elif path is not None:
        variant = api.load_variant(path, seed)
        session = api.new_session(variant, player)
    else:
        raise CommandError("no incident or session to play")
    try:
        click.echo(f"Preparing telemetry for {variant.incident.id} (seed {variant.seed}); the first build "
                   "takes a while...", err=True)
        game = api.Game(variant, api.open_telemetry(variant), session)
        try:
            PlainGame.of(game, sys.stdin, sys.stdout).run()
        finally:
            game.telemetry.close()
    finally:
        session.close()


def _pick_incident(player: str = "") -> Path:
    """Line-mode picker: list the library, read a number or id from stdin (`history` and `debrief N` show
    the player's finished sessions first: game.frontends.line_mode.shelf_line)."""
    from game.frontends.line_mode import shelf_line

    library = api.library_files()
    if not library:
        raise CommandError("the incident library is empty; give an incident file: servedrill play --plain FILE")
    click.echo("Incidents:")
    for i, p in enumerate(library, start=1):
        click.echo(f"  {i:>2}. {p.stem}")
    while True:
        try:
            choice = input("Pick a number or id (history: your finished sessions): ").strip()
        except EOFError:
            raise CommandError("no incident picked (end of input)") from None
        if not shelf_line(choice, player or _player(None), sys.stdout):
            break
    if choice.isdigit() and 1 <= int(choice) <= len(library):
        return library[int(choice) - 1]
    return api.find_incident(choice)


def _compare(recorded: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """What differs between a recorded query result and a re-run (rows: the first ones kept)."""
    out = []
    for key in ("ok", "error", "columns", "row_count", "truncated"):
        if recorded.get(key) != fresh.get(key):
            out.append(f"{key}: {recorded.get(key)!r} -> {fresh.get(key)!r}")
    rows_a, rows_b = recorded.get("rows") or [], fresh.get("rows") or []
    if not _same(rows_a, rows_b[: len(rows_a)] if len(rows_b) >= len(rows_a) else rows_b):
        out.append("rows differ")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@click.command("play", cls=GuardedCommand)
@click.argument("incident", required=False)
@click.option("--seed", type=int, default=None,
              help="Seed of the variant and the telemetry (default 0; dealt with --random).")
@click.option("--random", "random_deal", is_flag=True,
              help="Deal a random library incident and seed (whichever of the two you did not give).")
@click.option("--player", default=None, help="Your name in the session and transcript (default $USER).")
@click.option("--plain", is_flag=True, help="Line mode on stdin/stdout instead of the TUI.")
def play_cmd(incident: str | None, seed: int | None, random_deal: bool, player: str | None,
             plain: bool) -> None:
    """Play an incident (library id or file), or a random one with --random."""
    if random_deal:
        path, chosen = deal(incident, seed)
        click.echo(f"Dealt incident {path.stem} seed {chosen} "
                   f"(play it again: servedrill play {path.stem} --seed {chosen})")
    else:
        chosen = 0 if seed is None else seed
        path = _incident(incident, chosen)[1] if incident else _pick_incident(_player(player))
    _play_plain(path, chosen, _player(player))

@click.command("resume", cls=GuardedCommand)
@click.argument("session_id", required=False)
@click.option("--plain", is_flag=True, help="Line mode on stdin/stdout instead of the TUI.")
@click.option("--json", "as_json", is_flag=True, help="With no SESSION_ID: list as one JSON object.")
def resume_cmd(session_id: str | None, plain: bool, as_json: bool) -> None:
    """Continue an unfinished session; without an id, list them."""
    if session_id is None:
        sessions = api.all_unfinished()
        if as_json:
            emit({"ok": True, "sessions": [s.to_dict() for s in sessions]})
            return
        if not sessions:
            click.echo("No unfinished sessions.")
            return
        for s in sessions:
            click.echo(f"{s.session_id:<48} {s.state:<13} {s.queries:>3} queries  {s.player}")
        click.echo("Resume one with: servedrill resume SESSION_ID")
        return
    path = api.find_session(session_id)
    _play_plain(None, 0, "", session_path=path)

@click.command("score", cls=GuardedCommand)
@click.argument("transcript", type=click.Path(path_type=Path))
@click.option("--incident", "incident_file", type=click.Path(path_type=Path), default=None,
              help="Incident file to score against (default: the one the transcript names).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--reveal", is_flag=True, help="Score a session that was not submitted (shows the answer).")
def score_cmd(transcript: Path, incident_file: Path | None, as_json: bool, reveal: bool) -> None:
    """Score a transcript: its queries' SQL is re-run on every hypothesis's world (nothing it records
    about their results is trusted)."""
    t = api.load_transcript(transcript, incident_file)
    _require_submitted(t, transcript, reveal)
    report = api.score_transcript(t)
    recorded = t.recorded_total
    if as_json:
        emit({"ok": True, "session_id": t.header.session_id, "incident": t.incident.id,
               "player": t.header.player, "seed": t.header.seed, "total": report.total,
               "recorded_total": recorded,
               "recorded_matches": None if recorded is None else math.isclose(recorded, report.total,
                                                                              abs_tol=0.05),
               "score": report.to_dict()})
    else:
        click.echo(f"{t.header.player} on {t.incident.id} (seed {t.header.seed})")
        if recorded is not None and not math.isclose(recorded, report.total, abs_tol=0.05):
            click.echo(f"the transcript says {recorded:.1f}; recomputed from its queries: "
                       f"{report.total:.1f}")
        click.echo(api.score_text(report, api.board(t.incident, t.header.seed)))

@click.command("replay", cls=GuardedCommand)
@click.argument("transcript", type=click.Path(path_type=Path))
@click.option("--incident", "incident_file", type=click.Path(path_type=Path), default=None,
              help="Incident file (default: the one the transcript names).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--reveal", is_flag=True,
              help="Replay a session that was not submitted (its score shows the answer).")
def replay_cmd(transcript: Path, incident_file: Path | None, as_json: bool, reveal: bool) -> None:
    """Re-run a transcript's queries on the incident database and re-score it."""
    result = replay(transcript, incident_file, reveal=reveal)
    if as_json:
        emit({"ok": True, **result})
        return
    click.echo(f"{result['queries']} queries re-run against {result['incident']} "
               f"(seed {result['seed']})")
    if result["telemetry_matches"] is False:
        click.echo(f"telemetry differs: recorded {result['telemetry_digest_recorded']}, "
                   f"now {result['telemetry_digest_now']}")
    for d in result["differences"]:
        click.echo(f"  Q{d['query']}: {'; '.join(d['changes'])}")
    click.echo("results match the transcript" if result["results_match"] else "results DIFFER")
    if result["recorded_total"] is None:
        click.echo(f"score: {result['total']:.1f} (the transcript records none)")
    else:
        click.echo(f"score: the transcript says {result['recorded_total']:.1f}, recomputed "
                   f"{result['total']:.1f}" + ("" if result["score_matches"] else " (DIFFERENT)"))

@click.command("autoplay", cls=GuardedCommand)
@click.argument("incident")
@click.option("--strategy", required=True, type=click.Choice(STRATEGY_CHOICES))
@click.option("--seed", default=0, show_default=True, help="Telemetry seed.")
@click.option("--player-seed", type=int, default=None, help="Random player's seed (default: --seed).")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also write a transcript.")
@click.option("--seeds", "sweep_seeds", default=None, metavar="SEEDS",
              help="A sweep: play every one of these seeds (0,1,2 or 0-9), each an independent game, and report "
                   "each score and their mean.")
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="--seeds: games at once in local processes (default: the cores available).")
@ray_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def autoplay_cmd(incident: str, strategy: str, seed: int, player_seed: int | None, out: Path | None,
                 sweep_seeds: str | None, jobs: int | None, ray: str | None, as_json: bool) -> None:
    """Let a scripted player (expert, lucky, random, shotgun) play an incident, and score it.

    This SPOILS the incident: the players are built from its answer key."""
    from game.frontends.autoplay import autoplay_session

    if sweep_seeds is not None or ray is not None or jobs is not None:
        _autoplay_sweep(incident, strategy, sweep_seeds, player_seed, out, jobs, ray, as_json)
        return

    session, report = autoplay_session(incident_path(incident, seed), seed, strategy, player_seed=player_seed)
    inc = session.incident
    written = str(api.export_transcript(session, to=out)) if out else None
    if not as_json:
        click.echo("Spoiler: autoplay players are built from the incident's answer key.", err=True)
    if as_json:
        emit({"ok": True, "incident": inc.id, "seed": seed, "strategy": strategy, "spoils": True,
               "queries": len(session.queries), "total": report.total, "score": report.to_dict(),
               "events": [e.to_dict() for e in session.events], "transcript": written})
        return
    click.echo(f"{strategy} on {inc.id} (seed {seed}): {len(session.queries)} queries")
    click.echo(api.score_text(report))
    if written:
        click.echo(f"Transcript: {written}")

def _autoplay_sweep(incident: str, strategy: str, seeds: str | None, player_seed: int | None, out: Path | None,
                    jobs: int | None, ray: str | None, as_json: bool) -> None:
    """`autoplay --seeds`: the games fanned out (game.frontends.autoplay_sweep), one line (or row) per seed."""
    from game.api.fanout import default_jobs
    from game.cli.agent_commands import parse_seeds
    from game.frontends.autoplay_sweep import sweep

    if seeds is None:
        raise CommandError("--jobs and --ray fan out a sweep: name its seeds with --seeds (e.g. --seeds 0-9)")
    if out is not None or player_seed is not None:
        raise CommandError("--out and --player-seed belong to one game: leave them out of a --seeds sweep")
    require_ray(ray)
    chosen = parse_seeds(seeds)
    incident_path(incident, chosen[0])  # a bad incident fails here, before anything is fanned out
    result = sweep(incident, chosen, strategy, jobs=jobs or (0 if ray else default_jobs()), ray=ray)
    ok = not result["failed"]
    if as_json:
        emit({"ok": ok, "incident": incident, "spoils": True, **result})
    else:
        click.echo("Spoiler: autoplay players are built from the incident's answer key.", err=True)
        for run in result["runs"]:
            click.echo(f"{strategy} on {incident} seed {run['seed']}: " + (
                f"FAILED {run['error'].splitlines()[-1]}" if run["error"] else
                f"{run['total']:.1f} with {run['queries']} queries ({run['seconds']:.1f} s)"))
        mean = "-" if result["mean"] is None else f"{result['mean']:.1f}"
        click.echo(f"mean {mean} over {len(chosen) - len(result['failed'])} of {len(chosen)} seeds in "
                   f"{result['wall_s']:.0f} s" + (f" on Ray at {ray}" if ray else ""))
    if not ok:
        sys.exit(1)


@click.command("history", cls=GuardedCommand)
@click.option("--player", default=None, help="Whose finished sessions (default $USER).")
@click.option("--all-players", is_flag=True, help="Every player's finished sessions in this data folder.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def history_cmd(player: str | None, all_players: bool, as_json: bool) -> None:
    """Your finished sessions, most recent first: incident, score, date, time taken, queries (the terminal's
    F4 history; `servedrill score TRANSCRIPT` re-scores one)."""
    from game.frontends.line_mode import history_text

    if all_players and player is not None:
        raise CommandError("--player and --all-players: give one of them")
    who = None if all_players else _player(player)
    past = api.history(who)
    if as_json:
        emit({"ok": True, "player": who, "sessions": [
            {"session_id": p.session_id, "incident": p.incident_id, "title": p.title, "player": p.player,
             "seed": p.seed, "started": p.started, "submitted": p.submitted, "taken_s": p.taken_s,
             "score": p.score, "solved": p.solved, "queries": p.queries, "transcript": str(p.transcript)}
            for p in past]})
        return
    click.echo(history_text(past, reopen="Reopen a debrief in the terminal (F4 in the picker), or in line mode "
                                         "(history, then debrief N)"))


COMMANDS: tuple[click.Command, ...] = (play_cmd, resume_cmd, history_cmd, score_cmd, replay_cmd, autoplay_cmd,)
"""The commands of this module, in the order `servedrill --help` lists them."""



def _require_submitted(t: Any, transcript: Path, reveal: bool) -> None:
    """Refuse to score a session that was not submitted unless `reveal`: the score names the true cause.
    Whether it was submitted is read from its events (the checked journal), not from what the file's
    `submission` field says."""
    if not reveal and not any(e.kind == "submit" for e in t.events):
        raise CommandError(f"{transcript}: the session was not submitted; its score would show the answer "
                      "(pass --reveal to score it anyway)")


def replay(transcript: Path, incident_file: Path | None = None, *, reveal: bool = False) -> dict[str, Any]:
    """Re-run every query of a transcript on a fresh gateway over the incident's database and re-score.
    An unsubmitted session is refused unless `reveal` (as `servedrill score` does).

    Returns the keys documented for `servedrill replay --json` (without "ok")."""
    t = api.load_transcript(transcript, incident_file)
    _require_submitted(t, transcript, reveal)
    replayed = api.replay_transcript(t)
    differences = []
    for run in replayed.reruns:
        changes = _compare(run.recorded, run.now)
        if changes:
            differences.append({"query": run.recorded["index"], "sql": run.recorded.get("sql"), "changes": changes})
    report = replayed.report
    recorded = t.recorded_total
    digest = replayed.telemetry_digest
    return {
        "session_id": t.header.session_id, "incident": t.incident.id, "seed": t.header.seed,
        "player": t.header.player, "queries": len(replayed.reruns),
        "telemetry_digest_recorded": t.telemetry_digest, "telemetry_digest_now": digest,
        "telemetry_matches": None if t.telemetry_digest is None else t.telemetry_digest == digest,
        "results_match": not differences, "differences": differences,
        "recorded_total": recorded, "total": report.total,
        "score_matches": None if recorded is None else math.isclose(recorded, report.total, abs_tol=0.05),
        "score": report.to_dict(),
    }

"""A game day as its files: the plan read and checked, the roster of player tokens issued, the players'
hand-ins collected into the results folder (verified with the game day's journal key when it has one), and
the leaderboard read from that folder and written as text, Markdown and HTML. `game.api` re-exports these
names; the CLI's `gameday check|roster|collect|submit` and `leaderboard` are written on them (the live
console's operations are `game.api.facilitator`'s).

The plan is `game.gameday.plan`'s, the roster `game.gameday.roster`'s, collecting `game.gameday.collect`'s and
the leaderboard `game.reports.leaderboard`'s. Their errors (`GameDayError` with file:line diagnostics,
`RosterError`, `JournalKeyError`) are loaded on first use through `game.api`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from game.gameday.collect import Collected
    from game.gameday.plan import GameDay, Round
    from game.gameday.roster import Roster
    from game.reports.leaderboard import Leaderboard

__all__ = ["board_text", "data_folders", "hand_in", "hand_in_terms", "issue_roster", "journal_key", "leaderboard",
           "load_gameday", "write_leaderboard"]


def load_gameday(path: Path | str) -> GameDay:
    """Read and check a game-day file, every round's incident loaded as the variant of its seed. Raises
    GameDayError listing every problem (file:line:column)."""
    from game.gameday.plan import load_gameday as load

    return load(path)


def issue_roster(gameday: GameDay, reissue: tuple[str, ...] = (), reissue_all: bool = False) -> Roster:
    """Give every player of `gameday` a secret token (new ones for `reissue`, or everyone): the roster and the
    server's journal key are written beside the plan (mode 0600). Raises RosterError."""
    from game.gameday.roster import make_roster

    return make_roster(gameday, reissue, reissue_all)


def data_folders(gameday: GameDay, extra: Iterable[Path] = (), *, mine: bool = False) -> list[Path]:
    """The players' data folders to collect hand-ins from: `extra`, the plan's `data`, and this user's own
    (when `mine`, or when nothing else is given); each once."""
    from game.session import data_dir

    folders = list(extra)
    if gameday.data is not None:
        folders.append(gameday.data)
    if mine or not folders:
        folders.append(data_dir())
    return list(dict.fromkeys(folders))


def journal_key(gameday: GameDay) -> bytes | None:
    """The game day's journal key (written by `issue_roster`), None when it has none. Raises JournalKeyError
    (one line) when the key file is there but cannot be used."""
    from game.gameday.collect import journal_key as key_of

    return key_of(gameday)


def hand_in(gameday: GameDay, rounds: Sequence[Round], folders: Iterable[Path], *, player: str | None = None,
            key: bytes | None = None, trust_players: bool = False) -> list[Collected]:
    """Collect (and score) the submitted sessions of `rounds` from `folders` into the results folder: only
    `player`'s when given; with `key`, only journals the game-day server signed and that verify (unsigned ones
    too, marked unverified, with `trust_players`). A round's start as the console recorded it leaves earlier
    sessions out as practice. Idempotent."""
    from game.gameday.collect import collect_round, journals, read_state, round_times, write_state

    state = read_state(gameday.results)
    if not state:  # the leaderboard reads the teams and the round order from it
        write_state(gameday, {})
    folders = list(folders)
    found = journals(folders)
    return [collect_round(gameday, r, folders, started=round_times(state, r.number)[0], only=player, found=found,
                          key=key, trust_players=trust_players) for r in rounds]


def hand_in_terms(gameday: GameDay, collected: Iterable[Collected], key: bytes | None) -> tuple[str, str]:
    """On what terms hand-ins were taken: ("trusted" | "signed" | "signed+trusted", a sentence saying so)."""
    from game.gameday.collect import TRUST_NOTICE
    from game.session.signing import key_file_for

    if key is None:
        return "trusted", TRUST_NOTICE
    if any(c.trusted for c in collected):
        return "signed+trusted", "unsigned journals were taken on the players' word (--trust-players)"
    return "signed", f"only journals signed by the game-day server and verified with {key_file_for(gameday.path)}"


def leaderboard(results_dir: Path, gameday: GameDay | None = None, *, key: bytes | None = None,
                trust_players: bool = False) -> Leaderboard:
    """Read, score and rank every transcript in `results_dir` (teams and round order from `gameday`, else the
    folder's gameday.json); with `key`, unsigned transcripts are skipped unless `trust_players`."""
    from game.reports.leaderboard import read_results

    return read_results(results_dir, gameday, key=key, trust_players=trust_players)


def board_text(board: Leaderboard) -> str:
    """The leaderboard as plain text for a terminal."""
    from game.reports.leaderboard_report import format_text

    return format_text(board)


def write_leaderboard(board: Leaderboard, *, markdown: Path | None = None, html: Path | None = None) -> list[Path]:
    """Write the leaderboard as Markdown (with one SVG plot per incident beside it) and as one self-contained
    HTML page, each when its path is given; returns the files written. Raises OSError."""
    from game.reports.leaderboard_report import render_html, write_markdown

    written = write_markdown(board, markdown) if markdown else []
    if html:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_html(board), encoding="utf-8")
        written.append(html)
    return written

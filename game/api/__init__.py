"""The game as every front end plays it: the terminal and the browser (`tui/`; `servedrill serve` runs the
same app), line mode and the facilitator's console (`game.frontends`), and the CLI (`game.cli`). A front end
calls this package and nothing below it at run time (tests/test_layers.py); it may name lower modules'
types under `if TYPE_CHECKING:` so that the seams are typed.

The rules a front end must not get to choose live here or below, once:

- **The seed picks the variant and the telemetry.** `load_variant` is where an incident is loaded for play,
  always at a seed; `open_telemetry` takes that `Variant`, not a seed of its own, so a database cannot be
  built for another variant than the one the player reads. Sessions load their incident the same way
  (`game.session`), so the briefing, the board, the telemetry and the debrief agree.
- **A statement that fails costs nothing** (`Session.run_query`, reached through `run_query`): refused, a
  SQL error, a timeout or a cancel is shown and not recorded, so it takes no query from the budget and gets
  no Qn.
- **One set of query limits** (`PLAYER_LIMITS`, `ROW_CAP`) unless a caller passes others on purpose.
- **One telemetry schema** (`TABLE_COLUMNS`): the tables and columns a player may query.
- **What a player may see before opening an incident**, when a topic may be named, what counts as solved
  (`shelf`).

Its parts, each re-exported here:

- `play`: one game: the library, the variant, the telemetry, the session and every action on it (also as
  the `Game` object), the mitigation after the diagnosis (`act`, `mitigation_actions`, `mitigation_score`,
  `prepare_mitigation`: docs/mitigation.md), the debrief;
- `shelf`: the library as the picker shows it and the player's record (unfinished sessions, best scores,
  saved queries);
- `review`: a game read back: a transcript loaded, scored again, replayed on fresh telemetry; a score as text;
  every unfinished session on the machine;
- `telemetry`: the telemetry outside a game: a variant's tables as Parquet, and (for authors; it spoils the
  answer) the worlds of its hypotheses to query;
- `journal`: a session's record as the agents read it (its state, its pins, a hand-in's score);
- `interviewer`: following a candidate's session, sending into it, the interview report;
- `facilitator`: a game day's rounds, collecting hand-ins, the standings (the live console's), a message to
  every player in a round;
- `gameday`: a game day as its files: the plan checked, the roster issued, hand-ins collected with the journal
  key, the leaderboard read and written (the CLI's `gameday` and `leaderboard`).
- `postgame`: the review after a game day (or an interview): each player's path side by side, the team's
  evidence map, the debrief's truth, the results as rows (HTML, CSV, Parquet);
- `room`: the facilitator's live room: a round's snapshot for a projector (players' statuses, the standings,
  never a score or the answer while the round runs) and the round operations the console shares (start, end,
  a word to one player);
- `rounds`: the clock a player's screen shows (the round's in a game-day round), its warnings at 5 and 1
  minutes left, TIME UP (a round hands the board in), and the debrief held until the round ends.

Heavy modules (pydantic, DuckDB, the simulator) are imported inside the calls: the terminal imports this
package before its first paint. So are the errors of the session and the interviewer's channel
(`SessionError`, `GMError`), of a transcript (`TranscriptError`) and of a game day's files (`GameDayError`,
`RosterError`, `JournalKeyError`), loaded on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from game.api.facilitator import (
    RoundTimes,
    broadcast,
    collect_round,
    leaderboard_text,
    round_gate,
    round_standings,
    round_times,
    save_round_times,
)
from game.api.gameday import (
    board_text,
    data_folders,
    hand_in,
    hand_in_terms,
    issue_roster,
    journal_key,
    leaderboard,
    load_gameday,
    write_leaderboard,
)
from game.api.interviewer import (
    Sent,
    candidate_clock,
    interview_report,
    look,
    render_report,
    send,
    watch,
    write_interview_report,
)
from game.api.journal import (
    active_pins,
    handed_in,
    investigating,
    score_hand_in,
    sessions_folder,
    started_on,
    transcripts_folder,
)
from game.api.play import (
    PLAYER_LIMITS,
    ROW_CAP,
    TABLE_COLUMNS,
    Acted,
    BuildProgress,
    Debrief,
    Game,
    IncidentError,
    PastDebrief,
    QueryLimits,
    Ran,
    Runs,
    ScoringProgress,
    Telemetry,
    Truth,
    Variant,
    act,
    board,
    build_worlds,
    cancel,
    catalog,
    debrief,
    end_with_parent,
    export_transcript,
    find_incident,
    glance,
    heartbeat,
    hint,
    library,
    load_variant,
    mitigation_actions,
    mitigation_score,
    new_session,
    note,
    open_game,
    open_telemetry,
    past_debrief,
    pin,
    prefork_query_worker,
    prepare_mitigation,
    rank,
    read_span,
    resume_game,
    resume_session,
    run_query,
    save_draft,
    snippets,
    start,
    submit,
    truth,
    unpin,
    updates,
    variant_of,
)
from game.api.postgame import REVIEW_BUDGET_S, game_day_review, review_text, transcript_review, write_review
from game.api.review import (
    Replayed,
    Rerun,
    all_unfinished,
    load_transcript,
    replay_transcript,
    score_text,
    score_transcript,
)
from game.api.room import (
    TIME_UP_SETTLE_S,
    RoomError,
    RoomPlayer,
    RoomStanding,
    RoomState,
    end_round,
    next_round,
    room_state,
    round_left,
    running_round,
    send_to_player,
    start_round,
)
from game.api.rounds import (
    WARN_AT_S,
    Clock,
    DebriefHold,
    TimeNotice,
    TimeWarnings,
    debrief_hold,
    player_clock,
    round_clock,
    round_library,
    round_limits_text,
    time_up,
)
from game.api.shelf import (
    SAVED_NAME_CHARS,
    SOLVED_SCORE,
    Coverage,
    LibraryEntry,
    Met,
    PastSession,
    PlayerRecord,
    briefing_entry,
    by_difficulty,
    coverage,
    filter_library,
    find_session,
    forget_query,
    history,
    incident_of_the_day,
    library_files,
    met,
    new_to_player,
    pin_count,
    player_record,
    preselected,
    random_incident,
    save_query,
    saved_queries,
    session_entry,
    sessions,
    solved,
    teaches,
    unfinished_sessions,
)
from game.api.team import team_line, team_news, team_of
from game.api.telemetry import TRUTH_WORLD, Exported, export_parquet, open_world, world_names

if TYPE_CHECKING:
    from game.gameday.gate import Refused as RoundRefused
    from game.gameday.gm import GMError
    from game.gameday.plan import GameDayError
    from game.gameday.roster import RosterError
    from game.session import SessionError, TranscriptError
    from game.session.signing import KeyError_ as JournalKeyError

__all__ = [
    "PLAYER_LIMITS",
    "REVIEW_BUDGET_S",
    "ROW_CAP",
    "SAVED_NAME_CHARS",
    "SOLVED_SCORE",
    "TABLE_COLUMNS",
    "TIME_UP_SETTLE_S",
    "TRUTH_WORLD",
    "WARN_AT_S",
    "Acted",
    "BuildProgress",
    "Clock",
    "Coverage",
    "Debrief",
    "DebriefHold",
    "Exported",
    "GMError",
    "Game",
    "GameDayError",
    "IncidentError",
    "JournalKeyError",
    "LibraryEntry",
    "Met",
    "PastDebrief",
    "PastSession",
    "PlayerRecord",
    "QueryLimits",
    "Ran",
    "Replayed",
    "Rerun",
    "RoomError",
    "RoomPlayer",
    "RoomStanding",
    "RoomState",
    "RosterError",
    "RoundRefused",
    "RoundTimes",
    "Runs",
    "ScoringProgress",
    "Sent",
    "SessionError",
    "Telemetry",
    "TimeNotice",
    "TimeWarnings",
    "TranscriptError",
    "Truth",
    "Variant",
    "act",
    "active_pins",
    "all_unfinished",
    "board",
    "board_text",
    "briefing_entry",
    "broadcast",
    "build_worlds",
    "by_difficulty",
    "cancel",
    "candidate_clock",
    "catalog",
    "collect_round",
    "coverage",
    "data_folders",
    "debrief",
    "debrief_hold",
    "end_round",
    "end_with_parent",
    "export_parquet",
    "export_transcript",
    "filter_library",
    "find_incident",
    "find_session",
    "forget_query",
    "game_day_review",
    "glance",
    "hand_in",
    "hand_in_terms",
    "handed_in",
    "heartbeat",
    "hint",
    "history",
    "incident_of_the_day",
    "interview_report",
    "investigating",
    "issue_roster",
    "journal_key",
    "leaderboard",
    "leaderboard_text",
    "library",
    "library_files",
    "load_gameday",
    "load_transcript",
    "load_variant",
    "look",
    "met",
    "mitigation_actions",
    "mitigation_score",
    "new_session",
    "new_to_player",
    "next_round",
    "note",
    "open_game",
    "open_telemetry",
    "open_world",
    "past_debrief",
    "pin",
    "pin_count",
    "player_clock",
    "player_record",
    "prefork_query_worker",
    "prepare_mitigation",
    "preselected",
    "random_incident",
    "rank",
    "read_span",
    "render_report",
    "replay_transcript",
    "resume_game",
    "resume_session",
    "review_text",
    "room_state",
    "round_clock",
    "round_gate",
    "round_left",
    "round_library",
    "round_limits_text",
    "round_standings",
    "round_times",
    "run_query",
    "running_round",
    "save_draft",
    "save_query",
    "save_round_times",
    "saved_queries",
    "score_hand_in",
    "score_text",
    "score_transcript",
    "send",
    "send_to_player",
    "session_entry",
    "sessions",
    "sessions_folder",
    "snippets",
    "solved",
    "start",
    "start_round",
    "started_on",
    "submit",
    "teaches",
    "team_line",
    "team_news",
    "team_of",
    "time_up",
    "transcript_review",
    "transcripts_folder",
    "truth",
    "unfinished_sessions",
    "unpin",
    "updates",
    "variant_of",
    "watch",
    "world_names",
    "write_interview_report",
    "write_leaderboard",
    "write_review",
]


def __getattr__(name: str) -> Any:
    """The errors a front end catches, loaded on first use (game.session costs half a second to import,
    which the terminal does not pay before its first paint)."""
    if name == "SessionError":
        from game.session import SessionError as session_error

        return session_error
    if name == "TranscriptError":
        from game.session import TranscriptError as transcript_error

        return transcript_error
    if name == "GMError":
        from game.gameday.gm import GMError as gm_error

        return gm_error
    if name == "GameDayError":
        from game.gameday.plan import GameDayError as gameday_error

        return gameday_error
    if name == "RosterError":
        from game.gameday.roster import RosterError as roster_error

        return roster_error
    if name == "JournalKeyError":
        from game.session.signing import KeyError_ as journal_key_error

        return journal_key_error
    if name == "RoundRefused":
        from game.gameday.gate import Refused as round_refused

        return round_refused
    raise AttributeError(f"module 'game.api' has no attribute {name!r}")

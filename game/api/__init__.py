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
- **What a player may see before opening an incident**, when a topic may be named, what counts as solved
  (`shelf`).

Its parts, each re-exported here:

- `play`: one game: the library, the variant, the telemetry, the session and every action on it (also as
  the `Game` object), the debrief;
- `shelf`: the library as the picker shows it and the player's record (unfinished sessions, best scores);
- `interviewer`: following a candidate's session, sending into it, the interview report;
- `facilitator`: a game day's rounds, collecting hand-ins, the standings;
- `rounds`: the clock a player's screen shows (the round's in a game-day round), its warnings at 5 and 1
  minutes left, TIME UP (a round hands the board in), and the debrief held until the round ends.

Heavy modules (pydantic, DuckDB, the simulator) are imported inside the calls: the terminal imports this
package before its first paint. So are the errors of the session and the interviewer's channel
(`SessionError`, `GMError`), loaded on first use."""

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
    BuildProgress,
    Debrief,
    Game,
    IncidentError,
    QueryLimits,
    Ran,
    Runs,
    ScoringProgress,
    Telemetry,
    Truth,
    Variant,
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
    new_session,
    note,
    open_game,
    open_telemetry,
    pin,
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
    SOLVED_SCORE,
    Coverage,
    LibraryEntry,
    PlayerRecord,
    briefing_entry,
    by_difficulty,
    coverage,
    filter_library,
    find_session,
    incident_of_the_day,
    library_files,
    pin_count,
    player_record,
    preselected,
    random_incident,
    session_entry,
    sessions,
    teaches,
    unfinished_sessions,
)

if TYPE_CHECKING:
    from game.gameday.gate import Refused as RoundRefused
    from game.gameday.gm import GMError
    from game.session import SessionError

__all__ = [
    "PLAYER_LIMITS",
    "ROW_CAP",
    "SOLVED_SCORE",
    "WARN_AT_S",
    "BuildProgress",
    "Clock",
    "Coverage",
    "Debrief",
    "DebriefHold",
    "GMError",
    "Game",
    "IncidentError",
    "LibraryEntry",
    "PlayerRecord",
    "QueryLimits",
    "Ran",
    "RoundRefused",
    "RoundTimes",
    "Runs",
    "ScoringProgress",
    "Sent",
    "SessionError",
    "Telemetry",
    "TimeNotice",
    "TimeWarnings",
    "Truth",
    "Variant",
    "active_pins",
    "board",
    "briefing_entry",
    "broadcast",
    "build_worlds",
    "by_difficulty",
    "cancel",
    "candidate_clock",
    "catalog",
    "collect_round",
    "coverage",
    "debrief",
    "debrief_hold",
    "end_with_parent",
    "export_transcript",
    "filter_library",
    "find_incident",
    "find_session",
    "glance",
    "handed_in",
    "heartbeat",
    "hint",
    "incident_of_the_day",
    "interview_report",
    "investigating",
    "leaderboard_text",
    "library",
    "library_files",
    "load_variant",
    "look",
    "new_session",
    "note",
    "open_game",
    "open_telemetry",
    "pin",
    "pin_count",
    "player_clock",
    "player_record",
    "preselected",
    "random_incident",
    "rank",
    "read_span",
    "render_report",
    "resume_game",
    "resume_session",
    "round_clock",
    "round_gate",
    "round_library",
    "round_limits_text",
    "round_standings",
    "round_times",
    "run_query",
    "save_draft",
    "save_round_times",
    "score_hand_in",
    "send",
    "session_entry",
    "sessions",
    "sessions_folder",
    "snippets",
    "start",
    "started_on",
    "submit",
    "teaches",
    "time_up",
    "transcripts_folder",
    "truth",
    "unfinished_sessions",
    "unpin",
    "updates",
    "variant_of",
    "watch",
    "write_interview_report",
]


def __getattr__(name: str) -> Any:
    """The errors a front end catches, loaded on first use (game.session costs half a second to import,
    which the terminal does not pay before its first paint)."""
    if name == "SessionError":
        from game.session import SessionError as session_error

        return session_error
    if name == "GMError":
        from game.gameday.gm import GMError as gm_error

        return gm_error
    if name == "RoundRefused":
        from game.gameday.gate import Refused as round_refused

        return round_refused
    raise AttributeError(f"module 'game.api' has no attribute {name!r}")

"""A game read back after it was played: a transcript loaded and checked, scored again, its queries re-run on
fresh telemetry of its variant; a score as text; every unfinished session on this machine. `game.api`
re-exports these names; the CLI's `score`, `replay`, `autoplay` and `resume` are written on them.

A score is never read from what a transcript recorded about its results: `score_transcript` and
`replay_transcript` re-run the recorded SQL on every hypothesis's world, as the debrief does."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from game.query.limits import PLAYER_LIMITS

if TYPE_CHECKING:
    from game.rules.scoring import ScoreReport
    from game.session import Event, SessionSummary, Transcript
    from game.session.hypotheses import Shown

__all__ = ["Replayed", "Rerun", "all_unfinished", "load_transcript", "replay_transcript", "score_text",
           "score_transcript"]


def load_transcript(path: Path | str, incident_path: Path | str | None = None) -> Transcript:
    """Read and check a transcript: its events pass the session's rules again, and its incident (the file
    `incident_path`, else the one it names) still has the recorded digest and is loaded as the variant of its
    seed. Raises TranscriptError (one line naming the file and the problem)."""
    from game.session import load_transcript as load

    return load(path, incident_path=incident_path)


def score_transcript(transcript: Transcript) -> ScoreReport:
    """The transcript's score, its queries' SQL re-run on every hypothesis's world (nothing it records about
    their results is trusted). Scores whatever state it is in: the caller decides whether an unsubmitted
    session may be scored (its score names the answer)."""
    from game.rules.assess import score_session

    return score_session(transcript.incident, transcript.header.seed, transcript.events)


def score_text(report: ScoreReport, board: Sequence[Shown] | None = None) -> str:
    """The score report as text, naming each hypothesis by its label and title on `board` (the board the
    player saw: `Variant.board`, `api.board`) or, without one, by its id."""
    from game.rules.scoring import format_report

    return format_report(report, None if board is None else {h.id: f"{h.label} {h.title}" for h in board})


@dataclass(frozen=True)
class Rerun:
    """One recorded query and what it gives now: each its query event's data (the Qn, the SQL and the result
    as the journal keeps it), `now` as JSON would carry it."""

    recorded: dict[str, Any]
    now: dict[str, Any]


@dataclass(frozen=True)
class Replayed:
    """A transcript's queries re-run on the telemetry of its variant, built (or found in the cache) now, and
    the session scored on those runs."""

    telemetry_digest: str
    """The digest of the database the queries re-ran on (to set beside the one the transcript recorded)."""
    reruns: tuple[Rerun, ...]
    report: ScoreReport


def replay_transcript(transcript: Transcript) -> Replayed:
    """Re-run every query of `transcript` through a player's gateway (`PLAYER_LIMITS`) on its variant's
    telemetry, and score the session with each query's data as it ran now. Slow when the database or the
    worlds are not built yet."""
    from game.query.sandbox import Gateway
    from game.rules.assess import score_session
    from game.session import QUERY, Event, query_event_data
    from telemetry_gen.cache import ensure_database

    build = ensure_database(transcript.incident, transcript.header.seed)
    reruns: list[Rerun] = []
    events: list[Event] = []
    with Gateway(Path(build.path), memory_limit=PLAYER_LIMITS.memory_limit, row_cap=PLAYER_LIMITS.row_cap,
                 timeout_s=PLAYER_LIMITS.timeout_s) as gateway:
        for e in transcript.events:
            if e.kind != QUERY:
                events.append(e)
                continue
            fresh = query_event_data(gateway.run(str(e.data.get("sql", ""))), int(e.data["index"]))
            # as a transcript would carry it (timestamps as text), so that it compares with what was recorded
            fresh = json.loads(json.dumps(fresh, default=str))
            reruns.append(Rerun(e.data, fresh))
            events.append(Event(e.seq, e.time, e.kind, fresh))
    report = score_session(transcript.incident, transcript.header.seed, events)
    return Replayed(build.digest, tuple(reruns), report)


def all_unfinished(root: Path | None = None) -> list[SessionSummary]:
    """Every player's sessions under `root` (default: the data folder) not yet debriefed, most recent first,
    whether or not another process holds them (`unfinished_sessions` is one player's, to continue here)."""
    from game.session import list_unfinished

    return list_unfinished(root)

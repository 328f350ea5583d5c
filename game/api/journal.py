"""A session's record as the agents' front ends read it (`game.frontends.agent_play`, the evaluation runner):
its state, its pins, where its journal and transcript live, the telemetry it started on, and the score of a
hand-in read back from its journal. `game.api` re-exports these names."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from game.rules.scoring import ScoreReport
    from game.session import Session

__all__ = ["active_pins", "handed_in", "investigating", "score_hand_in", "sessions_folder", "started_on",
           "transcripts_folder"]


def investigating(session: Session) -> bool:
    """Whether the session is between its start and its submission (queries, pins and ranks are taken)."""
    from game.session import INVESTIGATING

    return session.state == INVESTIGATING


def handed_in(session: Session) -> bool:
    """Whether the session was submitted (and perhaps debriefed): its ranking is final."""
    from game.session import DEBRIEFED, SUBMITTED

    return session.state in (SUBMITTED, DEBRIEFED)


def active_pins(session: Session) -> list[dict[str, Any]]:
    """The pins that count now, in the order they were made: {query, hypothesis, stance} (hypothesis ids)."""
    from game.session import active_pins as pins

    return [{"query": e.data["query"], "hypothesis": e.data["hypothesis"], "stance": e.data["stance"]}
            for e in pins(session.events)]


def started_on(session: Session) -> str | None:
    """The telemetry digest the session's start recorded (None before it started)."""
    from game.session import START

    return next((e.data.get("telemetry_digest") for e in session.events if e.kind == START), None)


def sessions_folder(root: Path | None = None) -> Path:
    """Where session journals live under `root` (default: the data folder)."""
    from game.session import sessions_dir

    return sessions_dir(root)


def transcripts_folder(root: Path | None = None) -> Path:
    """Where exported transcripts live under `root` (default: the data folder)."""
    from game.session import transcripts_dir

    return transcripts_dir(root)


def score_hand_in(session: Session) -> ScoreReport:
    """The score of a submitted session, its queries re-run on every hypothesis's world (as `servedrill score`
    does), without writing its debrief. SessionError before submission: a score names the answer."""
    from game.rules.assess import score_session
    from game.session import SessionError

    if not handed_in(session):
        raise SessionError("the session is not submitted: it has no score yet")
    return score_session(session.incident, session.header.seed, session.events)

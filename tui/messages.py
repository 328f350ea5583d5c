"""Messages that worker threads post back to the UI thread (a worker never touches a widget)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from game.api import PastSession, Telemetry, Variant
    from game.rules.scoring import ScoreReport
    from game.session import Event, Session, SessionSummary
    from game.session.hypotheses import Shown
    from tui.resultview import ResultView


class BuildProgress(Message):
    """Telemetry build progress: `fraction` 0..1 and the builder's stage name."""

    def __init__(self, fraction: float, stage: str) -> None:
        super().__init__()
        self.fraction = fraction
        self.stage = stage


class IncidentLoaded(Message):
    """The full loader accepted the incident as the variant of the game's seed; `unfinished` are its
    resumable sessions; `board` its hypotheses as the session shows them (in the seed's shuffled order)."""

    def __init__(self, variant: Variant, unfinished: list[SessionSummary], board: list[Shown] | None = None) -> None:
        super().__init__()
        self.variant = variant
        self.unfinished = unfinished
        self.board = board or []


class TelemetryReady(Message):
    """The variant's database is built (or was cached) and a gateway is open on it."""

    def __init__(self, telemetry: Telemetry) -> None:
        super().__init__()
        self.telemetry = telemetry


class PrepareFailed(Message):
    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines


class SessionOpened(Message):
    def __init__(self, session: Session, warnings: list[str]) -> None:
        super().__init__()
        self.session = session
        self.warnings = warnings


class SessionFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class SchemaLoaded(Message):
    def __init__(self, catalog: list[Any], markers: list[Any]) -> None:
        super().__init__()
        self.catalog = catalog
        self.markers = markers


class QueryDone(Message):
    """A query finished: recorded as `event`, or None when it failed (free, not recorded)."""

    def __init__(self, event: Event | None, view: ResultView) -> None:
        super().__init__()
        self.event = event
        self.view = view


class QueryRefused(Message):
    """The session would not run the query (e.g. the investigation is over)."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class LibraryScanned(Message):
    """Unfinished sessions and best scores by incident id, for the picker."""

    def __init__(self, unfinished: dict[str, list[SessionSummary]], best: dict[str, float]) -> None:
        super().__init__()
        self.unfinished = unfinished
        self.best = best


class ScoringProgress(Message):
    """Scoring is building or opening world `name` (`done` of `total` so far)."""

    def __init__(self, name: str, done: int, total: int) -> None:
        super().__init__()
        self.name = name
        self.done = done
        self.total = total


class DebriefReady(Message):
    def __init__(self, report: ScoreReport | None, markdown: str, transcript: str | None,
                 error: str | None = None) -> None:
        super().__init__()
        self.report = report
        self.markdown = markdown
        self.transcript = transcript
        self.error = error


class HistoryLoaded(Message):
    """The player's finished sessions (`game.api.history`), most recent first; `error` when they could
    not be read."""

    def __init__(self, past: list[PastSession], error: str | None = None) -> None:
        super().__init__()
        self.past = past
        self.error = error

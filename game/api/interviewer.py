"""The interviewer's side of a game: follow a candidate's session from another process, send it a message,
a hint or an inject, read the candidate's game clock, and write the interview report. `game.api`
re-exports these names. The channel itself (the session's inbox, the checks on what may be sent) is
`game.gameday.gm`'s; the report is `game.reports.interview_report`'s.

Reading and scoring a session can take seconds (the candidate's queries re-run on every hypothesis's
world): a UI calls `watch`, `look`, `send` and `interview_report` from a worker thread."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from game.gameday.gm import Watch

__all__ = [
    "Sent", "candidate_clock", "interview_report", "look", "render_report", "send", "watch",
    "write_interview_report",
]

Snapshot = dict[str, Any]
"""What the interviewer sees of a session at one moment (docs/cli.md, `servedrill watch --json`)."""


def watch(session: Path | str, *, reveal: bool = False) -> Watch:
    """Follow the session file at `session` (`find_session` turns an id into one): the candidate's queries,
    board, pins and what was delivered. `reveal` shows the answer (truth, what each query ruled out, the
    running score) before the candidate submits. Raises GMError when the session cannot be read."""
    from game.gameday.gm import Watch

    return Watch(session, reveal=reveal)


def look(follower: Watch, now: float | None = None, *, force: bool = False) -> Snapshot | None:
    """Read what the session and its inbox gained since the last look, and the snapshot at `now` (epoch
    seconds; default the time now) when anything changed or `force`; None when nothing changed. Raises
    GMError."""
    changed = follower.refresh()
    return follower.snapshot(now) if changed or force else None


@dataclass(frozen=True)
class Sent:
    """An item delivered to a candidate's inbox, and the inbox file."""

    item: dict[str, Any]
    inbox: Path


def send(session: Path | str, kind: str, *, text: str | None = None, sender: str | None = None,
         cost: int | None = None, index: int | None = None, follower: Watch | None = None) -> Sent:
    """Send the candidate a "message", a "hint" (no text: the incident's next one; with text, your own at
    `cost` points) or an "inject" (the incident's `index`-th, or your own text). The item is checked
    against the session as it is now (hints left, inject not delivered yet, round not over), through
    `follower` when the caller already watches the session. Raises GMError."""
    from game.gameday.gm import send as deliver
    from game.session import inbox_path

    item = deliver(session, kind, text=text, sender=sender, cost=cost, index=index, watch=follower)
    return Sent(item, inbox_path(session))


def candidate_clock(session: Path | str, started: float, now: float) -> float:
    """The game clock as the candidate sees it at `now`: the seconds since `started` during which a process
    held their session (the nights the game was closed do not count)."""
    from game.session import held_clock, read_held

    return max(0.0, held_clock(read_held(session), [], started, now))


def interview_report(source: Path | str | Watch, *, reveal: bool = False) -> dict[str, Any]:
    """The interview report of a session (a session file, or a session being watched, brought up to date
    first): timeline, first looks, what each query ruled out, the pins, the score breakdown once the
    candidate submitted (or with `reveal`, for a file). Raises GMError."""
    from game.reports.interview_report import build_report, report_for

    if isinstance(source, str | Path):
        return report_for(source, reveal=reveal)
    source.refresh()
    return build_report(source)


def render_report(report: dict[str, Any], fmt: Literal["markdown", "html"]) -> str:
    """The report as Markdown or as a self-contained HTML page (every word of the candidate's escaped)."""
    from game.reports.interview_report import to_html, to_markdown

    return to_markdown(report) if fmt == "markdown" else to_html(report)


def write_interview_report(report: dict[str, Any], session: Path | str) -> tuple[Path, Path]:
    """Write `report` next to the session file, as `<id>.interview.md` and `<id>.interview.html`; returns
    the two paths. Raises OSError."""
    path = Path(session)
    md = path.with_name(path.stem + ".interview.md")
    html = md.with_suffix(".html")
    md.write_text(render_report(report, "markdown"), encoding="utf-8")
    html.write_text(render_report(report, "html"), encoding="utf-8")
    return md, html

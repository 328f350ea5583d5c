"""Line mode: the whole game on stdin and stdout, for terminals without the TUI, for scripts and tests.

A line is SQL unless its first word is a command (see HELP). Every action goes through `Session`,
so a line-mode game is journalled and resumable exactly like a TUI game.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from game.assess import score_session
from game.debrief import debrief_markdown
from game.gateway import Gateway, QueryResult
from game.hypotheses import Shown as ShownHypothesis
from game.hypotheses import shown_hypotheses
from game.scoring import format_report
from game.session import (
    BRIEFING,
    DEBRIEFED,
    INVESTIGATING,
    SUBMITTED,
    Session,
    SessionError,
    Update,
    transcripts_dir,
)
from incidents.spec import Incident, Inject

PROMPT = "servedrill> "
SHOWN_ROWS = 40

HELP = """\
Type SQL on one line to run it (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE). Commands:
  schema                      tables and columns with descriptions
  hypotheses                  the hypotheses (labelled A, B, ...) and your current ranking
  rank A=60 B=30 C=10         set your ranking (percent, must sum to 100); a hypothesis is its label,
                              its title in quotes ("Title"=60) or the start of one title
  pin Q3 A refutes            pin query Q3 as evidence that supports|refutes hypothesis A
  note A some text            write a note on a hypothesis
  queries                     list your queries
  hint                        take the next hint (costs points)
  briefing                    show the briefing again
  updates                     show the updates received so far
  submit                      submit your ranking (then the score and the debrief)
  help                        this text
  quit                        leave; the session stays resumable"""

COMMANDS = ("schema", "hypotheses", "rank", "pin", "note", "queries", "hint", "briefing", "updates", "submit",
            "help", "quit", "exit")


def format_table(columns: list[str], rows: list[Any], max_rows: int = SHOWN_ROWS) -> str:
    """A fixed-width text table; floats to 4 significant digits, cells cut at 40 characters."""
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "NULL" if v is None else str(v)

    shown = [[cell(v) for v in row] for row in rows[:max_rows]]
    widths = [min(40, max([len(c)] + [len(r[i]) for r in shown])) for i, c in enumerate(columns)]
    lines = ["  ".join(c[:w].ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v[:w].ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in shown]
    if len(rows) > max_rows:
        lines.append(f"... {len(rows) - max_rows} more rows")
    return "\n".join(lines)


def briefing_text(incident: Incident, board: list[ShownHypothesis] | None = None) -> str:
    """The page, then the hypotheses in board order (`board`; default: the seed-0 shuffle)."""
    b = incident.briefing
    lines = [f"== {incident.title} ==", f"Reported by {b.reported_by}, {b.since}.", "", b.summary.strip()]
    if b.evidence:
        lines += ["", "Attached:"] + [f"  - {e}" for e in b.evidence]
    limits = []
    if incident.time_limit_s:
        limits.append(f"time limit {incident.time_limit_s / 60:.0f} min")
    if incident.query_budget:
        limits.append(f"query budget {incident.query_budget}")
    if limits:
        lines += ["", "; ".join(limits).capitalize() + "."]
    shown = board if board is not None else shown_hypotheses(incident, 0)
    lines += ["", "Hypotheses:"] + [f"  {h.label}  {h.title}" for h in shown]
    lines += ["", "Type help for commands; anything else runs as SQL."]
    return "\n".join(lines)


def inject_text(inject: Inject) -> str:
    """An inject as line mode prints it: a header line naming the sender, then the text."""
    return f"--- update from {inject.sender} ---\n{inject.text.strip()}"


def update_text(update: Update) -> str:
    """An update (inject, interviewer's message or hint, a hint taken) as line mode prints it."""
    label = {"inject": "update", "message": "message", "hint": "hint"}.get(update.kind,
                                                                                               update.kind)
    cost = f" (-{update.cost} points)" if update.cost else ""
    return f"--- {label} from {update.sender}{cost} ---\n{update.text.strip()}"


def split_words(text: str) -> list[str]:
    """Words of a command line; "quoted titles" stay one word."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise SessionError(f"cannot read the line: {exc} (close the quotes)") from None


def parse_ranking(words: list[str]) -> list[tuple[str, float]]:
    """`A=60 B=30` (or A:60, or "Title"=60) into [(name, percent)], most confident first, stable for ties."""
    pairs: list[tuple[str, float]] = []
    for word in words:
        match = re.fullmatch(r"(.+?)\s*[=:]\s*(-?[0-9]*\.?[0-9]+)%?", word, re.DOTALL)
        if not match:
            raise SessionError(f"cannot read {word[:80]!r}: write hypothesis=percent, e.g. rank A=60 B=40")
        pairs.append((match.group(1).strip(), float(match.group(2))))
    if not pairs:
        raise SessionError("rank needs hypothesis=percent pairs, e.g. rank A=60 B=40")
    return sorted(pairs, key=lambda p: -p[1])


def parse_query_ref(word: str) -> int:
    match = re.fullmatch(r"[Qq]?(\d+)", word)
    if not match:
        raise SessionError(f"{word!r} is not a query number; write Q3 (see: queries)")
    return int(match.group(1))


@dataclass
class PlainGame:
    """One line-mode game over an open session and gateway. `telemetry_digest` goes into the transcript."""

    session: Session
    gateway: Gateway
    inp: TextIO
    out: TextIO
    telemetry_digest: str | None = None
    transcript_root: Path | None = None

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def run(self) -> str:
        """Play until submit (then show the debrief), quit or end of input. Returns the final state."""
        incident = self.session.incident
        if self.session.state == BRIEFING:
            self.say(briefing_text(incident, self.session.board))
            self.session.start(self.telemetry_digest)
        elif self.session.state == INVESTIGATING:
            self.say(f"Resumed {self.session.session_id}: {len(self.session.queries)} queries so far.")
            self._show_hypotheses()
            self._updates(quiet=True)
        if self.session.state == SUBMITTED:
            self._finish()
            return self.session.state
        if self.session.state == DEBRIEFED:
            self.say("This session is finished.")
            return self.session.state
        while True:
            self._deliver_injects()
            self.out.write(PROMPT)
            self.out.flush()
            line = self.inp.readline()
            if not line:
                self.say()
                self._leave()
                return self.session.state
            line = line.strip()
            if not line:
                continue
            try:
                if not self._dispatch(line):
                    return self.session.state
            except SessionError as exc:
                self.say(f"error: {exc}")
            if self.session.state == SUBMITTED:
                self._finish()
                return self.session.state

    # ---------------------------------------------------------------- lines

    def _dispatch(self, line: str) -> bool:
        """Handle one line; False to stop."""
        word, _, rest = line.partition(" ")
        command = word.lower()
        if command not in COMMANDS:
            self._query(line)
            return True
        handlers: dict[str, Callable[[str], bool | None]] = {
            "schema": lambda _: self._schema(),
            "hypotheses": lambda _: self._show_hypotheses(),
            "rank": self._rank,
            "pin": self._pin,
            "note": self._note,
            "queries": lambda _: self._queries(),
            "hint": lambda _: self._hint(),
            "briefing": lambda _: self.say(briefing_text(self.session.incident, self.session.board)),
            "updates": lambda _: self._updates(),
            "submit": self._submit,
            "help": lambda _: self.say(HELP),
        }
        if command in ("quit", "exit"):
            self._leave()
            return False
        handlers[command](rest.strip())
        return True

    def _deliver_injects(self) -> None:
        # timed injects and whatever an interviewer sent into the session's inbox
        for update in self.session.due_updates():
            self.say(update_text(update))

    def _updates(self, quiet: bool = False) -> None:
        delivered = self.session.updates
        for update in delivered:
            self.say(update_text(update))
        if not delivered and not quiet:
            self.say("no updates yet")

    def _query(self, sql: str) -> None:
        event, result = self.session.run_query(self.gateway, sql)
        self.say(self._result_text(event.data["index"], result))
        budget = self.session.incident.query_budget
        if budget and len(self.session.queries) == budget:
            self.say(f"That was query {budget} of your budget of {budget}; further queries cost points.")

    @staticmethod
    def _result_text(index: int, result: QueryResult) -> str:
        if not result.ok:
            return f"Q{index}: error: {result.error}"
        more = " (truncated)" if result.truncated else ""
        table = format_table(result.columns, result.rows)
        return (f"{table}\nQ{index}: {result.row_count} rows{more} in {result.duration_s * 1000:.0f} ms")

    def _schema(self) -> None:
        current = None
        for entry in self.gateway.catalog():
            if entry.table != current:
                current = entry.table
                self.say(f"{entry.table}")
            self.say(f"  {entry.column:<18} {entry.type:<10} {entry.description}")

    def _show_hypotheses(self) -> None:
        conf = {r["id"]: r["confidence"] for r in (self.session.ranking or [])}
        for h in self.session.board:
            mark = f"{conf[h.id]:5.1f}%" if h.id in conf else "     -"
            self.say(f"{mark}  {h.label}  {h.title}")

    def _rank(self, rest: str) -> None:
        event = self.session.rank(parse_ranking(split_words(rest)))
        label = self.session.label_of
        self.say("ranked: " + ", ".join(f"{label(r['id'])} {r['confidence']:g}%" for r in event.data["ranking"]))

    def _pin(self, rest: str) -> None:
        words = split_words(rest)
        if len(words) != 3:
            raise SessionError("usage: pin Q3 A supports|refutes")
        event = self.session.pin(parse_query_ref(words[0]), words[1], words[2].lower())
        self.say(f"pinned Q{event.data['query']} as {event.data['stance']} "
                 f"{self.session.label_of(event.data['hypothesis'])}")

    def _note(self, rest: str) -> None:
        words = split_words(rest)
        if len(words) < 2:
            raise SessionError("usage: note A your text")
        self.session.note(words[0], " ".join(words[1:]))
        self.say("noted")

    def _queries(self) -> None:
        for q in self.session.queries:
            status = f"{q.data['row_count']} rows" if q.data.get("ok") else f"error: {q.data.get('error')}"
            self.say(f"Q{q.data['index']:<3} {status:<16} {q.data['sql']}")
        if not self.session.queries:
            self.say("no queries yet")

    def _hint(self) -> None:
        event = self.session.take_hint()
        self.say(f"hint ({event.data['cost']} points): {event.data['text']}")

    def _submit(self, rest: str) -> None:
        words = split_words(rest) if rest else []
        if len(words) > 1:
            raise SessionError("usage: submit")
        # a query named after submit is kept for older scripts; scoring reads pins instead
        discriminator = parse_query_ref(words[0]) if words else None
        self.session.submit(None, discriminator)

    def _finish(self) -> None:
        self.say("Scoring: re-running your queries on every hypothesis's world...")
        report = score_session(self.session.incident, self.session.header.seed, self.session.events)
        self.say(debrief_markdown(self.session.incident, self.session.events, report))
        self.say(format_report(report, {h.id: f"{h.label} {h.title}" for h in self.session.board}))
        self.session.view_debrief()
        path = self.session.export_transcript(
            transcripts_dir(self.transcript_root) / f"{self.session.session_id}.json", self.telemetry_digest,
            {"total": report.total})
        self.say(f"Transcript: {path}")

    def _leave(self) -> None:
        self.say(f"Session {self.session.session_id} saved. Continue with: servedrill resume "
                 f"{self.session.session_id} --plain")

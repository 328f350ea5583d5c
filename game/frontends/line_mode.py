"""Line mode: the whole game on stdin and stdout, for terminals without the TUI, for scripts and tests.

A line is a command when its first word is one (see `help_text`), SQL when it starts like a read query
(SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN, ...), and otherwise a mistake: it is answered
with the nearest command ("did you mean") and runs nothing. Every action goes through `game.api` to the
session, so a line-mode game is journalled and resumable exactly like a TUI game.

A statement that fails (refused, a SQL error, a timeout, cancelled) is shown and not recorded: it costs
no query from the budget and gets no Qn. That rule is the session's (`Session.run_query`, reached through
`game.api.run_query`), so the terminal and this mode cannot differ on it; the game is opened through `game.api`,
as every front end does, and this module calls nothing below it at run time.
"""

from __future__ import annotations

import difflib
import html
import re
import shlex
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from game import api
from game.api import ROW_CAP
from game.api.text import visible

if TYPE_CHECKING:
    from game.api import Game, PastSession
    from game.query.gateway import QueryResult
    from game.query.sandbox import Gateway
    from game.session import Session, Update
    from game.session.hypotheses import Shown as ShownHypothesis
    from incidents.spec import Incident, Inject

PROMPT = "servedrill> "
SHOWN_ROWS = 40
"""Rows of a result printed at once; `more` prints the next ones (a query returns up to game.api.ROW_CAP)."""
MORE_HINT = "type more to see them"
"""Said after a page of rows when the result has more."""

COMMANDS = ("schema", "hypotheses", "rank", "pin", "unpin", "note", "queries", "more", "hint", "briefing", "updates",
            "time", "submit", "help", "quit", "exit", "snippets", "snippet", "save", "saved", "forget", "history",
            "debrief", "\\x")
TAKES_NOTHING = frozenset({"hint"})
"""Commands that cost something and take no argument: a word after one is refused rather than ignored, so a
slip ('hint foo') spends nothing."""

SQL_STARTS = ("select", "with", "from", "describe", "desc", "show", "summarize", "explain", "values", "table",
              "pivot", "unpivot")
"""First words of the statements the gateway runs (read queries): a line starting with one is SQL."""

CELL_CHARS = 40
"""A cell is cut to this many characters in a printed table on a terminal (piped, cells print in full)."""

_MD_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")
"""A backslash-escaped Markdown punctuation mark (how the debrief makes data literal in Markdown)."""


def plain_markdown(text: str) -> str:
    """Markdown written for a renderer (the debrief: HTML entities and backslash escapes keep data literal)
    as a reader of plain text should see it: `True -&gt; False` reads `True -> False`."""
    return html.unescape(_MD_ESCAPED.sub(r"\1", text))


def _bool_text(value: bool) -> str:
    """A boolean as SQL and the terminal's and browser's result grids print it."""
    return "true" if value else "false"


def expanded_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], first: int = 1) -> str:
    """Rows one after another, a `column | value` line per cell, every value in full (psql's \\x):
    for results whose cells are too long for a table line. `first` numbers the first row."""
    columns = [visible(c) for c in columns]
    pad = max([len(c) for c in columns] + [1])
    out: list[str] = []
    for number, row in enumerate(rows, start=first):
        out.append(f"-[ row {number} ]" + "-" * max(4, pad - 6))
        for name, value in zip(columns, row, strict=False):
            text = ("NULL" if value is None else _bool_text(value) if isinstance(value, bool)
                    else f"{value:.6g}" if isinstance(value, float) else str(value))
            text = visible(text, multiline=True)
            lines = text.split("\n")
            out.append(f"{name:<{pad}} | {lines[0]}")
            out += [f"{'':<{pad}} | {more}" for more in lines[1:]]
    return "\n".join(out)


def help_text(board: Sequence[ShownHypothesis] = ()) -> str:
    """The command list, its examples written with this game's hypotheses (`board`: labelled A, B, ...),
    so each example works as typed once a query has run."""
    labels = [str(h.label) for h in board] or ["A", "B", "C"]
    first = labels[0]
    title = str(board[0].title) if board else "The title of A"
    words = title.split()
    prefix = " ".join(words[:3]) if len(words) > 3 else title
    shares = _example_shares(len(labels))
    rank = " ".join(f"{label}={share}" for label, share in zip(labels, shares, strict=False))
    second = labels[1] if len(labels) > 1 else labels[0]
    rows = [
        ("schema", "tables and columns with descriptions"),
        ("hypotheses", f"the hypotheses (labelled {', '.join(labels)}) and your current ranking"),
        (f"rank {rank}", "set your ranking (percent, summing to 100, most likely first); a hypothesis"),
        ("", "is its label, its title in quotes, or the start of one title:"),
        ("", f'rank "{prefix}"=70 {second}=30'),
        (f"pin Q1 {first} supports", f"pin query Q1 as evidence that supports (or refutes) hypothesis {first}"),
        (f"unpin Q1 {first} supports", "take that pin off again (it no longer counts)"),
        (f"note {first} some text", "write a note on a hypothesis"),
        ("queries", "list your queries"),
        ("snippets", "good first queries, numbered; snippet 2 runs the second (it counts as a query)"),
        ("save NAME", "save your last query (or: save NAME: SQL) under NAME, for every incident you play"),
        ("saved", "your saved queries, numbered; saved 2 runs the second (it counts as a query)"),
        ("forget NAME", "delete a saved query (its name or number)"),
        ("more", f"the next {SHOWN_ROWS} rows of the last result (a query returns at most {ROW_CAP} rows)"),
        ("\\x", "expanded display on or off: each row as column | value lines, every value in full"),
        ("hint", "take the next hint (costs points)"),
        ("briefing", "show the briefing again"),
        ("updates", "show the updates received so far"),
        ("time", "the clock: time used and the limit (in a game-day round, the round's time left)"),
        ("submit", "submit your ranking (then the debrief and the score)"),
        ("history", "your finished sessions: incident, score, date, time taken"),
        ("debrief 1", "reopen the debrief of session 1 of the history (re-scored from its transcript)"),
        ("help", "this text"),
        ("quit", "leave; the session stays resumable"),
    ]
    pad = max(27, *(len(cmd) + 1 for cmd, _ in rows))
    return "\n".join([
        "Type SQL on one line to run it (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN). A statement",
        "that fails costs nothing: it is not counted against the query budget. Commands:",
        *(f"  {cmd:<{pad}} {what}" for cmd, what in rows),
    ])


def _example_shares(n: int) -> list[int]:
    """Percentages for a rank example over `n` hypotheses: falling, summing to 100 (at most five named)."""
    return {1: [100], 2: [70, 30], 3: [60, 30, 10], 4: [60, 25, 10, 5]}.get(n, [50, 25, 10, 10, 5])


def is_sql(line: str) -> bool:
    """Whether a line starts like a statement the gateway could run (or a comment before one)."""
    text = line.lstrip()
    if text.startswith(("(", "--", "/*")):
        return True
    word = re.split(r"[\s(;]", text, maxsplit=1)[0].lower()
    return word in SQL_STARTS


def near_miss(word: str) -> str | None:
    """The command or SQL keyword closest to a mistyped first word, if one is close."""
    found = difflib.get_close_matches(word.lower(), [*COMMANDS, *SQL_STARTS], n=1, cutoff=0.6)
    return found[0] if found else None


def format_table(columns: list[str], rows: list[Any], max_rows: int | None = SHOWN_ROWS, width: int | None = None,
                 cell_chars: int | None = CELL_CHARS, more_hint: str = MORE_HINT) -> str:
    """A fixed-width text table of the first `max_rows` rows (None: all); floats to 4 significant digits,
    cells cut at `cell_chars` characters (None: never cut). Rows left out are counted on a line ending with `more_hint`
    (how to see them). With `width` (the terminal's), the columns that do not fit are left out and named on
    a last line."""
    if max_rows is None:
        max_rows = len(rows)

    def cell(v: Any) -> str:
        if isinstance(v, bool):
            return _bool_text(v)
        if isinstance(v, float):
            return f"{v:.4g}"
        return visible(" ".join(("NULL" if v is None else str(v)).split("\n")))

    columns = [visible(c) for c in columns]
    shown = [[cell(v) for v in row] for row in rows[:max_rows]]
    widths = [min(cell_chars or 1 << 30, max([len(c)] + [len(r[i]) for r in shown])) for i, c in enumerate(columns)]
    keep = len(columns)
    if width is not None:
        used = 0
        for i, w in enumerate(widths):
            if used + w > width and i > 0:
                keep = i
                break
            used += w + 2
    def line(values: Sequence[str]) -> str:
        return "  ".join(_cut(v, w).ljust(w) for v, w in zip(values[:keep], widths[:keep], strict=True)).rstrip()

    lines = [line(columns), "  ".join("-" * w for w in widths[:keep])]
    lines += [line(r) for r in shown]
    if len(rows) > max_rows:
        lines.append(f"... {len(rows) - max_rows} more rows: {more_hint}")
    if keep < len(columns):
        hidden = columns[keep:]
        named = ", ".join(hidden[:8]) + (", ..." if len(hidden) > 8 else "")
        lines.append(f"... {len(hidden)} more column{'s' if len(hidden) != 1 else ''} not shown ({named}): "
                     "select fewer columns to see them")
    return "\n".join(lines)


def truncated_note(result: QueryResult) -> str:
    """The note after a row count when the gateway stopped the result at its row cap; else empty."""
    if not result.truncated:
        return ""
    return (f" (truncated: the result stopped at {result.row_count} rows, the row cap; aggregate or filter "
            "to see the rest)")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


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
    shown = board if board is not None else api.board(incident, 0)
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
    return f"--- {label} from {visible(update.sender)}{cost} ---\n{visible(update.text.strip(), multiline=True)}"


def split_words(text: str) -> list[str]:
    """Words of a command line; "quoted titles" stay one word."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise api.SessionError(f"cannot read the line: {exc} (close the quotes)") from None


def parse_ranking(words: list[str]) -> list[tuple[str, float]]:
    """`A=60 B=30` (or A:60, or "Title"=60) into [(name, percent)], most confident first, stable for ties."""
    pairs: list[tuple[str, float]] = []
    for word in words:
        match = re.fullmatch(r"(.+?)\s*[=:]\s*(-?[0-9]*\.?[0-9]+)%?", word, re.DOTALL)
        if not match:
            raise api.SessionError(f"cannot read {word[:80]!r}: write hypothesis=percent, e.g. rank A=60 B=40")
        pairs.append((match.group(1).strip(), float(match.group(2))))
    if not pairs:
        raise api.SessionError("rank needs hypothesis=percent pairs, e.g. rank A=60 B=40")
    return sorted(pairs, key=lambda p: -p[1])


def parse_query_ref(word: str) -> int:
    match = re.fullmatch(r"[Qq]?(\d+)", word)
    if not match:
        raise api.SessionError(f"{word!r} is not a query number; write Q3 (see: queries)")
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
    width: int | None = None
    """Tables are cut to this many columns of text; None: the terminal's width when `out` is one, else
    no cut (a script reads every column)."""
    last: QueryResult | None = field(default=None, init=False)
    """The last result that ran (what `more` pages through) and its Qn; a statement that failed leaves them."""
    last_index: int = field(default=0, init=False)
    shown: int = field(default=0, init=False)
    """Rows of `last` printed so far."""
    expanded: bool = field(default=False, init=False)
    """`\\x`: results print as column | value lines, every value in full."""
    past: list[PastSession] | None = field(default=None, init=False)
    """The finished sessions `history` listed last (what `debrief N` counts in)."""
    clock: Callable[[], float] = time.time
    """Epoch seconds now: the game clock, its warnings and TIME UP (game.api.rounds); tests drive it."""
    warnings: api.TimeWarnings = field(default_factory=api.TimeWarnings, init=False)

    def __post_init__(self) -> None:
        if self.width is None and _isatty(self.out):
            self.width = shutil.get_terminal_size().columns

    @classmethod
    def of(cls, game: Game, inp: TextIO, out: TextIO, transcript_root: Path | None = None) -> PlainGame:
        """Line mode on a game opened through `game.api`."""
        return cls(game.session, game.telemetry.gateway, inp, out, telemetry_digest=game.telemetry.digest,
                   transcript_root=transcript_root)

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def run(self) -> str:
        """Play until submit (then show the debrief), quit or end of input. Returns the final state."""
        incident = self.session.incident
        if self.session.state == "briefing":
            self.say(briefing_text(incident, self.session.board))
            round_clock = api.round_clock(self.clock())
            if round_clock is not None:  # a game-day round: its limit, not the incident's
                self.say(api.round_limits_text(round_clock) + ".")
            api.start(self.session, self.telemetry_digest)
        elif self.session.state == "investigating":
            self.say(f"Resumed {self.session.session_id}: {len(self.session.queries)} queries so far.")
            self._show_hypotheses()
            self._updates(quiet=True)
        if self.session.state == "submitted":
            self._mitigate()
            self._finish()
            return self.session.state
        if self.session.state == "debriefed":
            self.say("This session is finished.")
            return self.session.state
        while True:
            self._deliver_injects()
            if self._team_news():  # a team round: another member handed the team's board in
                self._finish()
                return self.session.state
            if self._tick():  # TIME UP of a game-day round handed the board in
                self._finish()
                return self.session.state
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
                if self._team_news():  # what the team did while this member typed, before their command
                    self._finish()
                    return self.session.state
                if not self._dispatch(line):
                    return self.session.state
            except api.SessionError as exc:
                self.say(f"error: {visible(str(exc), multiline=True)}")
            if self.session.state == "submitted":
                self._team_news()  # the hand-in may be another member's
                self._mitigate()
                self._finish()
                return self.session.state

    # ---------------------------------------------------------------- lines

    def _dispatch(self, line: str) -> bool:
        """Handle one line; False to stop."""
        word, _, rest = line.partition(" ")
        command = word.lower()
        if command not in COMMANDS:
            if is_sql(line):
                self._query(line)
            else:
                self._unknown(word)
            return True
        handlers: dict[str, Callable[[str], bool | None]] = {
            "schema": lambda _: self._schema(),
            "hypotheses": lambda _: self._show_hypotheses(),
            "rank": self._rank,
            "pin": self._pin,
            "unpin": self._unpin,
            "note": self._note,
            "queries": lambda _: self._queries(),
            "more": self._more,
            "hint": lambda _: self._hint(),
            "briefing": lambda _: self.say(briefing_text(self.session.incident, self.session.board)),
            "updates": lambda _: self._updates(),
            "time": lambda _: self.say(api.player_clock(self.session, self.clock()).text()),
            "submit": self._submit,
            "help": lambda _: self.say(help_text(self.session.board)),
            "snippets": self._snippets,
            "snippet": self._snippets,
            "save": self._save,
            "saved": self._saved,
            "forget": self._forget,
            "history": self._history,
            "debrief": self._past_debrief,
            "\\x": self._expanded,
        }
        if command in ("quit", "exit"):
            self._leave()
            return False
        if command in TAKES_NOTHING and rest.strip():
            # a word after `hint` is a slip, and taking a hint costs points: do nothing, say so
            self.say(f"error: {command} takes nothing after it (got {rest.strip()[:40]!r}); type {command} "
                     "alone. (Nothing was done.)")
            return True
        handlers[command](rest.strip())
        return True

    def _tick(self) -> bool:
        """Print the clock's warnings that came due (5 and 1 minute left, time up: each once); at TIME UP of a
        game-day round hand in the last ranking saved (game.api.time_up). Whether it handed in. Line mode
        reads a line at a time: a warning shows at the next prompt."""
        clock = api.player_clock(self.session, self.clock())
        for due in self.warnings.due(clock):
            self.say(f"*** {due.text}")
        return api.time_up(self.session, clock) is not None

    def _deliver_injects(self) -> None:
        # timed injects and whatever an interviewer sent into the session's inbox
        for update in api.updates(self.session):
            self.say(update_text(update))

    def _team_news(self) -> bool:
        """A team round: print what the other members did since the last prompt (one line each, naming them);
        whether the team's board was handed in meanwhile."""
        news = api.team_news(self.session)
        for event in news:
            self.say(f"[team] {api.team_line(self.session, event)}")
        return any(e.kind == "submit" for e in news)

    def _updates(self, quiet: bool = False) -> None:
        delivered = self.session.updates
        for update in delivered:
            self.say(update_text(update))
        if not delivered and not quiet:
            self.say("no updates yet")

    def _unknown(self, word: str) -> None:
        """A line that is neither a command nor SQL: say so, run nothing, spend nothing."""
        guess = near_miss(word)
        hint = f" Did you mean {guess}?" if guess else ""
        self.say(f"error: {word[:40]!r} is not a command, and SQL starts with SELECT, WITH, FROM, DESCRIBE, "
                 f"SHOW, SUMMARIZE or EXPLAIN.{hint} Type help for the commands. (Nothing ran; nothing "
                 "was counted.)")

    def _query(self, sql: str) -> None:
        ran = api.run_query(self.session, self.gateway, sql)
        event, result = ran.event, ran.result
        if event is not None:
            self.last, self.last_index, self.shown = result, event.data["index"], min(SHOWN_ROWS, len(result.rows))
        self.say(self._result_text(None if event is None else event.data["index"], result))
        budget = self.session.incident.query_budget
        if event is not None and budget and len(self.session.queries) == budget:
            self.say(f"That was query {budget} of your budget of {budget}; further queries cost points.")

    @property
    def cell_chars(self) -> int | None:
        """Cells are cut on a terminal (its width is known), printed in full when piped."""
        return CELL_CHARS if self.width else None

    def _rows_text(self, result: QueryResult, start: int, count: int | None) -> str:
        rows = result.rows[start:] if count is None else result.rows[start:start + count]
        if self.expanded:
            return expanded_table(result.columns, rows, first=start + 1) or "(no rows)"
        return format_table(result.columns, rows, max_rows=None, width=self.width, cell_chars=self.cell_chars)

    def _result_text(self, index: int | None, result: QueryResult) -> str:
        if not result.ok:
            error = visible(result.error, multiline=True)
            return f"error: {error} (not counted: a statement that fails costs no query)"
        if self.expanded:
            table = self._rows_text(result, 0, SHOWN_ROWS)
            if len(result.rows) > SHOWN_ROWS:
                table += f"\n... {len(result.rows) - SHOWN_ROWS} more rows: {MORE_HINT}"
        else:
            table = format_table(result.columns, result.rows, width=self.width, cell_chars=self.cell_chars)
        return (f"{table}\nQ{index}: {result.row_count} rows{truncated_note(result)} in "
                f"{result.duration_s * 1000:.0f} ms")

    def _more(self, rest: str) -> None:
        """The next SHOWN_ROWS rows of the last result. Not a query: nothing runs, nothing is recorded."""
        if rest:
            raise api.SessionError("usage: more")
        result = self.last
        if result is None:
            raise api.SessionError("no result to page through yet: run a query first, then more shows its next "
                               f"{SHOWN_ROWS} rows")
        start = self.shown
        if start >= len(result.rows):
            self.say(f"no more rows: Q{self.last_index} has {result.row_count} rows{truncated_note(result)}")
            return
        page = result.rows[start:start + SHOWN_ROWS]
        self.shown = start + len(page)
        self.say(self._rows_text(result, start, SHOWN_ROWS))
        left = len(result.rows) - self.shown
        after = f"; {left} more: {MORE_HINT}" if left else ""
        self.say(f"Q{self.last_index}: rows {start + 1}-{self.shown} of {result.row_count}"
                 f"{truncated_note(result)}{after}")

    def _expanded(self, rest: str) -> None:
        """`\\x`: expanded display on or off (psql's toggle); `\\x on` / `\\x off` set it."""
        word = rest.strip().lower()
        if word not in ("", "on", "off"):
            raise api.SessionError("usage: \\x (toggle), \\x on or \\x off")
        self.expanded = (not self.expanded) if not word else word == "on"
        self.say("Expanded display is " + ("on: each row as column | value lines." if self.expanded
                                          else "off: results print as tables."))

    def _snippets(self, rest: str) -> None:
        """`snippets`: the good first queries, numbered; `snippet N` (or `snippets N`) runs number N."""
        menu = api.snippets(self.session.incident)
        if not rest.strip():
            for number, snip in enumerate(menu, start=1):
                self.say(f"{number}. {snip.title}")
                self.say("\n".join(f"     {line}" for line in snip.sql.strip().splitlines()))
            self.say(f"Run one with: snippet N (1-{len(menu)}); it counts as a query. Or copy and edit it.")
            return
        word = rest.strip()
        if not word.isdigit() or not 1 <= int(word) <= len(menu):
            raise api.SessionError(f"no snippet {word[:20]!r}: write snippet N with N from 1 to {len(menu)} "
                                   "(snippets lists them)")
        sql = menu[int(word) - 1].sql.strip()
        self.say(" ".join(sql.split()))
        self._query(sql)

    def _save(self, rest: str) -> None:
        """`save NAME` keeps the last query run as NAME; `save NAME: SQL` keeps SQL. Saving is free."""
        name, colon, sql = rest.partition(":")
        if not colon:
            queries = self.session.queries
            if not queries:
                raise api.SessionError("no query to save yet: run one, then save NAME (or save NAME: SQL)")
            sql = str(queries[-1].data["sql"])
        query, replaced = api.save_query(self.session.header.player, name, sql, self.transcript_root)
        self.say(f"{'Replaced' if replaced else 'Saved'} \"{visible(query.name)}\": saved (lists them, saved N "
                 "runs one) offers it in every incident.")

    def _saved(self, rest: str) -> None:
        """`saved`: the player's saved queries, numbered; `saved N` runs number N (a query like any other)."""
        mine = api.saved_queries(self.session.header.player, self.transcript_root)
        if not mine:
            raise api.SessionError("no saved queries yet: save NAME keeps your last query")
        if not rest:
            for number, saved in enumerate(mine, start=1):
                self.say(f"{number}. {visible(saved.name)}")
                self.say("\n".join(f"     {line}" for line in visible(saved.sql, multiline=True).splitlines()))
            self.say(f"Run one with: saved N (1-{len(mine)}); it counts as a query.")
            return
        if not rest.isdigit() or not 1 <= int(rest) <= len(mine):
            raise api.SessionError(f"no saved query {rest[:20]!r}: write saved N with N from 1 to {len(mine)}")
        sql = mine[int(rest) - 1].sql
        self.say(visible(" ".join(sql.split())))
        self._query(sql)

    def _forget(self, rest: str) -> None:
        """`forget NAME` (or its number in `saved`) deletes a saved query."""
        player = self.session.header.player
        name = rest
        if rest.isdigit():
            mine = api.saved_queries(player, self.transcript_root)
            if not 1 <= int(rest) <= len(mine):
                raise api.SessionError(f"no saved query {rest[:20]!r}: saved lists them with their numbers")
            name = mine[int(rest) - 1].name
        gone = api.forget_query(player, name, self.transcript_root)
        self.say(f"Forgot \"{visible(gone.name)}\".")

    def _history(self, rest: str) -> None:
        """`history`: the player's finished sessions, numbered for `debrief N`, most recent first."""
        if rest.strip():
            raise api.SessionError("usage: history (then debrief N reopens one)")
        self.past = api.history(self.session.header.player, self.transcript_root)
        self.say(history_text(self.past, self.width, self.cell_chars))

    def _past_debrief(self, rest: str) -> None:
        """`debrief N`: the debrief of session N of the history, rebuilt from its transcript."""
        if self.past is None:
            self.past = api.history(self.session.header.player, self.transcript_root)
        say_past_debrief(self.past, rest, self.say)

    def _schema(self) -> None:
        current = None
        for entry in api.catalog(self.gateway):
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
        event = api.rank(self.session, parse_ranking(split_words(rest)))
        label = self.session.label_of
        self.say("ranked: " + ", ".join(f"{label(r['id'])} {r['confidence']:g}%" for r in event.data["ranking"]))

    def _pin(self, rest: str) -> None:
        words = split_words(rest)
        if len(words) != 3:
            raise api.SessionError("usage: pin Q3 A supports|refutes")
        event = api.pin(self.session, parse_query_ref(words[0]), words[1], words[2].lower())
        self.say(f"pinned Q{event.data['query']} as {event.data['stance']} "
                 f"{self.session.label_of(event.data['hypothesis'])}")

    def _unpin(self, rest: str) -> None:
        words = split_words(rest)
        if len(words) != 3:
            raise api.SessionError("usage: unpin Q3 A supports|refutes")
        event = api.unpin(self.session, parse_query_ref(words[0]), words[1], words[2].lower())
        self.say(f"unpinned Q{event.data['query']} ({event.data['stance']}) from "
                 f"{self.session.label_of(event.data['hypothesis'])}")

    def _note(self, rest: str) -> None:
        words = split_words(rest)
        if len(words) < 2:
            raise api.SessionError("usage: note A your text")
        api.note(self.session, words[0], " ".join(words[1:]))
        self.say("noted")

    def _queries(self) -> None:
        for q in self.session.queries:
            status = f"{q.data['row_count']} rows" if q.data.get("ok") else f"error: {q.data.get('error')}"
            self.say(f"Q{q.data['index']:<3} {status:<16} {q.data['sql']}")
        if not self.session.queries:
            self.say("no queries yet")

    def _hint(self) -> None:
        event = api.hint(self.session)
        self.say(f"hint ({event.data['cost']} points): {event.data['text']}")

    def _submit(self, rest: str) -> None:
        words = split_words(rest) if rest else []
        if len(words) > 1:
            raise api.SessionError("usage: submit")
        # a query named after submit is kept for older scripts; scoring reads pins instead
        discriminator = parse_query_ref(words[0]) if words else None
        api.submit(self.session, None, discriminator)

    def _mitigate(self) -> None:
        """The mitigation phase, when the incident has one and the session has not acted: `act ...` applies
        actions (once), SQL reads the fleet (after `act`, as it ran on with them; never counted), `done` ends."""
        offered = api.mitigation_actions(self.session.incident)
        if not offered or any(e.kind == "act" for e in self.session.events):
            return
        api.prepare_mitigation(self.session)  # while the player reads and types
        self.say("Diagnosis submitted. Now mitigate: what do you do to the fleet? The simulation continues from the "
                 "end of the window with your actions. Actions (several: separate them with ;):")
        for usage in offered:
            self.say(f"  act {usage}")
        self.say("SQL reads the telemetry (free); after act it holds what came after too. done (or skip) ends.")
        gateway = self.gateway
        while True:
            self.out.write("mitigate> ")
            self.out.flush()
            line = self.inp.readline()
            if not line:
                return
            line = line.strip()
            word, _, rest = line.partition(" ")
            if not line:
                continue
            if word.lower() in ("done", "skip", "quit", "exit", "submit"):
                return
            if word.lower() == "act":
                texts = [t.strip() for t in rest.split(";") if t.strip()]
                try:
                    acted = api.act(self.session, texts)
                except api.SessionError as exc:
                    self.say(f"error: {visible(str(exc), multiline=True)}")
                    continue
                sc = acted.score
                gateway = acted.telemetry.gateway
                ttr = "never" if sc.time_to_recovery_s is None else f"{sc.time_to_recovery_s:.0f} s"
                self.say(f"Applied at t={sc.decision_s:g} s: {', '.join(sc.actions)}. The fleet ran on to "
                         f"t={sc.end_s:g} s: recovered {'yes' if sc.recovered else 'no'}, time to recovery {ttr}, "
                         f"errors since {sc.errors_after}, shed {sc.requests_shed}. Query it, then done.")
            elif is_sql(line):
                result = api.glance(gateway, line)
                self.say(f"error: {visible(result.error, multiline=True)}" if not result.ok else format_table(
                    result.columns, result.rows, width=self.width))
            else:
                self.say(f"error: {word[:40]!r}: in the mitigation phase type act ACTION, SQL, or done. "
                         "Actions: " + "; ".join(offered))

    def _finish(self) -> None:
        hold = api.debrief_hold(self.session, self.clock())
        if hold is not None:  # a game-day round holds the debrief until it ends
            self.say(hold.text)
            self.say(f"See it then with: servedrill resume {self.session.session_id} --plain")
            return
        self.say("Scoring: re-running your queries on every hypothesis's world (building those not built "
                 "yet takes a while)...")
        done = api.debrief(self.session, progress=scoring_progress(self.say))
        report = done.report
        # the debrief holds the score table and what each query ruled out: printed once, then the total;
        # as plain text (the Markdown escapes data for a renderer: no &gt; or \_ on a terminal)
        self.say(plain_markdown(done.markdown))
        self.say(f"Score {report.total:.1f} / 100" + ("" if report.submitted else " (not submitted)"))
        path = api.export_transcript(self.session, self.telemetry_digest, {"total": report.total},
                                     root=self.transcript_root)
        self.say(f"Transcript: {path}")

    def _leave(self) -> None:
        self.say(f"Session {self.session.session_id} saved. Continue with: servedrill resume "
                 f"{self.session.session_id} --plain")


def scoring_progress(say: Callable[[str], None]) -> Callable[[str, int, int], None]:
    """A scoring progress callback that says one line per world (the worlds may take a while to build);
    the world's name is never said (a rival's id would name a hypothesis)."""
    said: set[tuple[int, int]] = set()

    def progress(name: str, done: int, total: int) -> None:
        if (done, total) in said:
            return
        said.add((done, total))
        what = {"truth": "what you saw", "noise": "a second run of it"}.get(name, "a rival hypothesis")
        say(f"  world {min(done + 1, total)} of {total} ({what})..." if done < total else f"  all {total} worlds ready")

    return progress


def history_text(past: Sequence[PastSession], width: int | None = None, cell_chars: int | None = None,
                 reopen: str = "Reopen a debrief with: debrief N") -> str:
    """The finished sessions `game.api.history` found, numbered for `debrief N`, as a table and the `reopen`
    line (or a line saying there are none yet)."""
    if not past:
        return "No finished sessions yet: a session you submit is listed here, its debrief one command away."
    rows = [(str(n), p.title, "-" if p.score is None else f"{p.score:.1f}" + (" solved" if p.solved else ""),
             p.date, _taken(p.taken_s), str(p.queries)) for n, p in enumerate(past, start=1)]
    table = format_table(["#", "incident", "score", "date (UTC)", "time", "queries"], rows, max_rows=None,
                         width=width, cell_chars=cell_chars)
    return table + "\n" + reopen


def say_past_debrief(past: Sequence[PastSession], rest: str, say: Callable[[str], None]) -> None:
    """`debrief N` over `past` (the history as listed), said line by line as it happens: which session, a
    line per world while it is re-scored, the debrief as plain text and the score. Raises SessionError (a
    message with the fix) for an N that is not in the list, before saying anything."""
    word = rest.strip()
    if not past:
        raise api.SessionError("no finished sessions yet: there is no debrief to reopen (history lists them)")
    if not word.isdigit() or not 1 <= int(word) <= len(past):
        raise api.SessionError(f"usage: debrief N, with N from 1 to {len(past)} (history lists them)")
    chosen = past[int(word) - 1]
    say(f"Reopening the debrief of {chosen.session_id} ({chosen.title})...")
    done = api.past_debrief(chosen.transcript, progress=scoring_progress(say))
    say(plain_markdown(done.debrief.markdown))
    say(f"Score {done.debrief.report.total:.1f} / 100 (reopened from {chosen.transcript})")


def shelf_line(line: str, player: str, out: TextIO, root: Path | None = None) -> bool:
    """Outside a game (the line-mode incident list): `history` and `debrief N` answered on `out`; True when
    `line` was one of them (errors said as `error: ...`)."""
    word, _, rest = line.strip().partition(" ")
    if word.lower() not in ("history", "debrief"):
        return False

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    try:
        past = api.history(player, root)
        if word.lower() == "history":
            say(history_text(past))
        else:
            say_past_debrief(past, rest, say)
    except api.SessionError as exc:
        say(f"error: {visible(str(exc), multiline=True)}")
    return True


def _taken(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False

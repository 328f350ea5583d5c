"""One agent's game: what a human player can do, as calls that take and return JSON-ready values.

The MCP server (`game.frontends.mcp_server`) exposes these calls as tools, one `AgentPlay` per connection;
the RL environment (`game.frontends.rl_env`) steps through the same calls. Everything goes through
`game.api` and the session it opens, so an agent's game is journalled, resumable and scored exactly like a
human's (`servedrill score`, `replay`, `watch`, the leaderboard read it unchanged):

- the incidents are the library as the picker shows it (`api.library()`: titles, symptom tags, limits);
- the telemetry is opened with `api.open_telemetry` under the player limits (row cap, time, memory);
- a statement that fails costs nothing (`Session.run_query`): it comes back as an error, no Qn, no budget;
- the session's rules refuse what is not allowed now, with the message a human reads (`AgentError`);
- the debrief opens only once the ranking is submitted, as for a human.

Nothing here hands an agent what a human cannot see before the debrief: no hypothesis ids (labels and
titles only), no answer key, no worlds, no incident file. Only library incidents can be opened by id, so an
agent cannot make the server read a file of its choosing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from game import api

if TYPE_CHECKING:
    from game.api import Game
    from game.query.gateway import QueryResult
    from game.rules.library import LibraryEntry
    from game.session import Update

SHOWN_ROWS = 40
"""Rows of a result in the `table` text (as line mode prints them); `rows` holds all of them (up to the row cap)."""
STANCES = ("supports", "refutes")


class AgentError(Exception):
    """An action the game refused or that failed, in the words a human player reads for it."""


@dataclass
class AgentPlay:
    """The one game of one agent (an MCP connection, an RL episode).

    `player` names the agent in the session and transcript. `root` is the data folder its session and
    transcript go to (default: the user's, where `servedrill resume` and the leaderboard look).
    `incident` and `seed`, when given, are the only ones `start` opens (an evaluation fixes them);
    `incident` may then be a path, chosen by whoever runs the server, not by the agent. Thread-safe: one
    call at a time."""

    player: str = "agent"
    root: Path | None = None
    incident: str | None = None
    seed: int | None = None
    game: Game | None = field(default=None, init=False)
    transcript: Path | None = field(default=None, init=False)
    """Where the transcript was written (at the debrief)."""
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)

    # ---------------------------------------------------------------- before a game

    def incidents(self) -> dict[str, Any]:
        """The library as the picker lists it: id, title, difficulty, symptom tags, limits, summary."""
        if self.incident is not None:
            with _refusals():
                entries = api.library([api.find_incident(self.incident)])
        else:
            entries = [e for e in api.library() if e.problem is None]
        return {"incidents": [_entry(e) for e in entries],
                **({"fixed": {"incident": self.incident, "seed": self.seed}} if self.incident is not None else {})}

    def start(self, incident: str | None = None, seed: int | None = None) -> dict[str, Any]:
        """Open `incident` (a library id) at `seed` (default 0): build or find its telemetry, journal a new
        session, leave the briefing. Returns the briefing, the board (labels and titles) and the limits."""
        with self._lock:
            if self.game is not None:
                raise AgentError(f"this connection already plays session {self.game.session.session_id}; "
                                 "one session per connection: open a new one for another game")
            path, chosen = self._choose(incident, seed)
            with _refusals():
                variant = api.load_variant(path, chosen)
                telemetry = api.open_telemetry(variant)
                try:
                    session = api.new_session(variant, self.player, root=self.root)
                except BaseException:
                    telemetry.close()
                    raise
                self.game = api.Game(variant, telemetry, session)
                self.game.start()
            return {"session_id": session.session_id, "incident": variant.incident.id, "seed": chosen,
                    **self._briefing()}

    def _choose(self, incident: str | None, seed: int | None) -> tuple[Path, int]:
        if seed is not None and self.seed is not None and seed != self.seed:
            raise AgentError(f"this server plays seed {self.seed} only")
        if seed is not None and seed < 0:
            raise AgentError(f"a seed is a whole number of 0 or more, got {seed}")
        chosen = self.seed if self.seed is not None else int(seed or 0)
        if self.incident is not None:
            if incident not in (None, "") and incident != self.incident:
                raise AgentError(f"this server plays incident {self.incident} only")
            with _refusals():
                return api.find_incident(self.incident), chosen
        if not incident:
            raise AgentError("name an incident: one of the ids list_incidents gives")
        known = {e.id: e.path for e in api.library() if e.problem is None}
        known.update({p.stem: p for p in list(known.values())})
        if incident not in known:
            raise AgentError(f"unknown incident {incident[:80]!r}; the incidents are: {', '.join(sorted(known))}")
        return known[incident], chosen

    # ---------------------------------------------------------------- reading

    def briefing(self) -> dict[str, Any]:
        """The briefing again, with the board and the limits."""
        with self._lock:
            self._game()
            return self._briefing()

    def _briefing(self) -> dict[str, Any]:
        from game.frontends.line_mode import briefing_text

        game = self._game()
        incident = game.session.incident
        text = briefing_text(incident, game.session.board)
        # line mode's last line tells a typist how to type commands; an agent has tools instead
        text = text.rsplit("\n\n", 1)[0]
        return {"briefing": text, "hypotheses": self._board(), "query_budget": incident.query_budget,
                "time_limit_s": incident.time_limit_s, "hints": len(incident.hints), "row_cap": api.ROW_CAP}

    def schema(self) -> dict[str, Any]:
        """The tables and columns with their descriptions (the schema browser's list)."""
        with self._lock:
            game = self._game()
            with _refusals():
                entries = game.telemetry.gateway.catalog()
            tables: dict[str, list[dict[str, str]]] = {}
            for e in entries:
                tables.setdefault(e.table, []).append({"column": e.column, "type": e.type,
                                                       "description": e.description})
            return {"tables": [{"table": t, "columns": cols} for t, cols in tables.items()]}

    def status(self, *, deliver: bool = True) -> dict[str, Any]:
        """Where the game stands: state, queries used of the budget, game clock, ranking, pins, notes; with
        `deliver`, the updates that fell due too (each delivered once)."""
        with self._lock:
            game = self._game()
            s = game.session
            label = s.label_of
            return {
                "session_id": s.session_id, "state": s.state, "queries_used": len(s.queries),
                "query_budget": s.incident.query_budget, "elapsed_s": round(s.elapsed(), 1),
                "time_limit_s": s.incident.time_limit_s, "hints_taken": s.hints_taken,
                "hints_left": max(0, len(s.incident.hints) - s.hints_taken),
                "hypotheses": self._board(),
                "ranking": [{"hypothesis": label(r["id"]), "confidence": r["confidence"]} for r in s.ranking or []],
                "pins": [{**p, "hypothesis": label(p["hypothesis"])} for p in api.active_pins(s)],
                "notes": [{"hypothesis": label(e.data["hypothesis"]), "text": e.data["text"]}
                          for e in s.events if e.kind == "note"],
                "queries": [{"query": q.data["index"], "sql": q.data["sql"], "row_count": q.data.get("row_count")}
                            for q in s.queries],
                **(self._new_updates() if deliver else {}),
            }

    def updates(self) -> dict[str, Any]:
        """Every update received so far (incident injects, an interviewer's messages, hints taken)."""
        with self._lock:
            game = self._game()
            with _refusals():
                game.updates()
            return {"updates": [_update(u) for u in game.session.updates]}

    def queries_left(self) -> int | None:
        """Queries left in the budget (0 when spent); None when the incident sets no budget."""
        with self._lock:
            s = self._game().session
            budget = s.incident.query_budget
            return None if not budget else max(0, budget - len(s.queries))

    # ---------------------------------------------------------------- acting

    def query(self, sql: str) -> dict[str, Any]:
        """Run one read-only statement on the telemetry under the player limits. A statement that fails is
        an AgentError and costs nothing; one that ran is the next Qn."""
        with self._lock:
            game = self._game()
            with _refusals():
                ran = game.run_query(sql)
            result = ran.result
            if ran.index is None:
                raise AgentError(f"{result.error} (not counted: a statement that fails costs no query)")
            return {"query": ran.index, **_result(result), **self._budget_note(), **self._new_updates()}

    def rank(self, ranking: Mapping[str, float]) -> dict[str, Any]:
        """Set the ranking: hypothesis (label or title) -> percent, summing to 100."""
        with self._lock:
            game = self._game()
            with _refusals():
                event = game.rank(_ordered(ranking))
            return {"ranking": self._rows(event.data["ranking"]), **self._new_updates()}

    def pin(self, query: int, hypothesis: str, stance: str) -> dict[str, Any]:
        """Pin Qn as evidence that supports or refutes a hypothesis (label or title)."""
        with self._lock:
            game = self._game()
            with _refusals():
                event = game.pin(query, hypothesis, str(stance).lower())
            return {"pinned": self._pin_row(event.data), **self._new_updates()}

    def unpin(self, query: int, hypothesis: str, stance: str) -> dict[str, Any]:
        """Take a pin off again (it no longer counts)."""
        with self._lock:
            game = self._game()
            with _refusals():
                event = game.unpin(query, hypothesis, str(stance).lower())
            return {"unpinned": self._pin_row(event.data), **self._new_updates()}

    def note(self, hypothesis: str, text: str) -> dict[str, Any]:
        """Write a note on a hypothesis (label or title)."""
        with self._lock:
            game = self._game()
            with _refusals():
                event = game.note(hypothesis, text)
            return {"noted": {"hypothesis": game.session.label_of(event.data["hypothesis"])},
                    **self._new_updates()}

    def hint(self) -> dict[str, Any]:
        """Take the next hint; it costs the points it names."""
        with self._lock:
            game = self._game()
            with _refusals():
                event = game.hint()
            return {"hint": event.data["text"], "cost": event.data["cost"], **self._new_updates()}

    def submit(self, ranking: Mapping[str, float] | None = None) -> dict[str, Any]:
        """Submit the ranking (given here, or the current one). After this, the debrief opens; nothing else
        can change."""
        with self._lock:
            game = self._game()
            with _refusals():
                event = game.submit(_ordered(ranking) if ranking else None)
            return {"submitted": self._rows(event.data["ranking"]), "state": game.session.state,
                    "next": "call debrief for the score and what happened"}

    def debrief(self) -> dict[str, Any]:
        """The score and the debrief, once the ranking is submitted (refused before). Writes the transcript."""
        with self._lock:
            game = self._game()
            s = game.session
            if not api.handed_in(s):
                raise AgentError("the debrief opens once you submit your ranking (submit first; it shows the "
                                 "answer, so nothing can change after it)")
            with _refusals():
                done = api.debrief(s)
                self.transcript = s.export_transcript(api.transcripts_folder(self.root) / f"{s.session_id}.json",
                                                      game.telemetry.digest, {"total": done.report.total})
            report = done.report
            return {"total": report.total, "submitted": report.submitted,
                    "components": [{"key": c.key, "title": c.title, "points": c.points, "max": c.max,
                                    "reason": c.reason} for c in report.components],
                    "debrief": done.markdown, "transcript": str(self.transcript), "session_id": s.session_id}

    def close(self) -> None:
        """Close the gateway and release the session file (an unfinished session stays resumable)."""
        with self._lock:
            if self.game is not None:
                self.game.close()

    # ---------------------------------------------------------------- helpers

    def _game(self) -> Game:
        if self.game is None:
            raise AgentError("no game yet: call start_session first (list_incidents names the incidents)")
        return self.game

    def _board(self) -> list[dict[str, str]]:
        return [{"label": h.label, "title": h.title} for h in self._game().session.board]

    def _rows(self, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        label = self._game().session.label_of
        return [{"hypothesis": label(r["id"]), "confidence": r["confidence"]} for r in rows]

    def _pin_row(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return {"query": data["query"], "hypothesis": self._game().session.label_of(data["hypothesis"]),
                "stance": data["stance"]}

    def _budget_note(self) -> dict[str, Any]:
        s = self._game().session
        budget, used = s.incident.query_budget, len(s.queries)
        out: dict[str, Any] = {"queries_used": used, "query_budget": budget}
        if budget and used == budget:
            out["note"] = f"That was query {budget} of your budget of {budget}; further queries cost points."
        elif budget and used > budget:
            out["note"] = f"Over the budget of {budget} queries: each further query costs points."
        return out

    def _new_updates(self) -> dict[str, Any]:
        """The updates that fell due since the last call (each journalled once), when there are any."""
        game = self.game
        if game is None or not api.investigating(game.session):
            return {}
        try:
            fresh = game.updates()
        except api.SessionError:
            return {}
        return {"new_updates": [_update(u) for u in fresh]} if fresh else {}


@contextmanager
def _refusals() -> Iterator[None]:
    """The game's own refusals (session rules, an incident that does not load, a closed gateway) as
    AgentError with the message a human reads."""
    try:
        yield
    except AgentError:
        raise
    except api.SessionError as exc:
        raise AgentError(str(exc)) from None
    except api.IncidentError as exc:
        raise AgentError(str(exc.diagnostics[0]) if exc.diagnostics else "the incident does not load") from None
    except (RuntimeError, OSError) as exc:
        raise AgentError(str(exc) or type(exc).__name__) from None


def _ordered(ranking: Mapping[str, float]) -> list[tuple[str, float]]:
    """A {hypothesis: percent} mapping as the session takes it: most confident first, stable for ties."""
    if not isinstance(ranking, Mapping) or not ranking:
        raise AgentError("a ranking maps hypotheses (labels or titles) to percent summing to 100, e.g. "
                         '{"A": 70, "B": 30}')
    pairs: list[tuple[str, float]] = []
    for name, share in ranking.items():
        if isinstance(share, bool) or not isinstance(share, int | float):
            raise AgentError(f"confidence for {str(name)[:80]!r} must be a number of percent, got {share!r}")
        pairs.append((str(name), float(share)))
    return sorted(pairs, key=lambda p: -p[1])


def _entry(entry: LibraryEntry) -> dict[str, Any]:
    return {"id": entry.id, "title": entry.title, "difficulty": entry.difficulty, "tags": entry.shown_tags,
            "time_limit_s": entry.time_limit_s, "query_budget": entry.query_budget,
            "summary": entry.briefing.summary}


def _update(update: Update) -> dict[str, Any]:
    return {"kind": update.kind, "from": update.sender, "text": update.text, "cost": update.cost,
            "elapsed_s": round(update.elapsed_s, 1)}


def _result(result: QueryResult) -> dict[str, Any]:
    from game.frontends.line_mode import format_table, truncated_note

    data = result.to_dict()
    table = format_table(result.columns, result.rows, more_hint="see rows for all of them")
    return {"columns": data["columns"], "types": data["types"], "rows": data["rows"], "row_count": result.row_count,
            "truncated": result.truncated, "duration_ms": round(result.duration_s * 1000.0, 1),
            "table": table + ("\n" + truncated_note(result).strip() if result.truncated else "")}


"""The rules of a round: which event may come now, what it records, and what it changes.

`Rules` holds a round's state (briefing -> investigating -> submitted -> debriefed) and its events. It
reads no file and no clock: a live session, a resumed journal, the interviewer's mirror and a transcript
being checked all pass their events through the same `check` and `apply`, so a journal cannot hold
what the game would not have accepted. An illegal event raises SessionError and changes nothing.

The data `check` returns is what is journalled: keep its keys and their order (the journal format)."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from game.query.gateway import QueryResult, json_safe
from game.session.hypotheses import Shown as ShownHypothesis
from game.session.hypotheses import resolve as resolve_hypothesis
from game.session.hypotheses import shown_hypotheses
from game.session.inbox import GM_SENDER
from game.session.records import MEMBER_RE, STANCES, Event, Kind, SessionError, State
from incidents.spec import Incident, Inject

ROWS_KEPT = 20
KEPT_CELL_CHARS = 1000
KEPT_BYTES = 64 * 1024
"""Result rows kept per query event, for review and replay checks."""
CONFIDENCE_TOLERANCE = 0.5
"""Percent: a ranking's confidences must sum to 100 within this."""
MAX_NOTE_CHARS = 4000
MAX_GM_TEXT_CHARS = 4000

_VERBS = {Kind.QUERY: "run a query", Kind.PIN: "pin evidence", Kind.UNPIN: "unpin evidence",
          Kind.RANK: "rank hypotheses", Kind.NOTE: "write a note", Kind.HINT: "take a hint", Kind.SUBMIT: "submit"}
_WHY_NOT = {State.BRIEFING: "the investigation has not started", State.INVESTIGATING: "the investigation is still open",
            State.SUBMITTED: "the diagnosis was already submitted", State.DEBRIEFED: "the session is over"}


class Rules:
    """One round's state machine over `incident` as dealt by `seed` (its board's labels). Not thread-safe:
    a Session serialises access."""

    def __init__(self, incident: Incident, seed: int) -> None:
        self.incident = incident
        self.seed = seed
        self.events: list[Event] = []
        self.state = State.BRIEFING
        self.ranking: list[dict[str, Any]] | None = None
        self.hints_taken = 0
        self.delivered: list[int] = []  # the incident's injects delivered, by index
        self.delivered_injects: list[Inject] = []  # also the interviewer's own, in delivery order
        self.gm_done: set[str] = set()  # interviewer item ids already journalled
        self.names = incident.hypothesis_ids()
        self.board: list[ShownHypothesis] = shown_hypotheses(incident, seed)

    # ---------------------------------------------------------------- the two steps

    def check(self, kind: str, data: dict[str, Any], *, replaying: bool = False) -> dict[str, Any]:
        """Whether an event of `kind` may come now; returns the data to record (ids made canonical).
        `replaying` a journal accepts a gap in the query numbers (a damaged line lost a query). A team's
        shared game names the member who acted in `by` (a roster name, set by the session from the server's
        seat, never typed); it is kept as it is, whatever the kind."""
        if "by" not in data:
            return self._check(kind, data, replaying)
        by = data["by"]
        if not isinstance(by, str) or not MEMBER_RE.match(by):
            raise SessionError(f"'by' must be a team member's name, got {str(by)[:40]!r}")
        return {**self._check(kind, {k: v for k, v in data.items() if k != "by"}, replaying), "by": by}

    def _check(self, kind: str, data: dict[str, Any], replaying: bool) -> dict[str, Any]:
        match kind:
            case Kind.START:
                self.require(State.BRIEFING, "start")
                return data
            case Kind.DEBRIEF_VIEWED:
                self.require(State.SUBMITTED, "view the debrief")
                return data
            case Kind.ACT:
                return self._check_act(data)
        gm = self._check_gm_id(data)  # before the state: an id used twice is refused whatever the state
        match kind:
            case Kind.INJECT:
                return {**self._check_inject(data), **gm}
            case Kind.MESSAGE:  # may come at any point of the round, also before the start and after it
                sender, text = _gm_text(data, "a message")
                return {"from": sender, "text": text, **gm}
        self.require(State.INVESTIGATING, _VERBS[Kind(kind)])
        match kind:
            case Kind.QUERY:
                return check_query(data, self.next_query(), gap_ok=replaying)
            case Kind.PIN:
                return self._check_pin(data)
            case Kind.UNPIN:
                return self._check_unpin(data)
            case Kind.RANK:
                return {**data, "ranking": self._check_ranking(data.get("ranking"))}
            case Kind.SUBMIT:
                return {**data, "ranking": self._check_ranking(data.get("ranking")),
                        "discriminator": self._check_discriminator(data.get("discriminator"))}
            case Kind.NOTE:
                return self._check_note(data)
            case Kind.HINT if data.get("index") is None and data.get("text") is not None:
                return {**_check_own_hint(data), **gm}
            case _:  # Kind.HINT: the incident's next hint
                return {**self._check_incident_hint(data.get("index")), **gm}

    def apply(self, event: Event) -> None:
        """Record a checked event and move the state on."""
        self.events.append(event)
        data = event.data
        if isinstance(data.get("gm"), str):
            # an interviewer's id is used up by whatever event carries it; the kind decides the rest
            self.gm_done.add(data["gm"])
        match event.kind:
            case Kind.START:
                self.state = State.INVESTIGATING
            case Kind.RANK:
                self.ranking = [dict(r) for r in data["ranking"]]
            case Kind.SUBMIT:
                self.ranking = [dict(r) for r in data["ranking"]]
                self.state = State.SUBMITTED
            case Kind.DEBRIEF_VIEWED:
                self.state = State.DEBRIEFED
            case Kind.HINT if data.get("index") is not None:  # the interviewer's own hints are not counted
                self.hints_taken += 1
            case Kind.INJECT if data["index"] is None:  # the interviewer's own: it arrived when it came
                arrived = max(0.0, event.time - self.started_at())
                self.delivered_injects.append(Inject.model_validate(
                    {"after_s": arrived, "from": data["from"], "text": data["text"]}))
            case Kind.INJECT:
                self.delivered.append(data["index"])
                self.delivered_injects.append(self.incident.injects[data["index"]])
            case _:  # QUERY, PIN, UNPIN, NOTE, MESSAGE and the interviewer's hints are recorded only
                pass

    def replay(self, event: Event) -> Event:
        """Check and apply an event read back from a journal or a transcript; returns it as recorded."""
        last = self.events[-1] if self.events else None
        if last is not None and event.seq <= last.seq:
            raise SessionError(f"sequence number {event.seq} does not follow {last.seq}")
        checked = Event(event.seq, event.time, event.kind, self.check(event.kind, event.data, replaying=True))
        self.apply(checked)
        return checked

    # ---------------------------------------------------------------- reading

    def require(self, state: State, what: str) -> None:
        if self.state != state:
            raise SessionError(f"cannot {what}: {_WHY_NOT[self.state]}")

    def started_at(self) -> float:
        return next(e.time for e in self.events if e.kind == Kind.START)

    def count(self, kind: Kind) -> int:
        return sum(1 for e in self.events if e.kind == kind)

    def next_query(self) -> int:
        """Qn of the next query: one past the last (a query lost with a damaged journal line leaves a gap)."""
        return max((int(e.data["index"]) for e in self.events if e.kind == Kind.QUERY), default=0) + 1

    def query(self, index: Any) -> Event | None:
        if isinstance(index, bool) or not isinstance(index, int):
            return None
        return next((e for e in self.events if e.kind == Kind.QUERY and e.data.get("index") == index), None)

    def canonical(self, name: Any) -> str:
        """A hypothesis id from an id (or alias), a board label or a title (or a unique title prefix)."""
        if isinstance(name, str) and name in self.names:
            return self.names[name]
        found = resolve_hypothesis(name, self.board) if isinstance(name, str) else None
        if found is None:
            known = ", ".join(f"{s.label} ({s.title})" for s in self.board)
            raise SessionError(f"unknown hypothesis {str(name)[:80]!r}; hypotheses: {known}")
        return found

    # ---------------------------------------------------------------- one kind each

    def _check_gm_id(self, data: dict[str, Any]) -> dict[str, Any]:
        """{"gm": id} for an item from the game master's inbox (each delivered once), else {}."""
        if "gm" not in data:
            return {}
        gid = data["gm"]
        if not isinstance(gid, str) or not gid:
            raise SessionError(f"a game-master item id must be text, got {gid!r}")
        if gid in self.gm_done:
            raise SessionError(f"game-master item {gid} was already delivered")
        return {"gm": gid}

    def _check_incident_hint(self, index: Any) -> dict[str, Any]:
        if not self.incident.hints:
            raise SessionError("this incident has no hints")
        if self.hints_taken >= len(self.incident.hints):
            raise SessionError("no hints left")
        if index != self.hints_taken:
            raise SessionError(f"hint {index!r} is out of order (next is {self.hints_taken})")
        hint = self.incident.hints[index]
        return {"index": index, "cost": hint.cost, "text": hint.text}

    def _check_inject(self, data: dict[str, Any]) -> dict[str, Any]:
        self.require(State.INVESTIGATING, "deliver an update")
        index = data.get("index")
        if index is None and data.get("text") is not None:
            sender, text = _gm_text(data, "an update")
            return {"index": None, "from": sender, "text": text}
        injects = self.incident.injects
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(injects):
            raise SessionError(f"no inject {index!r}; the incident has {len(injects)}")
        if index in self.delivered:
            raise SessionError(f"inject {index} was already delivered")
        inject = injects[index]
        return {"index": index, "from": inject.sender, "text": inject.text}

    def _check_act(self, data: dict[str, Any]) -> dict[str, Any]:
        """The mitigation: once, after the diagnosis was submitted, on an incident that has a mitigation phase;
        its actions written as incidents.mitigation parses them, each fitting the fleet."""
        from incidents.mitigation import ActionError, check_against, parse_actions

        if self.state not in (State.SUBMITTED, State.DEBRIEFED):
            raise SessionError("act after the diagnosis: submit first")
        mit = self.incident.mitigation
        if mit is None:
            raise SessionError("this incident has no mitigation phase")
        if self.count(Kind.ACT):
            raise SessionError("the mitigation was already applied: the fleet is running with it")
        texts = data.get("actions")
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise SessionError("act needs at least one action, e.g. act rollback")
        try:
            actions = parse_actions(texts)
            allowed: list[str] | None = None if mit.actions is None else list(mit.actions)
            for action in actions:
                check_against(action, replicas=self.incident.fleet.replicas, allowed=allowed)
        except ActionError as exc:
            raise SessionError(str(exc)) from None
        decision = data.get("decision_s")
        if not isinstance(decision, int | float) or isinstance(decision, bool) or \
                not 0.0 < float(decision) <= self.incident.window.duration_s:
            span = self.incident.window.duration_s
            raise SessionError(f"the decision time must lie within the window (0, {span:g}] s")
        return {"actions": [a.text() for a in actions], "decision_s": float(decision)}

    def _check_note(self, data: dict[str, Any]) -> dict[str, Any]:
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise SessionError("a note needs some text")
        if len(text) > MAX_NOTE_CHARS:
            raise SessionError(f"a note holds at most {MAX_NOTE_CHARS} characters")
        return {"hypothesis": self.canonical(data.get("hypothesis")), "text": text}

    def _check_pin(self, data: dict[str, Any]) -> dict[str, Any]:
        index = data.get("query")
        query = self.query(index)
        if query is None:
            last = self.next_query() - 1
            raise SessionError(f"no query Q{index}; queries so far: Q1..Q{last}" if last
                               else "no queries yet to pin")
        if not query.data.get("ok"):
            raise SessionError(f"Q{index} failed; pin a query that ran")
        stance = data.get("stance")
        if stance not in STANCES:
            raise SessionError(f"stance must be 'supports' or 'refutes', got {stance!r}")
        return {"query": index, "hypothesis": self.canonical(data.get("hypothesis")), "stance": stance}

    def _check_unpin(self, data: dict[str, Any]) -> dict[str, Any]:
        index, hypothesis, stance = data.get("query"), self.canonical(data.get("hypothesis")), data.get("stance")
        if stance not in STANCES:
            raise SessionError(f"stance must be 'supports' or 'refutes', got {stance!r}")
        if not any(pin_key(e) == (index, hypothesis, stance) for e in active_pins(self.events)):
            raise SessionError(f"Q{index} is not pinned as {stance} that hypothesis")
        return {"query": index, "hypothesis": hypothesis, "stance": stance}

    def _check_ranking(self, rows: Any) -> list[dict[str, Any]]:
        if not isinstance(rows, list) or not rows:
            raise SessionError("a ranking needs at least one hypothesis with a confidence")
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for row in rows:
            if not isinstance(row, Mapping):
                raise SessionError("each ranking entry needs an id and a confidence")
            hid = self.canonical(row.get("id"))
            if hid in seen:
                raise SessionError(f"hypothesis {hid!r} is ranked twice")
            seen.add(hid)
            conf = row.get("confidence")
            if isinstance(conf, bool) or not isinstance(conf, int | float) or not math.isfinite(conf):
                raise SessionError(f"confidence for {hid!r} must be a number of percent, got {conf!r}")
            if not 0 <= conf <= 100:
                raise SessionError(f"confidence for {hid!r} must be within 0..100 percent, got {conf:g}")
            out.append({"id": hid, "confidence": float(conf)})
        total = sum(r["confidence"] for r in out)
        if abs(total - 100.0) > CONFIDENCE_TOLERANCE:
            raise SessionError(f"confidences must sum to 100 percent; these sum to {total:g}")
        for a, b in itertools.pairwise(out):
            if b["confidence"] > a["confidence"]:
                raise SessionError(f"ranking order: {b['id']} ({b['confidence']:g}%) is listed below "
                                   f"{a['id']} ({a['confidence']:g}%); list the most likely first")
        return out

    def _check_discriminator(self, index: Any) -> int | None:
        if index is None:
            return None
        n = self.next_query() - 1
        if self.query(index) is None:
            raise SessionError(f"discriminator Q{index} is not one of your queries (Q1..Q{n})" if n
                               else "no queries yet to name as the discriminator")
        return index


def _gm_text(data: dict[str, Any], what: str) -> tuple[str, str]:
    """(sender, text) of a game master's message, hint or inject."""
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        raise SessionError(f"{what} needs some text")
    if len(text) > MAX_GM_TEXT_CHARS:
        raise SessionError(f"{what} holds at most {MAX_GM_TEXT_CHARS} characters")
    sender = data.get("from", GM_SENDER)
    if not isinstance(sender, str) or not sender.strip():
        raise SessionError(f"{what} needs a sender (from)")
    return sender.strip(), text


def _check_own_hint(data: dict[str, Any]) -> dict[str, Any]:
    """A hint the game master wrote himself (not one of the incident's): text and cost in points."""
    sender, text = _gm_text(data, "a hint")
    cost = data.get("cost", 0)
    if isinstance(cost, bool) or not isinstance(cost, int) or not 0 <= cost <= 100:
        raise SessionError(f"a hint's cost must be whole points within 0..100, got {cost!r}")
    return {"index": None, "cost": cost, "text": text, "from": sender}


def check_query(data: dict[str, Any], index: int, *, gap_ok: bool = False) -> dict[str, Any]:
    """A query event's data as recorded, numbered `index` (the next Qn). Replaying a journal (`gap_ok`),
    a later Qn is accepted: the queries in between were lost with a damaged line, the rest still count."""
    sql = data.get("sql")
    if not isinstance(sql, str):
        raise SessionError("a query event needs its SQL text")
    recorded = data.get("index")
    if gap_ok and isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > index:
        index = recorded
    elif recorded not in (None, index):
        raise SessionError(f"query index {recorded!r} should be {index}")
    reads = data.get("reads") or []
    if not isinstance(reads, list) or not all(isinstance(r, Mapping) and "table" in r for r in reads):
        raise SessionError("a query's reads must be a list of {table, columns, filters}")
    return {**data, "index": index, "ok": bool(data.get("ok")), "reads": reads}


def ranking_rows(ranking: Sequence[tuple[str, float]] | Mapping[str, float]) -> list[dict[str, Any]]:
    """A ranking given as pairs, a mapping or rows, as the rows an event records (not yet checked)."""
    pairs: Iterable[Any] = ranking.items() if isinstance(ranking, Mapping) else ranking
    rows = []
    for pair in pairs:
        if isinstance(pair, Mapping):
            rows.append({"id": pair.get("id"), "confidence": pair.get("confidence")})
            continue
        try:
            hid, conf = pair
        except (TypeError, ValueError):
            raise SessionError(f"ranking entries are (hypothesis, confidence) pairs, got {pair!r}") from None
        rows.append({"id": hid, "confidence": conf})
    return rows


def query_event_data(result: QueryResult, index: int) -> dict[str, Any]:
    """The data of a query event for query Q`index`: the result's outcome, reads and first ROWS_KEPT rows."""
    return {
        "index": index,
        "sql": result.sql,
        "ok": bool(result.ok),
        "error": result.error,
        "error_kind": result.error_kind,
        "row_count": int(result.row_count),
        "columns": list(result.columns),
        "truncated": bool(result.truncated),
        "duration_s": round(float(result.duration_s), 6),
        "reads": [r.to_dict() for r in result.reads],
        "rows": kept_rows(result.rows),
    }


def kept_rows(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The first ROWS_KEPT rows as the journal keeps them: each cell at most KEPT_CELL_CHARS of text and
    all of them at most KEPT_BYTES, so one query cannot bloat the journal (the query can be re-run)."""
    kept: list[list[Any]] = []
    size = 0
    for row in rows[:ROWS_KEPT]:
        cells = []
        for v in row:
            cell = json_safe(v)
            if isinstance(cell, str | list | dict) and len(text := json.dumps(cell)) > KEPT_CELL_CHARS:
                cell = text[:KEPT_CELL_CHARS] + "..."
            cells.append(cell)
        size += len(json.dumps(cells, default=str))
        if size > KEPT_BYTES:
            break
        kept.append(cells)
    return kept


def pin_key(event: Event) -> tuple[Any, Any, Any]:
    """(query index, hypothesis id, stance) of a pin or unpin event."""
    return event.data.get("query"), event.data.get("hypothesis"), event.data.get("stance")


def active_pins(events: Iterable[Event]) -> list[Event]:
    """The pin events still in force, in pin order: a pin counts once however often it was made, and an
    `unpin` of the same (query, hypothesis, stance) withdraws it (a later pin puts it back). Scoring, the
    interviewer's view and the screens all read pins through this."""
    live: dict[tuple[Any, Any, Any], Event] = {}
    for e in events:
        if e.kind == Kind.PIN:
            live.setdefault(pin_key(e), e)
        elif e.kind == Kind.UNPIN:
            live.pop(pin_key(e), None)
    return list(live.values())  # insertion order is pin order: a re-pin after an unpin is appended

"""`Session`: one player's round, journalled so that it survives a crash.

It ties the package's parts together: every action goes through the rules (`game.session.rules`), is
appended to the journal (`game.session.journal`) and only then changes the state; the interviewer's
inbox (`game.session.inbox`) is polled into the same journal; the draft sidecar (`game.session.draft`)
keeps what the UI has not recorded yet and the held intervals behind the game clock.

This module is the package's one reader of the wall clock (`time.time()`): a test that moves the clock
for every session action replaces `game.session.core.time`.

Why one module a little over 500 lines: `Session` is the package's one stateful class, every method an
action in the journalled order above; its parts (rules, journal, inbox, draft) are modules of their own."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from game.query.gateway import QueryResult
from game.session import journal, seat, signing
from game.session.draft import Draft, held_clock
from game.session.gm_key import key_path as gm_key_path
from game.session.gm_key import record_trust as record_gm_trust
from game.session.gm_key import verify as verify_gm
from game.session.hypotheses import Shown as ShownHypothesis
from game.session.inbox import InboxReader, gm_event
from game.session.paths import draft_path, file_digest, inbox_path, locate_incident, open_incident, sessions_dir
from game.session.records import (
    ACT,
    DEBRIEF_VIEWED,
    HINT,
    INJECT,
    MESSAGE,
    NOTE,
    PIN,
    QUERY,
    RANK,
    START,
    SUBMIT,
    UNPIN,
    Event,
    Header,
    Kind,
    SessionError,
    SessionWarning,
    State,
    Update,
    iso,
)
from game.session.rules import Rules, query_event_data, ranking_rows
from game.session.transcripts import transcript_doc, write_transcript
from incidents.spec import Incident, Inject

_ONCE = (START, DEBRIEF_VIEWED)
"""What a team's shared game records once, whichever member's process comes first (`Session._record`)."""


class _Runs(Protocol):
    def run(self, sql: str) -> QueryResult: ...


class Session:
    """One player's investigation of one incident. Thread-safe: one action at a time.

    Use `create`, `resume` or `in_memory`; the constructor (no journal, nothing locked) is for those and
    for a reader that mirrors a journal from outside (`game.gameday.gm.Watch`) through `replay`."""

    def __init__(self, header: Header, incident: Incident, path: Path | None) -> None:
        self.header = header
        self.incident = incident
        self.path = path
        self.warnings: list[str] = []
        self.member: str | None = seat.team_member(header) if path is not None else None
        """A team's shared game (game.session.seat): the member this process plays for, named in every event it
        records (`data.by`); None for one player's game."""
        self.gm_inbox: Path | None = inbox_path(path) if path is not None else None
        # each member keeps a draft of their own (their board being arranged, their editor, their hold)
        self.draft_path: Path | None = None if path is None else draft_path(path, self.member)
        self._rules = Rules(incident, header.seed)
        self._inbox = InboxReader(self.gm_inbox)
        self._gm_refused: dict[str, str] = {}
        self._draft = Draft(self.draft_path, header.session_id)
        self._lock = threading.RLock()
        self._fh: BinaryIO | None = None
        self._offset = 0
        """A shared game: the bytes of its journal this process has read (and applied)."""
        self._next_line = 2
        self._news: list[Event] = []
        """A shared game: what the other members recorded since `team_news` was last asked."""
        self._their_updates: list[Event] = []
        """A shared game: injects, messages and hints another member's process journalled, for `due_updates`."""

    # ---------------------------------------------------------------- opening

    @classmethod
    def create(cls, incident_path: Path | str, seed: int, player: str, *,
               root: Path | None = None) -> Session:
        """Start a new journalled session for the incident file at `incident_path`.

        The journal goes to `root`/sessions (default: `data_dir()`). Raises SessionError when the
        incident does not load or the file cannot be created."""
        path = Path(incident_path).resolve()
        incident = open_incident(path, int(seed))
        header = cls._new_header(incident, file_digest(path), str(path), seed, player, seat.team_members(player))
        folder = sessions_dir(root)
        target, fh = journal.begin(folder, header)  # a served round's checks; signed when the server says
        session = cls(header, incident, target)
        session._fh = fh
        session._offset = fh.tell()
        session._hold()
        return session

    @classmethod
    def in_memory(cls, incident: Incident, seed: int, player: str, *, incident_digest: str = "",
                  incident_path: str = "") -> Session:
        """A session that journals nothing (scripted players, replays). Same rules as a file session.

        Without `incident_digest`, the digest is the sha256 of the incident's canonical JSON."""
        digest = incident_digest or hashlib.sha256(
            json.dumps(incident.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()
        return cls(cls._new_header(incident, digest, incident_path, seed, player), incident, None)

    @staticmethod
    def _new_header(incident: Incident, digest: str, path: str, seed: int, player: str,
                    members: tuple[str, ...] = ()) -> Header:
        now = time.time()
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H%M%S")
        session_id = f"{incident.id}-{stamp}-{secrets.token_hex(3)}"
        return Header(session_id, incident.id, digest, path, int(seed), player or "player", iso(now),
                      members=members)

    @classmethod
    def resume(cls, path: Path | str) -> Session:
        """Reopen a journalled session to continue it. Damaged lines become `warnings` (and
        SessionWarning); a damaged header, a missing or changed incident raise SessionError."""
        path = Path(path)
        shared = seat.shares_journals()  # a team round: read under the lock, then leave it to each action
        fh = journal.open_shared(path) if shared else journal.open_locked(path)
        try:
            session = cls._from_journal(path, fh)
            if shared:
                if session.member is None:
                    raise SessionError(f"{path}: not your team's shared game")
                journal.unlock(fh)
        except BaseException:
            fh.close()
            raise
        problem = session._draft.read()
        if problem:
            session.warnings.append(problem)
        session._hold()
        for message in session.warnings:
            warnings.warn(message, SessionWarning, stacklevel=2)
        return session

    @classmethod
    def _from_journal(cls, path: Path, fh: BinaryIO) -> Session:
        text = journal.read(fh, path)
        header = text.header
        incident_path = locate_incident(header.incident_id, header.incident_path)
        try:
            digest = file_digest(incident_path)
        except OSError as exc:  # refused by the bounded read (a FIFO, over the size cap) or unreadable
            raise SessionError(f"{path}: cannot read incident {incident_path} ({exc.strerror or exc})") from None
        if digest != header.incident_digest:
            raise SessionError(f"{path}: incident {header.incident_id} changed since this session started "
                               f"({incident_path}); it cannot be resumed")
        session = cls(header, open_incident(incident_path, header.seed), path)
        session._fh = fh
        for number, line in text.lines:
            try:
                session.replay(journal.parse_line(line))
            except (ValueError, SessionError) as exc:  # one damaged line loses only itself
                session.warnings.append(f"{path}:{number}: skipped a damaged line ({exc})")
        numbers = [int(e.data["index"]) for e in session._rules.events if e.kind == QUERY]
        lost = sorted(set(range(1, max(numbers, default=0) + 1)) - set(numbers))
        if lost:
            session.warnings.append(f"{path}: {', '.join(f'Q{n}' for n in lost)} went with the damaged "
                                    "line(s); the other queries are kept")
        complete = False
        if text.torn.strip():
            try:
                session.replay(journal.parse_line(text.torn))
                complete = True
            except (ValueError, SessionError):
                session.warnings.append(f"{path}:{text.torn_number}: dropped an incomplete last line "
                                        "(a write cut short)")
        journal.repair_torn(fh, text, complete=complete)
        session._offset = fh.tell()
        session._next_line = text.torn_number + (1 if complete else 0)
        return session

    def close(self) -> None:
        """Release the journal file (and close this process's hold in the draft sidecar). The session
        stays resumable. Idempotent."""
        with self._lock:
            if self._fh is not None:
                if self._draft.release(time.time()):
                    self._draft.write()
                self._fh.close()
                self._fh = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- draft and time held

    @property
    def draft(self) -> dict[str, Any]:
        """What was not recorded when the session was last held: {"board": [{"id", "confidence"}] (the
        board's order and confidences, saved or not), "editor": the SQL editor's text}, each only when it
        is newer than what the journal says (a ranking or query recorded after the draft was written wins).
        Empty when there is none."""
        with self._lock:
            return self._draft.offered(self._rules.events, self._rules.names)

    def save_draft(self, *, board: Sequence[Mapping[str, Any]] | None = None, editor: str | None = None) -> None:
        """Keep the board's current order and confidences ([{"id", "confidence"}], best first) and/or the
        editor's text in the draft sidecar (rewritten at once, atomically; call it debounced). Also a sign
        of life (`heartbeat`). Never raises for the file: a draft is best effort."""
        with self._lock:
            events = self._rules.events
            self._draft.keep(board=board, editor=editor, seq=events[-1].seq if events else 0, now=time.time())
            self._seen()
            self._draft.write()

    def heartbeat(self) -> None:
        """Note that this process still holds the session (a crash then loses at most the time since)."""
        with self._lock:
            self._seen()
            self._draft.write()

    @property
    def held(self) -> list[tuple[float, float, bool]]:
        """(opened, last seen, closed) of every process that held this session, oldest first."""
        with self._lock:
            return [(float(a), float(b), bool(c)) for a, b, c in self._draft.held]

    def elapsed(self, now: float | None = None) -> float:
        """Seconds of investigation at `now` (epoch seconds, default the current time): since the start,
        less the gaps when no process held the session (`game.session.draft`). 0 before the start."""
        with self._lock:
            return max(0.0, self._clock(now)) if self._rules.count(START) else 0.0

    def follow_held(self, held: Sequence[Sequence[Any]]) -> None:
        """For a mirror of a session another process holds (`game.gameday.gm.Watch`): take the held intervals
        from its draft sidecar (`read_held`), so `elapsed` and `updates` are on the candidate's game
        clock. A session this process holds keeps its own."""
        with self._lock:
            if self._fh is None and self.path is None:
                self._draft.held = [[float(h[0]), float(h[1]), bool(h[2])] for h in held]

    def _clock(self, now: float | None) -> float:
        """`elapsed` unclamped (negative for a `now` before the start); the investigation has started."""
        when = time.time() if now is None else now
        return held_clock(self._draft.held, [e.time for e in self._rules.events], self._rules.started_at(), when)

    def _seen(self) -> None:
        if self._fh is not None:
            self._draft.seen(time.time())

    def _hold(self) -> None:
        """This process opens the session: a new held interval, written at once; and which interviewer key its
        game takes items signed with (`gm_key.record_trust`: a sender holding another is refused up front)."""
        self._draft.hold(time.time())
        self._draft.write()
        if self.path is not None:
            record_gm_trust(self.path)

    # ---------------------------------------------------------------- reading

    @property
    def session_id(self) -> str:
        return self.header.session_id

    @property
    def state(self) -> State:
        return self._rules.state

    @property
    def events(self) -> list[Event]:
        """A copy of the events so far, in order."""
        with self._lock:
            return list(self._rules.events)

    @property
    def queries(self) -> list[Event]:
        """Query events; the player's Qn is ``queries[n - 1]`` (``data["index"] == n``)."""
        return [e for e in self.events if e.kind == QUERY]

    @property
    def ranking(self) -> list[dict[str, Any]] | None:
        """The latest ranking: [{"id", "confidence" (percent)}], best first; None before the first."""
        with self._lock:
            ranking = self._rules.ranking
            return None if ranking is None else [dict(r) for r in ranking]

    @property
    def hints_taken(self) -> int:
        return self._rules.hints_taken

    @property
    def submission(self) -> Event | None:
        return next((e for e in self.events if e.kind == SUBMIT), None)

    @property
    def board(self) -> list[ShownHypothesis]:
        """The hypotheses in this session's shuffled order, labelled A, B, ... (what the player sees)."""
        return list(self._rules.board)

    def label_of(self, hypothesis_id: str) -> str:
        """The board label (A, B, ...) of a hypothesis id."""
        return next((s.label for s in self._rules.board if s.id == hypothesis_id), hypothesis_id)

    # ---------------------------------------------------------------- a team's shared game

    @property
    def team(self) -> tuple[str, ...]:
        """The members of a team's shared game (the header's), empty for one player's game."""
        return self.header.members

    def sync(self) -> list[Event]:
        """A team's shared game: check and apply what the other members' processes recorded since this process
        last read the journal (their queries, pins, rankings, notes, hand-in); returns those events, oldest
        first. Nothing for one player's game. SessionError when the journal no longer verifies."""
        with self._lock:
            if self.member is None or self._fh is None:
                return []
            with journal.locked(self._fh, exclusive=False):
                return self._catch_up(cut_torn=False)

    def team_news(self) -> list[Event]:
        """A team's shared game: the events the other members recorded since the last call (after a `sync`), for
        a front end to redraw what they changed. Empty for one player's game."""
        with self._lock:
            self.sync()
            news, self._news = self._news, []
            return news

    def _catch_up(self, *, cut_torn: bool) -> list[Event]:
        """Read, verify (a signed journal: each line's MAC on the chain's head) and replay the journal's lines
        after `_offset`. Holding the journal's lock."""
        assert self._fh is not None and self.path is not None
        lines, offset, torn = journal.follow(self._fh, self.path, self._offset)
        if torn and cut_torn:  # a member's write that died half way: never acknowledged, cut off
            journal.cut(self._fh, offset)
        chain = signing.chain_of(self._fh)
        new: list[Event] = []
        for line in lines:
            number = self._next_line
            self._next_line += 1
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if chain is not None:
                    assert chain.head is not None
                    chain.head = signing.verify_next(chain.key, chain.head, record, number)
                event = self._rules.replay(Event.from_dict(signing.strip(record)))
            except signing.ChainBroken as exc:
                raise SessionError(f"{self.path}:{exc.line}: {exc.reason}; the team's game cannot go on") from None
            except (ValueError, SessionError) as exc:
                raise SessionError(f"{self.path}:{number}: a line the team's game cannot take ({exc})") from None
            new.append(event)
            if event.data.get("by") != self.member:
                self._news.append(event)
            if event.kind in (INJECT, MESSAGE, HINT):
                self._their_updates.append(event)
        self._offset = offset
        return new

    def _second_hand_in(self) -> SessionError | None:
        """Why a member may not hand in the team's board (None: they may): one hand-in per team."""
        done = next((e for e in self._rules.events if e.kind == SUBMIT), None)
        if done is None:
            return None
        who = str(done.data.get("by") or "a team member")
        at = time.strftime("%H:%M:%S", time.localtime(done.time))
        return SessionError(f"{who} already handed in team {self.header.player}'s board at {at}: one hand-in per "
                            "team, and it counts for every member")

    # ---------------------------------------------------------------- actions

    def start(self, telemetry_digest: str | None = None) -> Event:
        """Leave the briefing. `telemetry_digest` (the incident database's) goes into the transcript. In a team's
        shared game a member who leaves the briefing after another gets that member's start event back."""
        return self._record(START, {"telemetry_digest": telemetry_digest})

    def run_query(self, gateway: _Runs, sql: str) -> tuple[Event | None, QueryResult]:
        """Run `sql` through the gateway and record it when it ran. A statement that fails (refused by the
        gateway, a SQL error, a timeout, cancelled) comes back with event None: not journalled, so it costs
        no query from the budget, gets no Qn and cannot be pinned; this is the game's one place for that
        rule, so every front end plays by it. Refused (SessionError) before the gateway runs anything when
        the session is not investigating. Blocks while the query runs (call from a worker thread)."""
        with self._lock:
            self.sync()  # a team's game: a member may have handed it in meanwhile
            self._rules.require(State.INVESTIGATING, "run a query")
        # not under the lock: the board stays usable while a slow query runs
        result = gateway.run(sql)
        if not result.ok:
            return None, result
        return self._record_query(result), result

    def _record_query(self, result: QueryResult) -> Event:
        """Record a result that ran (`run_query` decides which do)."""
        with self._lock:
            return self._record(QUERY, query_event_data(result, self._rules.next_query()))

    def pin(self, query_index: int, hypothesis: str, stance: str) -> Event:
        """Pin query Q`query_index` (1-based) to a hypothesis as evidence that supports or refutes it."""
        return self._record(PIN, {"query": query_index, "hypothesis": hypothesis, "stance": stance})

    def unpin(self, query_index: int, hypothesis: str, stance: str) -> Event:
        """Withdraw the pin of Q`query_index` to `hypothesis` with `stance`; it no longer counts. Raises
        SessionError when no such pin is in force."""
        return self._record(UNPIN, {"query": query_index, "hypothesis": hypothesis, "stance": stance})

    def rank(self, ranking: Sequence[tuple[str, float]] | Mapping[str, float]) -> Event:
        """Set the board: hypothesis ids (or aliases), best first, with confidences in percent that
        sum to 100 (within 0.5) and do not increase down the list."""
        return self._record(RANK, {"ranking": ranking_rows(ranking)})

    def note(self, hypothesis: str, text: str) -> Event:
        return self._record(NOTE, {"hypothesis": hypothesis, "text": text})

    def take_hint(self) -> Event:
        """Reveal the next hint; its text and cost (score points) are in the event's data."""
        with self._lock:
            return self._record(HINT, {"index": self._rules.hints_taken})

    def submit(self, ranking: Sequence[tuple[str, float]] | Mapping[str, float] | None = None,
               discriminator: int | None = None) -> Event:
        """Submit the final ranking (default: the current board) and the index of the query that
        separates the top two hypotheses (None: none named)."""
        with self._lock:
            self.sync()  # a team's game: the board as the team left it
            if ranking is None:
                if self._rules.ranking is None and self._rules.state == State.INVESTIGATING:
                    raise SessionError("rank the hypotheses before submitting (e.g. rank A=70 B=30)")
                rows = self._rules.ranking or []
            else:
                rows = ranking_rows(ranking)
            return self._record(SUBMIT, {"ranking": rows, "discriminator": discriminator})

    def act(self, actions: Sequence[str], decision_s: float) -> Event:
        """Journal the mitigation: the actions as written, applied at `decision_s` (seconds into the window)."""
        return self._record(ACT, {"actions": list(actions), "decision_s": decision_s})

    def view_debrief(self) -> Event:
        """Mark the submitted session debriefed. In a team's shared game every member's debrief opens as the round
        ends; a member whose debrief opens after another's gets that member's event back."""
        return self._record(DEBRIEF_VIEWED, {})

    def replay(self, event: Event) -> Event:
        """Check and apply an event read back from a journal (not written again): how a resumed session
        and an outside reader (`game.gameday.gm.Watch`) follow one. SessionError when the rules refuse it."""
        with self._lock:
            return self._rules.replay(event)

    # ---------------------------------------------------------------- injects

    def due_injects(self, now: float | None = None) -> list[Inject]:
        """Deliver the injects that are due and not delivered yet; returns them in file order.

        An inject is due `after_s` seconds of the game clock (`elapsed`; `now`: epoch seconds, default
        the current time) after the investigation started, or once `after_queries` queries are recorded.
        Each one is journalled as an `inject` event before this returns, so it is delivered once, also
        across resume. Returns [] unless the investigation is open. A UI polls this (on a timer and
        after each query) and shows what it returns.
        """
        with self._lock:
            return [self.incident.injects[e.data["index"]] for e in self._deliver_due(now)]

    def _deliver_due(self, now: float | None) -> list[Event]:
        if self._rules.state != State.INVESTIGATING:
            return []
        elapsed = self._clock(now)
        queries = self._rules.count(QUERY)
        out = []
        for index, inject in enumerate(self.incident.injects):
            if index in self._rules.delivered:
                continue
            by_time = inject.after_s is not None and elapsed >= inject.after_s
            by_queries = inject.after_queries is not None and queries >= inject.after_queries
            if by_time or by_queries:
                try:
                    out.append(self._record(INJECT, {"index": index}))
                except SessionError:
                    if self.member is None:
                        raise  # a team's game: another member's process delivered it first (it comes as theirs)
        return out

    def due_updates(self, now: float | None = None) -> list[Update]:
        """What a UI's poll shows now: the timed injects that fell due (`due_injects`), then the game
        master's new inbox items (`poll_gm`), each journalled before this returns."""
        with self._lock:
            self.sync()
            delivered = self._deliver_due(now)
            theirs, self._their_updates = self._their_updates, []  # a team's game: delivered in another member's
            return [self._update_of(e) for e in [*theirs, *delivered]] + self.poll_gm()

    @property
    def delivered_injects(self) -> list[Inject]:
        """Injects delivered so far, in delivery order (what a resumed UI shows again). An inject the
        game master wrote himself appears with `after_s` = when it arrived."""
        with self._lock:
            return list(self._rules.delivered_injects)

    @property
    def updates(self) -> list[Update]:
        """Everything delivered so far, oldest first: injects, game-master messages, hints."""
        with self._lock:
            return [self._update_of(e) for e in self._rules.events if e.kind in (INJECT, MESSAGE, HINT)]

    def next_inject_in(self, now: float | None = None) -> float | None:
        """Seconds until the next undelivered timed inject is due (0 when one is due now), or None
        when no timed inject is left or the investigation is not open; for a UI's timer."""
        with self._lock:
            if self._rules.state != State.INVESTIGATING:
                return None
            elapsed = self._clock(now)
            waits = [inj.after_s - elapsed for i, inj in enumerate(self.incident.injects)
                     if inj.after_s is not None and i not in self._rules.delivered]
            return max(0.0, min(waits)) if waits else None

    # ---------------------------------------------------------------- game master

    def poll_gm(self) -> list[Update]:
        """Deliver the game master's inbox items not delivered yet; returns them in inbox order.

        Reads only the inbox's new complete lines (nothing when its size has not changed). Each item
        is journalled (`message`, `hint` or `inject`, with its id under ``gm``) before this returns.
        A hint or inject sent before the investigation started waits for it; an item this session
        cannot take (no hints left, an inject already delivered, the round already submitted) is
        refused once and listed in `gm_refused`. Journal-only sessions (in memory) have no inbox."""
        with self._lock:
            if self.gm_inbox is None or self._fh is None:
                return []
            out: list[Update] = []
            for item in self._inbox.new_items():
                gid = item["id"]
                if gid in self._rules.gm_done or gid in self._gm_refused:
                    continue
                if not verify_gm(item):
                    self._gm_refused[gid] = ("not signed with this machine's interviewer key "
                                             f"({gm_key_path()}); only `servedrill send` there can send")
                    continue
                try:
                    event = self._record(*gm_event(item, self._rules.hints_taken))
                except SessionError as exc:
                    if self._rules.state == State.BRIEFING and item.get("kind") in (HINT, INJECT):
                        self._inbox.wait(item)
                    else:
                        self._gm_refused[gid] = str(exc)
                    continue
                out.append(self._update_of(event))
            return out

    def check_inbox_item(self, item: Mapping[str, Any]) -> None:
        """Raise SessionError when this session, as it is now, would refuse the inbox `item` (checked
        only: nothing is journalled). For the interviewer's view of what is still pending."""
        with self._lock:
            kind, data = gm_event(item, self._rules.hints_taken)
            self._rules.check(kind, data)

    @property
    def gm_refused(self) -> dict[str, str]:
        """Inbox item ids this process refused, with the reason (one line each)."""
        with self._lock:
            return dict(self._gm_refused)

    @property
    def gm_delivered(self) -> set[str]:
        """Ids of the game master's items journalled in this session."""
        with self._lock:
            return set(self._rules.gm_done)

    def _update_of(self, event: Event) -> Update:
        data = event.data
        # on the game clock, as the player's own timer: an update after a break is not stamped later
        elapsed = self._clock(event.time) if self._rules.count(START) else 0.0
        gm = data.get("gm") if isinstance(data.get("gm"), str) else None
        if event.kind == HINT:
            number = data.get("index")
            sender = data.get("from") or (f"Hint {number + 1}" if isinstance(number, int) else "Hint")
            source = "gm" if gm else "player"
            return Update(event.seq, event.time, HINT, str(sender), str(data.get("text", "")), source,
                          int(data.get("cost", 0)), elapsed, gm)
        source = "gm" if gm or event.kind == MESSAGE else "incident"
        return Update(event.seq, event.time, event.kind, str(data.get("from", "")), str(data.get("text", "")),
                      source, 0, elapsed, gm)

    # ---------------------------------------------------------------- transcript

    def transcript(self, telemetry_digest: str | None = None,
                   score: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The session as one JSON-ready document (see docs/cli.md for the keys). `score` (a score
        report's dict) is recorded for reading; scoring never trusts it."""
        return transcript_doc(self.header, self.events, self.state, exported=time.time(),
                              telemetry_digest=telemetry_digest, score=score)

    def export_transcript(self, path: Path | str, telemetry_digest: str | None = None,
                          score: Mapping[str, Any] | None = None) -> Path:
        """Write the transcript atomically (a temporary file, then rename). Returns the path."""
        return write_transcript(path, self.transcript(telemetry_digest, score))

    # ---------------------------------------------------------------- machinery

    def _record(self, kind: Kind, data: dict[str, Any]) -> Event:
        """Check an action, journal it (durable before this returns), then apply it. A team's shared game does
        it holding the journal's lock, after what the other members recorded meanwhile."""
        with self._lock:
            if self.member is None or self._fh is None:
                return self._write(kind, data)
            with journal.locked(self._fh, exclusive=True):
                self._catch_up(cut_torn=True)
                if kind == SUBMIT and (refused := self._second_hand_in()) is not None:
                    raise refused
                done = next((e for e in self._rules.events if e.kind == kind), None) if kind in _ONCE else None
                if done is not None:
                    # two members left the briefing together, or their debriefs opened together as the round
                    # ended: the team's game started (was debriefed) once, and each gets that event back
                    return done
                if kind not in (INJECT, MESSAGE) and "gm" not in data:  # the member's own act, from their seat
                    data = {**data, "by": self.member}
                event = self._write(kind, data)
                self._offset = self._fh.tell()
                self._next_line += 1
                return event

    def _write(self, kind: Kind, data: dict[str, Any]) -> Event:
        with self._lock:
            checked = self._rules.check(kind, data)
            events = self._rules.events
            last = events[-1] if events else None
            seq = last.seq + 1 if last else 1
            # wall clocks can step back; the journal's times must not
            now = max(time.time(), last.time if last else 0.0)
            event = Event(seq, now, kind, checked)
            if self.path is not None:
                journal.append(self._fh, journal.line_of(event), self.path)
            self._rules.apply(event)
            return event

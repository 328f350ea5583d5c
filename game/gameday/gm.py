"""The interviewer (game master) side of a session, from another process than the candidate's.

- Sending: `send` appends one item (a message, a hint or an inject) to the session's inbox, the
  JSON-lines sidecar ``<session_id>.gm`` next to the journal, under an exclusive `flock`, written in
  one `write` and fsync'ed before it returns. The candidate's `Session.poll_gm` (the TUI polls it
  about twice a second) journals each item in the candidate's own session, once.
- Watching: `Watch` follows the candidate's journal without locking it (the candidate's process holds
  the lock): it reads the complete lines appended since the last look and replays them through the
  session rules into an in-memory mirror. `Watch.snapshot` is the state an interviewer looks at: the
  candidate's queries, the hypothesis board (labelled as the candidate sees it) and its history, what
  was delivered and what is still in the inbox; and, once submitted or when opened with `reveal`, the
  ground truth, what each query ruled out and the running score. `servedrill watch --json` prints
  it; the keys are in docs/cli.md.

Inbox item: {"id", "time", "kind": "message" | "hint" | "inject", "from", "text"?, "cost"?, "index"?}.
A hint without text is the incident's next hint (at its cost); with text it is the interviewer's own,
at `cost` points. An inject names one of the incident's injects by `index`, or brings its own text.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from game.rules.assess import score_session
from game.rules.observe import is_schema_exploration
from game.rules.scoring import truth_ids
from game.session import (
    GM_SENDER,
    HINT,
    INJECT,
    INVESTIGATING,
    MAX_GM_TEXT_CHARS,
    MESSAGE,
    NOTE,
    QUERY,
    RANK,
    START,
    SUBMIT,
    Event,
    Header,
    Session,
    SessionError,
    active_pins,
    file_digest,
    fsync_dir,
    inbox_path,
    locate_incident,
    open_incident,
    read_held,
    read_inbox,
)
from game.session.gm_key import SIG, sign, verify
from game.session.inbox import MAX_INBOX_BYTES
from game.session.journal import MAX_JOURNAL_BYTES, MAX_JOURNAL_LINE_BYTES
from incidents.bounded_read import read_lines

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: the inbox is appended without a lock
    fcntl = None  # type: ignore[assignment]

GM_KINDS = (MESSAGE, HINT, INJECT)
DEFAULT_HINT_COST = 10
"""Points an interviewer's own hint costs unless he says otherwise."""
ROWS_SHOWN = 5
"""Result rows per query in a watch snapshot (the journal keeps up to 20)."""
MAX_SENDER_CHARS = 100
"""Longest sender name an item may carry (with MAX_GM_TEXT_CHARS, what bounds an inbox line)."""


class GMError(Exception):
    """An item that cannot be sent or a session that cannot be watched; one line for the interviewer."""


# ---------------------------------------------------------------- sending


def make_item(kind: str, *, text: str | None = None, sender: str | None = None, cost: int | None = None,
              index: int | None = None, now: float | None = None) -> dict[str, Any]:
    """One inbox item, checked for shape (not against the session: see `Watch.check_send`)."""
    if kind not in GM_KINDS:
        raise GMError(f"cannot send a {kind!r}; send one of {', '.join(GM_KINDS)}")
    if text is not None and not text.strip():
        text = None
    if text is not None and len(text) > MAX_GM_TEXT_CHARS:
        # the candidate's game would refuse it on delivery: say so now rather than "sent"
        raise GMError(f"the text has {len(text)} characters; an item holds at most {MAX_GM_TEXT_CHARS}")
    if sender is not None and len(sender.strip()) > MAX_SENDER_CHARS:
        raise GMError(f"the sender's name has {len(sender.strip())} characters; at most {MAX_SENDER_CHARS}")
    item: dict[str, Any] = {"id": secrets.token_hex(6), "time": time.time() if now is None else now,
                            "kind": kind, "from": (sender or "").strip() or GM_SENDER}
    if kind == MESSAGE:
        if text is None:
            raise GMError("a message needs some text")
        item["text"] = text
    elif kind == HINT:
        if text is not None:
            cost = DEFAULT_HINT_COST if cost is None else cost
            if isinstance(cost, bool) or not isinstance(cost, int) or not 0 <= cost <= 100:
                raise GMError(f"a hint's cost must be whole points within 0..100, got {cost!r}")
            item.update(text=text, cost=cost)
        elif cost is not None:
            raise GMError("the incident's next hint costs what the incident says; give text for your own hint")
    else:
        if (index is None) == (text is None):
            raise GMError("an inject is either one of the incident's (index) or your own text, not both")
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise GMError(f"inject index must be 0 or more, got {index!r}")
            item["index"] = index
        else:
            item["text"] = text
    return item


def append_item(session_path: Path | str, item: Mapping[str, Any]) -> Path:
    """Append one item to the session's inbox: one line, under an exclusive lock, fsync'ed. Returns the
    inbox path."""
    inbox = inbox_path(session_path)
    signed = item if SIG in item else sign(item)
    line = (json.dumps(dict(signed), separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    created = not inbox.exists()
    # no link followed (an inbox is a file this program creates) and no wait on a FIFO: a link or a
    # FIFO put in the inbox's place is refused, never written through
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(inbox, flags, 0o644)
    except OSError as exc:
        raise GMError(f"cannot write the inbox {inbox}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise GMError(f"cannot write the inbox {inbox}: not a regular file")
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as exc:
        raise GMError(f"cannot write the inbox {inbox}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if created:
        fsync_dir(inbox.parent)
    return inbox


def check_sender(session_path: Path | str) -> None:
    """Refuse (GMError) a sender without the credential the session's game takes: the interviewer key its game
    verifies with (the id it recorded beside the journal, `gm_key.record_trust`; a record owned by another
    account than the journal's is not the game's). A session that recorded none (written before, or in a
    folder its game could not write) takes items only from its owner's account.
    Without this, any shell user who can write the sessions folder could append to an inbox and be told
    "sent" for an item the candidate's game then drops."""
    from game.session.gm_key import key_id, key_path, load_key, trust_path, trusted_id

    path = Path(session_path)
    trusted = trusted_id(path)
    try:
        owner = os.stat(path).st_uid
        if trusted is not None and os.stat(trust_path(path)).st_uid != owner:
            trusted = None  # written by someone else than the game's account: not the game's word
    except OSError as exc:
        raise GMError(f"{path}: cannot read the session ({exc.strerror or exc})") from None
    if trusted is not None:
        own = load_key()
        if own is not None and key_id(own) == trusted:
            return
        why = "you hold no interviewer key" if own is None else f"your interviewer key ({key_path()}) is not it"
        raise GMError(f"{path.name}: not sent: this session's game takes only items signed with the interviewer "
                      f"key of the account that runs it, and {why} (hint: send from that account (in a served "
                      "game day, the facilitator's, which runs every player's game), or set "
                      "SERVEDRILL_GM_KEY_FILE to the key file that game uses)")
    if hasattr(os, "getuid") and owner != os.getuid():
        raise GMError(f"{path.name}: not sent: the session is another user's and its game recorded no interviewer "
                      "key (hint: send from the account that runs the candidate's game)")


def send(session_path: Path | str, kind: str, *, text: str | None = None, sender: str | None = None,
         cost: int | None = None, index: int | None = None, check: bool = True,
         watch: Watch | None = None) -> dict[str, Any]:
    """Send one item to a candidate's session; returns the item as written. With `check`, the item is
    first checked against the session's journal as it is now (hints left, inject not yet delivered,
    round not over), through `watch` when the caller already follows the session."""
    item = make_item(kind, text=text, sender=sender, cost=cost, index=index)
    check_sender(session_path)
    if check:
        (watch or Watch(session_path)).check_send(item)
    append_item(session_path, item)
    return item


# ---------------------------------------------------------------- watching


class Watch:
    """Follows one session file from outside the candidate's process. Call `refresh` to read what was
    appended since; it returns whether anything changed."""

    def __init__(self, path: Path | str, *, reveal: bool = False) -> None:
        self.path = Path(path)
        self.reveal = reveal
        self.inbox = inbox_path(self.path)
        first = self._first_line()
        try:
            self.header = Header.from_dict(json.loads(first))
        except (ValueError, TypeError) as exc:
            raise GMError(f"{self.path}:1: bad session header: {exc}") from None
        try:
            where = locate_incident(self.header.incident_id, self.header.incident_path)
            if file_digest(where) != self.header.incident_digest:
                raise GMError(f"{self.path}: incident {self.header.incident_id} changed since this session "
                              f"started ({where})")
            self.incident = open_incident(where, self.header.seed)
        except SessionError as exc:
            raise GMError(str(exc)) from None
        except OSError as exc:  # the incident file refused by the bounded read (a FIFO, too large)
            raise GMError(f"{self.path}: cannot read the session's incident ({exc})") from None
        self.incident_path = where
        self.warnings: list[str] = []
        self._reset()
        self.refresh()

    def _reset(self) -> None:
        self.mirror = Session(self.header, self.incident, None)
        self._offset = len(self._first_line()) + 1
        self._line = 1
        self._size = -1
        self._inbox_size = -1
        self.sent: list[dict[str, Any]] = []
        self._inbox_offset = 0

    def _first_line(self) -> bytes:
        """The journal's header line (without its newline); GMError when the file is refused or has none."""
        try:
            found = read_lines(self.path, 0, max_bytes=MAX_JOURNAL_BYTES, max_line=MAX_JOURNAL_LINE_BYTES,
                               what="session journal")
        except OSError as exc:
            raise GMError(f"cannot read session {self.path}: {exc.strerror or exc}") from None
        if not found.lines or found.lines[0][1] is None:
            raise GMError(f"{self.path}:1: the session file has no complete header line")
        return found.lines[0][1]

    def _warn(self, problem: str) -> None:
        if problem not in self.warnings:
            self.warnings.append(problem)

    @property
    def events(self) -> list[Event]:
        return self.mirror.events

    def refresh(self) -> bool:
        """Read the journal lines and inbox items appended since the last call; True if any."""
        changed = False
        try:
            size = self.path.stat().st_size
        except OSError:
            size = self._size
        if size < self._offset:  # rewritten (a torn last line cut off on resume): read it again
            self._reset()
        if size != self._size and self._offset < MAX_JOURNAL_BYTES:
            self._size = size
            try:
                found = read_lines(self.path, self._offset, max_bytes=MAX_JOURNAL_BYTES,
                                   max_line=MAX_JOURNAL_LINE_BYTES, what="session journal")
            except OSError as exc:  # replaced by something unreadable: what was read stands
                self._warn(f"cannot read session {self.path}: {exc.strerror or exc}")
            else:
                if found.capped:  # the first problem says so; the long lines are warned about below
                    self._warn(found.problems[0])
                for _, line in found.lines:
                    self._line += 1
                    if line is None:
                        self._warn(f"{self.path}:{self._line}: skipped a line longer than "
                                   f"{MAX_JOURNAL_LINE_BYTES // (1024 * 1024)} MB")
                        continue
                    if not line.strip():
                        continue
                    try:
                        self.mirror.replay(Event.from_dict(json.loads(line)))
                        changed = True
                    except (ValueError, SessionError) as exc:
                        self._warn(f"{self.path}:{self._line}: skipped a damaged line ({exc})")
                self._offset = found.end
        try:
            inbox_size = self.inbox.stat().st_size
        except OSError:
            inbox_size = -1
        if inbox_size != self._inbox_size and inbox_size >= 0 and self._inbox_offset < MAX_INBOX_BYTES:
            self._inbox_size = inbox_size
            problems: list[str] = []
            items, self._inbox_offset = read_inbox(self.inbox, self._inbox_offset, problems)
            for problem in problems:
                self._warn(problem)
            self.sent.extend(items)
            changed = changed or bool(items)
        return changed

    # ------------------------------------------------------------ checks before sending

    def check_send(self, item: Mapping[str, Any]) -> None:
        """Raise GMError when the candidate's session could not take `item` as things stand. A hint or
        inject sent before the candidate starts waits for the start."""
        self.refresh()
        session = self.mirror
        kind = item.get("kind")
        if kind == MESSAGE:
            return
        if session.state not in ("briefing", INVESTIGATING):
            raise GMError(f"the candidate's round is {session.state}; only messages can still be sent")
        pending = [i for i in self.pending() if i.get("kind") == kind]
        if kind == HINT and item.get("text") is None:
            queued = sum(1 for i in pending if i.get("text") is None)
            if session.hints_taken + queued >= len(self.incident.hints):
                raise GMError("no incident hints left to send; write your own hint text instead"
                              if self.incident.hints else "this incident has no hints; write your own hint text")
        if kind == INJECT and item.get("index") is not None:
            index = item["index"]
            if not 0 <= index < len(self.incident.injects):
                raise GMError(f"no inject {index}; the incident has {len(self.incident.injects)}")
            delivered = {e.data.get("index") for e in session.events if e.kind == INJECT}
            if index in delivered or any(i.get("index") == index for i in pending):
                raise GMError(f"inject {index} was already delivered or sent")

    def pending(self) -> list[dict[str, Any]]:
        """Items sent to the inbox that the candidate's session has not journalled yet, each with
        `problem`: null while it can still be delivered, else why the candidate's session will refuse
        it (checked one item at a time against the journal as it is now)."""
        done = self.mirror.gm_delivered
        out = []
        for item in self.sent:
            if item.get("id") in done:
                continue
            problem = None
            if not verify(item):
                problem = "not signed with this machine's interviewer key: the candidate's game will refuse it"
            else:
                try:
                    self.mirror.check_inbox_item(item)
                except SessionError as exc:
                    if self.mirror.state != "briefing":  # in the briefing it waits for the start
                        problem = str(exc)
            out.append({**{k: v for k, v in item.items() if k != SIG}, "problem": problem})
        return out

    # ------------------------------------------------------------ the picture

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """Everything the interviewer's screen shows, JSON-ready (keys in docs/cli.md).

        The answer (truth, signals, what each query ruled out, the running score) is in it only once
        the candidate submitted, or when the watch was opened with `reveal` (the interviewer's own
        choice: someone looking over their shoulder sees the cause). Scoring re-runs the candidate's
        queries on every hypothesis's world, so the first revealed look may build them."""
        now = time.time() if now is None else now
        incident, session = self.incident, self.mirror
        # the candidate's game clock: time a process held the session (the draft sidecar says when)
        session.follow_held(read_held(self.path))
        events = session.events
        board = {s.id: s for s in session.board}
        start = next((e.time for e in events if e.kind == START), None)
        submit = next((e for e in events if e.kind == SUBMIT), None)
        end = submit.time if submit is not None else now
        revealed = self.reveal or submit is not None
        report = score_session(incident, self.header.seed, events) if revealed else None

        def rel(t: float) -> float | None:
            return None if start is None else round(session.elapsed(t), 3)

        def shown(hid: str) -> dict[str, Any]:
            item = board.get(hid)
            return {"id": hid, "label": item.label if item else "?", "title": item.title if item else hid}

        per_query = {q["index"]: q for q in report.per_query} if report else {}
        queries = []
        for e in events:
            if e.kind != QUERY:
                continue
            d = e.data
            ok = bool(d.get("ok"))
            index = d.get("index")
            item = {
                "index": index, "seq": e.seq, "time": e.time, "elapsed_s": rel(e.time),
                "sql": d.get("sql", ""), "ok": ok, "error": d.get("error"), "row_count": d.get("row_count", 0),
                "columns": list(d.get("columns") or []), "rows": list(d.get("rows") or [])[:ROWS_SHOWN],
                "truncated": bool(d.get("truncated")),
                "schema_exploration": is_schema_exploration(str(d.get("sql", "")), []),
            }
            if revealed and index in per_query:
                item["ruled_out"] = list(per_query[index]["ruled_out"])
                item["why"] = dict(per_query[index]["why"])
            queries.append(item)
        history = [{"seq": e.seq, "time": e.time, "elapsed_s": rel(e.time), "kind": e.kind,
                    "ranking": [dict(r) for r in e.data.get("ranking", [])]}
                   for e in events if e.kind in (RANK, SUBMIT)]
        ranking = session.ranking or []
        hints = incident.hints
        taken = session.hints_taken
        delivered_injects = {e.data.get("index") for e in events if e.kind == INJECT}
        snap: dict[str, Any] = {
            "ok": True,
            "revealed": revealed,
            "session": {
                "session_id": self.header.session_id, "path": str(self.path), "inbox": str(self.inbox),
                "incident_id": incident.id, "incident_title": incident.title, "player": self.header.player,
                "seed": self.header.seed, "created": self.header.created, "state": session.state,
                "started": start, "elapsed_s": rel(end),
                "updated": events[-1].time if events else None, "time_limit_s": incident.time_limit_s,
                "query_budget": incident.query_budget,
            },
            "hypotheses": [{"id": s.id, "label": s.label, "title": s.title,
                            **({"true": s.id in truth_ids(incident)} if revealed else {})}
                           for s in session.board],
            "queries": queries,
            "board": {"ranking": [{**shown(r["id"]), "confidence": r["confidence"]} for r in ranking],
                      "history": history,
                      "pins": [dict(e.data, seq=e.seq, elapsed_s=rel(e.time),
                                    label=shown(str(e.data.get("hypothesis")))["label"])
                               for e in active_pins(events)],
                      "notes": [dict(e.data, seq=e.seq, elapsed_s=rel(e.time),
                                     label=shown(str(e.data.get("hypothesis")))["label"])
                                for e in events if e.kind == NOTE]},
            "submission": None if submit is None else {"seq": submit.seq, "time": submit.time,
                                                       "elapsed_s": rel(submit.time), **submit.data},
            "hints": {"taken": taken, "total": len(hints),
                      # an untaken hint shows its number and cost, never its text (the updates hold the
                      # text of the hints taken)
                      "next": None if taken >= len(hints) else {"index": taken, "cost": hints[taken].cost},
                      "cost_so_far": sum(int(e.data.get("cost", 0)) for e in events if e.kind == HINT)},
            "injects": [{"index": i, "from": inj.sender, "text": inj.text, "after_s": inj.after_s,
                         "after_queries": inj.after_queries, "delivered": i in delivered_injects}
                        for i, inj in enumerate(incident.injects)],
            "updates": [u.to_dict() for u in session.updates],
            "pending": self.pending(),
            "warnings": list(self.warnings),
        }
        if revealed and report is not None:
            open_rivals = [r for r in report.rivals if r not in report.ruled_out]
            snap.update({
                "truth": [{"id": h.id, "title": h.title, "explanation": h.explanation}
                          for h in incident.hypotheses if h.true],
                "debrief_summary": incident.debrief.summary if incident.debrief else "",
                "evidence": {"ruled_out": [{**shown(r), "query": q} for r, q in report.ruled_out.items()],
                             "still_open": [shown(r) for r in open_rivals]},
                "signals": [{"id": sig.id, "shows": sig.shows, "query": sig.query} for sig in incident.signals],
                "score": report.to_dict(),
            })
        return snap


def watch_snapshot(path: Path | str, now: float | None = None, *, reveal: bool = False) -> dict[str, Any]:
    """One look at a session: `Watch(path, reveal=reveal).snapshot(now)`."""
    return Watch(path, reveal=reveal).snapshot(now)

"""The library as a player meets it, and the player's record: what the picker lists and filters, what an
incident teaches and when that may be said, which sessions a player left unfinished, their best scores, and
the sessions on disk (to resume one or to watch one). `game.api` re-exports these names.

Every call is quick (no incident is loaded in full, no database opened): the picker calls them on the UI
thread or a short worker. Heavy modules are imported inside the calls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from game.rules.library import LibraryEntry

SAVED_NAME_CHARS = 60
"""The longest name a saved query may have, characters (a front end's input box stops there): the store's
MAX_NAME_CHARS, written out so that importing the API does not import the session package (a test holds
them equal)."""

if TYPE_CHECKING:
    import random
    from datetime import date

    from game.session import Event, SessionSummary
    from game.session.hypotheses import Shown
    from game.session.saved_queries import SavedQuery
    from incidents.spec import Incident

__all__ = [
    "SOLVED_SCORE", "Coverage", "LibraryEntry", "Met", "PastSession", "PlayerRecord", "briefing_entry",
    "by_difficulty", "coverage", "filter_library", "find_session", "history", "incident_of_the_day",
    "library_files", "met", "new_to_player", "pin_count", "player_record", "preselected", "random_incident",
    "session_entry", "sessions", "solved", "teaches", "unfinished_sessions",
]

SOLVED_SCORE = 70.0
"""A best score at least this counts an incident (and the topics it covers) as solved."""


def solved(score: float | None) -> bool:
    """Whether a (best) score counts as solved: the one place that decides it (every front end, `list`,
    the coverage line and the history ask here)."""
    return score is not None and score >= SOLVED_SCORE


# ---------------------------------------------------------------- the library


def library_files(incidents: Iterable[Path | str] | None = None) -> list[Path]:
    """The incident files a picker lists: `incidents` as paths, or (None) the installed library's files,
    sorted by name."""
    from game.rules.library import library_paths

    return library_paths() if incidents is None else [Path(p) for p in incidents]


def filter_library(entries: Sequence[LibraryEntry], text: str) -> list[LibraryEntry]:
    """The entries matching every word of `text` (title, id, shown tags); all of them for blank text."""
    from game.rules.library import filter_entries

    return filter_entries(entries, text)


def by_difficulty(entries: Iterable[LibraryEntry]) -> list[LibraryEntry]:
    """`entries` in the order a player reads a library: easiest first (difficulty 0, the tutorial, leads;
    an entry of unknown difficulty comes last), then by title, then by id."""
    return sorted(entries, key=lambda e: (e.difficulty is None, e.difficulty or 0, e.title.casefold(), e.id))


def _playable(entries: Iterable[LibraryEntry]) -> list[LibraryEntry]:
    """The entries a draw may land on: readable files, the tutorial left out (it is the newcomer's, found
    in the list's first row), sorted by id so that the draw does not depend on the list's order."""
    from game.rules.library import TUTORIAL_INCIDENT

    return sorted((e for e in entries if e.problem is None and e.id != TUTORIAL_INCIDENT), key=lambda e: e.id)


def random_incident(entries: Sequence[LibraryEntry], rng: random.Random | None = None) -> LibraryEntry | None:
    """An incident drawn at random from `entries` (not the tutorial, none that cannot be read); None when
    there is none to draw."""
    import random as random_module

    pool = _playable(entries)
    return (rng or random_module.SystemRandom()).choice(pool) if pool else None


def incident_of_the_day(entries: Sequence[LibraryEntry], day: date | None = None) -> LibraryEntry | None:
    """The incident of `day` (default: today, local time): the same for every player and every front end
    on that date, drawn from `entries` as `random_incident` draws (by a hash of the date, not a clock)."""
    import datetime
    import hashlib

    pool = _playable(entries)
    if not pool:
        return None
    when = day or datetime.date.today()
    digest = hashlib.sha256(f"servedrill-day-{when.isoformat()}".encode()).digest()
    return pool[int.from_bytes(digest[:8], "big") % len(pool)]


def preselected(entries: Sequence[LibraryEntry], preselect: str | Path | None = None, *,
                record: PlayerRecord | None = None, player: str = "") -> int:
    """The row a picker highlights first: `preselect` (an id or a path), else the tutorial for a player
    whose `record` holds nothing of theirs (no score, no open session), else the default incident
    (one-slow-replica), else 0. Without a record (not read yet): as for a player with history."""
    from game.rules.library import default_index

    new = record is not None and not record.best and not any(
        s.player == player for found in record.unfinished.values() for s in found)
    return default_index(entries, preselect, new_player=new)


def teaches(entry: LibraryEntry, finished: bool) -> list[str]:
    """The interview topics an incident teaches, said only once the player has finished it (`finished`):
    its topic tags can name the cause, so before that only the symptom tags count."""
    from incidents.coverage import TOPICS, covers

    tags = entry.tags if finished else entry.shown_tags
    return [t.key for t in TOPICS if covers(tags, t)]


@dataclass(frozen=True)
class Coverage:
    """How far a player has got through the library: incidents solved (a best score of SOLVED_SCORE or
    more) and the interview topics those cover, of the topics the library covers at all."""

    incidents: int
    solved: int
    topics_solved: int
    topics_covered: int


def coverage(entries: Sequence[LibraryEntry], best: Mapping[str, float]) -> Coverage:
    """The player's coverage of `entries` given their best scores by incident id (`player_record`)."""
    from incidents.coverage import topic_coverage

    by_topic = topic_coverage([(e.id, e.tags) for e in entries])
    covered = [key for key, ids in by_topic.items() if ids]
    ids = {e.id for e in entries}
    done = sorted(i for i in ids if solved(best.get(i)))
    topics = [key for key, tids in by_topic.items() if any(i in done for i in tids)]
    return Coverage(len(entries), len(done), len(topics), len(covered))


@dataclass(frozen=True)
class Met:
    """What a player has met: the symptom tags and the difficulties of the incidents they have finished
    (a scored transcript). Only shown tags: the topic tags could name a cause the player has not seen."""

    tags: frozenset[str] = frozenset()
    difficulties: frozenset[int] = frozenset()


def met(entries: Iterable[LibraryEntry], best: Mapping[str, float]) -> Met:
    """What the player with `best` scores (`player_record`) has met among `entries`."""
    done = [e for e in entries if e.id in best]
    return Met(frozenset(t for e in done for t in e.shown_tags),
               frozenset(e.difficulty for e in done if e.difficulty is not None))


def new_to_player(entry: LibraryEntry, seen: Met) -> list[str]:
    """What `entry` would bring the player for the first time: "difficulty N" when they have finished no
    incident of that difficulty, then each symptom tag none of their finished incidents had. Empty: nothing
    new."""
    level = entry.difficulty
    out = [] if level is None or level in seen.difficulties else [f"difficulty {level}"]
    return out + [t for t in entry.shown_tags if t not in seen.tags]


def briefing_entry(entry: LibraryEntry, incident: Incident, board: Sequence[Shown] | None = None) -> LibraryEntry:
    """`entry` (a quick peek at the file) with the display fields of the loaded incident (its variant's text
    for the seed) and its hypotheses as the player's `board` lists them, in that order; without a board,
    none are listed."""
    from game.rules.library import entry_for_incident

    return entry_for_incident(entry, incident, board)


def session_entry(path: Path) -> LibraryEntry:
    """The library entry of a session file's incident, read from the file's header line (no full load);
    an unreadable file or a lost incident comes back with `problem` set."""
    import json

    from game.rules.library import library_paths, read_entry

    try:
        with open(path, encoding="utf-8") as fh:
            header = json.loads(fh.readline())
    except (OSError, ValueError):
        return LibraryEntry(path, path.stem, path.stem, problem="unreadable session file")
    stored = Path(str(header.get("incident_path") or ""))
    if stored.is_file():
        return read_entry(stored)
    wanted = str(header.get("incident_id", ""))
    found = next((p for p in library_paths() if p.stem == wanted), None)
    return read_entry(found) if found else LibraryEntry(path, wanted, wanted, problem="incident not found")


# ---------------------------------------------------------------- the player's record and the sessions on disk


@dataclass
class PlayerRecord:
    """What the picker shows beside each incident: the unfinished sessions by incident id (anyone's), and
    the player's best submitted score by incident id."""

    unfinished: dict[str, list[SessionSummary]] = field(default_factory=dict)
    best: dict[str, float] = field(default_factory=dict)


def player_record(player: str, root: Path | None = None, *, seed: int | None = None) -> PlayerRecord:
    """`player`'s unfinished sessions under `root` (default: the data folder; at `seed`, or any) by incident
    id, and their best score by incident id: the total each of the player's exported transcripts recorded at
    its debrief (scoring re-runs every query on every world, far too slow for a list; a transcript without a
    recorded total is unscored and left out)."""
    from game.session import TranscriptError, list_unfinished, load_transcript, transcripts_dir

    record = PlayerRecord()
    for summary in list_unfinished(root):
        if summary.player != player:  # another player's open game is theirs, not a count on this one's picker
            continue
        if seed is not None and summary.seed != seed:  # another variant: not one this game can continue
            continue
        record.unfinished.setdefault(summary.incident_id, []).append(summary)
    folder = transcripts_dir(root)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            transcript = load_transcript(path)
        except TranscriptError:
            continue
        total = transcript.recorded_total
        if transcript.submission is None or transcript.header.player != player or total is None:
            continue
        incident_id = transcript.header.incident_id
        record.best[incident_id] = max(record.best.get(incident_id, total), total)
    return record


def unfinished_sessions(player: str, incident_id: str | None = None, root: Path | None = None, *,
                        seed: int | None = None) -> list[SessionSummary]:
    """`player`'s sessions not yet debriefed (of `incident_id`, or of every incident; of the variant of
    `seed`, or of any), most recent first, leaving out those open in a live process (another terminal,
    another tab of `servedrill serve`): a session held elsewhere is not this player's to continue here. A
    game at a given seed offers only that seed's sessions: continuing another would play another variant."""
    from game.session import list_unfinished

    return [s for s in list_unfinished(root)
            if (incident_id is None or s.incident_id == incident_id) and (seed is None or s.seed == seed)
            and s.player == player and not s.in_use]


def sessions(root: Path | None = None) -> list[SessionSummary]:
    """Every readable session under `root` (default: the data folder), most recently active first."""
    from game.session import list_sessions

    return list_sessions(root)


def find_session(ref: str, root: Path | None = None) -> Path:
    """The session file of `ref`: a session id, a unique prefix of one, or a path. Raises SessionError."""
    from game.session import find_session as find

    return find(ref, root)


def pin_count(events: Iterable[Event]) -> int:
    """How many pins are in force among `events` (a pin counts once; an unpin withdraws it): what the
    score reads."""
    from game.session import active_pins

    return len(active_pins(events))


# ---------------------------------------------------------------- past sessions


@dataclass(frozen=True)
class PastSession:
    """A finished session as the history lists it: read from its transcript (written at the debrief).
    Times are epoch seconds (None when the transcript has no such event); `taken_s` is the game clock from
    the start to the submission (time the session was held open: hours it sat closed do not count; wall
    time for a session without its draft sidecar); `score` is the total the debrief recorded (None:
    unscored)."""

    session_id: str
    incident_id: str
    title: str
    player: str
    seed: int
    started: float | None
    submitted: float | None
    taken_s: float | None
    score: float | None
    queries: int
    transcript: Path

    @property
    def solved(self) -> bool:
        return solved(self.score)

    @property
    def date(self) -> str:
        """When it was submitted (or started), `YYYY-MM-DD HH:MM` in UTC; "?" when neither is known."""
        import datetime

        when = self.submitted if self.submitted is not None else self.started
        if when is None:
            return "?"
        return datetime.datetime.fromtimestamp(when, datetime.UTC).strftime("%Y-%m-%d %H:%M")

    def to_dict(self) -> dict[str, object]:
        return {"session_id": self.session_id, "incident_id": self.incident_id, "title": self.title,
                "player": self.player, "seed": self.seed, "started": self.started, "submitted": self.submitted,
                "taken_s": self.taken_s, "score": self.score, "solved": self.solved, "queries": self.queries,
                "transcript": str(self.transcript)}


def history(player: str | None, root: Path | None = None) -> list[PastSession]:
    """`player`'s finished sessions (every player's with None), most recently submitted first: one per
    transcript under `root` (default: the data folder) that records a submission. A transcript that cannot
    be read back (damaged, or its incident changed since) is left out."""
    from game.session import (
        QUERY,
        START,
        SUBMIT,
        TranscriptError,
        held_clock,
        load_transcript,
        read_held,
        sessions_dir,
        transcripts_dir,
    )

    found: list[PastSession] = []
    folder = transcripts_dir(root)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            t = load_transcript(path)
        except TranscriptError:
            continue
        if t.submission is None or (player is not None and t.header.player != player):
            continue
        started = next((e.time for e in t.events if e.kind == START), None)
        submitted = next((e.time for e in t.events if e.kind == SUBMIT), None)
        taken = None
        if started is not None and submitted is not None:
            held = read_held(sessions_dir(root) / f"{t.header.session_id}.jsonl")
            taken = max(0.0, held_clock(held, [e.time for e in t.events], started, submitted))
        found.append(PastSession(t.header.session_id, t.header.incident_id, t.incident.title, t.header.player,
                                 t.header.seed, started, submitted, taken, t.recorded_total,
                                 sum(1 for e in t.events if e.kind == QUERY), path))
    found.sort(key=lambda p: (p.submitted or p.started or 0.0, p.session_id), reverse=True)
    return found


# ---------------------------------------------------------------- saved queries


def saved_queries(player: str, root: Path | None = None) -> list[SavedQuery]:
    """`player`'s saved queries under `root` (default: the data folder), in the order saved: offered in every
    incident (the editor's snippet menu, line mode's `saved`). Running one is a query like any other. Raises
    SessionError when the file cannot be read back (it is left as it is)."""
    from game.session import SessionError, data_dir
    from game.session.saved_queries import SavedQueryError
    from game.session.saved_queries import saved_queries as read

    try:
        return read(root or data_dir(), player)
    except SavedQueryError as exc:
        raise SessionError(str(exc)) from None


def save_query(player: str, name: str, sql: str, root: Path | None = None) -> tuple[SavedQuery, bool]:
    """Save `sql` as `name` for `player` (a name saved before, in any case, is replaced): (the query, whether
    it replaced one). Saving costs nothing and scores nothing. Raises SessionError, with a hint, on a bad name,
    an empty or too long query, a full list or an unreadable file; nothing is written then."""
    from game.session import SessionError, data_dir
    from game.session.saved_queries import SavedQueryError
    from game.session.saved_queries import save_query as save

    try:
        return save(root or data_dir(), player, name, sql)
    except SavedQueryError as exc:
        raise SessionError(str(exc)) from None


def forget_query(player: str, name: str, root: Path | None = None) -> SavedQuery:
    """Delete `player`'s saved query called `name` (any case). Raises SessionError when there is none."""
    from game.session import SessionError, data_dir
    from game.session.saved_queries import SavedQueryError
    from game.session.saved_queries import forget_query as forget

    try:
        return forget(root or data_dir(), player, name)
    except SavedQueryError as exc:
        raise SessionError(str(exc)) from None

"""Playing one game: the incident at a seed, its telemetry, the session and every action on it, the debrief.
(`game.api` re-exports this module's public names; the other parts of the API are the library and the
player's record (`game.api.shelf`), the interviewer's operations (`game.api.interviewer`) and the
facilitator's (`game.api.facilitator`).)

The rules a front end must not get to choose live here or below, once:

- **The seed picks the variant and the telemetry.** `load_variant` is where an incident is loaded for play,
  always at a seed; `open_telemetry` takes that `Variant`, not a seed of its own, so a database cannot be
  built for another variant than the one the player reads. Sessions load their incident the same way
  (`game.session`), so the briefing, the board, the telemetry and the debrief agree.
- **A statement that fails costs nothing** (`Session.run_query`): refused, a SQL error, a timeout or a
  cancel is shown and not recorded, so it takes no query from the budget and gets no Qn.
- **One set of query limits** (`game.query.limits.PLAYER_LIMITS`) unless a caller passes others on purpose.
- **One telemetry schema**: `TABLE_COLUMNS` names every table and its columns, what a player may query.

Staged calls (`load_variant`, `open_telemetry`, `new_session` / `resume_session`, `start`) let the terminal
show each step as it happens; `open_game` and `resume_game` do them in one go for line mode, the CLI and
tests. `Game` bundles what a front end holds while playing and is what the actions are called on.

Heavy modules (pydantic, DuckDB, the simulator) are imported inside the calls: the terminal imports this
module before its first paint."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from game.query.limits import PLAYER_LIMITS, ROW_CAP, QueryLimits
from game.rules.library import LibraryEntry, read_library
from incidents.diagnostics import IncidentError
from incidents.telemetry_schema import TABLE_COLUMNS

if TYPE_CHECKING:
    import subprocess

    from game.query.gateway import QueryResult
    from game.query.sandbox import CatalogEntry, Gateway
    from game.rules.mitigation import MitigationScore
    from game.rules.scoring import ScoreReport
    from game.session import Event, Session, Update
    from game.session.hypotheses import Shown
    from incidents.snippets import Snippet
    from incidents.spec import Incident
    from telemetry_gen.cache import BuildInfo

__all__ = [
    "PLAYER_LIMITS",
    "ROW_CAP",
    "TABLE_COLUMNS",
    "Debrief",
    "Game",
    "IncidentError",
    "PastDebrief",
    "QueryLimits",
    "Ran",
    "Runs",
    "Telemetry",
    "Truth",
    "Variant",
    "board",
    "build_worlds",
    "cancel",
    "catalog",
    "debrief",
    "end_with_parent",
    "export_transcript",
    "find_incident",
    "glance",
    "heartbeat",
    "hint",
    "library",
    "load_variant",
    "new_session",
    "note",
    "open_game",
    "open_telemetry",
    "past_debrief",
    "pin",
    "prefork_query_worker",
    "rank",
    "read_span",
    "resume_game",
    "resume_session",
    "run_query",
    "save_draft",
    "snippets",
    "start",
    "submit",
    "truth",
    "unpin",
    "updates",
    "variant_of",
]


BuildProgress = Callable[[float, str], None]
"""Called while a database builds: (fraction done 0..1, stage name)."""
ScoringProgress = Callable[[str, int, int], None]
"""Called while scoring opens each world: (world name, worlds done, worlds in all)."""


# ---------------------------------------------------------------- the library and the incident


def library(paths: Sequence[Path | str] | None = None) -> list[LibraryEntry]:
    """What a player may see of the incidents before opening one (default: the installed library):
    display fields read quickly, placeholders of a variant hidden, symptom tags only."""
    return read_library(None if paths is None else [Path(p) for p in paths])


def find_incident(ref: str) -> Path:
    """The incident file of `ref`, a library id or a path. Raises IncidentError for an unknown id."""
    from incidents.library import find_incident as find

    return find(ref)


@dataclass(frozen=True)
class Variant:
    """An incident file as the variant of one seed. The seed also draws the telemetry: whatever is built or
    shown for this game comes from this object, never from the file and a seed apart."""

    path: Path
    seed: int
    incident: Incident

    @property
    def board(self) -> list[Shown]:
        """The hypotheses as the player sees them: shuffled for (incident, seed), labelled A, B, ..."""
        from game.session.hypotheses import shown_hypotheses

        return shown_hypotheses(self.incident, self.seed)


def board(incident: Incident, seed: int) -> list[Shown]:
    """The hypotheses of `incident` as a player at `seed` sees them: shuffled, labelled A, B, ..."""
    from game.session.hypotheses import shown_hypotheses

    return shown_hypotheses(incident, seed)


def snippets(incident: Incident) -> list[Snippet]:
    """The editor's starter snippets for `incident` (incidents.snippets: the dialect on the whole fleet;
    the validator proves they settle no incident of difficulty 2 or more)."""
    from incidents.snippets import snippets as starter

    return starter(incident.window.start, incident.window.duration_s)


def load_variant(path: Path | str, seed: int) -> Variant:
    """The incident at `path` resolved for `seed`. Raises IncidentError (file:line diagnostics)."""
    from incidents.loader import load_incident

    resolved = Path(path).resolve()
    return Variant(resolved, int(seed), load_incident(resolved, seed=int(seed)))


def variant_of(session: Session) -> Variant:
    """The variant a session plays (its header's seed; the session loaded it with that seed)."""
    from game.session import locate_incident

    path = locate_incident(session.header.incident_id, session.header.incident_path)
    return Variant(path.resolve(), session.header.seed, session.incident)


# ---------------------------------------------------------------- telemetry


@dataclass
class Telemetry:
    """A variant's built database and the player's query gateway on it."""

    build: BuildInfo
    gateway: Gateway
    seed: int

    @property
    def digest(self) -> str:
        """The database's content digest: what a transcript records and a replay checks."""
        return self.build.digest

    def close(self) -> None:
        self.gateway.close()


def open_telemetry(variant: Variant, *, limits: QueryLimits = PLAYER_LIMITS,
                   progress: BuildProgress | None = None) -> Telemetry:
    """Build (or find in the cache) the variant's database and open a gateway on it under `limits`.
    Blocks for the build: call it from a worker thread in a UI."""
    from game.query.sandbox import Gateway
    from telemetry_gen.cache import ensure_database

    build = ensure_database(variant.incident, variant.seed, progress=progress)
    gateway = Gateway(Path(build.path), memory_limit=limits.memory_limit, row_cap=limits.row_cap,
                      timeout_s=limits.timeout_s)
    return Telemetry(build, gateway, variant.seed)


# ---------------------------------------------------------------- sessions


def new_session(variant: Variant, player: str, *, root: Path | None = None, journal: bool = True) -> Session:
    """A new journalled session of the variant for `player` (under `root`/sessions; default the data
    folder). `journal=False`: a session that writes nothing, under the same rules, for a scripted player
    whose game nobody resumes or watches. Raises SessionError."""
    from game.session import Session, SessionError, file_digest

    if not journal:
        return Session.in_memory(variant.incident, variant.seed, player, incident_digest=file_digest(variant.path),
                                 incident_path=str(variant.path))
    try:
        return Session.create(variant.path, variant.seed, player, root=root)
    except SessionError:
        joined = _team_game(root)
        if joined is None:
            raise
        return joined  # a team round: another member's tab started the team's game meanwhile; this one joins it


def _team_game(root: Path | None) -> Session | None:
    """The team's game of a team round's seat, resumed, once a member has started it (else None)."""
    from game.session import check_session_id, sessions_dir
    from game.session.seat import claimed, current

    seat = current()
    if seat is None or seat.team is None:
        return None
    found = claimed(Path(seat.registry), seat.round, seat.team, team=True)
    try:
        check_session_id(found)
    except ValueError:
        return None  # no claim yet (or a registry entry that is no session id: never made into a path)
    return resume_session(sessions_dir(root) / f"{found}.jsonl")


def resume_session(path: Path | str) -> Session:
    """Reopen a session file to continue it; what could not be read back is in `session.warnings` (not
    raised as Python warnings: each front end shows them its own way). Raises SessionError."""
    from game.session import Session, SessionWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionWarning)
        return Session.resume(path)


def start(session: Session, telemetry: Telemetry | str | None) -> Event:
    """Leave the briefing; the transcript records which telemetry the player saw (the telemetry, or its
    digest). Raises SessionError when the session is past its briefing."""
    return session.start(telemetry.digest if isinstance(telemetry, Telemetry) else telemetry)


@dataclass(frozen=True)
class Ran:
    """What running a statement gave: the result, and the query event when it counted (None when the
    statement failed: not recorded, free, no Qn)."""

    event: Event | None
    result: QueryResult

    @property
    def index(self) -> int | None:
        """The player's Qn, when it counted."""
        return None if self.event is None else int(self.event.data["index"])


class Runs(Protocol):
    """What runs a player's SQL: a gateway (`Telemetry.gateway`), or a stand-in for one in a test."""

    def run(self, sql: str) -> QueryResult: ...


def run_query(session: Session, telemetry: Telemetry | Runs, sql: str) -> Ran:
    """Run the player's SQL on the game's telemetry (or its gateway) under the session's rules: a
    statement that fails is shown and costs nothing (`Ran.event` None). Raises SessionError when the
    session is not investigating. Blocks while the query runs (a worker thread in a UI)."""
    event, result = session.run_query(telemetry.gateway if isinstance(telemetry, Telemetry) else telemetry, sql)
    return Ran(event, result)


def rank(session: Session, ranking: Sequence[tuple[str, float]] | Mapping[str, float]) -> Event:
    """Set the ranking: (hypothesis, percent) pairs, most likely first; a hypothesis is its id, label or
    title. Raises SessionError (and records nothing) when the ranking is not allowed."""
    return session.rank(ranking)


def pin(session: Session, query: int, hypothesis: str, stance: str) -> Event:
    """Pin Qn `query` to `hypothesis` as evidence that "supports" or "refutes" it."""
    return session.pin(query, hypothesis, stance)


def unpin(session: Session, query: int, hypothesis: str, stance: str) -> Event:
    """Take a pin off again (it no longer counts)."""
    return session.unpin(query, hypothesis, stance)


def note(session: Session, hypothesis: str, text: str) -> Event:
    """Write a note on a hypothesis."""
    return session.note(hypothesis, text)


def hint(session: Session) -> Event:
    """Take the incident's next hint (it costs points)."""
    return session.take_hint()


def updates(session: Session, now: float | None = None) -> list[Update]:
    """Injects and the interviewer's items that fell due by `now` (default: the time now) since the
    last call, each journalled once."""
    return session.due_updates(now)


def submit(session: Session, ranking: Sequence[tuple[str, float]] | Mapping[str, float] | None = None,
           discriminator: int | None = None) -> Event:
    """Submit `ranking` (default: the current board). `discriminator` (a Qn) is kept for older scripts;
    scoring reads the pins."""
    return session.submit(ranking, discriminator)


def save_draft(session: Session, *, board: Sequence[Mapping[str, Any]] | None = None,
               editor: str | None = None) -> None:
    """Keep what the front end has not recorded yet (the board being arranged, the editor's text) in
    the session's draft, which a resume shows again."""
    session.save_draft(board=board, editor=editor)


def heartbeat(session: Session) -> None:
    """Say the session is still held (the game clock counts only held time)."""
    session.heartbeat()


def catalog(telemetry: Telemetry | Gateway) -> list[CatalogEntry]:
    """The telemetry's (or its gateway's) tables and columns with their descriptions: the schema a player
    may query."""
    return (telemetry.gateway if isinstance(telemetry, Telemetry) else telemetry).catalog()


def glance(telemetry: Telemetry | Gateway, sql: str) -> QueryResult:
    """A read the front end makes for its own display (the plot's fault markers), a statement run outside any
    session (`servedrill query`), or the player's reads of the fleet after the mitigation, not the player's
    query: run on the gateway under the same limits and never recorded."""
    return (telemetry.gateway if isinstance(telemetry, Telemetry) else telemetry).run(sql)


def cancel(telemetry: Telemetry) -> bool:
    """Stop the query running on the telemetry now, if one is (True when there was one to stop)."""
    return telemetry.gateway.cancel()


def export_transcript(session: Session, telemetry: Telemetry | str | None = None,
                      score: Mapping[str, Any] | None = None, *, root: Path | None = None,
                      to: Path | str | None = None) -> Path:
    """Write the session's transcript into the transcripts folder under `root` (default: the data folder),
    named by the session id, or to the file `to` when given (a script's `--out`), with the telemetry's
    digest (default: the one its start recorded) and `score` (`{"total": ...}` once scored: what the picker
    shows as the player's best). Returns its path; raises SessionError or OSError."""
    from game.session import transcripts_dir

    digest = telemetry.digest if isinstance(telemetry, Telemetry) else telemetry
    target = Path(to) if to is not None else transcripts_dir(root) / f"{session.session_id}.json"
    return session.export_transcript(target, digest, score)


# ---------------------------------------------------------------- the debrief


@dataclass(frozen=True)
class Truth:
    """What the debrief says happened: the true hypotheses' titles, the fault timeline and the fix."""

    causes: tuple[str, ...]
    timeline: tuple[str, ...]
    mitigation: str


def truth(incident: Incident) -> Truth:
    """The truth of an incident as its debrief states it (give the session's incident: its variant)."""
    from game.rules.debrief import fault_timeline
    from game.rules.scoring import truth_ids

    titles = {h.id: h.title for h in incident.hypotheses}
    return Truth(tuple(titles[h] for h in truth_ids(incident)), tuple(fault_timeline(incident)),
                 incident.debrief.mitigation.strip())


@dataclass(frozen=True)
class Debrief:
    """The scored session: the report, the debrief's Markdown and its truth."""

    report: ScoreReport
    markdown: str
    truth: Truth


def debrief(session: Session, progress: ScoringProgress | None = None) -> Debrief:
    """Score the session (its queries re-run on every hypothesis's world) and write its debrief; a
    submitted session is marked as debriefed. In a served game-day round it raises SessionError until the
    round ends (game.session.seat). Slow when the worlds are not built yet: a worker thread."""
    from game.rules.assess import score_session
    from game.rules.debrief import debrief_markdown
    from game.session import SUBMITTED, SessionError
    from game.session.seat import debrief_held

    held = debrief_held()  # a served game-day round: not before the round ends
    if held is not None:
        raise SessionError(held)
    events = session.events
    report = score_session(session.incident, session.header.seed, events, progress=progress)
    markdown = debrief_markdown(session.incident, events, report, mitigation_score(session))
    if session.state == SUBMITTED:
        session.view_debrief()
    return Debrief(report, markdown, truth(session.incident))


@dataclass(frozen=True)
class PastDebrief:
    """A finished session's debrief rebuilt from its transcript (after a restart too): the debrief, and
    what a front end lays beside it (the incident as the session's variant, its events, its board)."""

    debrief: Debrief
    incident: Incident
    events: list[Event]
    board: list[Shown]
    session_id: str
    transcript: Path


def past_debrief(transcript: Path | str, progress: ScoringProgress | None = None) -> PastDebrief:
    """The debrief of a finished session, from its transcript (`game.api.history` lists them): its queries
    re-run on every hypothesis's world as at the end of the game (quick once the worlds are cached, so a
    worker thread). Nothing is written. Raises SessionError when the transcript cannot be read back or
    records no submission (a debrief names the answer), or in a served game-day round until it ends."""
    from game.rules.assess import score_session
    from game.rules.debrief import debrief_markdown
    from game.session import SUBMIT, SessionError, TranscriptError, load_transcript
    from game.session.seat import debrief_held

    held = debrief_held()
    if held is not None:
        raise SessionError(held)
    try:
        t = load_transcript(transcript)
    except TranscriptError as exc:
        raise SessionError(str(exc)) from None
    if not any(e.kind == SUBMIT for e in t.events):
        raise SessionError(f"{t.header.session_id} was not submitted: it has no debrief yet")
    report = score_session(t.incident, t.header.seed, t.events, progress=progress)
    markdown = debrief_markdown(t.incident, t.events, report)
    return PastDebrief(Debrief(report, markdown, truth(t.incident)), t.incident, list(t.events),
                       board(t.incident, t.header.seed), t.header.session_id, t.path)


# ---------------------------------------------------------------- mitigation


@dataclass(frozen=True)
class Acted:
    """The mitigation applied: its journal event, its score (apart from the diagnosis's), and a gateway on
    the run that continued from the decision with the actions (the window as before, then what came after),
    which the player reads with `glance` (the diagnosis's query budget is spent)."""

    event: Event
    score: MitigationScore
    telemetry: Telemetry


def mitigation_actions(incident: Incident) -> list[str]:
    """How to write each action the incident offers (empty: it has no mitigation phase)."""
    from incidents.mitigation import USAGE

    mit = incident.mitigation
    if mit is None:
        return []
    return [USAGE[verb] for verb in (mit.actions or USAGE)]


def act(session: Session, actions: Sequence[str], decision_s: float | None = None, *,
        limits: QueryLimits = PLAYER_LIMITS) -> Acted:
    """Apply mitigation `actions` (written as in line mode: "rollback", "set max_num_seqs=512", "drain vllm-3")
    at `decision_s` seconds into the window (default: its end), once, after the diagnosis was submitted. The
    fleet is simulated on past the window with them (same seed, same traffic); the event is journalled before
    the simulation. Raises SessionError (with a hint) on an action that cannot apply here, writing nothing.
    Slow (a few seconds of simulation): a worker thread in a UI."""
    from game.query.sandbox import Gateway
    from game.rules.mitigation import score_mitigation
    from game.session import SessionError
    from game.session.seat import debrief_held
    from incidents.mitigation import ActionError, check_against, parse_action, parse_actions
    from telemetry_gen.mitigation import compile_actions, mitigated_database

    held = debrief_held()
    if held is not None:  # whether an action recovers the fleet tells the cause: not while others still play
        raise SessionError("The mitigation phase waits for the round to end, as the debrief does. " + held)
    inc = session.incident
    decision = inc.window.duration_s if decision_s is None else float(decision_s)
    if inc.mitigation is not None and session.state in ("submitted", "debriefed"):
        parsed = []
        allowed = None if inc.mitigation.actions is None else list(inc.mitigation.actions)
        for i, text in enumerate(actions):
            try:
                action = parse_action(text)
                check_against(action, replicas=inc.fleet.replicas, allowed=allowed)
            except ActionError as exc:
                raise SessionError(action_error_text(i, text, exc)) from None
            parsed.append(action)
        try:  # what only the incident can say (a rollback with nothing deployed), before anything is written
            compile_actions(inc, parsed, decision)
        except ActionError as exc:
            raise SessionError(str(exc)) from None
    event = session.act(list(actions), decision)
    texts = list(event.data["actions"])
    score = score_mitigation(inc, session.header.seed, texts, float(event.data["decision_s"]))
    info: BuildInfo = mitigated_database(inc, session.header.seed, parse_actions(texts),
                                         decision_s=float(event.data["decision_s"]))[0]
    gateway = Gateway(Path(info.path), memory_limit=limits.memory_limit, row_cap=limits.row_cap,
                      timeout_s=limits.timeout_s)
    return Acted(event, score, Telemetry(info, gateway, session.header.seed))


def prepare_mitigation(session: Session) -> threading.Thread | None:
    """Start simulating, on a daemon thread, what `act` at the window's end needs: the run paused at the
    decision, and the run without actions that the score compares with. Acting then simulates only the
    continuation (`servedrill bench mitigation`); an `act` meanwhile waits for the preparation rather than
    repeating it, and repeats it (reporting any error) if it failed. Front ends call it once the diagnosis is
    in. The thread, to join; None when no mitigation phase is to come (none, not submitted, or acted)."""
    from telemetry_gen.mitigation import prepare_mitigation as prepare

    inc, seed = session.incident, session.header.seed
    if inc.mitigation is None or session.state not in ("submitted", "debriefed") \
            or any(e.kind == "act" for e in session.events):
        return None

    def run() -> None:
        # on an error, act simulates again and reports it to the player
        with contextlib.suppress(Exception):
            prepare(inc, seed)

    thread = threading.Thread(target=run, name="prepare-mitigation", daemon=True)
    thread.start()
    return thread


def action_error_text(index: int, text: str, exc: Exception) -> str:
    """A refused action as the front ends print it: which action, the column it stopped at, why, and a hint."""
    column = getattr(exc, "column", 1)
    message = getattr(exc, "message", str(exc))
    hint = getattr(exc, "hint", None)
    return f"action {index + 1} `{text}`, column {column}: {message}" + (f" (hint: {hint})" if hint else "")


def mitigation_score(session: Session) -> MitigationScore | None:
    """The score of the session's mitigation (None: it did not act). Re-simulates when the build cache lost it."""
    from game.rules.mitigation import score_mitigation
    from game.session import ACT

    event = next((e for e in session.events if e.kind == ACT), None)
    if event is None or session.incident.mitigation is None:
        return None
    return score_mitigation(session.incident, session.header.seed, list(event.data["actions"]),
                            float(event.data["decision_s"]))


def read_span(reads: Sequence[Mapping[str, Any]], t0: Any, duration_s: float) -> tuple[float, float] | None:
    """[start, end] simulated seconds of the incident window that a query's reads covered (the `reads` a
    query event records), from the bounds its filters put on `ts` (none: the whole window), clipped to the
    window that starts at `t0`; None when it read no table. The debrief draws it under the fault timeline."""
    from game.rules.observe import ts_bounds

    if not reads:
        return None
    low, high = duration_s, 0.0
    for read in reads:
        bounds = ts_bounds(read.get("filters") or [], t0)
        a = 0.0 if bounds.low is None else max(0.0, bounds.low)
        b = duration_s if bounds.high is None else min(duration_s, bounds.high)
        if a > b:  # bounds that contradict each other come from different scans: count the whole window
            a, b = 0.0, duration_s
        low, high = min(low, a), max(high, b)
    return low, high


# ---------------------------------------------------------------- a game in one object


@dataclass
class Game:
    """One player's game: the variant, its telemetry and the session. Every action goes to the session,
    whose rules decide what is allowed; reading state (`session.queries`, `session.ranking`, ...) is
    done on the session directly."""

    variant: Variant
    telemetry: Telemetry
    session: Session

    @property
    def board(self) -> list[Shown]:
        return self.session.board

    def start(self) -> Event:
        return start(self.session, self.telemetry)

    def run_query(self, sql: str) -> Ran:
        return run_query(self.session, self.telemetry, sql)

    def glance(self, sql: str) -> QueryResult:
        return glance(self.telemetry, sql)

    def cancel(self) -> bool:
        return cancel(self.telemetry)

    def catalog(self) -> list[CatalogEntry]:
        return catalog(self.telemetry)

    def rank(self, ranking: Sequence[tuple[str, float]] | Mapping[str, float]) -> Event:
        return rank(self.session, ranking)

    def pin(self, query: int, hypothesis: str, stance: str) -> Event:
        return pin(self.session, query, hypothesis, stance)

    def unpin(self, query: int, hypothesis: str, stance: str) -> Event:
        return unpin(self.session, query, hypothesis, stance)

    def note(self, hypothesis: str, text: str) -> Event:
        return note(self.session, hypothesis, text)

    def hint(self) -> Event:
        return hint(self.session)

    def updates(self, now: float | None = None) -> list[Update]:
        """Injects and interviewer's items that fell due since the last call (each journalled once)."""
        return updates(self.session, now)

    def save_draft(self, *, board: Sequence[Mapping[str, Any]] | None = None, editor: str | None = None) -> None:
        save_draft(self.session, board=board, editor=editor)

    def heartbeat(self) -> None:
        heartbeat(self.session)

    def submit(self, ranking: Sequence[tuple[str, float]] | Mapping[str, float] | None = None,
               discriminator: int | None = None) -> Event:
        """Submit `ranking` (default: the current board). `discriminator` (a Qn) is kept for older
        scripts; scoring reads the pins."""
        return submit(self.session, ranking, discriminator)

    def export_transcript(self, score: Mapping[str, Any] | None = None, *, root: Path | None = None) -> Path:
        return export_transcript(self.session, self.telemetry, score, root=root)

    def act(self, actions: Sequence[str], decision_s: float | None = None) -> Acted:
        return act(self.session, actions, decision_s)

    def debrief(self, progress: ScoringProgress | None = None) -> Debrief:
        return debrief(self.session, progress)

    def close(self) -> None:
        """Close the gateway and release the session file (it stays resumable)."""
        self.telemetry.close()
        self.session.close()


def open_game(path: Path | str, seed: int, player: str, *, root: Path | None = None,
              limits: QueryLimits = PLAYER_LIMITS, progress: BuildProgress | None = None,
              journal: bool = True) -> Game:
    """Open the incident at `path` at `seed` for `player`: variant, telemetry and a new session (one that
    writes nothing with `journal=False`, see `new_session`)."""
    variant = load_variant(path, seed)
    telemetry = open_telemetry(variant, limits=limits, progress=progress)
    try:
        session = new_session(variant, player, root=root, journal=journal)
    except BaseException:
        telemetry.close()
        raise
    return Game(variant, telemetry, session)


def resume_game(session_path: Path | str, *, limits: QueryLimits = PLAYER_LIMITS,
                progress: BuildProgress | None = None) -> Game:
    """Continue a session file: its variant (the header's seed) and that variant's telemetry."""
    session = resume_session(session_path)
    try:
        variant = variant_of(session)
        return Game(variant, open_telemetry(variant, limits=limits, progress=progress), session)
    except BaseException:
        session.close()
        raise


def build_worlds(incident_path: Path | str, seed: int) -> subprocess.Popen[bytes] | None:
    """Start building every hypothesis's world of the incident at `seed` in a background process (at low
    priority), so that scoring at the debrief finds them in the cache. Returns the process, to poll,
    terminate or wait on; None when it could not start."""
    from game.rules.assess import start_world_build

    return start_world_build(incident_path, seed)


def prefork_query_worker() -> bool:
    """Fork the SQL worker of this process's first game now, while nothing is loaded and one thread runs
    (game.query.sandbox.prefork): a served tab's warm process does it before it learns its tab, so opening
    the game costs no interpreter start. True if a worker was forked."""
    from game.query.sandbox import prefork

    return prefork()


def end_with_parent() -> None:
    """Exit this process within half a second of its parent's death, however the parent died
    (telemetry_gen.lifeline): a front end that a server started (`servedrill serve`) calls it."""
    from telemetry_gen.lifeline import watch_parent

    watch_parent()

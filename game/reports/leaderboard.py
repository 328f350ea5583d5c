"""The game-day leaderboard: every transcript in a results folder, scored and ranked.

Each `*.json` file under the folder (recursively; dot files skipped) is read with DuckDB
(`read_json` with the transcript's columns). A file that is not JSON, not one JSON object, or not a
servedrill transcript is skipped with a notice naming it; the other transcripts still count. The
folder's `gameday.json` (written by `servedrill gameday run`) is not a transcript: it gives the
teams and the round order.

Each transcript is re-scored from its queries' SQL (`game.rules.assess.score_session`: every query re-run on
the incident's hypothesis worlds) after `load_transcript` checked it against its incident. Nothing the
file claims is trusted: a transcript that cannot be re-scored (the incident changed or is not on this
machine) is skipped with its reason, and a recorded score (`gameday.score`) that differs from the
recomputed one is reported as a notice.

Ranking (DuckDB window functions): per incident (incident id and seed) and overall, by score
(higher first), then time (shorter first). Time is the player's investigation time: from the
`start` event to the `submit` event, seconds; a transcript without a submission has no time and
ranks after equal scores. A player with two transcripts for one incident counts the first submitted.
A team's score on an incident is the mean over its roster (a player who handed nothing in counts
0; without a roster, over the players seen); its time is the mean over those who handed in. Overall
scores are sums over the incidents, times too.

Whose word counts. Given the game day's journal key (`servedrill leaderboard --gameday PLAN`, when
`servedrill gameday roster` made one), a transcript counts only when the server's signed journal header
it carries (`gameday.journal_header`) and its events verify as a chain under the key
(game.session.signing) and its identity fields are the signed header's: an edited confidence, time,
player or deleted event is refused with the reason, and times (which break ties) are the server's. The
team is the roster's and `late` is recomputed from the round's start. Without a key nothing is verified
and the board says it trusts its files (`TRUST_NOTICE`).

Confidence in the true cause (the sum of the confidences on the true hypotheses, percent) is taken
from every `rank` and `submit` event, against seconds since the player's `start`; before a player's
first ranking it is the even spread (100 / number of hypotheses). A team's curve is the mean of its
players' curves at every moment one of them changed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from game.gameday.collect import MAX_STATE_BYTES, STATE_FILE, STATE_FORMAT
from incidents.bounded_read import ReadRefused, open_regular, read_text

TRANSCRIPT_COLUMNS = (
    "{'format': 'VARCHAR', 'format_version': 'BIGINT', 'session_id': 'VARCHAR', 'incident_id': 'VARCHAR', "
    "'player': 'VARCHAR', 'seed': 'BIGINT', 'state': 'VARCHAR', 'events': 'JSON', 'gameday': 'JSON'}"
)
NO_TEAM = None
TRUST_NOTICE = ("result files are not verified (no game-day journal key: pass --gameday PLAN after `servedrill "
                "gameday roster PLAN`): this board trusts its files, and whoever can write them")
IDENTITY = ("session_id", "incident_id", "incident_digest", "incident_path", "seed", "player", "created", "members")


@dataclass
class Entry:
    """One player's transcript for one incident. `score` 0..100; `time_s` seconds from start to submit
    (None: not submitted); `timeline`: (seconds since start, percent on the truth); `submitted_at`:
    epoch seconds of the submission."""

    file: Path
    session_id: str
    player: str
    team: str | None
    incident_id: str
    seed: int
    title: str
    score: float
    time_s: float | None
    submitted: bool
    late: bool
    rescored: bool
    timeline: list[tuple[float, float]]
    truth: list[str]
    submitted_at: float | None = None
    round: int | None = None
    verified: bool = False
    members: list[str] = field(default_factory=list)
    """A team's shared game (a team-play round): `player` is the team and these its players, each of whom the
    result counts for; empty for one player's game."""

    def to_dict(self) -> dict[str, Any]:
        return {"player": self.player, "team": self.team, "score": self.score, "time_s": self.time_s,
                "submitted": self.submitted, "late": self.late, "rescored": self.rescored,
                "file": str(self.file), "session_id": self.session_id, "verified": self.verified,
                "members": self.members}


@dataclass
class IncidentBoard:
    """The ranking of one incident (and seed). `players` and `teams` are dicts with a `rank` key,
    best first; `confidence`: team (or player, without teams) -> [[seconds, percent], ...]."""

    incident_id: str
    seed: int
    title: str
    round: int | None
    truth: list[str]
    players: list[dict[str, Any]]
    teams: list[dict[str, Any]]
    confidence: dict[str, list[tuple[float, float]]]

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "incident": self.incident_id, "seed": self.seed, "title": self.title,
                "truth": self.truth, "players": self.players, "teams": self.teams,
                "confidence": {k: [[round(x, 1), round(y, 2)] for x, y in v] for k, v in self.confidence.items()}}


@dataclass
class Leaderboard:
    """Everything the reports show. `skipped`: [{"file", "reason"}]; `notices`: other one-liners."""

    results_dir: Path
    event: str | None
    entries: list[Entry]
    incidents: list[IncidentBoard]
    players: list[dict[str, Any]]
    teams: list[dict[str, Any]]
    skipped: list[dict[str, str]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    verified: bool = False
    """Whether every counted transcript was verified against the game day's journal key."""

    def to_dict(self) -> dict[str, Any]:
        return {"results_dir": str(self.results_dir), "event": self.event, "transcripts": len(self.entries),
                "incidents": [b.to_dict() for b in self.incidents],
                "overall": {"players": self.players, "teams": self.teams},
                "skipped": self.skipped, "notices": self.notices, "verified": self.verified}


# ---------------------------------------------------------------- reading


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.removeprefix("Invalid Input Error: ")


def _read_row(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The transcript columns of `path` through DuckDB: (row, None) or (None, why it is skipped)."""
    from game.session.transcripts import MAX_TRANSCRIPT_BYTES  # here: the session package is slow to import

    literal = str(path).replace("'", "''")
    try:
        # a regular file within the transcript cap, checked before DuckDB reads it by name (DuckDB would
        # block on a FIFO and read a huge file whole)
        with open_regular(path, max_bytes=MAX_TRANSCRIPT_BYTES, what="transcript") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return None, "the file is empty"
        cur = con.execute(f"SELECT * FROM read_json('{literal}', columns={TRANSCRIPT_COLUMNS}, format='auto', "
                          "maximum_object_size=67108864)")
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    except duckdb.Error as exc:
        return None, f"not a transcript: {_first_line(exc)}"
    except ReadRefused as exc:
        return None, exc.problem
    except OSError as exc:
        return None, f"cannot read it ({exc.strerror or exc})"
    if len(rows) != 1:
        return None, f"not a transcript: it holds {len(rows)} JSON values, a transcript is one object"
    row = dict(zip(names, rows[0], strict=True))
    if row["format"] not in (None, "servedrill-transcript") or row["session_id"] is None or row["events"] is None:
        return None, "not a servedrill transcript (foreign JSON)"
    return row, None


def _timeline(con: duckdb.DuckDBPyConnection, events_json: str, truth: list[str]) -> tuple[float | None,
                                                                                           list[tuple[float, float]]]:
    """(start time, [(seconds since start, percent on the truth)]) from a transcript's events, in SQL."""
    rows = con.execute(
        """
        WITH ev AS (SELECT unnest(CAST(CAST(? AS JSON) AS JSON[])) AS e),
        flat AS (SELECT e->>'kind' AS kind, CAST(e->>'seq' AS BIGINT) AS seq, CAST(e->>'time' AS DOUBLE) AS t,
                        e->'data'->'ranking' AS ranking FROM ev),
        rk AS (SELECT seq, t, unnest(CAST(ranking AS JSON[])) AS r FROM flat WHERE kind IN ('rank', 'submit'))
        SELECT 'start' AS what, min(t) AS t, NULL AS pct FROM flat WHERE kind = 'start'
        UNION ALL
        SELECT 'rank', t, sum(CASE WHEN r->>'id' IN (SELECT unnest(CAST(? AS VARCHAR[])))
                                   THEN CAST(r->>'confidence' AS DOUBLE) ELSE 0 END)
        FROM rk GROUP BY seq, t
        ORDER BY what DESC, t
        """, [events_json, truth]).fetchall()
    start = rows[0][1] if rows and rows[0][0] == "start" else None
    points = [(float(t) - (start or 0.0), float(p)) for what, t, p in rows if what == "rank" and start is not None]
    return start, points


def _score(path: Path) -> tuple[Any, str | None]:
    """(report, transcript) from load_transcript + score_session, or (None, why not)."""
    from game.rules.assess import score_session
    from game.session import TranscriptError, load_transcript

    try:
        t = load_transcript(path)
    except TranscriptError as exc:
        return None, str(exc).split(": ", 1)[-1]
    return (score_session(t.incident, t.header.seed, t.events), t), None


def _state(results: Path, gameday: Any | None) -> tuple[str | None, dict[str, str], list[tuple[str, int]],
                                                      dict[str, list[str]]]:
    """(event, player -> team, round order [(incident, seed)], team -> roster)."""
    if gameday is not None:
        teams = dict(gameday.teams)
        order = [(r.incident_id, r.seed) for r in gameday.rounds]
        return gameday.event, gameday.players, order, teams
    try:
        doc = json.loads(read_text(results / STATE_FILE, max_bytes=MAX_STATE_BYTES, what="game-day state file"))
    except (OSError, ValueError):  # missing, unreadable or refused (a FIFO, a device, too large)
        return None, {}, [], {}
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
        return None, {}, [], {}
    teams = {str(t.get("name")): [str(p) for p in t.get("players", [])]
             for t in doc.get("teams", []) if isinstance(t, dict)}
    order = [(str(r.get("incident")), int(r.get("seed", 0))) for r in doc.get("rounds", []) if isinstance(r, dict)]
    players = {p: team for team, ps in teams.items() for p in ps}
    return doc.get("event"), players, order, teams


def read_results(results_dir: Path | str, gameday: Any | None = None, *, key: bytes | None = None,
                 trust_players: bool = False) -> Leaderboard:
    """Read, score and rank every transcript under `results_dir`. `gameday`: a loaded GameDay whose teams
    and rounds take precedence over the folder's gameday.json. `key`: the game day's journal key; with
    it only verified transcripts count (unverified ones too with `trust_players`, marked)."""
    results = Path(results_dir)
    event, team_of, order, rosters = _state(results, gameday)
    skipped: list[dict[str, str]] = []
    notices: list[str] = [] if key is not None else [TRUST_NOTICE]
    deadlines = _deadlines(results, gameday)
    entries: list[Entry] = []
    files = sorted(p for p in results.rglob("*.json")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(results).parts)
                   and not (p.parent == results and p.name == STATE_FILE))
    con = duckdb.connect()
    try:
        for path in files:
            row, why = _read_row(con, path)
            if row is None:
                skipped.append({"file": str(path), "reason": why or "unreadable"})
                continue
            verified = False
            if key is not None:
                refused = _refusal(path, row, key)
                if refused is not None and not (trust_players and refused.startswith("unsigned")):
                    skipped.append({"file": str(path), "reason": f"refused: {refused}"})
                    continue
                verified = refused is None
            entry, why = _entry(con, path, row, team_of, notices)
            if entry is None:
                skipped.append({"file": str(path), "reason": why or "unreadable"})
                continue
            if verified:
                entry.verified = True
                if entry.members:  # a team's game: the team is the signed header's player, if the plan has it
                    entry.team = entry.player if entry.player in rosters else None
                else:
                    entry.team = team_of.get(entry.player, entry.team) if gameday is not None else entry.team
                deadline = deadlines.get((entry.incident_id, entry.seed))
                entry.late = deadline is not None and entry.submitted_at is not None and entry.submitted_at > deadline
            elif key is not None:
                notices.append(f"{path}: unverified (unsigned), counted on the player's word (--trust-players)")
            entries.append(entry)
        entries = _dedupe(entries, notices)
        boards, players, teams = _rank(con, entries, order, rosters)
    finally:
        con.close()
    return Leaderboard(results, event, entries, boards, players, teams, skipped, notices,
                       key is not None and all(e.verified for e in entries))


def _deadlines(results: Path, gameday: Any | None) -> dict[tuple[str, int], float]:
    """(incident, seed) -> the round's deadline (its start in gameday.json + its time limit)."""
    from game.gameday.collect import read_state, round_times

    if gameday is None:
        return {}
    state = read_state(results)
    out = {}
    for rnd in gameday.rounds:
        started = round_times(state, rnd.number)[0]
        if started is not None:
            out[(rnd.incident_id, rnd.seed)] = started + rnd.time_limit_s
    return out


def _refusal(path: Path, row: dict[str, Any], key: bytes) -> str | None:
    """Why the transcript at `path` does not verify under `key` (None: it does). Starts with "unsigned"
    when it carries no signed journal at all."""
    from game.session.signing import ChainBroken, verify_chain
    from game.session.transcripts import MAX_TRANSCRIPT_BYTES

    meta = json.loads(row["gameday"]) if row["gameday"] else {}
    header = meta.get("journal_header") if isinstance(meta, dict) else None
    if not isinstance(header, dict):
        return "unsigned: not a journal the game-day server signed (a hand-in from outside the server)"
    try:
        doc = json.loads(read_text(path, max_bytes=MAX_TRANSCRIPT_BYTES, what="transcript"))
    except (OSError, ValueError) as exc:
        return f"cannot be read again ({exc})"
    events = doc.get("events") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return "no events"
    try:
        verify_chain(key, header, events)
    except ChainBroken as exc:
        where = "the signed header" if exc.line == 1 else f"events[{exc.line - 2}]"
        return f"{where}: {exc.reason}"
    for name in IDENTITY:
        if doc.get(name) != header.get(name):
            return f"its {name} is not the signed journal's ({doc.get(name)!r}, signed {header.get(name)!r})"
    return None


def _entry(con: duckdb.DuckDBPyConnection, path: Path, row: dict[str, Any], team_of: dict[str, str],
           notices: list[str]) -> tuple[Entry | None, str | None]:
    meta = json.loads(row["gameday"]) if row["gameday"] else {}
    meta = meta if isinstance(meta, dict) else {}
    scored, why = _score(path)
    hypotheses = 0
    if scored is None:
        return None, f"cannot be scored: {why}"
    report, t = scored
    total, truth, title, rescored = float(report.total), list(report.truth), t.incident.title, True
    hypotheses = len(t.incident.hypotheses)
    claimed = t.recorded_total
    if claimed is not None and abs(claimed - total) > 0.05:
        notices.append(f"{path}: the file claims {claimed:.4g} points; recomputed from its queries: {total:.1f}")
    try:
        start, points = _timeline(con, row["events"], truth)
    except duckdb.Error as exc:
        return None, f"events cannot be read: {_first_line(exc)}"
    submit_at = next((float(e["time"]) for e in json.loads(row["events"]) if isinstance(e, dict)
                      and e.get("kind") == "submit" and isinstance(e.get("time"), int | float)), None)
    time_s = submit_at - start if submit_at is not None and start is not None else None
    if truth and start is not None:
        points = [(0.0, 100.0 * len(truth) / max(hypotheses, 1)), *points]
    elif not truth:
        points = []  # without the incident the truth is unknown: no curve
    player = str(row["player"])
    members = list(t.header.members)
    team: str | None = player  # a team's shared game is the team's result
    if not members:
        team = meta.get("team") if isinstance(meta.get("team"), str) else team_of.get(player, NO_TEAM)
    return Entry(path, str(row["session_id"]), player, team, str(row["incident_id"]), int(row["seed"] or 0),
                 title, round(total, 1), None if time_s is None else round(time_s, 1), time_s is not None,
                 bool(meta.get("late")), rescored, points, truth, submit_at,
                 meta.get("round") if isinstance(meta.get("round"), int) else None, members=members), None


def _dedupe(entries: list[Entry], notices: list[str]) -> list[Entry]:
    """One entry per player and incident: the first submitted (then the first file)."""
    kept: dict[tuple[str, str, int], Entry] = {}
    for e in sorted(entries, key=lambda e: (not e.submitted, e.submitted_at or 0.0, str(e.file))):
        key = (e.player, e.incident_id, e.seed)
        if key in kept:
            if kept[key].session_id != e.session_id:
                notices.append(f"{e.file}: {e.player} already has a transcript for {e.incident_id} "
                               f"(seed {e.seed}) in {kept[key].file}; counting that one")
            continue
        kept[key] = e
    return sorted(kept.values(), key=lambda e: (e.incident_id, e.seed, e.player))


# ---------------------------------------------------------------- ranking

_RANK = "rank() OVER (PARTITION BY {part} ORDER BY score DESC, time_s ASC NULLS LAST)"


def _records(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _rank(con: duckdb.DuckDBPyConnection, entries: list[Entry], order: list[tuple[str, int]],
          rosters: dict[str, list[str]]) -> tuple[list[IncidentBoard], list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-incident boards, overall players and overall teams, ranked in SQL."""
    # weight: how many roster players a result counts for (a team's shared game: each member; else 1)
    con.execute("CREATE TEMP TABLE entries (incident VARCHAR, seed BIGINT, player VARCHAR, team VARCHAR, "
                "score DOUBLE, time_s DOUBLE, submitted BOOLEAN, late BOOLEAN, file VARCHAR, members VARCHAR[], "
                "weight INTEGER)")
    con.execute("CREATE TEMP TABLE rosters (team VARCHAR, player VARCHAR)")
    if entries:
        con.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [[e.incident_id, e.seed, e.player, e.team, e.score, e.time_s, e.submitted, e.late,
                          str(e.file), e.members, max(1, len(e.members))] for e in entries])
    pairs = [[t, p] for t, ps in rosters.items() for p in ps]
    if pairs:
        con.executemany("INSERT INTO rosters VALUES (?, ?)", pairs)
    con.execute("""
        CREATE TEMP TABLE sizes AS
        SELECT team, count(*) AS size FROM rosters GROUP BY team
        UNION ALL
        SELECT team, greatest(count(DISTINCT player), max(weight)) FROM entries
        WHERE team IS NOT NULL AND team NOT IN (SELECT team FROM rosters) GROUP BY team""")
    players = _records(con.execute(f"""
        SELECT incident, seed, {_RANK.format(part='incident, seed')} AS rank, player, team, round(score, 1) AS score,
               time_s, submitted, late, file, members
        FROM entries ORDER BY incident, seed, rank, player"""))
    teams = _records(con.execute(f"""
        WITH t AS (
            SELECT e.incident, e.seed, e.team, sum(e.score * e.weight) / any_value(s.size) AS score,
                   avg(e.time_s) AS time_s, CAST(sum(e.weight) AS BIGINT) AS handed_in, any_value(s.size) AS size
            FROM entries e JOIN sizes s USING (team) GROUP BY e.incident, e.seed, e.team)
        SELECT incident, seed, {_RANK.format(part='incident, seed')} AS rank, team, round(score, 1) AS score,
               round(time_s, 1) AS time_s, handed_in, size
        FROM t ORDER BY incident, seed, rank, team"""))
    overall_players = _records(con.execute(f"""
        WITH flat AS (  -- a team's result counts for each of its members
            SELECT player, team, score, time_s FROM entries WHERE len(members) = 0
            UNION ALL
            SELECT unnest(members) AS player, team, score, time_s FROM entries WHERE len(members) > 0),
        p AS (SELECT player, any_value(team) AS team, sum(score) AS score, sum(time_s) AS time_s,
                     count(*) AS incidents FROM flat GROUP BY player)
        SELECT {_RANK.format(part='1')} AS rank, player, team, round(score, 1) AS score, round(time_s, 1) AS time_s,
               incidents
        FROM p ORDER BY rank, player"""))
    overall_teams = _records(con.execute(f"""
        WITH per AS (
            SELECT e.incident, e.seed, e.team, sum(e.score * e.weight) / any_value(s.size) AS score,
                   avg(e.time_s) AS time_s
            FROM entries e JOIN sizes s USING (team) GROUP BY e.incident, e.seed, e.team),
        t AS (SELECT s.team, coalesce(sum(per.score), 0) AS score, sum(per.time_s) AS time_s,
                     count(per.incident) AS incidents, any_value(s.size) AS size
              FROM sizes s LEFT JOIN per USING (team) GROUP BY s.team)
        SELECT {_RANK.format(part='1')} AS rank, team, round(score, 1) AS score, round(time_s, 1) AS time_s,
               incidents, size
        FROM t ORDER BY rank, team"""))
    boards = _boards(entries, players, teams, order)
    return boards, overall_players, overall_teams


def _boards(entries: list[Entry], players: list[dict[str, Any]], teams: list[dict[str, Any]],
            order: list[tuple[str, int]]) -> list[IncidentBoard]:
    recorded = {(e.incident_id, e.seed): e.round for e in entries if e.round is not None}
    keys = sorted({(e.incident_id, e.seed) for e in entries},
                  key=lambda k: (order.index(k) if k in order else len(order), recorded.get(k) or 10**6, k))
    boards = []
    for key in keys:
        mine = [e for e in entries if (e.incident_id, e.seed) == key]
        rescored = [e for e in mine if e.truth]
        head = rescored[0] if rescored else mine[0]
        strip = ("incident", "seed")
        board_players = [{k: v for k, v in r.items() if k not in strip} for r in players
                         if (r["incident"], r["seed"]) == key]
        board_teams = [{k: v for k, v in r.items() if k not in strip} for r in teams
                       if (r["incident"], r["seed"]) == key]
        number = order.index(key) + 1 if key in order else recorded.get(key)
        boards.append(IncidentBoard(key[0], key[1], head.title, number,
                                    head.truth, board_players, board_teams, team_confidence(mine)))
    return boards


def team_confidence(entries: list[Entry]) -> dict[str, list[tuple[float, float]]]:
    """team (or player when they have no team) -> step curve of the mean confidence on the truth."""
    groups: dict[str, list[Entry]] = {}
    for e in entries:
        if e.timeline:
            groups.setdefault(e.team or e.player, []).append(e)
    out: dict[str, list[tuple[float, float]]] = {}
    for name in sorted(groups):
        members = groups[name]
        times = sorted({t for e in members for t, _ in e.timeline})
        curve: list[tuple[float, float]] = []
        for t in times:
            values = [next(v for x, v in reversed(e.timeline) if x <= t) for e in members]
            value = sum(values) / len(values)
            if not curve or curve[-1][1] != value:
                curve.append((t, value))
        out[name] = curve
    return out

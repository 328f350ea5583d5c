"""The game-day file (gameday.yaml): the event, its rounds in order, the teams, where results go.

A round names an incident (a library id, or a file path relative to the game-day file), the seed
every player gets, and the time limit in minutes (default: the incident's own limit). Teams list
their players; a player name is what each player passes as `servedrill play --player NAME`, so it
is one word (letters, digits, `.`, `_`, `-`) and belongs to one team only. `results` is the folder
the transcripts are collected into (a local path or a shared folder; relative paths are from the
game-day file). `data`, when set, is the SERVEDRILL_DATA folder the players play in (a shared
folder), which the facilitator's console collects from; without it, the facilitator's own.

Every problem comes back as a `Diagnostic` (file:line:column: what is wrong (hint: ...)), all at
once, in the style of incidents/loader.py, whose YAML reader, incidents/yaml_reader.py (marks on every key
and value, YAML-1.2 booleans, duplicate keys and alias bombs refused), is reused here.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from incidents.bounded_read import ReadRefused, read_bytes
from incidents.diagnostics import Diagnostic
from incidents.yaml_reader import MAX_BYTES, HardenedLoader, Refused, TreeBuilder, decode, tab_diagnostics

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$"
"""A player or team name: one shell word, so the join command needs no quoting."""
MAX_ROUNDS = 20
MAX_TIME_LIMIT_MIN = 240.0


class GameDayError(Exception):
    """A game-day file that cannot be used; `diagnostics` says why, all at once."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(str(d) for d in diagnostics))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoundSpec(_Strict):
    incident: str = Field(description="library incident id, or a file path relative to the game-day file")
    seed: int = Field(0, ge=0, description="seed every player gets: the variant and the telemetry")
    time_limit_min: float | None = Field(
        None, gt=0, le=MAX_TIME_LIMIT_MIN, description="minutes for the round (default: the incident's limit)")
    debrief: Literal["held", "immediate"] = Field(
        "held", description="in a served round: 'held' until the round ends (default), or 'immediate' "
                            "(practice rounds)")
    team_play: bool | None = Field(
        None, description="each team plays the round as one shared game with one hand-in (default: the "
                          "event's team_play)")

    @field_validator("incident")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the incident is empty")
        return v.strip()


class TeamSpec(_Strict):
    name: str = Field(pattern=NAME_RE, description="team name, one word")
    players: list[str] = Field(min_length=1, description="player names, as they pass --player NAME")


class GameDaySpec(_Strict):
    event: str = Field(min_length=1, description="name of the event, shown on the console and the reports")
    date: str | None = Field(None, description="free text, e.g. 2026-03-12")
    facilitator: str | None = None
    results: str = Field(min_length=1, description="folder the transcripts are collected into")
    data: str | None = Field(None, description="SERVEDRILL_DATA folder the players use (a shared folder)")
    rounds: list[RoundSpec] = Field(min_length=1, max_length=MAX_ROUNDS)
    teams: list[TeamSpec] = Field(min_length=1)
    team_play: bool = Field(False, description="every round is team play unless the round says "
                                               "team_play: false")


@dataclass(frozen=True)
class Round:
    """One round, resolved. `number` is 1-based; `time_limit_s` in seconds."""

    number: int
    ref: str
    incident_id: str
    title: str
    path: Path
    seed: int
    time_limit_s: float
    debrief: str = "held"
    team_play: bool = False
    """Each team plays the round as one shared game (a served round: every member's link opens it), one hand-in
    per team."""

    @property
    def library(self) -> bool:
        """Whether `ref` is a library id (else a file)."""
        return self.ref == self.incident_id and not Path(self.ref).suffix

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.number, "incident": self.incident_id, "ref": self.ref, "title": self.title,
                "path": str(self.path), "seed": self.seed, "time_limit_s": self.time_limit_s,
                "debrief": self.debrief, "team_play": self.team_play}


@dataclass(frozen=True)
class GameDay:
    """A checked game-day file. Paths are absolute; `teams` maps team name -> players in file order."""

    path: Path
    event: str
    date: str | None
    facilitator: str | None
    results: Path
    data: Path | None
    rounds: list[Round]
    teams: dict[str, list[str]]

    @property
    def players(self) -> dict[str, str]:
        """player -> team."""
        return {p: team for team, players in self.teams.items() for p in players}

    def hand_ins(self, rnd: Round) -> dict[str, list[str]]:
        """Who hands in for `rnd`: in a team round each team (its members), else each player (themself)."""
        if rnd.team_play:
            return {team: list(players) for team, players in self.teams.items()}
        return {p: [p] for p in self.players}

    def join_command(self, rnd: Round, player: str) -> str:
        """The exact command a player runs to play `rnd`."""
        ref = rnd.ref if rnd.library else str(rnd.path)
        prefix = f"SERVEDRILL_DATA={_quote(str(self.data))} " if self.data else ""
        return f"{prefix}servedrill play {_quote(ref)} --seed {rnd.seed} --player {player}"

    def submit_command(self, player: str) -> str:
        """The command a player on another machine runs to hand in (copies their transcripts)."""
        return f"servedrill gameday submit {_quote(str(self.path))} --player {player}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": str(self.path), "event": self.event, "date": self.date, "facilitator": self.facilitator,
                "results": str(self.results), "data": None if self.data is None else str(self.data),
                "rounds": [r.to_dict() for r in self.rounds],
                "teams": [{"name": t, "players": p} for t, p in self.teams.items()]}


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9._/=:@+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


# ---------------------------------------------------------------- reading YAML with marks


@dataclass
class _Doc:
    data: Any
    values: dict[tuple[str | int, ...], yaml.Mark]
    keys: dict[tuple[str | int, ...], yaml.Mark]
    name: str

    def at(self, loc: tuple[str | int, ...], message: str, hint: str | None = None, on_key: bool = False
           ) -> Diagnostic:
        """A diagnostic at the deepest part of `loc` present in the file."""
        while loc and loc not in self.values and loc not in self.keys:
            loc = loc[:-1]
        value, key = self.values.get(loc), self.keys.get(loc)
        mark = (key or value) if on_key else (value or key)
        if mark is None:
            return Diagnostic(self.name, 1, 1, message, hint)
        return Diagnostic(self.name, mark.line + 1, mark.column + 1, message, hint)


def _read_yaml(path: Path) -> tuple[_Doc | None, list[Diagnostic]]:
    name = str(path)
    try:
        if not path.is_file():
            why = "is a directory, not a game-day file" if path.is_dir() else "no such file"
            return None, [Diagnostic(name, 0, 0, why, "give the path of a gameday.yaml")]
        raw = read_bytes(path, max_bytes=MAX_BYTES, what="game-day file")  # regular, bounded: never read whole
    except ReadRefused as exc:
        return None, [Diagnostic(name, 0, 0, exc.problem, "a game-day file is a few lines of YAML")]
    except OSError as exc:
        return None, [Diagnostic(name, 0, 0, f"cannot read file: {exc.strerror or exc}")]
    text, problems = decode(raw, name)
    if text is None:
        return None, [d if "servedrill new" not in (d.hint or "") else
                      Diagnostic(d.path, d.line, d.column, d.message, "start from docs/gameday.example.yaml")
                      for d in problems]
    tabs = tab_diagnostics(text, name)
    if tabs:
        return None, tabs
    loader = HardenedLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, [Diagnostic(name, 1, 1, "no YAML document: the file has only comments or blank lines",
                                     "start from docs/gameday.example.yaml")]
        builder = TreeBuilder(loader, name)
        data = builder.build(root, ())
    except Refused as exc:
        line, col = (exc.mark.line + 1, exc.mark.column + 1) if exc.mark else (1, 1)
        return None, [Diagnostic(name, line, col, exc.message, exc.hint)]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        context = f" ({exc.context})" if exc.context else ""
        return None, [Diagnostic(name, line, col, f"YAML syntax error: {exc.problem or 'invalid YAML'}{context}")]
    except (yaml.YAMLError, RecursionError) as exc:
        return None, [Diagnostic(name, 1, 1, f"YAML error: {exc}")]
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else "a single value"
        return None, [Diagnostic(name, root.start_mark.line + 1, root.start_mark.column + 1,
                                 f"the top level must be a mapping of game-day fields, found {kind}",
                                 "start with `event: ...`; see docs/gameday.example.yaml")]
    if "hypotheses" in data or "faults" in data:
        return None, [Diagnostic(name, root.start_mark.line + 1, root.start_mark.column + 1,
                                 "this is an incident file, not a game-day file",
                                 "a game day names incidents under `rounds:`; see docs/gameday.example.yaml")]
    return _Doc(data, builder.value_marks, builder.key_marks, name), list(builder.diagnostics)


def _where(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "game day"


def _fields_at(loc: tuple[str | int, ...]) -> list[str]:
    model: type[BaseModel] = GameDaySpec
    for part in loc:
        if part == "rounds":
            model = RoundSpec
        elif part == "teams":
            model = TeamSpec
    return list(model.model_fields)


def _pydantic_diagnostics(doc: _Doc, error: ValidationError) -> list[Diagnostic]:
    out = []
    for err in error.errors(include_url=False):
        loc = tuple(err["loc"])
        kind, got = err["type"], err.get("input")
        if kind == "missing":
            info = _model_field(loc)
            out.append(doc.at(loc[:-1], f"{_where(loc[:-1])}: missing required field '{loc[-1]}'",
                              info, on_key=True))
        elif kind == "extra_forbidden":
            allowed = _fields_at(loc[:-1])
            close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else "allowed: " + ", ".join(allowed)
            out.append(doc.at(loc, f"{_where(loc[:-1])}: unknown field '{loc[-1]}'", hint, on_key=True))
        elif kind == "string_pattern_mismatch":
            out.append(doc.at(loc, f"{_where(loc)}: {got!r} is not a valid name",
                              "one word of letters, digits, '.', '_' or '-', at most 32 characters"))
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            out.append(doc.at(loc, f"{_where(loc)}: {msg[:1].lower()}{msg[1:]}, got {got!r}"))
    return out


def _model_field(loc: tuple[str | int, ...]) -> str | None:
    model: type[BaseModel] = RoundSpec if "rounds" in loc else TeamSpec if "teams" in loc else GameDaySpec
    info = model.model_fields.get(str(loc[-1]))
    return info.description if info is not None else None


def _roster_diagnostics(doc: _Doc, spec: GameDaySpec) -> list[Diagnostic]:
    out = []
    teams: dict[str, int] = {}
    players: dict[str, tuple[int, int]] = {}
    for ti, team in enumerate(spec.teams):
        if team.name in teams:
            out.append(doc.at(("teams", ti, "name"), f"teams[{ti}].name: team '{team.name}' is listed twice",
                              f"also teams[{teams[team.name]}]; give each team its own name"))
        teams.setdefault(team.name, ti)
        for pi, player in enumerate(team.players):
            loc = ("teams", ti, "players", pi)
            if not re.fullmatch(NAME_RE, player):
                out.append(doc.at(loc, f"{_where(loc)}: {player!r} is not a valid player name",
                                  "one word of letters, digits, '.', '_' or '-': it goes on the command line"))
            elif player in players:
                other = players[player]
                out.append(doc.at(loc, f"{_where(loc)}: player '{player}' is already in team "
                                  f"'{spec.teams[other[0]].name}'", "a player plays for one team only"))
            players.setdefault(player, (ti, pi))
    return out


def _round(doc: _Doc, base: Path, index: int, spec: RoundSpec, team_play: bool = False
           ) -> tuple[Round | None, list[Diagnostic]]:
    """Resolve and load round `index` (0-based) as the variant of its seed."""
    from incidents.loader import IncidentError, find_incident, load_incident

    loc = ("rounds", index, "incident")
    ref = spec.incident
    candidate = Path(ref)
    if not candidate.is_absolute() and (len(candidate.parts) > 1 or candidate.suffix in (".yaml", ".yml")):
        ref_path: str = str(base / candidate)
    else:
        ref_path = ref
    try:
        path = find_incident(ref_path).resolve()
        incident = load_incident(path, seed=spec.seed)
    except IncidentError as exc:
        first = exc.diagnostics[0] if exc.diagnostics else None
        what = first.message if first else "does not load"
        hint = first.hint if first else None
        more = f" ({len(exc.diagnostics) - 1} more: servedrill validate {ref_path})" if len(exc.diagnostics) > 1 else ""
        where = f" at {first.path}:{first.line}" if first and first.line > 0 and first.path != ref else ""
        return None, [doc.at(loc, f"rounds[{index}].incident: '{ref}' {what}{where}{more}", hint)]
    except OSError as exc:
        return None, [doc.at(loc, f"rounds[{index}].incident: '{ref}' cannot be read ({exc.strerror or exc})")]
    limit_min = spec.time_limit_min
    limit_s = float(incident.time_limit_s or 15 * 60) if limit_min is None else float(limit_min) * 60.0
    team = team_play if spec.team_play is None else spec.team_play
    return Round(index + 1, ref, incident.id, incident.title, path, spec.seed, limit_s, spec.debrief, team), []


def load_gameday(path: Path | str, *, check_incidents: bool = True) -> GameDay:
    """Read and check a game-day file; raise GameDayError listing every problem.

    With `check_incidents`, every round's incident must load as the variant of its seed (this is
    what `servedrill gameday check` adds to a syntax check); without it, rounds keep their reference
    and an unresolved path."""
    path = Path(path)
    doc, diagnostics = _read_yaml(path)
    if doc is None:
        raise GameDayError(diagnostics)
    try:
        spec = GameDaySpec.model_validate(doc.data)
    except ValidationError as exc:
        raise GameDayError(_sorted(diagnostics + _pydantic_diagnostics(doc, exc))) from None
    diagnostics += _roster_diagnostics(doc, spec)
    base = path.resolve().parent
    rounds: list[Round] = []
    for i, rs in enumerate(spec.rounds):
        if check_incidents:
            rnd, found = _round(doc, base, i, rs, spec.team_play)
            diagnostics += found
            if rnd is not None:
                rounds.append(rnd)
        else:
            limit = (rs.time_limit_min or 15.0) * 60.0
            team = spec.team_play if rs.team_play is None else rs.team_play
            rounds.append(Round(i + 1, rs.incident, rs.incident, rs.incident, base / rs.incident, rs.seed, limit,
                                rs.debrief, team))
    seen: dict[tuple[str, int], int] = {}
    for rnd in rounds:
        key = (rnd.incident_id, rnd.seed)
        if key in seen:
            diagnostics.append(doc.at(("rounds", rnd.number - 1), f"rounds[{rnd.number - 1}]: incident "
                                      f"'{rnd.incident_id}' with seed {rnd.seed} is already round {seen[key]}",
                                      "give the repeat another seed, so the two rounds can be told apart"))
        seen.setdefault(key, rnd.number)
    if diagnostics:
        raise GameDayError(_sorted(diagnostics))
    results = _resolve(base, spec.results)
    data = _resolve(base, spec.data) if spec.data else None
    teams = {t.name: list(t.players) for t in spec.teams}
    return GameDay(path.resolve(), spec.event, spec.date, spec.facilitator, results, data, rounds, teams)


def check_gameday(path: Path | str) -> list[Diagnostic]:
    """Every problem of the game-day file and its incidents; [] when it is ready to run."""
    try:
        load_gameday(path)
    except GameDayError as exc:
        return exc.diagnostics
    except Exception as exc:  # the boundary of a checker: report, never a traceback
        return [Diagnostic(str(path), 1, 1, f"internal error while checking the file: {exc!r}",
                           "please report this with the file")]
    return []


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _sorted(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(set(diagnostics), key=lambda d: (d.line, d.column, d.message))

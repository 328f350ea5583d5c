"""What the incident library shows a player before an incident is opened: a quick look at each file.

The full loader (`incidents.loader.load_incident`) validates everything and pulls in pydantic and
DuckDB; the picker only needs a few display fields of each file to paint at once. This peek reads a file
with the loader's own hardened YAML reader (size cap, no aliases bombs, duplicate keys refused), so a file
that cannot be trusted is listed with its problem rather than half-read. The real load happens when the
player opens an incident (`game.api.load_variant`), and its diagnostics win over this peek.

Only symptom tags are shown before the debrief: topic tags can name the cause (`incidents.coverage`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from incidents.coverage import TOPICS, Topic, covers, topic_coverage, visible_tags
from incidents.diagnostics import Diagnostic
from incidents.library import iter_library
from incidents.variable_decls import PLACEHOLDER_RE
from incidents.yaml_reader import parse_yaml, read_file

if TYPE_CHECKING:
    from game.session.hypotheses import Shown
    from incidents.spec import Incident

__all__ = [
    "DEFAULT_INCIDENT",
    "TOPICS",
    "TUTORIAL_INCIDENT",
    "BriefingCard",
    "LibraryEntry",
    "Topic",
    "covers",
    "default_index",
    "entry_for_incident",
    "entry_from_data",
    "filter_entries",
    "hide_placeholders",
    "library_paths",
    "read_entry",
    "read_library",
    "topic_coverage",
]

DEFAULT_INCIDENT = "one-slow-replica"
TUTORIAL_INCIDENT = "first-shift-one-replica-lags"
"""The incident a player with no history starts on: short, and its updates walk through the game."""


@dataclass(frozen=True)
class BriefingCard:
    """The page the player receives, as written in the incident file."""

    reported_by: str = ""
    since: str = ""
    summary: str = ""
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class LibraryEntry:
    """Display fields of one incident file. `time_limit_s` in seconds, `query_budget` in queries.

    `problem` is set when the file could not be read as a mapping; the entry is still listed so the
    player sees it, and opening it shows the loader's diagnostics."""

    path: Path
    id: str
    title: str
    difficulty: int | None = None
    tags: tuple[str, ...] = ()
    time_limit_s: float | None = None
    query_budget: int | None = None
    briefing: BriefingCard = field(default_factory=BriefingCard)
    hypotheses: tuple[tuple[str, str], ...] = ()
    """(label, title) in the session's board order; empty until the incident has loaded for a seed
    (the quick peek does not know the shuffled order, and file order would tell the player nothing
    true, or worse, something)."""
    problem: str | None = None

    @property
    def shown_tags(self) -> list[str]:
        """The tags a player may see before the debrief (symptom tags; topic tags can name the cause)."""
        return visible_tags(self.tags)

    def matches(self, text: str) -> bool:
        """Whether every word of `text` appears (case-insensitive) in the id, title or shown tags."""
        haystack = " ".join([self.id, self.title, *self.shown_tags]).lower()
        return all(word in haystack for word in text.lower().split())


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def entry_from_data(path: Path, data: Any) -> LibraryEntry:
    """Build an entry from parsed YAML data; anything missing or of the wrong shape is left empty."""
    if not isinstance(data, dict):
        return LibraryEntry(path, path.stem, path.stem, problem="not an incident (no top-level mapping)")
    raw_brief, raw_tags = data.get("briefing"), data.get("tags")
    brief: dict[str, Any] = raw_brief if isinstance(raw_brief, dict) else {}
    raw_evidence = brief.get("evidence")
    evidence: list[Any] = raw_evidence if isinstance(raw_evidence, list) else []
    tags: list[Any] = raw_tags if isinstance(raw_tags, list) else []
    difficulty = data.get("difficulty")
    budget = data.get("query_budget")
    return LibraryEntry(
        path=path,
        id=_text(data.get("id")) or path.stem,
        title=hide_placeholders(_text(data.get("title"))) or path.stem,
        difficulty=difficulty if isinstance(difficulty, int) and not isinstance(difficulty, bool) else None,
        tags=tuple(_text(t) for t in tags),
        time_limit_s=_number(data.get("time_limit_s")),
        query_budget=budget if isinstance(budget, int) and not isinstance(budget, bool) else None,
        briefing=BriefingCard(
            reported_by=hide_placeholders(_text(brief.get("reported_by"))),
            since=hide_placeholders(_text(brief.get("since"))),
            summary=hide_placeholders(" ".join(_text(brief.get("summary")).split())),
            evidence=tuple(hide_placeholders(_text(e)) for e in evidence),
        ),
    )


def hide_placeholders(text: str) -> str:
    """Text of an incident with variables, before its variant is drawn: {{name|filter}} becomes "…"
    (the briefing shows the drawn values once the incident has loaded for its seed)."""
    return PLACEHOLDER_RE.sub("…", text)


def entry_for_incident(entry: LibraryEntry, incident: Incident, board: Sequence[Shown] | None = None) -> LibraryEntry:
    """`entry` with the display fields of the loaded incident (its variant's text for the seed) and
    its hypotheses as the session's `board` lists them (`game.session.hypotheses.Shown`: label and title, in
    the shuffled order); without a board, none are listed."""
    b = incident.briefing
    return replace(
        entry,
        title=incident.title,
        briefing=BriefingCard(reported_by=b.reported_by, since=b.since, summary=" ".join(b.summary.split()),
                              evidence=tuple(b.evidence)),
        hypotheses=tuple((str(s.label), str(s.title)) for s in board or ()),
        time_limit_s=incident.time_limit_s,
        query_budget=incident.query_budget,
    )


def read_entry(path: Path | str) -> LibraryEntry:
    """Peek at one incident file. Never raises: unreadable files come back with `problem` set."""
    path = Path(path)
    text, problems = read_file(path)
    if text is None:
        return LibraryEntry(path, path.stem, path.stem, problem=_problem(problems))
    parsed, problems = parse_yaml(text, str(path))
    if parsed is None:
        return LibraryEntry(path, path.stem, path.stem, problem=_problem(problems))
    return entry_from_data(path, parsed.data)


def _problem(diagnostics: Sequence[Diagnostic]) -> str:
    """The first diagnostic as one short line, without the path (the picker shows which file)."""
    if not diagnostics:
        return "cannot read"
    first = diagnostics[0]
    where = f" at line {first.line}" if first.line > 0 else ""
    return f"{first.message}{where}"


def library_paths() -> list[Path]:
    """The incident files of the installed library, sorted by name (the template excluded)."""
    return iter_library()


def read_library(paths: Iterable[Path] | None = None) -> list[LibraryEntry]:
    """Entries for `paths` (default: the library), in the given order, without duplicates."""
    seen: set[Path] = set()
    out = []
    for path in library_paths() if paths is None else paths:
        resolved = Path(path).resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        out.append(read_entry(resolved))
    return out


def default_index(entries: Sequence[LibraryEntry], preselect: str | Path | None = None, *,
                  new_player: bool = False) -> int:
    """Row to highlight first: `preselect` (an id or a path), else the tutorial for a `new_player` (no
    score and no session yet), else the default incident, else 0."""
    first: list[str | Path] = [TUTORIAL_INCIDENT] if new_player else []
    wanted: list[str | Path] = [*first, DEFAULT_INCIDENT] if preselect is None else [preselect, DEFAULT_INCIDENT]
    for want in wanted:
        for i, entry in enumerate(entries):
            if isinstance(want, Path) or "/" in str(want) or str(want).endswith((".yaml", ".yml")):
                if Path(want).resolve() == entry.path.resolve():
                    return i
            elif entry.id == want or entry.path.stem == want:
                return i
    return 0


def filter_entries(entries: Sequence[LibraryEntry], text: str) -> list[LibraryEntry]:
    """Entries matching every word of `text`; all of them for blank text."""
    return [e for e in entries if e.matches(text)] if text.strip() else list(entries)

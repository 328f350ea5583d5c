"""A quick look at incident files for the picker and the briefing card, without the full loader.

The full loader (`incidents.loader.load_incident`) validates everything and pulls in pydantic and
DuckDB; the picker only needs a few display fields of each file to paint at once. The real load
happens in a worker when the player opens an incident, and its diagnostics win over this peek.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

MAX_PEEK_BYTES = 1 << 20
"""Files larger than this (bytes) are listed by name only; the loader refuses them anyway."""

DEFAULT_INCIDENT = "one-slow-replica"


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
        from game.library_view import visible_tags

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
    brief = data.get("briefing") if isinstance(data.get("briefing"), dict) else {}
    evidence = brief.get("evidence") if isinstance(brief.get("evidence"), list) else []
    tags = data.get("tags") if isinstance(data.get("tags"), list) else []
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


# Any {{...}}, as incidents.variants.PLACEHOLDER_RE finds them; not imported from there because that
# module pulls in numpy, and this peek is on the path to the picker's first paint.
_PLACEHOLDER = re.compile(r"\{\{[^{}]*\}\}")


def hide_placeholders(text: str) -> str:
    """Text of an incident with variables, before its variant is drawn: {{name|filter}} becomes "…"
    (the briefing shows the drawn values once the incident has loaded for its seed)."""
    return _PLACEHOLDER.sub("…", text)


def entry_for_incident(entry: LibraryEntry, incident: Any, board: Sequence[Any] | None = None) -> LibraryEntry:
    """`entry` with the display fields of the loaded incident (its variant's text for the seed) and
    its hypotheses as the session's `board` lists them (`game.hypotheses.Shown`: label and title, in
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
    import yaml

    path = Path(path)
    try:
        if path.stat().st_size > MAX_PEEK_BYTES:
            return LibraryEntry(path, path.stem, path.stem, problem="file too large")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return LibraryEntry(path, path.stem, path.stem, problem=f"cannot read: {exc}")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return LibraryEntry(path, path.stem, path.stem, problem=f"YAML error{where}")
    return entry_from_data(path, data)


def library_paths() -> list[Path]:
    """The incident files of the installed library, sorted by name (the template excluded)."""
    # find_spec runs only the package's (empty) __init__, not the heavy loader
    spec = importlib.util.find_spec("incidents")
    if spec is None or not spec.submodule_search_locations:
        return []
    library = Path(next(iter(spec.submodule_search_locations)))
    return sorted(p for p in library.glob("*.yaml") if p.name != "template.yaml" and p.is_file())


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


def default_index(entries: Sequence[LibraryEntry], preselect: str | Path | None = None) -> int:
    """Row to highlight first: `preselect` (an id or a path), else the default incident, else 0."""
    wanted: list[str | Path] = [DEFAULT_INCIDENT] if preselect is None else [preselect, DEFAULT_INCIDENT]
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

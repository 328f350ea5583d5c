"""The incident library: the incident files beside this module, finding one by id, and the template."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from incidents.diagnostics import UnknownIncidentError

LIBRARY_DIR = Path(__file__).resolve().parent
TEMPLATE_PATH = LIBRARY_DIR / "template.yaml"
SCHEMA_COMMENT = "# yaml-language-server: $schema=./schema.json"


def iter_library(root: Path = LIBRARY_DIR) -> list[Path]:
    """Incident files in the library directory, sorted by name (the template is not one)."""
    return sorted(p for p in Path(root).glob("*.yaml") if p.name != TEMPLATE_PATH.name and p.is_file())


def find_incident(id_or_path: str, root: Path = LIBRARY_DIR) -> Path:
    """Path of an incident given a library id (file stem) or a path.

    Anything that exists or looks like a path (has a directory part or a .yaml/.yml suffix) is
    returned as a path, so load_incident can say precisely what is wrong with it. Otherwise
    an unknown id raises UnknownIncidentError listing close matches.
    """
    candidate = Path(id_or_path)
    library = {p.stem: p for p in iter_library(root)}
    if id_or_path in library and not candidate.exists():
        return library[id_or_path]
    if candidate.exists() or len(candidate.parts) > 1 or candidate.suffix in (".yaml", ".yml"):
        return candidate
    matches = difflib.get_close_matches(candidate.stem, list(library), n=3, cutoff=0.5)
    raise UnknownIncidentError(id_or_path, matches, sorted(library))


def render_template(incident_id: str) -> str:
    """The incident template with `incident_id` filled in; it validates as written.

    Raises ValueError when incident_id is not a slug (lowercase words joined by '-').
    """
    # imported here: the picker lists the library through this module, and these pull in pydantic
    from incidents.pydantic_errors import PATTERN_WORDS
    from incidents.spec import SLUG_RE

    if not re.fullmatch(SLUG_RE, incident_id):
        raise ValueError(f"incident id {incident_id!r} is not a slug: {PATTERN_WORDS[SLUG_RE]}")
    text = TEMPLATE_PATH.read_text(encoding="utf-8")
    return re.sub(r"^id: .*$", f"id: {incident_id}", text, count=1, flags=re.MULTILINE)

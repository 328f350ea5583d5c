"""The symptom families `servedrill new` starts an incident from, and how a family's sections replace the
template's. The sections themselves are YAML files in game/authoring/family_sections/ (one per family, named by
its key), so they read and diff as the incident files they become."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from incidents.library import SCHEMA_COMMENT, render_template
from incidents.spec import SCHEMA_PATH, did_you_mean

FAMILIES_DIR = Path(__file__).resolve().parent / "family_sections"
"""One YAML file of template sections per family, named by its key."""


@dataclass(frozen=True)
class Family:
    """A symptom family `servedrill new` can start from: a coverage family (incidents/coverage.py), the
    short names an author may type for it, and the sections of the template it replaces (YAML text with
    top-level keys, in FAMILIES_DIR/<key>.yaml; each replaced section keeps the template's comments unless
    it brings its own)."""

    key: str
    aliases: tuple[str, ...]
    summary: str

    @property
    def sections(self) -> str:
        return (FAMILIES_DIR / f"{self.key}.yaml").read_text(encoding="utf-8")


FAMILIES: tuple[Family, ...] = (
    Family("ttft-after-deploy", ("latency", "ttft"), "slow first tokens after a change (TTFT)"),
    Family("one-slow-replica", ("throughput", "tpot"), "slow streaming on one replica (TPOT)"),
    Family("oom-at-peak", ("errors", "oom"), "errors and crashes at peak (OOM)"),
    Family("nondeterministic-outputs", ("determinism",), "the same prompt, different answers"),
    Family("quantized-regression", ("quality",), "answers got worse after a rollout (evals)"),
)
"""The families `servedrill new --family` offers: every symptom family of incidents/coverage.py."""
DEFAULT_FAMILY = "ttft-after-deploy"


def find_family(name: str) -> Family | None:
    """The family with this key or alias (case-insensitive), or None."""
    wanted = name.strip().lower()
    return next((f for f in FAMILIES if wanted == f.key or wanted in f.aliases), None)


_TOP_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):")


def _sections(text: str) -> list[tuple[str | None, list[str], list[str]]]:
    """Top-level sections of YAML text as (key, comment lines above it, its own lines); key None holds
    what comes before the first key."""
    out: list[tuple[str | None, list[str], list[str]]] = [(None, [], [])]
    pending: list[str] = []
    for line in text.splitlines(keepends=True):
        found = _TOP_KEY.match(line)
        if found:
            out.append((found.group(1), pending, [line]))
            pending = []
        elif line.startswith("#") or not line.strip():
            pending.append(line)
        else:
            out[-1][2].extend([*pending, line])
            pending = []
    out[-1][2].extend(pending)
    return out


def family_text(template: str, family: Family) -> str:
    """The template with the family's sections in place of the template's own (same order, same comments
    unless the family brings its own)."""
    replacing = {key: (comments, lines) for key, comments, lines in _sections(family.sections) if key}
    out: list[str] = []
    for key, comments, lines in _sections(template):
        if key in replacing:
            own_comments, own_lines = replacing[key]
            out += (own_comments or comments) + own_lines
            if not own_lines[-1].endswith("\n"):
                out.append("\n")
        else:
            out += comments + lines
    return "".join(out)


def scaffold_text(incident_id: str, folder: Path, family: str | None = None) -> str:
    """The template for `incident_id` (for `family`, its sections swapped in), its schema comment pointing
    at incidents/schema.json from `folder`. Raises ValueError for a bad id or an unknown family."""
    text = render_template(incident_id)
    if family is not None:
        chosen = find_family(family)
        if chosen is None:
            names = [f.key for f in FAMILIES] + [a for f in FAMILIES for a in f.aliases]
            hint = did_you_mean(family, names) or "families: " + ", ".join(f.key for f in FAMILIES)
            raise ValueError(f"unknown symptom family '{family}' ({hint})")
        text = family_text(text, chosen)
    try:
        rel = Path(os.path.relpath(SCHEMA_PATH, folder.resolve())).as_posix()
    except ValueError:  # another drive on Windows: no relative path exists
        rel = SCHEMA_PATH.as_posix()
    if rel != "schema.json" and text.startswith(SCHEMA_COMMENT):
        text = text.replace(SCHEMA_COMMENT, f"# yaml-language-server: $schema={rel}", 1)
    return text

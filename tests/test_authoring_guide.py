"""docs/authoring.md keeps up with the code it describes: every tag the picker shows or the coverage
counts, and every fault kind of the registry with the traces it leaves, is named in the guide (an author
writes an incident from the guide alone)."""

from __future__ import annotations

import re
from pathlib import Path

from engine_model.fault_kinds import REGISTRY
from incidents.coverage import SYMPTOM_TAGS, TOPICS

GUIDE = (Path(__file__).resolve().parent.parent / "docs" / "authoring.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text under a `### title` heading, up to the next heading of level 2 or 3."""
    start = GUIDE.index(f"### {title}\n")
    found = re.search(r"^#{2,3} ", GUIDE[start + 4:], re.MULTILINE)
    return GUIDE[start: start + 4 + found.start()] if found else GUIDE[start:]


def test_the_guide_lists_every_symptom_tag_and_every_topic_tag() -> None:
    tags = section("Tags: what the list shows and what the debrief teaches")
    symptoms, topics = tags.split("**Topic tags**")
    assert {t for t in SYMPTOM_TAGS if f"`{t}`" not in symptoms} == set()
    missing = {t for topic in TOPICS if not topic.family for t in topic.tags if f"`{t}`" not in topics}
    assert missing == set()


def test_the_guide_says_where_every_fault_kind_shows() -> None:
    table = section("What each kind leaves in the telemetry")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = {k for line in rows for k in re.findall(r"`([a-z_]+)`", line.split("|")[1])}
    assert set(REGISTRY) - named == set()
    assert named - set(REGISTRY) == set()  # no row for a kind that no longer exists

"""What the incident library may show a player, for the picker: topic coverage, and the tags that can
be shown before the debrief (symptom tags only; topic tags can name the cause). A re-export of
`incidents.coverage`, which is light (no loader, no pydantic), so the TUI presents `game/` only."""

from __future__ import annotations

from incidents.coverage import SYMPTOM_TAGS, TOPICS, Topic, covers, topic_coverage, visible_tags

__all__ = ["SYMPTOM_TAGS", "TOPICS", "Topic", "covers", "topic_coverage", "visible_tags"]

"""Words that give the answer away: the true cause named in what a player sees before the debrief.

A word *names the cause* when it comes from the true hypotheses' ids and titles or their fault kinds
(`gpu_throttle` gives "gpu" and "throttle"), is at least four letters long, is not a common word,
and appears in no distractor's id, title or world fault kinds (a word the rivals share tells nothing). Player-visible
fields are the incident's id, title, symptom tags (`visible_tags`) and the briefing. Words match on a
common stem, so "throttled" matches "throttle".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from incidents.coverage import visible_tags

COMMON = frozenset(
    """
about after again against also among answer answers around because been before being below between
both busy cause could does down during each even every fell fine first from have higher into just
kept later less like lower made many more most much must never next only other over same seen since
slow slower some still such than that their them then there these they this those through time times
today under until very were what when where which while will with without would your
replica replicas request requests fleet model models engine engines serving server token tokens
running users user traffic latency long longer short shorter fast faster high low
""".split()  # noqa: SIM905 - a word list reads better as text
)

_WORD = re.compile(r"[a-z][a-z0-9]+")


def _items(value: Any) -> list[Any]:
    """A list from raw YAML that may be broken (the models report the breakage; this must not raise)."""
    return value if isinstance(value, list) else []


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "er"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _tokens(text: str) -> list[str]:
    """The words of `text` as written (lower case; `_` and `-` split words), in order."""
    return _WORD.findall(text.lower().replace("_", " ").replace("-", " "))


def _words(text: str) -> set[str]:
    return {_stem(w) for w in _tokens(text)}


def cause_words(data: Mapping[str, Any]) -> set[str]:
    """Stems that name the true cause and no distractor (see the module docstring)."""
    hyps = [h for h in _items(data.get("hypotheses")) if isinstance(h, Mapping)]
    truth_text: list[str] = []
    rival_text: list[str] = []
    for h in hyps:
        bucket = truth_text if h.get("true") is True else rival_text
        bucket += [str(h.get("id", "")), str(h.get("title", ""))]
        if h.get("true") is not True:
            rival_text += [str(f.get("kind", "")) for f in _items(h.get("world")) if isinstance(f, Mapping)]
    for f in _items(data.get("faults")):
        if isinstance(f, Mapping):
            truth_text.append(str(f.get("kind", "")))
    shared = set().union(*(_words(t) for t in rival_text)) if rival_text else set()
    found = set().union(*(_words(t) for t in truth_text)) if truth_text else set()
    return {w for w in found - shared if len(w) >= 4 and w not in COMMON and not w.isdigit()}


def visible_fields(data: Mapping[str, Any]) -> Iterable[tuple[tuple[str | int, ...], str]]:
    """(location, text) of every field a player sees before the debrief."""
    for key in ("id", "title"):
        if isinstance(data.get(key), str):
            yield (key,), data[key]
    tags = [t for t in _items(data.get("tags")) if isinstance(t, str)]
    shown = set(visible_tags(tags))
    for i, tag in enumerate(tags):
        if tag in shown:
            yield ("tags", i), tag
    briefing = data.get("briefing")
    if isinstance(briefing, Mapping):
        for key in ("reported_by", "since", "summary"):
            if isinstance(briefing.get(key), str):
                yield ("briefing", key), briefing[key]
        for i, line in enumerate(_items(briefing.get("evidence"))):
            if isinstance(line, str):
                yield ("briefing", "evidence", i), line


def leaks(data: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str, str]]:
    """(location, word as written, its stem) for the first word of each player-visible field that names the
    true cause."""
    words = cause_words(data)
    out = []
    for loc, text in visible_fields(data):
        for written in _tokens(text):
            if _stem(written) in words:
                out.append((loc, written, _stem(written)))
                break
    return out

"""Words that give the answer away: the true cause named in what a player sees before the debrief.

A word *names the cause* when it comes from the true hypotheses' ids, titles and aliases or their fault
kinds (`gpu_throttle` gives "gpu" and "throttle"), is at least four letters long, is not a common word,
and is not shared:

- by a distractor's id, title, aliases or world and member fault kinds (a word the rivals share tells
  nothing), nor
- by the symptom vocabulary: the symptom tags a player sees (`memory`, `errors`, `oom`, ...) and the
  claims of the briefed symptoms, which `validate --deep` proves every hypothesis's world shows. A word
  every world's page can carry ("memory" on an out-of-memory page whose truth is a memory leak) is the
  symptom, not the answer.

Player-visible fields are the incident's id, title, symptom tags (`visible_tags`) and the briefing. Words
match on a common stem, so "throttled" matches "throttle". `leaks` reports every occurrence in one pass,
each with which occurrence of that word in its field it is, so the loader can point at its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from incidents.coverage import SYMPTOM_TAGS, TOPICS, visible_tags

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

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Leak:
    """One word of the true cause in player-visible text: where (`loc`), the word as written, its stem,
    and which occurrence of that written word in the field's text it is (0 = the first)."""

    loc: Loc
    word: str
    stem: str
    occurrence: int


def _items(value: Any) -> list[Any]:
    """A list from raw YAML that may be broken (the models report the breakage; this must not raise)."""
    return value if isinstance(value, list) else []


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "er"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def normalise(text: str) -> str:
    """`text` in lower case with `_` and `-` as spaces: what `_WORD` splits into words."""
    return text.lower().replace("_", " ").replace("-", " ")


def word_spans(text: str) -> Iterable[tuple[int, int, str]]:
    """(start, end, word) of each word of `text` in order, offsets into `text` itself (when lower-casing
    keeps its length, which it does for all but a few non-ASCII letters)."""
    for m in _WORD.finditer(normalise(text)):
        yield m.start(), m.end(), m.group()


def _tokens(text: str) -> list[str]:
    """The words of `text` as written (lower case; `_` and `-` split words), in order."""
    return _WORD.findall(normalise(text))


def _words(texts: Iterable[str]) -> set[str]:
    return {_stem(w) for t in texts for w in _tokens(t)}


def _fault_kinds(faults: Any) -> list[str]:
    return [str(f.get("kind", "")) for f in _items(faults) if isinstance(f, Mapping)]


def _names(h: Mapping[str, Any]) -> list[str]:
    aliases = [str(a) for a in _items(h.get("aliases"))]
    return [str(h.get("id", "")), str(h.get("title", "")), *aliases]


GENERIC_SYMPTOM_TAGS = SYMPTOM_TAGS - {tag for topic in TOPICS if topic.family for tag in topic.tags}
"""Symptom tags that name no family ("memory", "errors", "latency"): symptom words on every page. A family
tag ("quantized-regression") is symptom vocabulary only on the incidents that show it."""


def symptom_words(data: Mapping[str, Any]) -> set[str]:
    """Stems of the symptom vocabulary: the generic symptom tags, the incident's own visible tags, and the
    claims of its briefed symptoms (the page's own words, which every hypothesis's world must show)."""
    tags = visible_tags(t for t in _items(data.get("tags")) if isinstance(t, str))
    claims = [str(s.get("claim", "")) for s in _items(data.get("symptoms"))
              if isinstance(s, Mapping) and s.get("briefed", True) is not False]
    return _words([*GENERIC_SYMPTOM_TAGS, *tags, *claims])


def cause_words(data: Mapping[str, Any]) -> set[str]:
    """Stems that name the true cause and that neither a distractor nor the symptom vocabulary shares (see
    the module docstring)."""
    hyps = [h for h in _items(data.get("hypotheses")) if isinstance(h, Mapping)]
    truth_text = _fault_kinds(data.get("faults"))
    rival_text: list[str] = []
    for h in hyps:
        if h.get("true") is True:
            truth_text += _names(h)
            continue
        rival_text += _names(h) + _fault_kinds(h.get("world"))
        for member in _items(h.get("members")):
            rival_text += _fault_kinds(member)
    found = _words(truth_text) - _words(rival_text) - symptom_words(data)
    return {w for w in found if len(w) >= 4 and w not in COMMON and not w.isdigit()}


def visible_fields(data: Mapping[str, Any]) -> Iterable[tuple[Loc, str]]:
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


def leaks(data: Mapping[str, Any]) -> list[Leak]:
    """Every word of every player-visible field that names the true cause, in field and text order."""
    words = cause_words(data)
    out: list[Leak] = []
    for loc, text in visible_fields(data):
        seen: dict[str, int] = {}
        for written in _tokens(text):
            occurrence = seen.get(written, 0)
            seen[written] = occurrence + 1
            if _stem(written) in words:
                out.append(Leak(loc, written, _stem(written), occurrence))
    return out

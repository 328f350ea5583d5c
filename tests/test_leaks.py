"""The leak check (incidents.leaks through validate): every word of the true cause in what a player sees,
in one pass and each at its own line, but never a word of the symptom vocabulary or one a rival shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from incidents.leaks import cause_words, leaks
from incidents.loader import check_incident_text
from incidents.yaml_reader import parse_yaml

GOOD_TEXT = (Path(__file__).parent / "data" / "incidents" / "good.yaml").read_text(encoding="utf-8")
SUMMARY = "  summary: Answers stream slowly for a share of users.\n"


def _leak_diagnostics(text: str) -> list[tuple[int, int, str]]:
    return [(d.line, d.column, d.message) for d in check_incident_text(text, "bad.yaml")
            if "names the true cause" in d.message]


def _at(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the nth `needle` in `text`."""
    offset = -1
    for _ in range(nth + 1):
        offset = text.index(needle, offset + 1)
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _data(text: str) -> dict[str, Any]:
    parsed, _ = parse_yaml(text, "good.yaml")  # keeps `true:` a string key, as validate reads it
    assert parsed is not None
    return dict(parsed.data)


def test_every_leaking_word_is_reported_in_one_pass_each_at_its_own_line() -> None:
    assert GOOD_TEXT.count(SUMMARY) == 1
    text = GOOD_TEXT.replace(SUMMARY, (
        "  summary: >-\n"
        "    Answers stream slowly for a share of users; one card's\n"
        "    clock throttled, then throttled again.\n"
    ))
    text = text.replace('"Token rate chart dipped"', '"Token rate chart dipped while throttling"')
    found = _leak_diagnostics(text)
    assert [(line, col) for line, col, _ in found] == [
        _at(text, "clock throttled"),
        _at(text, "throttled, then"),
        _at(text, "throttled again"),
        _at(text, "throttling"),
    ]
    words = [msg.split("'")[1] for _, _, msg in found]
    assert words == ["clock", "throttled", "throttled", "throttling"]
    assert all(msg.startswith("briefing.summary: ") for _, _, msg in found[:3])
    assert found[3][2].startswith("briefing.evidence[0]: 'throttling' names the true cause")


def test_a_word_the_briefed_symptoms_claim_is_not_a_leak_but_a_finding_of_the_truth_alone_is() -> None:
    text = GOOD_TEXT.replace(SUMMARY, "  summary: Answers stream slowly; the SM clock chart dipped.\n")
    assert [m.split("'")[1] for _, _, m in _leak_diagnostics(text)] == ["clock"]
    # every hypothesis's world must show a briefed claim, so its words describe the page, not the cause
    briefed = text.replace("claim: Streaming got slower.", "claim: Streaming got slower and clocks fell.")
    assert _leak_diagnostics(briefed) == []
    # a finding only the truth must show (briefed: false) is no shared vocabulary
    finding = briefed.replace("    claim: Streaming got slower and clocks fell.\n",
                              "    claim: Streaming got slower and clocks fell.\n    briefed: false\n")
    assert [m.split("'")[1] for _, _, m in _leak_diagnostics(finding)] == ["clock"]


def test_generic_symptom_tag_words_never_leak_family_tag_words_only_where_shown() -> None:
    data = _data(GOOD_TEXT)
    data["faults"] = [{"kind": "memory_leak", "at_s": 600, "params": {"bytes_per_s": 1e6}}]
    data["hypotheses"][0]["title"] = "Quantized weights leak memory"
    data["hypotheses"][0]["aliases"] = []
    data["briefing"]["summary"] = "CUDA out of memory while the quantized model leaks."
    # "memory" is a symptom tag every page may use; "leak" and "quantized" name the cause here
    assert {lk.word for lk in leaks(data)} == {"leaks", "quantized"}
    assert "memory" not in cause_words(data)
    # an incident that shows the family tag quantized-regression tells the player as much already
    data["tags"] = ["quantized-regression"]
    assert {lk.word for lk in leaks(data)} == {"leaks"}


def test_words_a_rival_shares_through_its_members_or_aliases_are_not_leaks() -> None:
    data = _data(GOOD_TEXT)
    data["briefing"]["summary"] = "The GPU clock throttled; it overheated."
    data["hypotheses"][0]["aliases"] = ["overheat"]
    assert {lk.stem for lk in leaks(data)} == {"clock", "throttl", "overheat"}
    data["hypotheses"][1]["aliases"] = ["overheated-room"]  # a rival's alias shares the word
    assert {lk.stem for lk in leaks(data)} == {"clock", "throttl"}
    members = [[{"kind": "gpu_throttle", "at_s": 1200, "params": {"clock_factor": 0.7}}]]
    data["hypotheses"][1]["members"] = members  # a rival's member throttles the GPU too
    assert "throttle" not in cause_words(data) and "gpu" not in cause_words(data)
    assert {lk.stem for lk in leaks(data)} == {"clock", "throttl"}  # the title's "throttled" is the truth's own


def test_the_truths_own_title_and_broken_data_are_not_reported() -> None:
    text = GOOD_TEXT.replace("title: GPU clocks throttled\n", "title: GPU clocks throttled by overheating\n")
    assert _leak_diagnostics(text) == []  # the answer key is not player-visible
    for broken in ({}, {"hypotheses": "x", "briefing": [1]}, {"hypotheses": [None, {"true": True, "aliases": 3}]}):
        assert leaks(broken) == []

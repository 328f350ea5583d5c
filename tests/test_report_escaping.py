"""Names and text from players reach the reports as text: escaped in the HTML pages (Jinja2 templates,
autoescaped) and literal in Markdown (game.text.md_text), in the leaderboard and the interview report."""

from __future__ import annotations

import json
import re
from pathlib import Path

from game.reports.interview_report import report_for, to_html, to_markdown
from game.reports.leaderboard import IncidentBoard, Leaderboard
from game.reports.leaderboard_report import render_html, write_markdown

EVIL = "<script>alert('x')</script> **bold** & [link](javascript:x)"
JOURNALS = Path(__file__).parent / "data" / "journals"


def _board() -> Leaderboard:
    player = {"rank": 1, "player": EVIL, "team": "<b>red</b>", "score": 71.25, "time_s": 125.0, "incidents": 1,
              "submitted": True, "late": False}
    team = {"rank": 1, "team": "<b>red</b>", "score": 71.25, "time_s": 125.0, "incidents": 1, "handed_in": 1,
            "size": 1}
    board = IncidentBoard("inc-1", 0, "Title <i>x</i>", 1, ["Cause <u>y</u>"], [player], [team],
                          {"<b>red</b>": [(0.0, 20.0), (60.0, 80.0)]})
    return Leaderboard(Path("results"), "Day <1>", [], [board], [player], [team],
                       skipped=[{"file": "<evil>.json", "reason": "not <json>"}])


def _no_live_tags(page: str) -> None:
    """Only the page's own tags: none of the player's."""
    for tag in ("script", "b", "i", "u", "evil", "json", "1"):
        assert not re.search(rf"<{tag}[\s>]", page), tag


def test_the_leaderboard_page_escapes_every_name() -> None:
    page = render_html(_board())
    _no_live_tags(page)
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; **bold** &amp; [link](javascript:x)" in page
    assert "<title>Leaderboard: Day &lt;1&gt;</title>" in page
    assert "<td>71.2</td>" in page and "<td>2:05</td>" in page  # the numbers as before
    assert page.count("<svg") == 1 and 'data-series="&lt;b&gt;red&lt;/b&gt;"' in page  # the chart's own escaping


def test_the_leaderboard_markdown_shows_names_literally(tmp_path: Path) -> None:
    [md, _svg] = write_markdown(_board(), tmp_path / "board.md")
    text = md.read_text(encoding="utf-8")
    # inside a fenced code block text is literal as typed (the sparklines); outside, nothing is markup
    fenced = re.findall(r"^```\n(.*?)^```$", text, re.M | re.S)
    outside = re.sub(r"^```\n.*?^```$", "", text, flags=re.M | re.S)
    assert "<script" not in outside and "<b>" not in outside
    assert any("<b>red</b>" in block for block in fenced)
    assert r"&lt;script&gt;alert\('x'\)&lt;/script&gt; \*\*bold\*\* &amp; \[link\]\(javascript:x\)" in text


def _journal_with_player(tmp_path: Path, player: str) -> Path:
    header, *events = JOURNALS.joinpath("slow-decode-ada.jsonl").read_text(encoding="utf-8").splitlines()
    raw = json.loads(header)
    raw.update(player=player, incident_path=str(JOURNALS / "slow-decode-injects.yaml"))
    path = tmp_path / f"{raw['session_id']}.jsonl"
    path.write_text("\n".join([json.dumps(raw), *events[:12]]) + "\n", encoding="utf-8")  # not submitted
    return path


def test_the_interview_report_escapes_the_player_and_the_session_text(tmp_path: Path) -> None:
    report = report_for(_journal_with_player(tmp_path, EVIL))
    page = to_html(report)
    _no_live_tags(page)
    assert page.startswith("<!doctype html>") and "<div class='notes'></div>" in page
    assert "Interview report: &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    # the note written in the round (a newline in it) and a query's SQL, as text
    assert "decode is slow on vllm-1 second line, unicode é" in page
    assert "<code>SELECT replica, avg(decode_s) AS d FROM requests GROUP BY replica</code>" in page
    markdown = to_markdown(report)
    assert "<script" not in markdown
    assert r"# Interview report: &lt;script&gt;alert\('x'\)&lt;/script&gt; \*\*bold\*\*" in markdown

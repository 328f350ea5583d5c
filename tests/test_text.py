"""Reports show names and notes as typed: no HTML, no Markdown, no control characters."""

from __future__ import annotations

from game.text import md_cell, md_text, plain


def test_plain_drops_controls_and_bounds_length() -> None:
    assert plain("a\x1b[31mb\nc\x00") == "a[31mb c"
    assert len(plain("x" * 5000, 100)) == 100


def test_markdown_text_is_literal() -> None:
    evil = "<img src=x onerror=alert(1)> **bold** [link](http://x) | pipe"
    out = md_text(evil)
    assert "<img" not in out and "&lt;img" in out
    assert "**" not in out and "\\*\\*" in out
    assert "](" not in out and "\\|" in out


def test_cells_escape_html_and_pipes_only() -> None:
    assert md_cell("a|b <b>x</b> p90_s") == "a\\|b &lt;b&gt;x&lt;/b&gt; p90_s"

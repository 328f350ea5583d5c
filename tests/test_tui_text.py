"""Text from data, players and interviewers is text: Rich markup, ANSI escapes and control characters in a
result cell, a column name, a note, an interviewer's message, a player name, an incident or hypothesis
title or the candidate's SQL are shown literally (control characters as visible stand-ins, never sent to
the terminal) and bounded, on every screen that shows them; the app keeps running throughout.

One game on a copy of the TUI fixture whose titles are hostile, resumed from a hand-written journal whose
query, note and message are hostile: picker, briefing, workspace (results table, row detail, plot legend,
board, updates feed, query log, editor, status line), the interviewer's screen and session chooser,
submit and debrief."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_tui_support import FIXTURE, START, make_app, run_async, screen_name, until

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

HOSTILE = "[/x] [b]bold[rank0]: CUDA error \x1b[31mred\x1b[0m \x07bell\x00nul\u202erev[$accent]v \\"
"""Markup that would crash ("[/x]"), style ("[b]"), vanish ("[rank0]") or be read as a variable
("[$accent]"), an ANSI colour escape, BEL, NUL, a right-to-left override and a trailing backslash."""

SHOWN = "[/x] [b]bold[rank0]: CUDA error ␛[31mred␛[0m ␇bell␀nulrev[$accent]v \\"
"""HOSTILE as it must be shown (the override as <U+202E>, elsewhere the visible stand-ins)."""
SHOWN = SHOWN.replace("nulrev", "nul<U+202E>rev")

PLAYER = "ada [/x]\x1b[2J"
LONG = "L" * 3000 + "[/x]END"
"""A cell far longer than the table shows: cut there, whole in the row detail."""


def _hostile_incident(folder: Path) -> Path:
    text = FIXTURE.read_text(encoding="utf-8")
    text = text.replace("id: tui-mini", "id: tui-hostile")
    text = text.replace("title: One of two replicas is slow to start answering",
                        "title: " + json.dumps("Slow replica " + HOSTILE))
    text = text.replace("title: KV cache pressure", "title: " + json.dumps("KV " + HOSTILE))
    path = folder / "tui-hostile.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _journal(data: Path, incident: Path) -> Path:
    from game.session import FORMAT_VERSION, SESSION_FORMAT, file_digest

    header = {"format": SESSION_FORMAT, "format_version": FORMAT_VERSION, "session_id": "tui-hostile-1",
              "incident_id": "tui-hostile", "incident_digest": file_digest(incident), "incident_path": str(incident),
              "seed": 0, "player": PLAYER, "created": "2023-11-14T22:13:20Z"}
    rows = [["2025-03-04T09:00:00", HOSTILE, 1.0, LONG], ["2025-03-04T09:00:10", HOSTILE, 2.0, "x"],
            ["2025-03-04T09:00:00", "[/x] other", 3.0, "y"], ["2025-03-04T09:00:10", "[/x] other", 4.0, "z"]]
    query = {"index": 1, "sql": f"SELECT t, g, v, long FROM x -- {HOSTILE}\n-- [/x]", "ok": True, "error": None,
             "error_kind": None, "row_count": len(rows), "columns": ["t", "g [/x]", "v[rank0]", "long"],
             "truncated": False, "duration_s": 0.01, "reads": [], "rows": rows}
    events = [
        (START, "start", {"telemetry_digest": None}),
        (START + 40, "query", query),
        (START + 50, "pin", {"query": 1, "hypothesis": "kv-pressure", "stance": "supports"}),
        (START + 55, "note", {"hypothesis": "kv-pressure", "text": "note " + HOSTILE}),
        (START + 60, "message", {"from": "GM " + HOSTILE, "text": "msg " + HOSTILE, "gm": "m-hostile"}),
        (START + 70, "rank", {"ranking": [{"id": "kv-pressure", "confidence": 70.0},
                                          {"id": "throttle", "confidence": 10.0},
                                          {"id": "overload", "confidence": 10.0},
                                          {"id": "bad-deploy", "confidence": 10.0}]}),
    ]
    lines = [json.dumps(header)] + [json.dumps({"seq": i, "time": t, "kind": k, "data": d})
                                    for i, (t, k, d) in enumerate(events, start=1)]
    path = data / "sessions" / "tui-hostile-1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _plain(widget: Any) -> str:
    rendered = widget.render()
    return getattr(rendered, "plain", None) or str(rendered)


def _cells(table: Any) -> list[str]:
    return [getattr(c, "plain", str(c)) for r in range(table.row_count) for c in table.get_row_at(r)]


def _no_raw_controls(app: Any) -> None:
    """Nothing on screen carries a raw control character (it would reach the terminal)."""
    svg = app.export_screenshot()
    for char in ("\x1b", "\x07", "\x00", "\u202e"):
        assert char not in svg, repr(char)


@pytest.mark.slow
def test_hostile_text_is_shown_literally_on_every_screen(tui_env: Path, tmp_path: Path) -> None:
    data = tui_env
    incident = _hostile_incident(tmp_path)
    path = _journal(data, incident)
    seen: dict[str, Any] = {}

    async def go() -> None:
        from game.gameday import gm
        from game.session import list_sessions
        from tui.screens.gm import SessionChooser

        app = make_app(data, incidents=[incident], preselect="tui-hostile", player=PLAYER, steady=True,
                       clock=lambda: START + 125.0)
        async with app.run_test(size=(150, 44)) as pilot:
            # picker: the incident's title in the table and the detail
            await until(pilot, lambda: "picker" in app.marks, what="the picker")
            await until(pilot, lambda: app.screen.scanned, what="the scan")
            # the table cuts the title to its column; the detail under it shows it whole
            picker_cells = _cells(app.screen.query_one("#picker-table"))
            assert any(cell.startswith(f"Slow replica {SHOWN}"[:30]) for cell in picker_cells)
            assert f"Slow replica {SHOWN}" in _plain(app.screen.query_one("#picker-detail"))
            _no_raw_controls(app)

            # briefing: the card, with the hostile hypothesis title
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "BriefingScreen" and "ready" in app.marks
                        and app.screen.unfinished, what="the briefing")
            card = _plain(app.screen.query_one("#alert-card"))
            assert f"Slow replica {SHOWN}" in card and f"KV {SHOWN}" in card
            _no_raw_controls(app)

            # workspace: continue the hand-written session
            await pilot.press("enter")
            await until(pilot, lambda: "workspace" in app.marks, what="the workspace")
            screen = app.screen
            assert f"Slow replica {SHOWN}"[:45] in _plain(screen.query_one("#status-line"))  # cut at 60
            table = screen.query_one("#results-table")
            cells = _cells(table)
            assert SHOWN[:59] + "…" in cells and "[/x] other" in cells
            assert [getattr(c.label, "plain", str(c.label)) for c in table.columns.values()] == [
                "t", "g [/x]", "v[rank0]", "long"]
            assert max(len(c) for c in cells) <= 60  # bounded on screen
            board = screen.query_one("#board")
            board_cells = _cells(board)
            assert any(c.startswith(f"KV {SHOWN}"[:40]) for c in board_cells)  # cut to the column, literal
            assert any(c.startswith("note [/x] [b]bold") for c in board_cells)
            feed = screen.query_one("#updates-feed")
            assert any(f"msg {SHOWN}" in str(feed.get_option_at_index(i).prompt) for i in range(feed.option_count))
            log = screen.query_one("#query-log")
            assert "-- [/x] [b]bold[rank0]: CUDA er" in str(log.get_option_at_index(0).prompt)
            editor = screen.query_one("#editor")
            assert "-- [/x] [b]bold[rank0]: CUDA error ␛[31mred" in editor.text and "\x1b" not in editor.text
            _no_raw_controls(app)

            # the full value of a cut cell is one Enter away
            table.focus()
            table.move_cursor(row=0)
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "RowDetailScreen", what="the row detail")
            detail = app.screen.query_one("#detail-text").text
            assert LONG in detail and SHOWN in detail
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")

            # the plot: the groups (hostile values) in the legend, the column names in the caption
            await pilot.press("f2")
            plot = screen.query_one("#results-plot")
            await until(pilot, lambda: plot.drawn_series == 2, what="the plot")
            await pilot.pause()
            legend = plot.legend_text
            assert "[/x] other" in legend and "[/x] [b]bold[rank0]: CUDA error ␛[31mre" in legend
            assert "g [/x]" in _plain(plot.query_one("#plot-caption"))
            _no_raw_controls(app)
            await pilot.press("f2")

            # a message from the interviewer arriving now: announced literally
            gm.send(path, "message", text="live " + HOSTILE, sender="GM " + HOSTILE)
            await until(pilot, lambda: "update-message" in app.marks, what="the live message")
            notes = [n for n in app.screen.query_one("#notices").notices if "live" in n.text]
            assert notes and SHOWN in notes[0].text  # plain text on the notice strip, never markup
            assert SHOWN[:50] in notes[0].title
            _no_raw_controls(app)

            # the interviewer's screen on the same session, and the session chooser (the player's name)
            app.open_watch(path, reveal=True)
            await until(pilot, lambda: screen_name(app) == "GMScreen" and app.screen.snap is not None,
                        timeout=120, what="the interviewer's screen")
            gm_screen = app.screen
            assert "ada [/x]␛[2J" in _plain(gm_screen.query_one("#gm-status"))
            assert any("-- [/x] [b]bold[rank0]" in c for c in _cells(gm_screen.query_one("#gm-queries")))
            assert "-- [/x] [b]bold[rank0]: CUDA error ␛[31mred" in _plain(gm_screen.query_one("#gm-detail"))
            assert f"KV {SHOWN}"[:30] in _plain(gm_screen.query_one("#gm-board"))
            assert "msg [/x] [b]bold[rank0]" in _plain(gm_screen.query_one("#gm-feed"))
            _no_raw_controls(app)
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            app.push_screen(SessionChooser(list_sessions(data)))
            await until(pilot, lambda: screen_name(app) == "SessionChooser" and app.screen.query("#gm-sessions"))
            chooser = app.screen.query_one("#gm-sessions")
            assert "ada [/x]␛[2J" in str(chooser.get_option_at_index(0).prompt)
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")

            # submit (the titles in the dialog) and the debrief (the SQL, the note, the message)
            await pilot.press("f8")
            await until(pilot, lambda: screen_name(app) == "SubmitScreen")
            assert f"KV {SHOWN}" in " ".join(app.screen.ranking_text.split())
            _no_raw_controls(app)
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "debrief" in app.marks, timeout=120, what="the debrief")
            assert screen_name(app) == "DebriefScreen"
            markdown = app.screen.markdown
            assert "[/x] [b]bold[rank0]: CUDA error ␛[31m" in markdown and "\x1b" not in markdown
            _no_raw_controls(app)
            seen["ok"] = app.is_running

    run_async(go())
    assert seen == {"ok": True}

"""Layouts that give each column its content's width: the board's titles use the pane (wrapping rather
than cutting the words that tell two hypotheses apart), the debrief's tables are sized to their content
with the rival each feature ruled out, and the queries list says what tells one query from the next."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_support import journal, make_app, run_async, submitted_events, until
from textual.app import App, ComposeResult

from tui.board import Board
from tui.formatting import column_widths
from tui.widgets.board import HypothesisBoard
from tui.widgets.query_log import entry_text, query_gist

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

PER_REPLICA = [
    "SELECT replica, avg(prefill_s) AS prefill FROM requests WHERE status = 'ok' GROUP BY replica",
    "SELECT replica, count(*) AS n FROM requests WHERE status = 'error' GROUP BY replica",
    "SELECT replica, max(value) FROM metrics WHERE name = 'sm_clock_mhz' GROUP BY replica ORDER BY 2",
]


def test_the_queries_list_says_what_tells_queries_apart() -> None:
    gists = [query_gist(sql) for sql in PER_REPLICA]
    assert gists[0] == "requests · status = 'ok' · by replica · avg(prefill_s) AS prefill"
    assert gists[1] == "requests · status = 'error' · by replica · count(*) AS n"
    assert gists[2].startswith("metrics · name = 'sm_clock_mhz' · by replica")
    # a CTE's final SELECT; a comment is no part of it; a statement with no SELECT is shown as written
    assert query_gist("WITH x AS (SELECT * FROM requests) SELECT replica FROM x /* y */") == "x · replica"
    # a comment the player wrote labels the query
    assert query_gist("-- clocks\nSELECT replica FROM metrics") == "-- clocks · metrics · replica"
    assert query_gist("DESCRIBE requests") == "DESCRIBE requests"
    rows = [entry_text({"index": i, "ok": True, "row_count": 2, "sql": sql}, 40).plain
            for i, sql in enumerate(PER_REPLICA, start=1)]
    assert len({r[10:] for r in rows}) == 3 and "SELECT replica" not in " ".join(rows)


def test_columns_get_their_contents_width_and_the_rest_is_shared() -> None:
    cells = [["Query", "Ruled out", "What differed"],
             ["Q1", "A GPU runs at reduced clocks", "the groups differ: vllm-1's prefill is twice its peers' " * 3]]
    for available in (76, 136, 196):
        widths = column_widths(cells, available)
        assert sum(widths) + 2 == available
        assert widths[0] == len("Query") + 2 and widths[1] == len("A GPU runs at reduced clocks") + 2
    # narrower than everything wants: nobody gets less than its longest word
    narrow = column_widths(cells, 40)
    assert narrow[1] >= len("reduced") + 2 and sum(narrow) + 2 == 40


class _BoardApp(App[None]):
    CSS = "HypothesisBoard { height: 1fr; }"  # as the compact layout's board pane

    def __init__(self, board: Board) -> None:
        super().__init__()
        self.board = board

    def compose(self) -> ComposeResult:
        yield HypothesisBoard(self.board, {}, {}, id="board")


LONG = [("A", "kv", "KV cache pressure from long documents evicts the prefix cache on every replica"),
        ("B", "lora", "KV cache pressure from long documents only on the replicas serving the LoRA adapter"),
        ("C", "gw", "The gateway release added latency")]


def test_board_titles_wrap_in_the_pane_instead_of_losing_their_last_words() -> None:
    from game.session.hypotheses import Shown

    board = Board.initial([Shown(*h) for h in LONG])

    async def go() -> None:
        app = _BoardApp(board)
        async with app.run_test(size=(80, 20)) as pilot:
            widget = app.query_one(HypothesisBoard)
            await pilot.pause()
            shown = [str(widget.get_cell_at((r, 4))) for r in range(3)]
            assert "LoRA adapter" in shown[1].replace("\n", " ")  # the words that tell A from B
            assert all(" ".join(s.split()) == h[2] for s, h in zip(shown, LONG, strict=True))
            assert widget.ordered_rows[1].height >= 2 and widget.ordered_rows[2].height == 1
        async with _BoardApp(board).run_test(size=(80, 5)) as pilot:  # no rows to spare: cut on one line
            await pilot.pause()
            widget = pilot.app.query_one(HypothesisBoard)
            assert all(r.height == 1 for r in widget.ordered_rows)

    run_async(go())


@pytest.mark.slow  # scores a session (re-runs its query on every hypothesis's world)
@pytest.mark.parametrize("size", [(80, 24), (140, 45), (200, 60)], ids=["80x24", "140x45", "200x60"])
def test_the_debriefs_tables_fit_their_content_and_name_the_rival(tui_env: Path, size: tuple[int, int]) -> None:
    from textual.widgets._markdown import MarkdownTableContent

    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", submitted_events())

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, steady=True)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: "debrief" in app.marks, timeout=120)
            await pilot.pause()
            screen = app.screen
            lines = screen.markdown.splitlines()
            start = lines.index("| Query | Ruled out | What differed |")
            rows = [line for line in lines[start + 2:] if line.startswith("|")]
            assert all(line.count("|") == 4 for line in rows)  # one rival (and its reason) a row
            assert len(rows) >= 2 and any(line.startswith("|  |") for line in rows)
            tables = list(screen.query(MarkdownTableContent))
            ruled = next(t for t in tables if [c.plain for c in t.headers][1] == "Ruled out")
            longest = max(len(row[1].plain) for row in ruled.rows)
            widths = ruled.fitted
            if size[0] >= 140:
                assert widths[1] >= longest + 2  # titles on one line
            assert widths[1] >= 12  # never the nine characters it had

    run_async(go())

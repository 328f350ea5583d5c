"""Line mode at parity (issue 34): `history` and `debrief N` (a past debrief reopened from its transcript),
starter snippets, full cells when piped, `\\x` expanded display, a progress line per world while scoring,
plain text (no HTML entities or Markdown escapes). Paging (`more`) is tests/test_row_cap.py's."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from game.cli.game_commands import COMMANDS
from game.frontends.line_mode import PlainGame, expanded_table, format_table, plain_markdown, scoring_progress
from game.session import Session
from game.session.hypotheses import shown_hypotheses
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

INCIDENT = Path(__file__).parent / "data" / "incidents" / "drill-slow-replica.yaml"
CLOCK = "SELECT replica, min(value) AS clock FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY 1"
SPLIT = "SELECT replica, avg(queue_s) AS q, avg(prefill_s) AS p FROM requests GROUP BY 1 ORDER BY 1"
LABEL = {s.id: s.label for s in shown_hypotheses(load_incident(INCIDENT), 0)}
LONG = "SELECT repeat('x', 70) || 'END' AS long_cell"


@pytest.fixture(scope="module")
def cache(library_cache: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        ensure_database(load_incident(INCIDENT), 0)
        yield library_cache


@pytest.fixture
def data(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def _cli(*args: str, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(click.Group(commands=COMMANDS), list(args), input=stdin)
    assert "Traceback" not in result.output
    return result


def _game(data: Path, moves: list[str], width: int | None = None) -> str:
    """Line mode on a fresh session of the drill incident, `moves` on stdin; what it printed."""
    from game.query.gateway import Gateway

    info = ensure_database(load_incident(INCIDENT), 0)
    session = Session.create(INCIDENT, 0, "ada", root=data)
    out = io.StringIO()
    try:
        with Gateway(Path(info.path)) as gateway:
            PlainGame(session, gateway, io.StringIO("\n".join([*moves, "quit"]) + "\n"), out,
                      transcript_root=data, width=width).run()
    finally:
        session.close()
    return out.getvalue()


def test_plain_markdown_reads_as_written() -> None:
    assert plain_markdown("True -&gt; False &amp; more") == "True -> False & more"
    assert plain_markdown(r"kv\_cache\_usage \*not\* \[x\]") == "kv_cache_usage *not* [x]"


def test_snippets_are_listed_and_run_as_queries(data: Path) -> None:
    said = _game(data, ["snippets", "snippet 1", "snippet 99", "snippet one", "queries"])
    assert "1. " in said and "Run one with: snippet N" in said and "SELECT" in said
    assert "Q1: " in said  # snippet 1 ran and was counted
    assert "error: no snippet '99': write snippet N with N from 1 to" in said
    assert "error: no snippet 'one'" in said and "Traceback" not in said
    assert said.count("Q1 ") == 1 and "Q2" not in said


def test_cells_print_in_full_when_piped_and_are_cut_on_a_terminal(data: Path) -> None:
    piped = _game(data, [LONG])
    assert "x" * 70 + "END" in piped
    on_a_terminal = _game(data, [LONG], width=120)
    assert "END" not in on_a_terminal and "…" in on_a_terminal
    # format_table itself: None never cuts
    assert "y" * 90 in format_table(["c"], [("y" * 90,)], cell_chars=None)


def test_expanded_display_shows_every_value_in_full(data: Path) -> None:
    said = _game(data, ["\\x", LONG, "\\x off", "\\x sideways"], width=80)
    assert "Expanded display is on" in said and "Expanded display is off" in said
    assert "-[ row 1 ]" in said and "long_cell | " + "x" * 70 + "END" in said
    assert "error: usage: \\x (toggle), \\x on or \\x off" in said
    assert expanded_table(["a", "b"], [(1, "two\nlines")]).splitlines() == [
        "-[ row 1 ]----", "a | 1", "b | two", "  | lines"]


def test_scoring_says_a_line_per_world_and_never_a_worlds_name() -> None:
    said: list[str] = []
    progress = scoring_progress(said.append)
    for name, done in (("truth", 0), ("throttle", 1), ("throttle", 1), ("noise", 2), ("noise", 3)):
        progress(name, done, 3)
    assert said == ["  world 1 of 3 (what you saw)...", "  world 2 of 3 (a rival hypothesis)...",
                    "  world 3 of 3 (a second run of it)...", "  all 3 worlds ready"]


@pytest.mark.slow
def test_history_and_a_past_debrief_in_line_mode_with_progress_and_plain_text(data: Path) -> None:
    from game.rules.assess import _close_shared

    _close_shared()  # the worlds are opened again here (a process keeps them open once scored), with progress
    a, d = LABEL["throttle"], LABEL["overload"]
    first = _cli("play", "--plain", str(INCIDENT), "--player", "ada",
                 stdin=f"history\ndebrief 1\n{SPLIT}\n{CLOCK}\npin Q2 {a} supports\nrank {a}=90 {d}=10\nsubmit\n")
    assert first.exit_code == 0, first.output
    out = first.stdout
    assert "No finished sessions yet" in out
    assert "error: no finished sessions yet: there is no debrief to reopen" in out
    assert "Scoring: re-running your queries" in out and " worlds ready" in out  # a line per world
    assert "&gt;" not in out and "&amp;" not in out and "&lt;" not in out
    total = next(line for line in out.splitlines() if line.startswith("Score "))

    second = _cli("play", "--plain", str(INCIDENT), "--player", "ada",
                  stdin="history\ndebrief 3\ndebrief\ndebrief 1\nquit\n")
    assert second.exit_code == 0, second.output
    out = second.stdout
    title = load_incident(INCIDENT).title
    assert title in out and "Reopen a debrief with: debrief N" in out
    [row] = [line for line in out.splitlines() if line.startswith("1 ")]
    assert total.split()[1] in row  # the score the debrief recorded
    assert "error: usage: debrief N, with N from 1 to 1 (history lists them)" in out
    assert "Reopening the debrief of" in out and "# Debrief" in out
    assert f"{total.split(' / ')[0]} / 100 (reopened from" in out
    assert "&gt;" not in out
    # the same from the line-mode incident list, before any game is opened (no session is made)
    sessions = sorted((data / "sessions").glob("*.jsonl"))
    listed = _cli("play", "--plain", "--player", "ada", stdin="history\ndebrief 2\ndebrief 1\n")
    assert listed.exit_code == 1 and "no incident picked (end of input)" in listed.output
    assert title in listed.stdout and "error: usage: debrief N, with N from 1 to 1" in listed.stdout
    assert "Reopening the debrief of" in listed.stdout and "# Debrief" in listed.stdout
    assert "(reopened from" in listed.stdout
    assert sorted((data / "sessions").glob("*.jsonl")) == sessions
    # someone else's history is not ada's
    other = _cli("play", "--plain", str(INCIDENT), "--player", "bob", stdin="history\nquit\n")
    assert "No finished sessions yet" in other.stdout


def test_line_mode_shows_control_characters_in_data_errors_and_messages_as_visible_text(data: Path) -> None:
    """Text is text in line mode too: an escape sequence in a cell, a column name, an error or an interviewer's
    message reaches the terminal as visible stand-ins (game.api.text, the table the terminal app uses)."""
    from game.frontends.line_mode import update_text
    from game.session.records import Update

    said = _game(data, ["SELECT chr(27) || '[2J' || chr(7) AS \"x\u202ey\", 'tab\there' AS t",
                        "SELECT * FROM \"no\u001b[31mtable\"", "\\x", "SELECT chr(27) || '[31mred' AS c"])
    assert "\x1b" not in said and "\x07" not in said and "\u202e" not in said
    assert "␛[2J␇" in said and "x<U+202E>y" in said and "tab here" in said  # the cells, the column name
    assert "no␛[31mtable" in said  # the error quotes the statement: visibly
    assert "␛[31mred" in said  # expanded display too
    text = update_text(Update(1, 0.0, "message", "sam\x1b]0;pwned\x07", "look at\x1b[8m vllm-3", "gm"))
    assert "\x1b" not in text and "sam␛]0;pwned␇" in text and "look at␛[8m vllm-3" in text

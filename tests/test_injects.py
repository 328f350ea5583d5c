"""Timed injects: due by wall-clock time or by query count, delivered once, surviving resume and
transcripts; line mode prints them; `play --random` deals an incident and a seed."""

from __future__ import annotations

import io
import json
import random
import re
import warnings
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from game.cli import game_commands as cli_game
from game.frontends.line_mode import PlainGame
from game.query.gateway import QueryResult
from game.session import INJECT, Session, SessionError, load_transcript
from incidents.loader import check_incident_text, iter_library, load_incident, load_incident_text

DATA = Path(__file__).parent / "data" / "incidents"
GOOD_TEXT = (DATA / "good.yaml").read_text(encoding="utf-8")
INJECTS = """\
injects:
  - after_s: 300
    from: On-call manager
    text: Leadership asks for an ETA.
  - after_queries: 2
    from: Customer success
    text: A second customer reports slow answers.
  - after_s: 900
    from: Search team
    text: It is getting worse.
"""
TEXT = GOOD_TEXT.replace("briefing:\n", INJECTS + "briefing:\n", 1)
QUERIES = [f"SELECT {i}" for i in range(1, 6)]


class _Echo:
    """A gateway that answers every query with one row: injects count queries, they never score them."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, sql: str) -> QueryResult:
        self.ran.append(sql)
        return QueryResult(sql, ok=True, columns=["x"], rows=[(1,)], row_count=1)


@pytest.fixture
def incident_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    path = tmp_path / "slow-decode.yaml"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _started(incident_file: Path) -> tuple[Session, float]:
    session = Session.create(incident_file, 0, "ada")
    return session, session.start().time


def _query(session: Session, n: int = 1) -> None:
    gateway = _Echo()
    for _ in range(n):
        session.run_query(gateway, QUERIES[len(session.queries)])


# ------------------------------------------------------------------ the format


def test_injects_load_with_their_sender_under_from() -> None:
    incident = load_incident_text(TEXT)
    assert [(i.after_s, i.after_queries, i.sender) for i in incident.injects] == [
        (300, None, "On-call manager"), (None, 2, "Customer success"), (900, None, "Search team")]


@pytest.mark.parametrize(
    ("inject", "words"),
    [
        ("  - {after_s: 60, after_queries: 2, from: a, text: b}", "exactly one of after_s"),
        ("  - {from: a, text: b}", "exactly one of after_s"),
        ("  - {after_s: -5, from: a, text: b}", "after_s"),
        ("  - {after_queries: 0, from: a, text: b}", "after_queries"),
        ("  - {after_s: 5, form: a, text: b}", "did you mean 'from'?"),
    ],
)
def test_a_bad_inject_is_a_diagnostic_on_its_line(inject: str, words: str) -> None:
    text = GOOD_TEXT.replace("briefing:\n", f"injects:\n{inject}\nbriefing:\n", 1)
    diagnostics = check_incident_text(text, "i.yaml")
    line = text.splitlines().index(inject) + 1
    assert any(d.line == line and words in f"{d.message} (hint: {d.hint})" for d in diagnostics), diagnostics


# ------------------------------------------------------------------ due and delivered


def test_injects_fall_due_by_time_and_are_delivered_once(incident_file: Path) -> None:
    session, t0 = _started(incident_file)
    assert session.due_injects(t0 + 299) == []
    assert session.next_inject_in(t0 + 299) == pytest.approx(1)
    [first] = session.due_injects(t0 + 300)
    assert first.sender == "On-call manager"
    assert session.due_injects(t0 + 301) == []  # delivered once
    assert session.next_inject_in(t0 + 301) == pytest.approx(599)
    # a late poll delivers everything that fell due meanwhile, but not the query-count one
    [last] = session.due_injects(t0 + 5000)
    assert last.sender == "Search team"
    assert session.next_inject_in(t0 + 5000) is None
    delivered = [e for e in session.events if e.kind == INJECT]
    assert [e.data["index"] for e in delivered] == [0, 2]
    assert delivered[0].data["text"] == "Leadership asks for an ETA."
    session.close()


def test_injects_fall_due_by_query_count(incident_file: Path) -> None:
    session, t0 = _started(incident_file)
    _query(session)
    assert session.due_injects(t0) == []
    _query(session)
    [update] = session.due_injects(t0)
    assert update.sender == "Customer success"
    _query(session)
    assert session.due_injects(t0) == []
    session.close()


def test_no_injects_before_the_start_or_after_the_submission(incident_file: Path) -> None:
    session = Session.create(incident_file, 0, "ada")
    assert session.due_injects(1e12) == [] and session.next_inject_in() is None
    session.start()
    session.submit([("throttle", 100.0)])
    assert session.due_injects(1e12) == []
    assert not any(e.kind == INJECT for e in session.events)
    session.close()


def test_an_inject_cannot_be_recorded_twice_or_out_of_range(incident_file: Path) -> None:
    session, t0 = _started(incident_file)
    session.due_injects(t0 + 300)
    with pytest.raises(SessionError, match="already delivered"):
        session._record(INJECT, {"index": 0})
    with pytest.raises(SessionError, match="no inject"):
        session._record(INJECT, {"index": 7})
    session.close()


def test_delivered_injects_survive_resume_and_transcripts(incident_file: Path, tmp_path: Path) -> None:
    session, t0 = _started(incident_file)
    _query(session, 2)
    assert [i.sender for i in session.due_injects(t0 + 400)] == ["On-call manager", "Customer success"]
    path = session.path
    session.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = Session.resume(path)
    assert [i.sender for i in again.delivered_injects] == ["On-call manager", "Customer success"]
    assert again.due_injects(t0 + 400) == []
    [late] = again.due_injects(t0 + 900)
    assert late.sender == "Search team"
    again.submit([("throttle", 100.0)])
    out = again.export_transcript(tmp_path / "t.json")
    again.close()
    kinds = [e["kind"] for e in json.loads(out.read_text())["events"]]
    assert kinds.count(INJECT) == 3
    assert [e.kind for e in load_transcript(out).events].count(INJECT) == 3


# ------------------------------------------------------------------ line mode


def test_line_mode_prints_injects_between_prompts(incident_file: Path) -> None:
    session = Session.create(incident_file, 0, "ada")
    out = io.StringIO()
    gateway = _Echo()
    game = PlainGame(session, gateway, io.StringIO("SELECT 1\nSELECT 2\nupdates\nquit\n"), out)
    game.run()
    assert gateway.ran == ["SELECT 1", "SELECT 2"]
    session.close()
    text = out.getvalue()
    update = "--- update from Customer success ---\nA second customer reports slow answers."
    assert text.count(update) == 2  # when it fell due, and again for `updates`
    first = text.index(update)
    # after the second query's result and before the prompt that follows it
    assert text.index("Q2:") < first < text.index("servedrill> ", first)
    assert "On-call manager" not in text  # 300 s have not passed


# ------------------------------------------------------------------ play --random


def _cli(*args: str) -> Result:
    group = click.Group(commands=cli_game.COMMANDS)
    return CliRunner().invoke(group, list(args))


@pytest.fixture
def played(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, int]]:
    calls: list[tuple[Path, int]] = []
    monkeypatch.setattr(cli_game, "_play_plain", lambda path, seed, player: calls.append((path, seed)))
    return calls


def _dealt(output: str) -> tuple[str, int]:
    match = re.search(r"Dealt incident (\S+) seed (\d+) \(play it again: servedrill play \1 --seed \2\)", output)
    assert match, output
    return match.group(1), int(match.group(2))


def test_play_random_deals_and_prints_an_incident_and_a_seed(played: list[tuple[Path, int]]) -> None:
    library = {p.stem for p in iter_library()}
    for _ in range(3):
        result = _cli("play", "--random", "--plain")
        assert result.exit_code == 0, result.output
        incident, seed = _dealt(result.output)
        assert incident in library and 0 <= seed < cli_game.DEAL_SEEDS
        path, played_seed = played[-1]
        assert (path.stem, played_seed) == (incident, seed)


def test_play_random_keeps_what_the_player_fixed(played: list[tuple[Path, int]]) -> None:
    result = _cli("play", "--random", "--plain", "--seed", "42")
    assert _dealt(result.output)[1] == 42 and played[-1][1] == 42
    result = _cli("play", "--random", "--plain", "one-slow-replica")
    assert _dealt(result.output)[0] == "one-slow-replica" and played[-1][0].stem == "one-slow-replica"


def test_play_random_passes_the_deal_to_the_tui(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.app
    from tui.cli import main

    calls: list[tuple[Path, int]] = []
    monkeypatch.setattr(tui.app, "run", lambda path, seed=0, player=None, **_:  calls.append((Path(path), seed)))
    result = CliRunner().invoke(main, ["play", "--random"])
    incident, seed = _dealt(result.output)
    assert calls == [(calls[0][0], seed)] and calls[0][0].stem == incident


def test_a_deal_is_reproducible_from_its_random_source() -> None:
    first = cli_game.deal(None, None, random.Random(7))
    assert first == cli_game.deal(None, None, random.Random(7))
    deals = {cli_game.deal(None, None, random.Random(s)) for s in range(10)}
    assert len({seed for _, seed in deals}) > 1
    for path, seed in deals:
        assert load_incident(path, seed=seed).id == path.stem


def test_line_mode_prints_an_interviewers_message_at_the_next_prompt(incident_file: Path) -> None:
    from game.gameday.gm import send

    session = Session.create(incident_file, 0, "ada")
    session.start()
    assert session.path is not None
    send(session.path, "message", text="What did you rule out so far?", sender="Interviewer", check=False)
    out = io.StringIO()
    PlainGame(session, _Echo(), io.StringIO("SELECT 1\nquit\n"), out).run()
    session.close()
    text = out.getvalue()
    assert text.count("--- message from Interviewer ---\nWhat did you rule out so far?") == 1
    resumed = Session.resume(session.path)
    assert [e.kind for e in resumed.events].count("message") == 1  # journalled once
    resumed.close()

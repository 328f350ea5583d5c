"""The review after a game day (issue 31): a signed game day of three players on the tui-mini fixture, played
through game.session and the real gateway and collected with the journal key, then reviewed: each player's
path (queries in order, what each ruled out as re-run on the worlds, belief over time), the team's evidence
map and the rival nobody ruled out with a query that would have; the results as CSV and Parquet; the HTML
self-contained with every player's text escaped; an edited transcript not reviewed; one interview
transcript reviewed by the same renderer; a bad plan a one-line error."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from gameday_support import MINI, cli, seat_env

from game import api
from game.gameday.collect import write_state
from game.gameday.plan import load_gameday
from game.gameday.roster import make_roster
from game.query.gateway import Gateway
from game.reports.review_report import ROW_COLUMNS, Review, render_html
from game.rules.assess import score_session
from game.session import Session, load_transcript, signing
from game.session import seat as seat_module
from telemetry_gen.cache import ensure_database

SLOW = pytest.mark.slow  # plays, collects and scores games (the game day in a module fixture)

ROOT = Path(__file__).resolve().parents[1]

PLAN = """\
event: Review day
results: results
rounds:
  - incident: {mini}
    seed: 0
    time_limit_min: 10
teams:
  - name: blue
    players: [ana, ben]
  - name: red
    players: [dara]
"""

EVENTS = "SELECT * FROM events"
"""Reads the change log whole: no max_num_seqs or memory change, so KV cache pressure is ruled out."""
RATE = "SELECT time_bucket(INTERVAL 30 SECOND, ts) AS t, count(*) AS n FROM requests GROUP BY 1 ORDER BY 1"
"""Arrivals per half minute stay flat: the traffic surge (overload) is ruled out."""
COUNT = "SELECT count(*) FROM requests"
"""A size: rules out nothing."""
NAMES = "SELECT DISTINCT name FROM metrics"
XSS = "<img src=x onerror=alert(1)>"


def _play(data: Path, player: str, moves: list[tuple[str, object]]) -> Session:
    """A game of `player` with scripted moves: ("q", sql), ("rank", [(id, pct)]), ("note", (id, text)),
    ("pin", (qn, id, stance)), ("submit", [(id, pct)])."""
    session = Session.create(MINI, 0, player, root=data)
    info = ensure_database(session.incident, 0)
    session.start(info.digest)
    with Gateway(Path(info.path)) as gateway:
        for kind, arg in moves:
            if kind == "q":
                session.run_query(gateway, str(arg))
            elif kind == "rank":
                session.rank(arg)  # type: ignore[arg-type]
            elif kind == "note":
                session.note(*arg)  # type: ignore[misc]
            elif kind == "pin":
                session.pin(*arg)  # type: ignore[misc]
            elif kind == "submit":
                session.submit(arg)  # type: ignore[arg-type]
    session.close()
    return session


EVEN = [("throttle", 25.0), ("overload", 25.0), ("bad-deploy", 25.0), ("kv-pressure", 25.0)]
GAMES: dict[str, list[tuple[str, object]]] = {
    # careful: rules out kv-pressure (the change log) and overload (arrivals), stays 50/50 on what is left
    "ana": [("q", EVENTS), ("rank", [("throttle", 40.0), ("bad-deploy", 30.0), ("overload", 30.0)]),
            ("q", RATE), ("pin", (1, "kv-pressure", "refutes")), ("note", ("bad-deploy", "still open: check prefill")),
            ("submit", [("throttle", 50.0), ("bad-deploy", 50.0)])],
    # a lucky guess: one size, all in on the truth
    "ben": [("q", COUNT), ("submit", [("throttle", 90.0), ("overload", 10.0)])],
    # never rules anything out, and writes markup in a note
    "dara": [("q", COUNT), ("q", NAMES), ("note", ("overload", XSS)), ("submit", EVEN)],
}


@pytest.fixture(scope="module")
def day(library_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The plan of a signed game day whose one round the three players played and the facilitator collected."""
    root = tmp_path_factory.mktemp("review-day")
    data = root / "servedrill-data"
    plan_file = root / "facilitator" / "gameday.yaml"
    plan_file.parent.mkdir()
    plan_file.write_text(PLAN.format(mini=MINI), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        mp.setenv("SERVEDRILL_DATA", str(data))
        gd = load_gameday(plan_file)
        make_roster(gd)
        write_state(gd, {1: (1.0, None)})
        for player, moves in GAMES.items():
            seat_env(mp, plan_file, player)
            _play(data, player, moves)
        mp.delenv(seat_module.SEAT_ENV)
        mp.delenv(signing.KEY_ENV)
        key = api.journal_key(gd)
        [collected] = api.hand_in(gd, gd.rounds, [data], key=key)
        assert sorted(collected.files) == ["ana", "ben", "dara"], collected.problems + collected.refused
        yield plan_file


@pytest.fixture
def cache(library_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    return library_cache


def _review(day: Path, results: Path | None = None) -> Review:
    gd = load_gameday(day)
    return api.game_day_review(gd, results, key=api.journal_key(gd))


@SLOW
def test_each_players_path_and_row(day: Path, cache: Path) -> None:
    review = _review(day)
    assert review.verified and review.complete and review.event == "Review day"
    [rnd] = review.rounds
    assert (rnd.round, rnd.incident_id, rnd.seed, rnd.truth) == (1, "tui-mini", 0, ["throttle"])
    paths = {p.player: p for p in rnd.players}
    assert sorted(paths) == ["ana", "ben", "dara"]
    ana, ben, dara = paths["ana"], paths["ben"], paths["dara"]
    # the careful player's path: her queries in order, with time, and what each ruled out
    assert [(s.index, s.ruled_out) for s in ana.steps] == [(1, ["kv-pressure"]), (2, ["overload"])]
    assert "config_change" in ana.steps[0].why["kv-pressure"]
    assert ana.steps[0].at_s is not None and ana.steps[1].at_s is not None
    assert ana.steps[0].at_s <= ana.steps[1].at_s
    assert ana.ruled_out == {"kv-pressure": 1, "overload": 2} and ana.still_open == ["bad-deploy"]
    # her belief over time: a ranking, then the submission; the truth at 40% then 50%
    assert [(b.truth_pct, b.submitted) for b in ana.belief] == [(40.0, False), (50.0, True)]
    assert [n.text for n in ana.notes] == ["still open: check prefill"]
    # the lucky guess and the one who ruled nothing out
    assert [s.ruled_out for s in ben.steps] == [[]] and ben.ruled_out == {}
    assert [s.ruled_out for s in dara.steps] == [[], []] and dara.ruled_out == {}
    assert ben.belief[-1].truth_pct == 90.0 and dara.belief[-1].truth_pct == 25.0
    # the score is the one its SQL earns, as `servedrill score` computes it
    for p in rnd.players:
        t = load_transcript(p.file)
        assert p.score == round(score_session(t.incident, 0, t.events).total, 1)
        assert p.verified
    assert ana.score > ben.score and ana.score > dara.score
    # the rows: one per player per round
    rows = {r["player"]: r for r in review.rows()}
    assert list(rows["ana"]) == [c for c, _ in ROW_COLUMNS]
    assert rows["ana"]["team"] == "blue" and rows["dara"]["team"] == "red"
    assert all((r["round"], r["incident"], r["seed"]) == (1, "tui-mini", 0) for r in rows.values())
    assert (rows["ana"]["queries"], rows["ben"]["queries"], rows["dara"]["queries"]) == (2, 1, 2)
    assert all(r["hints"] == 0 and r["submitted"] and r["time_s"] is not None for r in rows.values())
    for r in rows.values():
        parts = r["conclusion"] + r["evidence"] + r["pins"] + r["penalties"]
        assert r["score"] == pytest.approx(max(0.0, parts), abs=0.11)
        assert r["solved"] == (r["score"] >= api.SOLVED_SCORE)
    assert rows["ben"]["solved"] is False  # a guess is not a solve


@SLOW
def test_the_evidence_map_and_the_rival_nobody_ruled_out(day: Path, cache: Path) -> None:
    [rnd] = _review(day).rounds
    by_rival = {m.rival: m for m in rnd.evidence}
    assert sorted(by_rival) == ["bad-deploy", "kv-pressure", "overload"]
    assert [(x["player"], x["team"], x["query"]) for x in by_rival["kv-pressure"].ruled_out_by] == [("ana", "blue", 1)]
    assert [(x["player"], x["query"]) for x in by_rival["overload"].ruled_out_by] == [("ana", 2)]
    assert rnd.nobody == ["bad-deploy"] and by_rival["bad-deploy"].nobody
    # a query of the incident's that would have: the debrief's suggestion
    offer = by_rival["bad-deploy"].settled_by
    assert offer is not None and offer["query"] == "signal prefill-by-replica" and "prefill" in offer["sql"]
    assert "vllm-0" in offer["why"]
    assert rnd.summary and rnd.settling_queries
    # per team: blue (ana, ben) ruled out two rivals, red (dara) none
    assert rnd.teams() == {"blue": {"ruled_out": ["overload", "kv-pressure"], "still_open": ["bad-deploy"]},
                           "red": {"ruled_out": [], "still_open": ["overload", "bad-deploy", "kv-pressure"]}}


@SLOW
def test_csv_and_parquet_read_back_as_the_json_rows(day: Path, cache: Path, tmp_path: Path) -> None:
    csv_file, parquet_file, html_file = tmp_path / "out" / "r.csv", tmp_path / "out" / "r.parquet", tmp_path / "r.html"
    code, out, err = cli("gameday", "review", str(day), "--csv", str(csv_file), "--parquet", str(parquet_file),
                         "--html", str(html_file), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"ok", "event", "source", "verified", "complete", "rows", "rounds", "skipped", "notices",
                        "written"}
    assert doc["written"] == [str(html_file), str(csv_file), str(parquet_file)]
    assert set(doc["rounds"][0]) == {"round", "incident", "seed", "title", "hypotheses", "truth", "summary",
                                     "causal_chain", "settling_queries", "players", "evidence", "teams",
                                     "nobody_ruled_out"}
    assert doc["rounds"][0]["nobody_ruled_out"] == ["bad-deploy"]
    columns = [c for c, _ in ROW_COLUMNS]
    want = sorted((tuple(r[c] for c in columns) for r in doc["rows"]), key=str)
    con = duckdb.connect()
    try:
        from_parquet = con.execute(f"SELECT {', '.join(columns)} FROM read_parquet(?)", [str(parquet_file)]).fetchall()
        from_csv = con.execute(f"SELECT {', '.join(columns)} FROM read_csv(?, header=true, columns={{"
                               + ", ".join(f"'{c}': '{t}'" for c, t in ROW_COLUMNS) + "})",
                               [str(csv_file)]).fetchall()
    finally:
        con.close()
    assert sorted(from_parquet, key=str) == want
    assert sorted(from_csv, key=str) == want
    assert len(want) == 3
    # the text form names the rival nobody ruled out
    code, text, _ = cli("gameday", "review", str(day))
    assert code == 0 and "nobody ruled out The gateway release added latency" in text


@SLOW
def test_the_html_is_self_contained_and_escapes_what_players_wrote(day: Path, cache: Path, tmp_path: Path) -> None:
    import dataclasses

    review = _review(day)
    page = render_html(review)
    assert "<script" not in page.lower() and "src=\"http" not in page and "href=" not in page
    assert XSS not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count("<svg") == 3  # one belief plot per player
    # a name with markup (a transcript's player is only the plan's when verified) is escaped, and bounded
    [rnd] = review.rounds
    evil = "<b onmouseover=alert(2)>eve</b>" + "x" * 500
    rnd.players[0] = dataclasses.replace(rnd.players[0], player=evil, team="<i>t</i>")
    page = render_html(review)
    assert "<b onmouseover" not in page and "&lt;b onmouseover=alert(2)&gt;eve&lt;/b&gt;" in page
    assert "<i>t</i>" not in page and "&lt;i&gt;t&lt;/i&gt;" in page
    # every note is bounded where it is read in
    from game.reports.review_report import NOTE_CHARS

    assert all(len(n.text) <= NOTE_CHARS for p in rnd.players for n in p.notes)


@SLOW
def test_an_edited_transcript_is_not_reviewed(day: Path, cache: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(load_gameday(day).results, results)
    ben = next(results.rglob("*ben.json"))
    doc = json.loads(ben.read_text())
    submit = next(e for e in doc["events"] if e["kind"] == "submit")
    submit["data"]["ranking"] = [{"id": "throttle", "confidence": 50.0}, {"id": "bad-deploy", "confidence": 50.0}]
    ben.write_text(json.dumps(doc))
    review = _review(day, results)
    assert sorted(p.player for p in review.rounds[0].players) == ["ana", "dara"]
    [skip] = review.skipped
    assert skip["file"] == str(ben) and skip["reason"].startswith("refused: ")
    # as the leaderboard refuses it
    board = api.leaderboard(results, load_gameday(day), key=api.journal_key(load_gameday(day)))
    assert sorted(e.player for e in board.entries) == ["ana", "dara"]
    # without the key nothing is verified: the edited file is reviewed on its word, and the review says so
    trusting = api.game_day_review(load_gameday(day), results)
    assert sorted(p.player for p in trusting.rounds[0].players) == ["ana", "ben", "dara"]
    assert not trusting.verified and any("trusts its files" in n for n in trusting.notices)
    assert next(p for p in trusting.rounds[0].players if p.player == "ben").belief[-1].truth_pct == 50.0


@SLOW
def test_one_interview_transcript_renders_the_same_review(cache: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from game.reports.review_report import NAME_CHARS

    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    name = "<b onmouseover=alert(2)>eve</b>" + "x" * 200  # an interview's candidate name is whatever was typed
    session = _play(tmp_path / "data", name, [*GAMES["ana"][:-1], ("note", ("throttle", XSS + "y" * 3000)),
                                              GAMES["ana"][-1]])
    transcript = session.export_transcript(tmp_path / "cand.json")
    review = api.transcript_review(transcript)
    assert review.event is None and len(review.rounds) == 1 and review.complete
    [rnd] = review.rounds
    [cand] = rnd.players
    assert cand.player.startswith("<b onmouseover") and len(cand.player) == NAME_CHARS
    assert cand.team is None and not cand.verified and cand.time_s is not None
    assert [(s.index, s.ruled_out) for s in cand.steps] == [(1, ["kv-pressure"]), (2, ["overload"])]
    assert rnd.nobody == ["bad-deploy"] and rnd.round is None
    assert max(len(n.text) for n in cand.notes) == 500
    page = render_html(review)
    assert "<script" not in page.lower() and page.count("<svg") == 1 and "nobody ruled it out" in page
    assert "<b onmouseover" not in page and "&lt;b onmouseover=alert(2)&gt;eve" in page and XSS not in page
    assert "y" * 500 not in page
    written = api.write_review(review, csv=tmp_path / "cand.csv")
    assert written == [tmp_path / "cand.csv"]
    [row] = review.rows()
    assert row["player"] == cand.player and row["round"] is None and row["queries"] == 2
    # the command takes the transcript in place of a plan
    code, out, err = cli("gameday", "review", str(transcript), "--html", str(tmp_path / "cand.html"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["event"] is None and doc["source"] == str(transcript) and doc["rows"] == review.rows()
    assert (tmp_path / "cand.html").read_text(encoding="utf-8") == page
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    code, out, err = cli("gameday", "review", str(tmp_path / "broken.json"))
    assert code == 1 and err.startswith(f"servedrill: {tmp_path / 'broken.json'}: ") and len(err.splitlines()) == 1


@SLOW
def test_the_review_is_bounded_by_its_budget(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query no scoring ran before is not re-run once the budget is spent: it rules out nothing, and the
    review says so (as scoring does)."""
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    novel = "SELECT replica, count(*) AS n FROM requests WHERE ttft_s > 0.123456 GROUP BY replica"
    session = _play(tmp_path / "data", "cand", [("q", novel), ("submit", EVEN)])
    review = api.transcript_review(session.export_transcript(tmp_path / "cand.json"), budget_s=0.0)
    [cand] = review.rounds[0].players
    assert not review.complete and not cand.complete and [s.assessed for s in cand.steps] == [False]
    assert any("time budget" in n for n in review.notices)
    assert "not re-run: the time budget was spent" in render_html(review)


def test_a_bad_plan_is_a_one_line_error(tmp_path: Path) -> None:
    plan_file = tmp_path / "gameday.yaml"
    plan_file.write_text("event: e\nresults: r\nrounds:\n  - incident: nope\n    sed: 3\n"
                         "teams:\n  - name: a\n    players: [x]\n", encoding="utf-8")
    code, out, err = cli("gameday", "review", str(plan_file))
    assert code == 1 and out == ""
    assert err.startswith(f"{plan_file}:5:5: ") and "(hint: did you mean 'seed'?)" in err
    code, out, _ = cli("gameday", "review", str(plan_file), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["error"].startswith(f"{plan_file}:5:5: ")
    # a plan whose results were never collected
    good = tmp_path / "good.yaml"
    good.write_text(PLAN.format(mini=MINI), encoding="utf-8")
    code, _, err = cli("gameday", "review", str(good))
    assert code == 1 and "no results folder" in err and "servedrill gameday collect" in err


def test_the_json_keys_are_documented() -> None:
    """docs/cli.md lists every top-level key `gameday review --json` prints (the set the CLI test checks)."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("### `servedrill gameday review FILE", 1)[1].split("\n### ", 1)[0]
    keys = {line.split("|")[1].strip().strip("`") for line in section.splitlines()
            if line.startswith("| `") and line.count("|") >= 3 and "`, `" not in line.split("|")[1]}
    assert {"ok", "event", "source", "verified", "complete", "rows", "rounds", "skipped", "notices",
            "written"} <= keys
    assert all(f"`{c}`" in section for c, _ in ROW_COLUMNS)

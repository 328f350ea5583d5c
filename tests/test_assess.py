"""Evidence from real queries on the simulated worlds of tests/data/incidents/tui-mini.yaml, scoring of
whole sessions from their SQL alone, and a scripted player through line mode."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from game.frontends.line_mode import PlainGame
from game.query.gateway import Gateway, QueryResult
from game.rules.assess import CHANGED_BETWEEN_RUNS, Assessor, queries_of, score_session, start_world_build
from game.rules.debrief import debrief_markdown
from game.session import Session, file_digest, load_transcript
from incidents.loader import load_incident
from incidents.spec import Incident
from telemetry_gen.cache import ensure_database
from telemetry_gen.proving.worlds import NOISE, TRUTH, ensure_worlds, world_names, world_of, worlds_cached

pytestmark = pytest.mark.slow  # builds worlds and assesses queries on them

DATA = Path(__file__).parent / "data" / "incidents"
MINI = DATA / "tui-mini.yaml"
CLOCK_SQL = "SELECT replica, min(value) AS low FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica"
PREFILL_SQL = "SELECT replica, avg(prefill_s) AS prefill FROM requests WHERE status = 'ok' GROUP BY replica"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def mini(cache: Path) -> Incident:
    return load_incident(MINI)


@pytest.fixture(scope="module")
def assessor(mini: Incident) -> Assessor:
    with Assessor.open(mini, 0) as a:
        yield a


def test_worlds_differ_only_by_their_cause(mini: Incident) -> None:
    assert world_names(mini) == [TRUTH, "overload", "bad-deploy", "kv-pressure", NOISE, "overload~1", "bad-deploy~1",
                                 "kv-pressure~1", "truth~2"]
    assert world_of(mini, "overload~1") == world_of(mini, "overload")
    overload = world_of(mini, "overload")
    assert [f.kind for f in overload.faults] == ["traffic_surge"]
    assert overload.noise == mini.noise and overload.workload == mini.workload
    assert world_of(mini, "throttle") is mini


def test_zero_rows_limit_zero_and_missing_names_rule_out_nothing(assessor: Assessor) -> None:
    for sql in ("SELECT * FROM requests LIMIT 0",
                "SELECT name, value FROM metrics WHERE name = 'no_such_metric'",
                "SELECT replica, prefill_s FROM requests WHERE prefill_s < 0"):
        evidence = assessor.assess(1, sql)
        assert evidence.ok and evidence.rows == 0 and evidence.ruled_out == ()


def test_a_query_that_shows_the_cause_rules_out_every_rival(assessor: Assessor) -> None:
    assert set(assessor.assess(1, CLOCK_SQL).ruled_out) == {"overload", "bad-deploy", "kv-pressure"}


def test_a_query_rules_out_only_what_it_shows(assessor: Assessor) -> None:
    # how many requests came is a size: nobody knows how big a surge the rival would have been
    counted = assessor.assess(1, "SELECT count(*) AS n FROM requests")
    assert counted.ok and counted.ruled_out == ()
    # that the arrivals stay level while the surge's would climb is a direction a reader sees
    series = assessor.assess(3, "SELECT time_bucket(INTERVAL 30 SECOND, ts) AS t, count(*) AS n FROM requests "
                                "GROUP BY 1 ORDER BY 1")
    assert series.ruled_out == ("overload",), series.why
    failed = assessor.assess(2, "SELECT nonsense FROM requests")
    assert not failed.ok and failed.ruled_out == ()


@pytest.mark.parametrize("sql", [
    "SELECT replica, prefill_s FROM requests USING SAMPLE 5",
    "SELECT replica, avg(prefill_s) FROM requests TABLESAMPLE 50% GROUP BY replica",
    "SELECT replica, avg(prefill_s) FROM requests TABLESAMPLE 30% (bernoulli, 7) GROUP BY replica",
])
def test_a_sample_rules_out_nothing(assessor: Assessor, sql: str) -> None:
    """Otherwise a player could rule rivals out by luck, re-running a sampled query until it differs (on a
    small table two unseeded samples can draw the same rows, so running it twice is not enough to tell)."""
    for i in range(3):
        evidence = assessor.assess(i, f"{sql} -- try {i}")
        assert evidence.ok and evidence.ruled_out == ()
        assert "sample" in evidence.note


def test_a_result_that_changes_between_runs_rules_out_nothing_and_says_so(
        assessor: Assessor, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the policy cannot name in advance is caught by running the query twice on the truth's world."""
    sql = "SELECT replica, avg(prefill_s) AS p FROM requests GROUP BY replica ORDER BY replica -- changing"
    real = assessor._run
    calls: list[str] = []

    def second_truth_run_differs(name: str, text: str) -> QueryResult:
        calls.append(name)
        result = real(name, text)
        if name == TRUTH and calls.count(TRUTH) == 2:
            result.rows = [(r[0], r[1] * 1.5) for r in result.rows]
        return result

    monkeypatch.setattr(assessor, "_run", second_truth_run_differs)
    evidence = assessor.assess(1, sql)
    assert evidence.ok and evidence.ruled_out == () and evidence.note == CHANGED_BETWEEN_RUNS
    assert calls == [TRUTH, TRUTH]  # no world beyond the truth was run for it
    monkeypatch.undo()
    steady = assessor.assess(2, sql + " again")
    assert steady.ok and steady.note == ""


@pytest.mark.parametrize("sql", [
    "SELECT random() AS r",
    "SELECT replica, avg(prefill_s) FROM requests WHERE random() < 0.5 GROUP BY replica",
    "SELECT gen_random_uuid() AS u, random() AS r FROM range(20)",
    "SELECT " + ", ".join(f"CAST(hash(sum(prefill_s) + {k}) % 2 AS INTEGER) * 2 - 1 AS c{k}" for k in range(50))
    + " FROM requests",
])
def test_digests_and_random_numbers_do_not_run(assessor: Assessor, sql: str) -> None:
    """A digest of a figure is a coin flip per world; fifty of them find one that parts the truth from a
    rival by luck. They are refused on every world, so they rule nothing out."""
    evidence = assessor.assess(1, sql)
    assert not evidence.ok and evidence.ruled_out == ()


def test_labels_of_a_threshold_on_a_count_rule_out_nothing(assessor: Assessor) -> None:
    """How many requests came is a size (nobody knows how big a surge would have been); labelling each
    request by whether its id passes a number just above the count seen turns it into a text that only the
    surge's worlds show. The same number read as a count rules out nothing, so the labels do not either;
    the surge's own arrivals climbing, a direction, still do (test_a_query_rules_out_only_what_it_shows)."""
    seen = assessor._run(TRUTH, "SELECT count(*) FROM requests").rows[0][0]
    for factor in (1.2, 1.5, 2.0):
        n = int(seen * factor)
        for i, sql in enumerate((
                f"SELECT DISTINCT CASE WHEN request_id > {n} THEN 'many' ELSE 'few' END AS k FROM requests",
                f"SELECT DISTINCT row_number() OVER () > {n} AS many FROM requests",
                f"SELECT DISTINCT CASE WHEN request_id > {n} THEN 0 / 0 ELSE 1 END AS k FROM requests")):
            evidence = assessor.assess(i, sql)
            assert evidence.ok and evidence.ruled_out == (), (sql, evidence.why)


def test_file_reads_are_refused_on_every_world(assessor: Assessor) -> None:
    evidence = assessor.assess(1, "SELECT * FROM read_csv('/etc/passwd')")
    assert not evidence.ok and evidence.ruled_out == ()


def _session_with(mini: Incident, sqls: list[str], ranking: list[tuple[str, float]]) -> Session:
    info = ensure_database(mini, 0)
    session = Session.in_memory(mini, 0, "p", incident_digest=file_digest(MINI), incident_path=str(MINI))
    session.start(info.digest)
    with Gateway(Path(info.path)) as gateway:
        for sql in sqls:
            session.run_query(gateway, sql)
    session.submit(ranking)
    return session


def test_scores_come_from_the_sql_not_from_what_the_transcript_says(mini: Incident, tmp_path: Path) -> None:
    honest = _session_with(mini, [CLOCK_SQL], [("throttle", 95.0), ("overload", 5.0)])
    cheat = _session_with(mini, ["SELECT 1"], [("throttle", 95.0), ("overload", 5.0)])
    good = score_session(mini, 0, honest.events)
    assert good.total >= 85 and good.ruled_out == {"overload": 1, "bad-deploy": 1, "kv-pressure": 1}
    # forge the cheat's transcript: the honest query's reads and rows, and a claimed score
    doc = cheat.transcript()
    real = next(e for e in honest.transcript()["events"] if e["kind"] == "query")
    for e in doc["events"]:
        if e["kind"] == "query":
            e["data"].update({k: real["data"][k] for k in ("reads", "rows", "columns", "row_count")})
    doc["score"] = {"total": 100.0}
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(doc))
    forged = load_transcript(path, incident_path=MINI)
    assert forged.recorded_total == 100.0
    assert score_session(mini, 0, forged.events).total <= 35
    assert queries_of(forged.events) == [(1, "SELECT 1")]


def test_a_scripted_player_plays_through_line_mode_by_title(mini: Incident, tmp_path: Path) -> None:
    moves = "\n".join([
        CLOCK_SQL,
        PREFILL_SQL,
        'pin Q1 "A GPU runs at reduced clocks" supports',
        'pin Q1 "More traffic" refutes',
        'rank "A GPU runs at reduced clocks"=94 "KV cache pressure"=2 "More traffic than the fleet can take"=2 '
        '"The gateway release added latency"=2',
        "clear",  # a typo: runs as SQL and fails, the game goes on
        "submit",
    ]) + "\n"
    info = ensure_database(mini, 0)
    session = Session.in_memory(mini, 0, "bot")
    out = io.StringIO()
    with Gateway(Path(info.path)) as gateway:
        PlainGame(session, gateway, io.StringIO(moves), out, telemetry_digest=info.digest,
                  transcript_root=tmp_path).run()
    text = out.getvalue()
    for shown in session.board:
        assert f"  {shown.label}  {shown.title}" in text
        assert shown.id not in text.split("# Debrief")[0]  # no hypothesis id before the debrief
    assert session.state == "debriefed"
    assert "Score " in text and "What each query ruled out" in text
    report = score_session(mini, 0, session.events)
    assert report.total >= 85
    assert [p["verdict"] for p in report.pins] == ["right", "right"]


def test_line_mode_from_stdin_through_the_cli(cache: Path, tmp_path: Path) -> None:
    moves = f"{CLOCK_SQL}\nrank \"A GPU\"=90 \"KV cache\"=10\nsubmit\n"
    env = {"SERVEDRILL_CACHE": str(cache), "SERVEDRILL_DATA": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "tui.cli", "play", str(MINI), "--plain", "--player", "bot"],
                          input=moves, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Score " in done.stdout
    transcripts = list((tmp_path / "transcripts").glob("*.json"))
    assert len(transcripts) == 1
    assert json.loads(transcripts[0].read_text())["player"] == "bot"


def test_worlds_are_built_once_and_shared(mini: Incident) -> None:
    first = ensure_worlds(mini, 0)
    again = ensure_worlds(mini, 0)
    assert again.paths == first.paths and again.built_s == 0.0


def test_the_background_build_shares_the_worlds_out_over_processes(tmp_path: Path) -> None:
    """`python -m telemetry_gen.proving.worlds --jobs 2` (what the game starts while the player reads) builds
    every world once, over two processes: afterwards each is in the cache, and the game starts no build for
    them any more; a malformed part is refused."""
    env = {**os.environ, "SERVEDRILL_CACHE": str(tmp_path / "cache")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(tmp_path / "cache"))
        assert not worlds_cached(load_incident(MINI, 0), 0)
    build = subprocess.run([sys.executable, "-m", "telemetry_gen.proving.worlds", "--nice", "--jobs", "2",
                            str(MINI), "0"], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert build.returncode == 0, build.stderr
    inc = load_incident(MINI, 0)
    names = world_names(inc)
    # this process built every other world from the first; the second process the rest
    assert build.stdout.count("/") == len(names[0::2]) + 1
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(tmp_path / "cache"))
        found = ensure_worlds(inc, 0)
        assert worlds_cached(inc, 0) and start_world_build(MINI, 0) is None  # nothing left to build
    assert sorted(found.paths) == sorted(names) and found.built_s == 0.0  # all there: nothing was built now
    bad = subprocess.run([sys.executable, "-m", "telemetry_gen.proving.worlds", "--part", "2/2", str(MINI), "0"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert bad.returncode == 2 and "K/N with 0 <= K < N" in bad.stderr


def test_scoring_has_a_time_budget_and_reuses_what_it_ran(mini: Incident, cache: Path) -> None:
    """Past its budget an Assessor re-runs nothing new (the query rules out nothing and says so); a second
    Assessor on the same worlds takes every other world's result of the first from the disk cache and
    runs only the truth (twice: a result that changes between runs is evidence of nothing)."""
    worlds = ensure_worlds(mini, 0)
    with Assessor(mini, worlds, budget_s=0.0) as spent:
        evidence = spent.assess(1, CLOCK_SQL + " -- budget")
    assert evidence.assessed is False and evidence.ruled_out == ()
    # the budget is one scoring's, not the Assessor's lifetime (a game day's players share one Assessor)
    with Assessor(mini, worlds) as shared:
        late = shared.assess(1, CLOCK_SQL + " -- late", deadline=0.0)
        assert late.assessed is False
        assert shared.assess(1, CLOCK_SQL + " -- late").assessed is True
    sql = PREFILL_SQL + " -- cached"
    with Assessor(mini, worlds) as first:
        ruled = first.assess(1, sql).ruled_out
    ran: list[str] = []
    with Assessor(mini, worlds) as second:
        original = second._run

        def counted(name: str, text: str):  # type: ignore[no-untyped-def]
            ran.append(name)
            return original(name, text)

        second._run = counted  # type: ignore[method-assign]
        assert second.assess(1, sql).ruled_out == ruled
    assert ran == [TRUTH, TRUTH]


def test_a_threshold_of_the_players_own_reads_as_nothing(assessor: Assessor) -> None:
    """The clock reading rules three rivals out as a group against its siblings; the same figure cut at a
    number the player picked ('throttled' below 1500 MHz) is a size made into a word, and reads as nothing,
    with the reason in the debrief's words."""
    assert assessor.assess(1, CLOCK_SQL).ruled_out
    cut = assessor.assess(2, "SELECT replica, CASE WHEN min(value) < 1500 THEN 'throttled' ELSE 'fine' END AS state "
                             "FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica")
    assert cut.ok and cut.rows > 0 and cut.ruled_out == ()
    assert "threshold" in cut.note


def test_the_debrief_says_why_a_threshold_read_as_nothing(mini: Incident) -> None:
    cut = ("SELECT replica, CASE WHEN min(value) < 1500 THEN 'throttled' ELSE 'fine' END AS state FROM metrics "
           "WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica")
    session = _session_with(mini, [cut], [("throttle", 95.0), ("overload", 5.0)])
    report = score_session(mini, 0, session.events)
    assert report.ruled_out == {}
    [row] = report.per_query
    assert "threshold" in row["note"]
    text = debrief_markdown(mini, session.events, report)
    assert "| Q1 | nothing | read as nothing: it compares an aggregated figure with a number you chose" in text
